"""Behaviour snapshot of the simulator: every number it gives, to compare two versions.

Checks issue 12 item 7: every number the library and the CLI gave before a
refactor is unchanged to 1e-9 relative. ``snapshot`` runs a fixed grid through
the public API only (`sim.load_model`, `sim.Cluster`, `sim.simulate`,
`sim.sweep`, `sim.workers.simulate_workers`, `sim.methods.METHODS`) and
through ``python -m sim`` subprocesses, and writes one JSON record per
configuration, keyed by a readable string (``kind|model|scheduler|network|
gpus|precision|...``):

- ``sim``: every zoo model x every scheduler x 5 networks x 1, 2, 4, 16, 64
  GPUs (4 per node), batch 32, fp32 (fp16 for a subset of models): every entry
  of ``res.metrics``, the message groups as sizes + a digest;
- ``method``: every survey method (``method=``, parameter server included) on a
  smaller grid; ``ps``: every scheduler with ``architecture="ps"``;
- ``import`` / ``trace``: layer CSVs with measured per-layer ``comm_ms`` (from
  ``python -m sim import-bcaffe`` on the B-Caffe logs, from tests/data/*.csv
  that have the column, and a small built-in one) run under every scheduler;
- ``workers`` / ``workers-noise``: `simulate_workers` without noise and with
  normal cv 0.1, seed 0 (refusals are recorded as their message);
- ``sweep``: rows of `sim.sweep` for a few configurations;
- ``cli``: the JSON printed by ``run``, ``sweep``, ``validate``,
  ``algorithms`` and ``tune`` (return code and stderr on failure).

A configuration that raises `sim.SimInputError` is recorded as its message
(any other exception as ``unexpected <type>: <message>``, so that a crash shows
up as a difference instead of ending the run).
The code under test is the one in the current directory (it goes first on
``sys.path``; the CLI runs there too), so the same script snapshots any version:

    cd /work/golden   && python /path/to/bench/behaviour.py snapshot -o /tmp/before.json
    cd /work/wt-other && python /path/to/bench/behaviour.py snapshot -o /tmp/after.json
    python bench/behaviour.py check /tmp/before.json /tmp/after.json [--rtol 1e-9]

The full snapshot is 9,900 records, about 4.5 min of CPU (14 MB of JSON);
``--quick`` snapshots a small subset (about 400 records, under 20 s). ``check`` prints how
many records were compared, equal, differing, missing and added, then the
differing records grouped by (scheduler, kind) with a few examples each (old
and new value, relative difference), and exits 1 when a record differs or is
missing. Fields and records that only the new snapshot has are counted, not
failed: the refactor may add outputs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the code under test is the one in the current directory
sys.dont_write_bytecode = True  # leave the checkout under test as it is

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import sim  # noqa: E402

# The schedulers by their place in the registry (the same order in every version),
# so that this script names none of them and runs against old and new code alike.
SEQUENTIAL, WFBP, SYNCEASGD, MGWFBP, OPTIMAL, BUCKET, HOROVOD, DDP, BYTESCHEDULER, DEAR = list(sim.SCHEDULERS)[:10]
#: Schedulers left out of the per-worker records ($BEHAVIOUR_SKIP_WORKERS, comma-separated), e.g. those an
#: old version refused there, which a version that runs them would time at length for nothing to compare.
SKIP_WORKERS = set(filter(None, os.environ.get("BEHAVIOUR_SKIP_WORKERS", "").split(",")))

NETWORKS = ["10gbe", "ib-fdr-56", "100gbe", "nvlink3", "10gbe-k80-osu"]
GPU_COUNTS = [1, 2, 4, 16, 64]
GPUS_PER_NODE = 4
BATCH = 32
FP16_MODELS = ["alexnet", "vgg16", "resnet50", "densenet121", "bert_large", "gpt2"]
METHOD_NETWORKS = ["10gbe", "ib-fdr-56", "100gbe"]
PS_MODELS = ["alexnet", "resnet50", "bert_base"]
WORKER_NETWORKS = ["10gbe", "ib-fdr-56"]
TRACE_GPUS = [1, 2, 4, 8, 16]
#: The reference logs bundled with the repo (data/reference, with their sources), found from this
#: script's own place, so that a snapshot of any checkout reads the same files.
REFERENCE_DIR = Path(__file__).resolve().parent.parent / "data" / "reference"
BCAFFE_DIR = REFERENCE_DIR / "bcaffe_k80_10gbe"
#: A small layer table with measured all-reduce times (made up, fixed here so
#: that the snapshot does not depend on test fixtures).
BUILTIN_TRACE_CSV = """name,params,fwd_ms,bwd_ms,comm_ms
conv1,1000,1.0,2.0,0.2
relu1,0,0.5,0.5,0
conv2,250000,1.0,2.0,1.1
conv3,750000,2.0,3.5,2.9
fc1,4000000,0.5,1.0,9.5
fc2,40000,0.2,0.4,0.4
"""


# ---------------------------------------------------------------- flattening
def _scalar(value):
    """A JSON-able scalar, or None when ``value`` is not one."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return _NOT_SCALAR


_NOT_SCALAR = object()


def groups_summary(groups) -> dict:
    """Message groups as their sizes and a digest of the layer names (compact)."""
    groups = [list(g) for g in groups]
    text = json.dumps(groups)
    return {"groups.sizes": ",".join(str(len(g)) for g in groups),
            "groups.sha1": hashlib.sha1(text.encode()).hexdigest()}


def flatten(obj, prefix: str = "") -> dict:
    """Nested dicts and lists as {path: scalar}; ``groups`` lists as a summary."""
    out: dict = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key == "groups" and isinstance(value, (list, tuple)):
                out.update({f"{prefix}.{k}" if prefix else k: v for k, v in groups_summary(value).items()})
            else:
                out.update(flatten(value, path))
        return out
    if isinstance(obj, np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, (list, tuple)):
        if not obj:
            out[prefix] = "[]"
        for i, value in enumerate(obj):
            out.update(flatten(value, f"{prefix}[{i}]"))
        return out
    value = _scalar(obj)
    out[prefix] = repr(obj) if value is _NOT_SCALAR else value
    return out


# ---------------------------------------------------------------- recording
class Recorder:
    """Records keyed by a readable string; each holds values or an error."""

    def __init__(self, scrub: str = "") -> None:
        self.records: dict[str, dict] = {}
        self.scrub = scrub

    def clean(self, text: str) -> str:
        return text.replace(self.scrub, "<tmp>") if self.scrub else text

    def add(self, kind: str, key_parts, scheduler, fn) -> None:
        """Run ``fn`` (returning a dict of values) and record its flat values or its SimInputError."""
        key = "|".join([kind, *(str(p) for p in key_parts)])
        rec: dict = {"kind": kind, "scheduler": scheduler}
        try:
            values = fn()
        except sim.SimInputError as exc:
            rec["error"] = self.clean(str(exc))
        except Exception as exc:  # a crash of the code under test is a difference too, not the end of the run
            rec["error"] = self.clean(f"unexpected {type(exc).__name__}: {exc}")
        else:
            rec["values"] = {k: self.clean(v) if isinstance(v, str) else v for k, v in flatten(values).items()}
        self._put(key, rec)

    def add_error(self, kind: str, key_parts, scheduler, message: str) -> None:
        key = "|".join([kind, *(str(p) for p in key_parts)])
        self._put(key, {"kind": kind, "scheduler": scheduler, "error": self.clean(message)})

    def _put(self, key: str, rec: dict) -> None:
        if key in self.records:
            raise RuntimeError(f"duplicate record key {key}")
        self.records[key] = rec


def cluster(gpus: int, network: str, gpus_per_node: int = GPUS_PER_NODE) -> sim.Cluster:
    return sim.Cluster(gpus=gpus, gpus_per_node=gpus_per_node, network=network)


def sim_values(res) -> dict:
    return {**res.metrics, "result.iteration_time_s": res.iteration_time_s}


def record_grid(rec: Recorder, models, networks, gpu_counts, precisions) -> None:
    """``sim``: every scheduler over the grid."""
    for name in models:
        model = sim.load_model(name)
        for precision in precisions:
            for scheduler in sim.SCHEDULERS:
                for network in networks:
                    for gpus in gpu_counts:
                        rec.add("sim", [name, scheduler, network, gpus, precision], scheduler,
                                lambda m=model, s=scheduler, n=network, g=gpus, p=precision: sim_values(
                                    sim.simulate(m, cluster(g, n), s, batch_size=BATCH, precision=p)))


def record_methods(rec: Recorder, models, networks, gpu_counts) -> None:
    """``method``: every survey method; ``ps``: every scheduler on the parameter server."""
    from sim.methods import METHODS

    for name in models:
        model = sim.load_model(name)
        for method, cfg in METHODS.items():
            for network in networks:
                for gpus in gpu_counts:
                    rec.add("method", [name, method, network, gpus, "fp32"], cfg.scheduler,
                            lambda m=model, me=method, n=network, g=gpus: sim_values(
                                sim.simulate(m, cluster(g, n), method=me, batch_size=BATCH)))
    for name in PS_MODELS if len(models) > 3 else models[:1]:
        model = sim.load_model(name)
        for scheduler in sim.SCHEDULERS:
            for gpus in (2, 16):
                rec.add("ps", [name, scheduler, "10gbe", gpus, "fp32"], scheduler,
                        lambda m=model, s=scheduler, g=gpus: sim_values(
                            sim.simulate(m, cluster(g, "10gbe"), s, architecture="ps", batch_size=BATCH)))


def run_cli(args: list[str]) -> dict:
    """``python -m sim ARGS`` in the current directory: return code, stdout JSON (or text), stderr on failure."""
    proc = subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True,
                          cwd=os.getcwd(), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, check=False)
    out: dict = {"returncode": proc.returncode}
    try:
        out["stdout"] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        out["stdout_text"] = proc.stdout.strip()
    if proc.returncode != 0:
        out["stderr"] = proc.stderr.strip()
    return out


def trace_csvs(rec: Recorder, tmp: Path, quick: bool) -> dict[str, Path]:
    """Layer CSVs with measured comm_ms: imported B-Caffe logs, tests/data ones, the built-in one."""
    csvs: dict[str, Path] = {}
    builtin = tmp / "builtin_trace.csv"
    builtin.write_text(BUILTIN_TRACE_CSV, encoding="utf-8")
    csvs["builtin_trace"] = builtin
    logs = sorted(BCAFFE_DIR.glob("tmp*comm.log")) if BCAFFE_DIR.is_dir() else []
    if quick:
        logs = [p for p in logs if p.name == "tmp8comm.log"]
    for log in logs:
        out = tmp / f"bcaffe_{log.stem}.csv"
        rec.add("import", [log.name], None, lambda log=log, out=out: run_cli(["import-bcaffe", str(log), "-o", str(out)]))
        if out.is_file():
            rec.add("import", [log.name, "csv"], None, lambda out=out: pd.read_csv(out).to_dict(orient="list"))
            csvs[f"bcaffe_{log.stem}"] = out
    for path in sorted(Path("tests/data").glob("*.csv")):
        if "comm_ms" in path.read_text(encoding="utf-8").splitlines()[0]:
            csvs[f"tests_{path.stem}"] = path.resolve()
    return csvs


def record_traces(rec: Recorder, csvs: dict[str, Path], quick: bool) -> None:
    """``trace``: every scheduler on each CSV with measured all-reduce times."""
    for label, path in csvs.items():
        try:
            model = sim.load_model(str(path))
        except sim.SimInputError as exc:
            rec.add_error("trace", [label, "load"], None, str(exc))
            continue
        for scheduler in sim.SCHEDULERS:
            for gpn in (1,) if quick else (1, 4):
                for gpus in TRACE_GPUS:
                    rec.add("trace", [label, scheduler, "10gbe-k80-osu", gpus, f"gpn{gpn}", "fp32"], scheduler,
                            lambda m=model, s=scheduler, g=gpus, k=gpn: sim_values(
                                sim.simulate(m, cluster(g, "10gbe-k80-osu", k), s, batch_size=BATCH)))


def worker_values(res) -> dict:
    timeline = res.timeline
    by_kind = timeline.groupby("kind")["duration_s"].sum().to_dict() if len(timeline) else {}
    return {**res.metrics, "result.iteration_times_s": res.iteration_times_s,
            "result.straggler_workers": list(res.straggler_workers),
            "wait_s.sum_by_iteration": np.asarray(res.wait_s).sum(axis=1),
            "wait_s.max": float(np.max(res.wait_s)) if np.size(res.wait_s) else 0.0,
            "timeline.rows": len(timeline), "timeline.duration_s_by_kind": by_kind}


def record_workers(rec: Recorder, models, networks, gpu_counts) -> None:
    """``workers`` (no noise) and ``workers-noise`` (normal cv 0.1, seed 0)."""
    from sim.workers import StragglerSpec, simulate_workers

    specs = {"workers": StragglerSpec(), "workers-noise": StragglerSpec("normal", cv=0.1)}
    for name in models:
        model = sim.load_model(name)
        for scheduler in [s for s in sim.SCHEDULERS if s not in SKIP_WORKERS]:
            for kind, spec in specs.items():
                for network in networks:
                    for gpus in gpu_counts:
                        rec.add(kind, [name, scheduler, network, gpus, "fp32", "seed0"], scheduler,
                                lambda m=model, s=scheduler, n=network, g=gpus, sp=spec: worker_values(
                                    simulate_workers(m, cluster(g, n), s, batch_size=BATCH, straggler=sp, seed=0)))


SWEEPS = {
    "resnet50-all": dict(model="resnet50", gpus=[1, 2, 4, 8, 16, 32, 64], schedulers=None),
    "vgg16-buckets": dict(model="vgg16", gpus=[4, 16], schedulers=[WFBP, MGWFBP, BUCKET],
                          networks=["10gbe", "100gbe", "ib-fdr-56"], bucket_mbs=[1.0, 25.0, 100.0]),
    "bert_base-fp16-prefetch": dict(model="bert_base", gpus=[2, 8, 32], precision="fp16", prefetch=True,
                                    schedulers=[SEQUENTIAL, SYNCEASGD, OPTIMAL, HOROVOD, DDP]),
    "resnet50-calibrated": dict(model="resnet50", gpus=[1, 8], schedulers=[WFBP, MGWFBP],
                                calibrate_iteration_s=0.2),
}


def record_sweeps(rec: Recorder, names) -> None:
    """``sweep``: each row of a few `sim.sweep` calls."""
    for label in names:
        cfg = dict(SWEEPS[label])
        model = sim.load_model(cfg.pop("model"))
        cfg["schedulers"] = cfg["schedulers"] or list(sim.SCHEDULERS)
        try:
            frame = sim.sweep(model, sim.Cluster(gpus_per_node=GPUS_PER_NODE), batch_size=BATCH, **cfg)
        except sim.SimInputError as exc:
            rec.add_error("sweep", [label], None, str(exc))
            continue
        rec.add("sweep", [label, "shape"], None, lambda f=frame: {"rows": len(f), "columns": list(f.columns)})
        for i, row in enumerate(frame.to_dict(orient="records")):
            parts = [label, f"row{i}", row.get("scheduler"), row.get("network"), row.get("gpus")]
            if "bucket_mb" in row:
                parts.append(f"{BUCKET}{row['bucket_mb']}")
            rec.add("sweep", parts, row.get("scheduler"), lambda r=row: r)


def cli_commands(csvs: dict[str, Path], quick: bool) -> dict[str, list[str]]:
    ref = ["--reference", str(REFERENCE_DIR)] if REFERENCE_DIR.is_dir() else []
    cmds = {
        "run resnet50 mgwfbp 16": ["run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4",
                                   "--scheduler", MGWFBP, "--format", "json"],
        "tune resnet50 bucket-mb": ["tune", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4",
                                    "--scheduler", BUCKET, "--knob", "bucket-mb", "--values", "1,5,25,100",
                                    "--format", "json"],
        "run resnet50 6 gpus (error)": ["run", "--model", "resnet50", "--gpus", "6", "--gpus-per-node", "4"],
    }
    if quick:
        return cmds
    trace = str(csvs.get("bcaffe_tmp8comm", csvs["builtin_trace"]))
    cmds.update({
        "run vgg16 BSP-PS 8": ["run", "--model", "vgg16", "--gpus", "8", "--gpus-per-node", "4", "--method", "BSP-PS",
                               "--format", "json"],
        "run bert_large dear fp16 16": ["run", "--model", "bert_large", "--gpus", "16", "--gpus-per-node", "4",
                                        "--scheduler", DEAR, "--precision", "fp16", "--format", "json"],
        "run alexnet horovod knobs": ["run", "--model", "alexnet", "--gpus", "4", "--scheduler", HOROVOD,
                                      "--fusion-threshold-mb", "16", "--cycle-time-ms", "2", "--iterations", "3",
                                      "--prefetch", "--io-ms", "5", "--h2d-ms", "2", "--format", "json"],
        "run resnet50 stragglers": ["run", "--model", "resnet50", "--gpus", "8", "--gpus-per-node", "4",
                                    "--straggler-dist", "normal", "--straggler-cv", "0.1", "--stragglers", "1",
                                    "--seed", "0", "--format", "json"],
        "run trace optimal": ["run", "--model", trace, "--gpus", "8", "--scheduler", OPTIMAL, "--format", "json"],
        "sweep resnet50": ["sweep", "--model", "resnet50", "--gpus", "1,2,4,8,16", "--gpus-per-node", "4",
                           "--scheduler", "wfbp,mgwfbp,optimal,bucket", "--format", "json"],
        "sweep googlenet methods": ["sweep", "--model", "googlenet", "--gpus", "4,16", "--gpus-per-node", "4",
                                    "--method", "BSP-A2A,BSP-PS,ByteScheduler-PS", "--format", "json"],
        "validate": ["validate", "--format", "json", *ref],
        "algorithms resnet50 8": ["algorithms", "--model", "resnet50", "--gpus", "8", "--seed", "0", "--format", "json"],
        "algorithms alexnet lognormal": ["algorithms", "--model", "alexnet", "--gpus", "4", "--steps", "50",
                                         "--straggler-dist", "lognormal", "--straggler-cv", "0.2", "--seed", "0",
                                         "--format", "json"],
        "tune vgg16 credit": ["tune", "--model", "vgg16", "--gpus", "16", "--gpus-per-node", "4", "--scheduler",
                              BYTESCHEDULER, "--knob", "credit", "--values", "1,2,4,8", "--format", "json"],
    })
    return cmds


def snapshot(out: Path, quick: bool) -> None:
    t0 = time.perf_counter()
    zoo = sim.zoo_names()
    with tempfile.TemporaryDirectory(prefix="behaviour-") as tmpdir:
        rec = Recorder(scrub=tmpdir)
        tmp = Path(tmpdir)
        if quick:
            models = [m for m in ("alexnet", "resnet50", "bert_base") if m in zoo]
            record_grid(rec, models, ["10gbe", "100gbe"], [1, 4, 16], ["fp32"])
            record_grid(rec, models[:1], ["10gbe"], [4, 16], ["fp16"])
            record_methods(rec, models[:2], ["10gbe"], [1, 16])
            record_workers(rec, models[:1], ["10gbe"], [1, 16])
            csvs = trace_csvs(rec, tmp, quick)
            record_traces(rec, {k: v for k, v in csvs.items() if k != "builtin_trace"} or csvs, quick)
            record_sweeps(rec, ["vgg16-buckets"])
        else:
            record_grid(rec, zoo, NETWORKS, GPU_COUNTS, ["fp32"])
            record_grid(rec, [m for m in FP16_MODELS if m in zoo], NETWORKS, GPU_COUNTS, ["fp16"])
            record_methods(rec, zoo, METHOD_NETWORKS, GPU_COUNTS)
            record_workers(rec, zoo, WORKER_NETWORKS, GPU_COUNTS)
            csvs = trace_csvs(rec, tmp, quick)
            record_traces(rec, csvs, quick)
            record_sweeps(rec, list(SWEEPS))
        for label, args in cli_commands(csvs, quick).items():
            rec.add("cli", [label], None, lambda a=args: run_cli(a))
    counts: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    for r in rec.records.values():
        counts[r["kind"]] += 1
        errors[r["kind"]] += "error" in r
    meta = {"cwd": os.getcwd(), "commit": _git_head(), "python": platform.python_version(), "quick": quick,
            "runtime_s": round(time.perf_counter() - t0, 1), "records": len(rec.records),
            "records_by_kind": dict(counts), "errors_by_kind": dict(errors)}
    out.write_text(json.dumps({"meta": meta, "records": rec.records}, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(rec.records)} records ({', '.join(f'{k} {v}' for k, v in counts.items())}); "
          f"{sum(errors.values())} recorded errors; {meta['runtime_s']} s; wrote {out}")


def _git_head() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() or None


# ---------------------------------------------------------------- checking
def rel_diff(a, b) -> float:
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale else 0.0


def same_value(a, b, rtol: float, atol: float) -> bool:
    num = (int, float)
    if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, num) and isinstance(b, num)):
        return a == b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol or abs(a - b) <= rtol * max(abs(a), abs(b))


def compare_record(old: dict, new: dict, rtol: float, atol: float) -> tuple[list, int]:
    """Differences [(field, old, new)] and the number of fields only ``new`` has."""
    if "error" in old or "error" in new:
        o, n = old.get("error"), new.get("error")
        return ([] if o == n else [("<error>", o, n)]), 0
    ov, nv = old["values"], new["values"]
    diffs = [(k, ov[k], nv.get(k, "<missing>")) for k in ov
             if k not in nv or not same_value(ov[k], nv[k], rtol, atol)]
    return diffs, len(set(nv) - set(ov))


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    s = json.dumps(v) if not isinstance(v, str) else v
    return s if len(s) <= 120 else s[:117] + "..."


def _describe(field: str, o, n) -> str:
    line = f"      {field}: old {_fmt(o)}  new {_fmt(n)}"
    num = (int, float)
    if isinstance(o, num) and isinstance(n, num) and not isinstance(o, bool) and not isinstance(n, bool):
        line += f"  (rel diff {rel_diff(o, n):.3g})"
    return line


def check(old_path: Path, new_path: Path, rtol: float, atol: float, examples: int) -> int:
    old = json.loads(old_path.read_text(encoding="utf-8"))
    new = json.loads(new_path.read_text(encoding="utf-8"))
    o_recs, n_recs = old["records"], new["records"]
    missing = [k for k in o_recs if k not in n_recs]
    added = [k for k in n_recs if k not in o_recs]
    differing: dict[tuple, list] = defaultdict(list)
    added_fields = equal = 0
    for key, o in o_recs.items():
        if key not in n_recs:
            continue
        diffs, extra = compare_record(o, n_recs[key], rtol, atol)
        added_fields += extra
        if diffs:
            differing[(o.get("scheduler") or "-", o["kind"])].append((key, diffs))
        else:
            equal += 1
    n_diff = sum(len(v) for v in differing.values())
    print(f"old: {old_path} ({old['meta'].get('cwd')} @ {old['meta'].get('commit')}, {len(o_recs)} records)")
    print(f"new: {new_path} ({new['meta'].get('cwd')} @ {new['meta'].get('commit')}, {len(n_recs)} records)")
    print(f"rtol {rtol:g}, atol {atol:g}")
    print(f"compared {len(o_recs) - len(missing)}, equal {equal}, differing {n_diff}, "
          f"missing {len(missing)}, added {len(added)} (fields only in new: {added_fields})")
    for (scheduler, kind), items in sorted(differing.items()):
        fields = defaultdict(int)
        for _, diffs in items:
            for f, _, _ in diffs:
                fields[f.split("[")[0]] += 1
        top = ", ".join(f"{f} x{c}" for f, c in sorted(fields.items(), key=lambda x: -x[1])[:6])
        print(f"\n== scheduler {scheduler}, kind {kind}: {len(items)} differing records (fields: {top})")
        for key, diffs in items[:examples]:
            print(f"   {key}")
            for f, o, n in diffs[:6]:
                print(_describe(f, o, n))
            if len(diffs) > 6:
                print(f"      ... {len(diffs) - 6} more fields")
    for label, keys in (("missing (in old only)", missing), ("added (in new only)", added)):
        if keys:
            print(f"\n{label}: {len(keys)}, e.g.")
            for k in keys[:examples * 3]:
                print(f"   {k}")
    return 1 if n_diff or missing else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser("snapshot", help="record every number of the code in the current directory")
    snap.add_argument("-o", "--output", type=Path, required=True)
    snap.add_argument("--quick", action="store_true", help="a small subset (under a minute)")
    chk = sub.add_parser("check", help="compare two snapshots; exit 1 when a record differs or is missing")
    chk.add_argument("old", type=Path)
    chk.add_argument("new", type=Path)
    chk.add_argument("--rtol", type=float, default=1e-9)
    chk.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0: relative only)")
    chk.add_argument("--examples", type=int, default=3, help="examples shown per group")
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        snapshot(args.output, args.quick)
        return 0
    return check(args.old, args.new, args.rtol, args.atol, args.examples)


if __name__ == "__main__":
    sys.exit(main())
