"""PyTorch profiler (Kineto) Chrome traces in: measured steps, collectives and overlap.

`read_trace` reads one rank's trace (``.json`` or ``.json.gz``, as written by
``torch.profiler`` with ``ProfilerActivity.CUDA``) into a `KinetoTrace`:

* **GPU activity**: every kernel, memcpy and memset (``cat`` ``kernel``,
  ``gpu_memcpy``, ``gpu_memset``) with its stream, start and duration, joined
  through its ``correlation`` id to the CUDA runtime call that launched it
  (the CPU thread and time of the launch).
* **Steps**: the ``ProfilerStep#N`` annotations. A GPU activity belongs to the
  step during which it was *launched*. Without step annotations the whole
  trace is one step.
* **Phases** of each step, from ``record_function`` annotations on the CPU:
  forward (a name with the word ``forward``, e.g. ``## forward ##`` or
  ``DistributedDataParallel.forward``), backward (the word ``backward``;
  else the span of the ``autograd::engine::evaluate_function`` ops) and
  optimizer (``Optimizer.step#...`` or ``## optimizer ##``; ``zero_grad`` is
  not the optimizer phase). Without a forward annotation the forward phase
  runs from the step start to the backward start; without an optimizer
  annotation, from the backward end to the step end. A GPU activity's phase
  is the phase during which it was launched.
* **Collectives**: NCCL kernels (name starting ``nccl``): kind from the
  ``Collective name`` argument (else the kernel name), elements from
  ``In msg nelems``, bytes = elements x the size of ``dtype``.
* **DDP bucket copies**: GPU activity launched inside the reducer's
  ``mul_out`` / ``copy_grad_to_bucket`` ops (gradient into its bucket, divided
  by the world size) and ``copy_bucket_to_grad`` ops (reduced bucket back
  into the gradients).

Measured report (`measured_report`), per step and as medians over steps:
``iteration_time_s`` is the ``ProfilerStep#N`` duration (the training loop's
wall time per step). Communication, hidden and exposed follow Holistic Trace
Analysis (HTA, ``CommunicationAnalysis.get_comm_comp_overlap``): kernels are
communication (name starts ``nccl``), memory (memcpy, memset) or computation
(every other kernel); the intervals of each class are merged (union) so that
concurrent kernels count once; ``comm_s`` is the length of the communication
union, ``comm_hidden_s`` the length of its intersection with the computation
union (computation runs on other streams, as kernels on one stream never
overlap), ``comm_exposed_s = comm_s - comm_hidden_s`` and
``overlap_pct = 100 x hidden / comm``. HTA computes the ratio over the whole
trace; here it is computed per step and the median over steps is reported.

Layer table (`layer_table`): traces without a module annotation per layer
cannot give per-layer times, but DDP's all-reduces mark its gradient
buckets. One row per bucket, input to output: ``params`` = the bucket's
all-reduce element count; ``bwd_ms`` = GPU busy time (union of non-NCCL
activity) of the backward work launched after the previous bucket's
all-reduce launch and up to this one's; ``fwd_ms`` = the step's forward GPU
busy time split in proportion to ``bwd_ms``; ``comm_ms`` = the bucket's
measured all-reduce kernel time. All are medians over the steps whose bucket
sequence equals the last step's (DDP may rebuild its buckets after the first
iteration). The backward work launched after the last all-reduce (DDP's
copies back into the gradients) and the optimizer's GPU time are reported as
``backward_tail_s`` and ``optimizer_gpu_s`` (for ``update_ms``).

Limits: a file over `MAX_TRACE_BYTES` on disk, or whose gzip stream
decompresses past it (checked while decompressing, 1 MiB at a time), is
refused before parsing (`sim.calib.tracejson`). Events are decoded one by one
and only the ones used are kept, so peak memory is about three times the decompressed size (bytes,
text, one event) plus the kept events; a trace with more than `MAX_EVENTS` events to keep is refused
as soon as it passes the count. Bad input raises `SimInputError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sim.calib.kineto_checks import (
    DTYPE_BYTES,
    check_dtype,
    check_elements,
    check_number,
    check_world_size,
)
from sim.calib.tracejson import parse_trace_object, read_text
from sim.checks import check_int
from sim.core.intervals import covered_before, union
from sim.errors import SimInputError

__all__ = [
    "DTYPE_BYTES",
    "MAX_EVENTS",
    "MAX_TRACE_BYTES",
    "REPORT_KEYS",
    "KinetoTrace",
    "collectives",
    "ddp_copies",
    "layer_table",
    "measured_report",
    "read_trace",
    "steps",
]

#: Largest trace accepted, in bytes, on disk and after decompression.
MAX_TRACE_BYTES = 200 * 10**6
#: Most events kept (GPU activity, CUDA runtime calls, annotations), some 700 bytes each once built: 34 times
#: the 14,548 of the one-step trace in tests/data/kineto, so some 3 s and 400 MB; a longer profile is refused.
MAX_EVENTS = 500_000
#: The report's median keys (per-step rows carry them too).
REPORT_KEYS = (
    "iteration_time_s", "comm_s", "comm_hidden_s", "comm_exposed_s", "overlap_pct",
    "forward_s", "backward_s", "optimizer_s", "compute_s", "gpu_busy_s", "backward_tail_s",
    "optimizer_gpu_s", "ddp_copy_in_s", "ddp_copy_out_s",
)
_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
             "memcpy": "memcpy", "memset": "memset"}
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
_META_KEYS = ("distributedInfo", "deviceProperties", "schemaVersion", "otherData")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_AUTOGRAD = "autograd::engine::evaluate_function"
_COPY_IN = ("reducer::mul_out", "copy_grad_to_bucket")
_COPY_OUT = ("copy_bucket_to_grad",)
_NCCL_KIND = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


@dataclass(frozen=True, eq=False)
class KinetoTrace:
    """One rank's trace, reduced to what the analyses use (times in microseconds).

    ``gpu``: one row per kernel/memcpy/memset: ``cat``, ``name``, ``stream``,
    ``ts_us``, ``dur_us``, ``launch_us``, ``launch_tid``, ``when_us`` (launch
    time, else start), ``step``, ``phase``, ``role`` (comm, compute, memory),
    ``ddp_copy`` ("in", "out" or ""), and for NCCL kernels ``kind``,
    ``dtype``, ``elements``, ``bytes``, ``group_size``.
    ``steps``: one row per step with its span and phase spans.
    """

    where: str
    gpu: pd.DataFrame
    steps: pd.DataFrame
    info: dict = field(default_factory=dict)


# ---------------------------------------------------------------- reading


def _keep(event, index: int, where: str) -> dict | None:
    """The fields used of one complete ("X") event, or None for an event not used."""
    if not isinstance(event, dict) or event.get("ph") != "X":
        return None
    cat = str(event.get("cat", "")).lower()
    name = str(event.get("name", ""))
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    if cat in _GPU_CATS:
        row = {"kind_": "gpu", "cat": _GPU_CATS[cat], "name": name, "device": event.get("pid"),
               "stream": args.get("stream", event.get("tid")), "correlation": args.get("correlation")}
        if name.startswith("nccl"):
            row.update(coll_kind=args.get("Collective name"), dtype=check_dtype(event, args, index, where),
                       elements=check_elements(event, args, index, where), group_size=args.get("Group size"))
    elif cat in _RUNTIME_CATS:
        if args.get("correlation") is None:
            return None
        row = {"kind_": "runtime", "correlation": args["correlation"], "tid": event.get("tid")}
    elif cat == "user_annotation" or (cat == "cpu_op" and (
            _STEP.match(name) or name.startswith(_AUTOGRAD) or any(s in name for s in _COPY_IN + _COPY_OUT))):
        row = {"kind_": "cpu", "name": name, "tid": event.get("tid")}
    else:
        return None
    row["ts"] = check_number(event, "ts", index, where)
    row["dur"] = check_number(event, "dur", index, where)
    return row


def read_trace(source, *, max_bytes: int = MAX_TRACE_BYTES, where: str | None = None) -> KinetoTrace:
    """Read a Kineto trace from a path (``.json`` or ``.json.gz``) or its bytes.

    Raises `SimInputError` for a file over ``max_bytes`` (on disk or
    decompressed), a truncated gzip stream or JSON text, non-JSON, JSON
    without ``traceEvents``, a trace without GPU activity or without NCCL
    kernels, or GPU activity from more than one device.
    """
    max_bytes = check_int("max_bytes", max_bytes, 1)
    if where is None:
        where = "trace" if isinstance(source, (bytes, bytearray)) else Path(source).name
    text = read_text(source, max_bytes, where)
    kept = 0

    def keep(event, index: int) -> dict | None:
        nonlocal kept
        row = _keep(event, index, where)
        kept += row is not None
        if kept > MAX_EVENTS:
            raise SimInputError(f"{where}: over {MAX_EVENTS:,} events to keep (GPU activity, runtime calls, "
                                f"annotations) by event {index:,}; a trace has at most {MAX_EVENTS:,} "
                                "(sim.calib.kineto.MAX_EVENTS): profile fewer steps")
        return row

    meta, events = parse_trace_object(text, where, keep, _META_KEYS)
    del text
    return _build(meta, events, where)


# ---------------------------------------------------------------- building


def _build(meta: dict, events: list[dict], where: str) -> KinetoTrace:
    by_kind: dict[str, list[dict]] = {"gpu": [], "runtime": [], "cpu": []}
    for event in events:
        by_kind[event.pop("kind_")].append(event)
    gpu = pd.DataFrame(by_kind["gpu"])
    if gpu.empty:
        other = meta.get("otherData")
        if isinstance(other, dict) and {"scheduler", "iteration_time_s"} <= set(other):
            raise SimInputError(f"{where}: a simulated timeline written by python -m sim trace, not a PyTorch "
                                "profiler trace; import-trace reads what torch.profiler exports")
        raise SimInputError(f"{where}: no GPU events (kernels, memcpy, memset); profile with ProfilerActivity.CUDA")
    devices = gpu["device"].dropna().astype(str).unique()
    if len(devices) > 1:
        raise SimInputError(f"{where}: GPU activity from {len(devices)} devices; give the trace of one rank")
    is_nccl = gpu["name"].str.startswith("nccl")
    if not is_nccl.any():
        raise SimInputError(f"{where}: no NCCL kernels; not a trace of multi-GPU training with NCCL")
    gpu["role"] = np.where(is_nccl, "comm", np.where(gpu["cat"] == "kernel", "compute", "memory"))
    gpu = gpu.rename(columns={"ts": "ts_us", "dur": "dur_us"})
    gpu = _join_launches(gpu, pd.DataFrame(by_kind["runtime"], columns=["correlation", "tid", "ts", "dur"]))
    cpu = pd.DataFrame(by_kind["cpu"], columns=["name", "tid", "ts", "dur"])
    cpu["tid"] = cpu["tid"].astype(str)
    step_frame = _steps_frame(cpu, gpu)
    gpu = _assign_steps(gpu, step_frame)
    gpu["ddp_copy"] = _ddp_copy_marks(gpu, cpu)
    gpu = _collective_columns(gpu)
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    props = meta.get("deviceProperties") if isinstance(meta.get("deviceProperties"), list) else []
    info = {
        "source": where,
        "world_size": check_world_size(dist.get("world_size"), where),
        "rank": dist.get("rank"),
        "backend": dist.get("backend"),
        "nccl_version": dist.get("nccl_version"),
        # the first device name that is text (a number or a list there is a malformed trace, not a GPU)
        "gpu": next((p["name"] for p in props if isinstance(p, dict) and isinstance(p.get("name"), str)), None),
        "device": devices[0] if len(devices) else None,
        "steps_profiled": len(step_frame),
    }
    return KinetoTrace(where=where, gpu=gpu, steps=step_frame, info=info)


def _join_launches(gpu: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """Add ``launch_us`` and ``launch_tid``: the runtime call with the same correlation id."""
    runtime = runtime.assign(correlation=pd.to_numeric(runtime["correlation"], errors="coerce"))
    runtime = runtime.dropna(subset=["correlation"]).drop_duplicates("correlation")
    runtime = runtime.rename(columns={"ts": "launch_us", "tid": "launch_tid"})[["correlation", "launch_us", "launch_tid"]]
    gpu = gpu.assign(correlation=pd.to_numeric(gpu["correlation"], errors="coerce"))
    gpu = gpu.merge(runtime, on="correlation", how="left")
    gpu["launch_tid"] = gpu["launch_tid"].astype(str)
    return gpu.sort_values("ts_us", kind="stable").reset_index(drop=True)


def _span(frame: pd.DataFrame) -> tuple[float, float]:
    if frame.empty:
        return math.nan, math.nan
    return float(frame["ts"].min()), float((frame["ts"] + frame["dur"]).max())


def _phases(cpu: pd.DataFrame, start: float, end: float) -> dict:
    """Forward, backward and optimizer spans of the step [start, end] (see the module docstring)."""
    inside = cpu[(cpu["ts"] >= start) & (cpu["ts"] <= end) & ~cpu["name"].str.match(_STEP.pattern)]
    lower = inside["name"].str.lower()
    autograd = lower.str.startswith(_AUTOGRAD)
    fwd = _span(inside[lower.str.contains(r"\bforward\b") & ~autograd])
    bwd = _span(inside[lower.str.contains(r"\bbackward\b") & ~autograd])
    if math.isnan(bwd[0]):
        bwd = _span(inside[autograd])
    opt = _span(inside[lower.str.contains("optimizer") & ~lower.str.contains("zero_grad")])
    if math.isnan(fwd[0]) and not math.isnan(bwd[0]):
        fwd = (start, bwd[0])
    if math.isnan(opt[0]) and not math.isnan(bwd[0]):
        opt = (bwd[1], end)
    return {"forward_start_us": fwd[0], "forward_end_us": fwd[1], "backward_start_us": bwd[0],
            "backward_end_us": bwd[1], "optimizer_start_us": opt[0], "optimizer_end_us": opt[1]}


def _steps_frame(cpu: pd.DataFrame, gpu: pd.DataFrame) -> pd.DataFrame:
    marks = cpu[cpu["name"].str.match(_STEP.pattern)].drop_duplicates("name").sort_values("ts")
    if marks.empty:
        launch = gpu["launch_us"].fillna(gpu["ts_us"])
        start = float(min(launch.min(), cpu["ts"].min() if len(cpu) else math.inf))
        end = float(max((gpu["ts_us"] + gpu["dur_us"]).max(), (cpu["ts"] + cpu["dur"]).max() if len(cpu) else -math.inf))
        rows = [(0, "whole trace", start, end, end - start)]
    else:
        rows = [(int(_STEP.match(r.name).group(1)), r.name, float(r.ts), float(r.ts + r.dur), float(r.dur))
                for r in marks.itertuples(index=False)]
    frame = pd.DataFrame(rows, columns=["step", "name", "start_us", "end_us", "duration_us"])
    phases = pd.DataFrame([_phases(cpu, r.start_us, r.end_us) for r in frame.itertuples(index=False)])
    return pd.concat([frame, phases], axis=1)


def _assign_steps(gpu: pd.DataFrame, step_frame: pd.DataFrame) -> pd.DataFrame:
    """``step`` (-1 outside every step) and ``phase`` of each GPU activity, by launch time."""
    gpu["when_us"] = gpu["launch_us"].fillna(gpu["ts_us"])
    when = gpu["when_us"].to_numpy()
    starts = step_frame["start_us"].to_numpy()
    idx = np.searchsorted(starts, when, side="right") - 1
    valid = (idx >= 0) & (when <= step_frame["end_us"].to_numpy()[np.clip(idx, 0, None)])
    gpu["step"] = np.where(valid, step_frame["step"].to_numpy()[np.clip(idx, 0, None)], -1)
    spans = step_frame.set_index("step").reindex(gpu["step"]).reset_index(drop=True)
    with np.errstate(invalid="ignore"):  # a step without the phase has NaN bounds: no activity falls in it
        conditions = [
            (when >= spans[f"{p}_start_us"].to_numpy()) & (when <= spans[f"{p}_end_us"].to_numpy())
            for p in ("backward", "optimizer", "forward")
        ]
    gpu["phase"] = np.select(conditions, ["backward", "optimizer", "forward"], default="other")
    return gpu


def _ddp_copy_marks(gpu: pd.DataFrame, cpu: pd.DataFrame) -> np.ndarray:
    """"in"/"out" for GPU activity launched inside a DDP reducer copy op, else ""."""
    marks = np.full(len(gpu), "", dtype=object)
    copy_in = cpu["name"].apply(lambda n: any(s in n for s in _COPY_IN))
    copy_out = cpu["name"].apply(lambda n: any(s in n for s in _COPY_OUT))
    ops = cpu[copy_in | copy_out].assign(copy=np.where(copy_in[copy_in | copy_out], "in", "out"))
    launched = gpu[gpu["launch_us"].notna()]
    if ops.empty or launched.empty:
        return marks
    left = pd.DataFrame({"row": launched.index, "launch_us": launched["launch_us"], "tid": launched["launch_tid"]})
    found = pd.merge_asof(left.sort_values("launch_us"), ops.sort_values("ts"), left_on="launch_us",
                          right_on="ts", by="tid", direction="backward")
    hit = found[found["launch_us"] <= found["ts"] + found["dur"]]
    marks[hit["row"].to_numpy()] = hit["copy"].to_numpy()
    return marks


def _collective_columns(gpu: pd.DataFrame) -> pd.DataFrame:
    for column in ("coll_kind", "dtype", "elements", "group_size"):
        if column not in gpu:
            gpu[column] = None
    comm = gpu["role"] == "comm"
    from_name = gpu["name"].str.extract(_NCCL_KIND, expand=False).str.lower()
    kind = gpu["coll_kind"].where(gpu["coll_kind"].notna(), from_name)
    gpu["kind"] = kind.where(comm, None)
    gpu["elements"] = pd.to_numeric(gpu["elements"], errors="coerce").where(comm)
    size = gpu["dtype"].map(DTYPE_BYTES)
    gpu["bytes"] = gpu["elements"] * size
    return gpu.drop(columns=["coll_kind"])


# ---------------------------------------------------------------- analyses


def _overlap_us(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Length of the intersection of two disjoint sorted interval sets."""
    if len(a[0]) == 0 or len(b[0]) == 0:
        return 0.0
    return float(np.sum(covered_before(*b, a[1]) - covered_before(*b, a[0])))


def _busy_us(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return union(frame["ts_us"].to_numpy(), (frame["ts_us"] + frame["dur_us"]).to_numpy())


def _length_us(frame: pd.DataFrame) -> float:
    """Busy time of ``frame``'s GPU activity: the length of the union of its intervals."""
    start, end = _busy_us(frame)
    return float(np.sum(end - start))


def _by_step(trace: KinetoTrace) -> dict[int, pd.DataFrame]:
    """Each step's GPU activity (an empty frame for a step without any)."""
    groups = dict(tuple(trace.gpu.groupby("step", sort=False)))
    return {int(s): groups.get(s, trace.gpu.iloc[:0]) for s in trace.steps["step"]}


def steps(trace: KinetoTrace) -> pd.DataFrame:
    """One row per step: its number, name, span and phase spans (microseconds)."""
    return trace.steps.copy()


def collectives(trace: KinetoTrace) -> pd.DataFrame:
    """One row per NCCL kernel: step, phase, kind, dtype, elements, bytes
    (elements x dtype size; NaN when the trace lacks either), group size,
    stream, start and duration (microseconds on the trace's clock), launch time."""
    comm = trace.gpu[trace.gpu["role"] == "comm"]
    columns = ["step", "phase", "kind", "dtype", "elements", "bytes", "group_size", "stream",
               "ts_us", "dur_us", "launch_us", "name"]
    return comm[columns].rename(columns={"ts_us": "start_us", "dur_us": "duration_us"}).reset_index(drop=True)


def _copy_counts(gpu: pd.DataFrame) -> dict:
    row: dict = {}
    for direction in ("in", "out"):
        copies = gpu[gpu["ddp_copy"] == direction]
        row[f"ddp_copy_{direction}"] = len(copies)
        row[f"ddp_copy_{direction}_s"] = float(copies["dur_us"].sum()) * 1e-6
    return row


def ddp_copies(trace: KinetoTrace) -> pd.DataFrame:
    """Per step: the DDP bucket copies, gradient into bucket (``in``) and bucket
    back into the gradients (``out``): count and summed GPU time of each."""
    return pd.DataFrame([{"step": step, **_copy_counts(gpu)} for step, gpu in _by_step(trace).items()])


def _step_row(gpu: pd.DataFrame, step: pd.Series) -> dict:
    comm = _busy_us(gpu[gpu["role"] == "comm"])
    compute = _busy_us(gpu[gpu["role"] == "compute"])
    comm_us = float(np.sum(comm[1] - comm[0]))
    hidden_us = _overlap_us(comm, compute)
    backward = gpu[gpu["phase"] == "backward"]
    last_allreduce = backward.loc[backward["kind"] == "allreduce", "when_us"].max()
    tail = backward[(backward["role"] != "comm") & (backward["when_us"] > last_allreduce)]
    optimizer = gpu[(gpu["phase"] == "optimizer") & (gpu["role"] != "comm")]
    coll = gpu[gpu["role"] == "comm"]
    row = {
        "step": int(step["step"]),
        "name": step["name"],
        "iteration_time_s": step["duration_us"] * 1e-6,
        "comm_s": comm_us * 1e-6,
        "comm_hidden_s": hidden_us * 1e-6,
        "comm_exposed_s": (comm_us - hidden_us) * 1e-6,
        "overlap_pct": 100.0 * hidden_us / comm_us if comm_us > 0 else None,
    }
    for phase in ("forward", "backward", "optimizer"):
        row[f"{phase}_s"] = (step[f"{phase}_end_us"] - step[f"{phase}_start_us"]) * 1e-6
    row.update({
        "compute_s": float(np.sum(compute[1] - compute[0])) * 1e-6,
        "gpu_busy_s": _length_us(gpu) * 1e-6,
        "backward_tail_s": _length_us(tail) * 1e-6,
        "optimizer_gpu_s": _length_us(optimizer) * 1e-6,
        "collectives": len(coll),
        "allreduce_bytes": float(coll.loc[coll["kind"] == "allreduce", "bytes"].sum()),
    })
    row.update(_copy_counts(gpu))
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def measured_report(trace: KinetoTrace) -> dict:
    """The measured iteration: per-step rows (``steps``) and, for each key in
    `REPORT_KEYS`, the median over the steps. ``overlap_pct`` is the median of
    the per-step percentages. Definitions: see the module docstring."""
    per_step = _by_step(trace)
    rows = [_step_row(per_step[int(step["step"])], step) for _, step in trace.steps.iterrows()]
    report: dict = {}
    for key in REPORT_KEYS:
        values = [r[key] for r in rows if r.get(key) is not None]
        report[key] = float(np.median(values)) if values else None
    report["steps_profiled"] = len(rows)
    report["trace"] = dict(trace.info)
    report["method"] = (
        "iteration = ProfilerStep duration; comm = union of NCCL kernel intervals; hidden = its "
        "intersection with the union of computation kernels (HTA); overlap_pct = 100 hidden/comm; "
        "medians over steps"
    )
    report["steps"] = rows
    return report


def _bucket_times(gpu: pd.DataFrame) -> tuple[list[int], np.ndarray, np.ndarray, float]:
    """One step: all-reduce element counts in launch order, the backward busy
    time before each all-reduce launch, the all-reduce kernel times and the
    forward busy time (microseconds)."""
    backward = gpu[gpu["phase"] == "backward"]
    reduces = backward[backward["kind"] == "allreduce"].sort_values("when_us")
    work = backward[backward["role"] != "comm"]
    bucket = np.searchsorted(reduces["when_us"].to_numpy(), work["when_us"].to_numpy(), side="left")
    bwd = np.array([_length_us(work[bucket == k]) for k in range(len(reduces))])
    forward = gpu[(gpu["phase"] == "forward") & (gpu["role"] != "comm")]
    elements = [int(e) if not math.isnan(e) else -1 for e in reduces["elements"]]
    return elements, bwd, reduces["dur_us"].to_numpy(), _length_us(forward)


def layer_table(trace: KinetoTrace) -> pd.DataFrame:
    """One layer row per DDP gradient bucket, input to output, in the layer-CSV
    format (``name,params,fwd_ms,bwd_ms,comm_ms`` plus ``dtype`` and
    ``allreduce_bytes``); `sim.model.model_from_frame` reads it. How each
    column is measured: see the module docstring."""
    per_step = {s: _bucket_times(gpu) for s, gpu in _by_step(trace).items()}
    last = per_step[max(per_step)]
    if not last[0]:
        raise SimInputError(f"{trace.where}: no all-reduce in the backward phase; not a DDP data-parallel trace")
    if -1 in last[0]:
        raise SimInputError(f"{trace.where}: the NCCL kernels carry no element count ('In msg nelems'); "
                            "record the trace with PyTorch 2.1 or later")
    same = [v for v in per_step.values() if v[0] == last[0]]
    bwd = np.median([v[1] for v in same], axis=0)
    comm = np.median([v[2] for v in same], axis=0)
    fwd_total = float(np.median([v[3] for v in same]))
    fwd = fwd_total * bwd / bwd.sum() if bwd.sum() > 0 else np.full(len(bwd), fwd_total / len(bwd))
    comm_rows = trace.gpu[(trace.gpu["kind"] == "allreduce") & (trace.gpu["step"] == max(per_step))]
    comm_rows = comm_rows[comm_rows["phase"] == "backward"].sort_values("when_us")
    frame = pd.DataFrame({
        "name": [f"ddp_bucket{k}" for k in range(len(bwd))],
        "params": np.array(last[0], dtype=np.int64),
        "fwd_ms": fwd * 1e-3,
        "bwd_ms": bwd * 1e-3,
        "comm_ms": comm * 1e-3,
        "dtype": comm_rows["dtype"].to_numpy(),
        "allreduce_bytes": comm_rows["bytes"].to_numpy(),
    })
    return frame.iloc[::-1].reset_index(drop=True)
