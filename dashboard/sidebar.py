"""The shared sidebar: workload and cluster, the same on every page.

Each widget's key is its query parameter (``bind="query-params"``) and its
default comes from `dashboard.state.DEFAULTS`; its value lives in
``st.session_state``, so the choice carries across pages and into a link.
"""

from __future__ import annotations

import streamlit as st

import sim
from dashboard import state
from dashboard.upload import MAX_UPLOAD_MB, model_from_csv_text, read_layer_csv

__all__ = ["render"]

_BIND = "query-params"
#: Help of the cluster's select boxes that need one.
_HELP = {"topo": "How the node is built (data/topologies.csv): flat, the model without a topology; dgx1 and "
                 "dgx1-4nic (NVLink hybrid cube-mesh: fewer rings over fewer GPUs; one or four NICs) need "
                 "NVLink2 inside the node; pcie-2socket, 4 PCIe GPUs over two sockets and one NIC.",
         "fw": "What each message costs beyond the link (data/frameworks.csv): a launch per collective and "
               "copies into and out of fusion buffers. auto: the one the scheduler's reference implementation "
               "runs on (pytorch-ddp for ddp and bucket, horovod for wfbp, mgwfbp and most others, byteps on a "
               "parameter server); mpi: a direct MPI call per message (Caffe-MPI style); none: the links alone."}


def _upload() -> None:
    """Read the uploaded file into ``csv_text`` (from memory only).

    A file that cannot be used (too large, not text, not a layer table) is dropped
    from the uploader at once (its key changes), and its one-line error is kept in
    ``upload_error`` for the page (`dashboard.ui.config_or_stop`): so the uploader never
    lists a refused file beside the next one, and the next file replaces the error.
    """
    session = st.session_state
    with st.container(key="upload"):
        file = st.file_uploader(
            "Layer CSV (name, params, fwd_ms, bwd_ms) or Hugging Face config.json", type=["csv", "txt", "json"],
            key=f"upload_file_{session['upload_gen']}", max_upload_size=MAX_UPLOAD_MB,
            help="One row per layer, input to output: parameter count and forward/backward time in ms "
                 "on one GPU at your batch size. Optional columns: type, comm_ms, tensors. Or a BERT, GPT-2, "
                 "Llama or Mistral config.json (its compute times are estimated for the GPU).",
        )
    if file is not None and file.file_id != session.get("csv_upload_id"):
        try:
            text = read_layer_csv(file.name, file.getvalue())
            model_from_csv_text(text, file.name)  # the same check the pages make, before the table is kept
        except sim.SimInputError as exc:  # keep no table, forget the file, say why on the page
            session.update(csv_text=None, csv_name=None, csv_upload_id=None, upload_error=str(exc),
                           upload_gen=session["upload_gen"] + 1)
            st.rerun()
        session.update(csv_text=text, csv_name=file.name, csv_upload_id=file.file_id, upload_error=None)
    elif file is None and session.get("csv_upload_id") is not None:
        # The file was removed: its table goes with it.
        # A table handed over by the Validation page came from no upload and stays.
        session.update(csv_text=None, csv_name=None, csv_upload_id=None)
    if session.get("csv_name"):
        st.caption(f"Using **{session['csv_name']}** (uploads are not part of a shared link).")


def _has_tf32(gpu) -> bool:
    """`sim.compute.has_tf32`, False for an unknown name."""
    try:
        return sim.compute.has_tf32(gpu)
    except (sim.SimInputError, TypeError):
        return False


def render() -> None:
    """Draw the sidebar's widgets; their values land in ``st.session_state``."""
    with st.sidebar:
        st.subheader("Workload")
        models = state.model_options()
        if st.session_state.get("model") == state.UPLOAD and "model" not in st.query_params:
            # a link's ?model=upload is taken (dashboard.ui.check_link), but the binding, which knows the option
            # by its label, drops the name from the address; set again, the binding writes the label back on the
            # next run (Streamlit forbids writing a bound key), so the shared address says an upload is needed
            st.session_state["model"] = state.UPLOAD
        st.selectbox("Model", models, index=state.index_of("model", models), key="model", bind=_BIND,
                     format_func=lambda name: state.UPLOAD_LABEL if name == state.UPLOAD else name,
                     help="A model of the zoo, or your own layer CSV (a link says that an upload is needed; "
                          "the file itself stays in this session).")
        if st.session_state.get("model") == state.UPLOAD:
            _upload()
        else:  # a refused file's error is the last file's: not shown again on coming back to the uploader
            st.session_state["upload_error"] = None
        c1, c2 = st.columns(2)
        c1.number_input("Batch per GPU", min_value=1, max_value=65536, step=1, value=state.default("batch"),
                        key="batch", bind=_BIND)
        precisions = list(sim.model.PRECISIONS)
        c2.selectbox("Precision", precisions, index=state.index_of("precision", precisions),
                     key="precision", bind=_BIND,
                     help="The GPU rate used for compute and the gradient width on the wire. "
                          + " ".join(f"**{k}**: {v}." for k, v in sim.model.PRECISIONS.items()))

        st.subheader("Cluster")
        gpus = state.gpu_options()
        st.selectbox("GPU type", gpus, index=state.index_of("gpu", gpus), key="gpu", bind=_BIND,
                     help="Sets the estimated compute times of zoo models (a CSV carries its own).")
        if st.session_state.get("precision") == "fp32" and _has_tf32(st.session_state.get("gpu")):
            st.caption("This GPU has TF32 tensor cores: PyTorch runs convolutions in TF32 by default, so for a "
                       "convolutional model **fp32** here is a run with TF32 switched off and **tf32** the default "
                       "run (tf32 puts matrix products on TF32 too, which PyTorch does only where allowed).")
        c1, c2 = st.columns(2)
        c1.number_input("GPUs", min_value=1, max_value=65536, step=1, value=state.default("gpus"), key="gpus",
                        bind=_BIND, help="Workers P; must fill whole nodes.")
        c2.number_input("GPUs per node", min_value=1, max_value=64, step=1, value=state.default("per_node"),
                        key="per_node", bind=_BIND)
        for label, key, options in (
            ("Between nodes", "net", state.network_options("inter")),
            ("Inside a node", "intra", state.network_options("intra")),
            ("Node topology", "topo", state.topology_options()),
            ("All-reduce", "coll", state.collective_options()),
            ("Framework", "fw", state.framework_options()),
        ):
            st.selectbox(label, options, index=state.index_of(key, options), key=key, bind=_BIND,
                         help=_HELP.get(key))

        with st.expander("α-β override and calibration"):
            st.toggle("Override α and β", value=state.default("ab"), key="ab", bind=_BIND,
                      help="Every all-reduce of M bytes then costs α + β·M, whatever P and the collective.")
            if st.session_state.get("ab"):
                c1, c2 = st.columns(2)
                c1.number_input("α (µs)", min_value=0.0, max_value=state.BOUNDS["alpha_us"][1], step=10.0,
                                value=state.default("alpha_us"), key="alpha_us", bind=_BIND)
                c2.number_input("β (ns/byte)", min_value=0.0, max_value=state.BOUNDS["beta_ns"][1], step=0.1,
                                format="%.4f",
                                value=state.default("beta_ns"), key="beta_ns", bind=_BIND,
                                help="1 ns/byte is 1 GB/s.")
            st.toggle("Calibrate compute", value=state.default("calib"), key="calib", bind=_BIND,
                      help="Scale every layer's compute time so one GPU takes the measured iteration time.")
            if st.session_state.get("calib"):
                st.number_input("Measured 1-GPU iteration (s)", min_value=1e-6, max_value=1e4, step=0.01,
                                format="%.4f", value=state.default("calib_s"), key="calib_s", bind=_BIND)

        with st.expander("Stragglers"):
            st.toggle("Workers differ", value=state.default("strag"), key="strag", bind=_BIND,
                      help="Run the per-worker engine too: every all-reduce waits for the slowest worker. "
                           "Timeline and Compare then show who waits for whom and the p50/p99 iteration.")
            if st.session_state.get("strag"):
                dists = state.STRAGGLER_DISTS
                st.selectbox("Compute variability", dists, index=state.index_of("strag_dist_sb", dists),
                             key="strag_dist_sb", bind=_BIND)
                st.slider("Coefficient of variation", 0.0, 1.0, value=state.default("strag_cv_sb"), step=0.01,
                          key="strag_cv_sb", bind=_BIND)
                c1, c2 = st.columns(2)
                c1.number_input("Slow workers", min_value=0, max_value=65536, step=1,
                                value=state.default("strag_slow_sb"), key="strag_slow_sb", bind=_BIND,
                                help="Persistently slow workers, chosen by the seed.")
                c2.number_input("Slower by", min_value=1.0, max_value=10.0, step=0.1,
                                value=state.default("strag_factor_sb"), key="strag_factor_sb", bind=_BIND)
                st.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, value=state.default("strag_seed_sb"),
                                key="strag_seed_sb", bind=_BIND)
