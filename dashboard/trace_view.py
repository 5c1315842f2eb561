"""A PyTorch profiler (Kineto) trace upload: the measured iteration beside the simulated one.

The upload is read from memory only (`sim.calib.kineto.read_trace` on its
bytes), capped at `MAX_TRACE_UPLOAD_MB`; a bad trace shows its one-line error
and the rest of the page keeps working. The measured report (iteration,
communication, hidden, exposed, overlap %: medians over the profiled steps,
HTA's definitions) is set beside a simulation of the same data-parallel run:
the same GPU count, either a zoo model (ResNet-50 by default, for the bundled
HTA trace) with compute calibrated to the trace, or the trace's own DDP-bucket
layer table with its measured all-reduce times (trace-driven mode).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import sim
from dashboard import figures, ui
from sim.calib.kineto import layer_table, measured_report, read_trace
from sim.catalog import gpus as gpu_catalog
from sim.schedulers.names import DDP, WFBP

__all__ = ["COMPARED", "MAX_TRACE_JSON_BYTES", "MAX_TRACE_UPLOAD_BYTES", "MAX_TRACE_UPLOAD_MB", "comparison_table", "gpu_of", "measured_figure",
           "panel", "read_uploaded_trace", "simulate_like"]

#: The upload limit of a trace; the server refuses any upload over ``server.maxUploadSize`` of
#: ``.streamlit/config.toml`` (5 MB as shipped) first, so raise both together. A gzipped trace of
#: 5 MiB holds a few dozen MB of JSON; larger traces go through ``python -m sim import-trace``.
MAX_TRACE_UPLOAD_MB = 5
MAX_TRACE_UPLOAD_BYTES = MAX_TRACE_UPLOAD_MB * 1024 * 1024
#: The most JSON an uploaded trace may hold once decompressed (the library's own limit,
#: `sim.calib.kineto.MAX_TRACE_BYTES`, is 200 MB: a 4 MiB gzip upload of 190 MB took 11 s and about
#: 1.3 GB; 63 MB took 3.7 s and peaked at 400 MiB, measured 2026-11-24). The bundled HTA trace is 9.8 MB.
MAX_TRACE_JSON_BYTES = 64 * 10**6
#: The figures set side by side: (report key, label, scale to the shown unit).
COMPARED = (
    ("iteration_time_s", "iteration (ms)", 1e3), ("comm_s", "communication (ms)", 1e3),
    ("comm_hidden_s", "hidden (ms)", 1e3), ("comm_exposed_s", "exposed (ms)", 1e3),
    ("overlap_pct", "overlap %", 1.0),
)
ZOO_MODE, TRACE_MODE = "zoo", "trace"


@st.cache_data(show_spinner="Reading the trace ...", max_entries=4)
def read_uploaded_trace(name: str, data: bytes) -> tuple[dict, pd.DataFrame | None, str | None]:
    """The measured report and the DDP-bucket layer table of an uploaded trace (or None and why not)."""
    if len(data) > MAX_TRACE_UPLOAD_BYTES:
        raise sim.SimInputError(f"{name}: {len(data) / 2**20:.1f} MiB is too large; the limit is "
                                f"{MAX_TRACE_UPLOAD_MB} MiB")
    trace = read_trace(bytes(data), where=name, max_bytes=MAX_TRACE_JSON_BYTES)
    report = measured_report(trace)
    try:
        return report, layer_table(trace), None
    except sim.SimInputError as exc:
        return report, None, str(exc)


def gpu_of(name: str | None, default: str = "a100") -> str:
    """The catalog GPU named in a trace's device name (``NVIDIA A100-PG509-200`` -> ``a100``): of those whose
    first part the name holds, the one with the most parts in it (``A100-SXM4-40GB`` -> ``a100-40gb``,
    ``Tesla V100-SXM2-32GB`` -> ``v100-sxm2``, ``NVIDIA GeForce RTX 4090`` -> ``rtx4090``), the catalog's order
    breaking ties."""
    text = name.lower().replace(" ", "") if isinstance(name, str) else ""  # "GeForce RTX 4090" -> ...rtx4090
    best, score = default, 0
    for gpu in gpu_catalog():
        parts = gpu.split("-")
        hits = sum(part in text for part in parts) if parts[0] in text else 0
        if hits > score:
            best, score = gpu, hits
    return best


def simulate_like(report: dict, layers: pd.DataFrame | None, *, mode: str, model: str, gpu: str,
                  batch_size: int) -> sim.SimResult:
    """The simulated run of the trace's configuration: its GPU count, in one node, DDP.

    ``zoo``: ``model`` with compute calibrated so that one GPU's iteration is the
    measured iteration minus its exposed communication. ``trace``: the trace's
    layer table (measured compute and all-reduce times per DDP bucket; the
    optimizer and the copies after the last bucket as the update).
    """
    world = max(int(report["trace"].get("world_size") or 1), 1)
    cluster = sim.Cluster(gpus=world, gpus_per_node=world, gpu=gpu)
    if mode == TRACE_MODE:
        if layers is None:
            raise sim.SimInputError("this trace has no DDP layer table: simulate a zoo model instead")
        update_ms = ((report.get("optimizer_gpu_s") or 0.0) + (report.get("backward_tail_s") or 0.0)) * 1e3
        the_model = sim.model_from_frame(layers, f"{report['trace']['source']} buckets", update_ms=update_ms,
                                         source="uploaded Kineto trace")
        return sim.simulate(the_model, cluster, WFBP, batch_size=batch_size)
    one_gpu_s = report["iteration_time_s"] - (report.get("comm_exposed_s") or 0.0)
    return sim.simulate(sim.load_model(model), cluster, DDP, batch_size=batch_size,
                        calibrate_iteration_s=one_gpu_s if one_gpu_s > 0 else None)


def comparison_table(report: dict, metrics: dict) -> pd.DataFrame:
    """Measured and simulated figures side by side, with the simulated one's difference."""
    sim_overlap = 100.0 * metrics["comm_hidden_s"] / metrics["comm_s"] if metrics["comm_s"] > 0 else None
    rows = []
    for key, label, scale in COMPARED:
        measured = report.get(key)
        simulated = sim_overlap if key == "overlap_pct" else metrics[key]
        rows.append({"figure": label, "measured": None if measured is None else measured * scale,
                     "simulated": None if simulated is None else simulated * scale})
    frame = pd.DataFrame(rows)
    frame["difference %"] = 100.0 * (frame["simulated"] - frame["measured"]) / frame["measured"]
    return frame


def measured_figure(report: dict) -> go.Figure:
    """Each profiled step's iteration as a stack: exposed and hidden communication, the rest."""
    steps = pd.DataFrame(report["steps"])
    x = [f"step {s}" for s in steps["step"]]
    rest = (steps["iteration_time_s"] - steps["comm_exposed_s"]).clip(lower=0) * 1e3
    fig = go.Figure([
        go.Bar(x=x, y=rest, name="compute, no exposed communication", marker={"color": "#4C78A8"}),
        go.Bar(x=x, y=steps["comm_exposed_s"] * 1e3, base=rest, name="exposed communication",
               marker={"color": "#d62728"}),
        go.Bar(x=x, y=steps["comm_hidden_s"] * 1e3, name="hidden communication (under compute)",
               marker={"color": "#f4b6b6"}, base=0, width=0.3, opacity=0.9),
    ])
    fig.update_layout(barmode="overlay", height=400, margin={"l": 10, "r": 10, "t": 45, "b": 40},
                      title={"text": f"Measured · {report['trace']['source']} · iteration "
                                     f"{ui.fmt_ms(report['iteration_time_s'])} (median)", "x": 0.01},
                      yaxis={"title": "ms"}, legend={"orientation": "h", "y": -0.15})
    return fig


def _controls(report: dict, layers: pd.DataFrame | None) -> dict:
    c1, c2, c3, c4 = st.columns(4)
    modes = [ZOO_MODE] + ([TRACE_MODE] if layers is not None else [])
    mode = c1.radio("Simulate", modes, key="trace_mode", format_func=lambda m: {
        ZOO_MODE: "a zoo model", TRACE_MODE: "the trace's DDP buckets (trace-driven)"}[m])
    zoo = sim.zoo_names()
    model = c2.selectbox("Zoo model", zoo, index=zoo.index("resnet50"), key="trace_model",
                         disabled=mode != ZOO_MODE, help="The bundled HTA trace is ResNet-50.")
    batch = c3.number_input("Batch per GPU", min_value=1, max_value=65536, value=32, step=1, key="trace_batch")
    names = list(gpu_catalog())
    gpu = c4.selectbox("GPU", names, index=names.index(gpu_of(report["trace"].get("gpu"))), key="trace_gpu")
    return {"mode": mode, "model": model, "gpu": gpu, "batch_size": int(batch)}


def panel() -> None:
    """The upload, and measured against simulated, side by side."""
    st.subheader("Your profiler trace against the simulator")
    file = st.file_uploader("PyTorch profiler (Kineto) trace of one rank, .json or .json.gz", type=["json", "gz"],
                            key="trace_upload", max_upload_size=MAX_TRACE_UPLOAD_MB,
                            help="As written by torch.profiler with ProfilerActivity.CUDA during DDP training, "
                                 f"up to {MAX_TRACE_UPLOAD_MB} MiB (gzip it); larger traces: python -m sim "
                                 "import-trace TRACE.")
    if file is None:
        st.caption("For example HTA's `tests/data/kineto/nccl_data.json.gz` (ResNet-50, DDP on 2 × A100).")
        return
    try:
        report, layers, why = read_uploaded_trace(file.name, file.getvalue())
        settings = _controls(report, layers)
        res = simulate_like(report, layers, **settings)
    except sim.SimInputError as exc:
        st.error(str(exc))
        return
    if why:
        st.caption(f"No trace-driven mode: {why}")
    world = res.cluster.gpus
    left, right = st.columns(2)
    with left:
        st.plotly_chart(measured_figure(report), key="trace_measured_chart", config=ui.PLOTLY_CONFIG)
    with right:
        title = (f"Simulated · {res.model.name} · {ui.plural(world, 'GPU')} {settings['gpu']} · iteration "
                 f"{ui.fmt_ms(res.iteration_time_s)}")
        st.plotly_chart(figures.gantt_figure(res.timeline, title, height=400), key="trace_simulated_chart",
                        config=ui.PLOTLY_CONFIG)
    with st.container(key="trace_table"):
        st.dataframe(comparison_table(report, res.metrics), hide_index=True, column_config={
            "measured": st.column_config.NumberColumn(format="%.2f"),
            "simulated": st.column_config.NumberColumn(format="%.2f"),
            "difference %": st.column_config.NumberColumn(format="%+.1f")})
    busy = report.get("gpu_busy_s")
    if busy is not None:
        st.caption(f"The GPU is busy {ui.fmt_ms(busy)} of the measured {ui.fmt_ms(report['iteration_time_s'])} step; "
                   "the rest is time the GPU waits for the host (data loading, Python, launches), which the "
                   "trace-driven layer table does not hold.")
    st.caption(f"Measured: medians over {report['steps_profiled']} profiled steps ({report['method']}). "
               f"Simulated: {ui.plural(world, 'GPU')} in one node, "
               + ("DDP, compute calibrated to the measured iteration minus its exposed communication."
                  if settings["mode"] == ZOO_MODE else "each DDP bucket's measured compute and all-reduce time."))
