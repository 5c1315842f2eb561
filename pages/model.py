"""Model: the layer table, per-layer bars, and (for small models) the iteration DAG."""

import streamlit as st

from dashboard import cached, figures, state, tables, ui

MAX_DAG_LAYERS = 40
#: Zoo models whose DAG is drawn (20 and 38 rows per gradient tensor; bert_base has 199, gpt2 149).
DAG_MODELS = ("alexnet", "vgg16")

cfg = ui.config_or_stop()
st.title(f"Model: {cfg.model_label}")
ui.assumptions(cfg)

options = state.scheduler_options()
scheduler = st.selectbox("Scheduler (for the message grouping)", options, index=state.index_of("scheduler", options),
                         key="scheduler", bind="query-params")
res = ui.guarded(cached.simulate, cfg, scheduler)
model = res.model  # with the compute times used for this GPU, batch and precision
cost = res.cluster.comm_cost(model, cfg.precision)  # measured per layer when the CSV has comm_ms
layers = tables.layer_table(model, cost, cfg.precision, res.groups)

with_params = layers.loc[layers["params"] > 0]
alpha_bound = int((with_params["alpha_ms"] > with_params["beta_ms"]).sum())
# the rows are what schedulers plan over: one per gradient tensor (a zoo model by default), or one per layer
per_tensor = res.metrics["gradients"] == "tensor"
rows = "Gradient tensors" if per_tensor else "Layers"
layer_count = cached.model_of(cfg).num_layers
c = st.columns(4)
c[0].metric(rows, f"{len(with_params):,}" if per_tensor else f"{model.num_layers:,}",
            f"of {ui.plural(layer_count, 'layer')}" if per_tensor else f"{len(with_params):,} with parameters",
            delta_color="off", delta_arrow="off",
            help="One row per gradient tensor (a conv weight, a BN weight and a BN bias are three), as frameworks "
                 "send them; the table below also lists the layers without parameters." if per_tensor else None)
c[1].metric("Parameters", f"{model.total_params / 1e6:,.2f} M")
c[2].metric("Gradient per iteration", tables.fmt_bytes(layers["grad_bytes"].sum()), cfg.precision,
            delta_color="off", delta_arrow="off")
c[3].metric(f"{rows} where α > β·M", f"{alpha_bound:,} of {len(with_params):,}",
            help="For these, sending the gradient alone costs more in start-up than in transfer: "
                 "merging them with neighbours saves most.")
if cfg.gpus > 1 and cost.regimes:
    st.caption(f"All-reduce here: T(M) = {ui.cost_line(cost)}; each layer's bars split its gradient's time by the "
               "line of the regime it falls in.")
elif cfg.gpus > 1 and cost.alpha_s > 0:
    st.caption(
        f"All-reduce here: T(M) = α + β·M with α = {ui.fmt_alpha(cost.alpha_s)} and β = "
        f"{cost.beta_s_per_byte * 1e9:.3g} ns/byte, so a gradient smaller than α/β = "
        f"{tables.fmt_bytes(cost.alpha_s / cost.beta_s_per_byte) if cost.beta_s_per_byte else '∞'} "
        "spends more time starting up than transferring."
    )
elif cfg.gpus > 1:  # α = 0: no gradient is start-up bound (α/β = 0/0 read "∞" beside "0 of 161")
    st.caption(f"All-reduce here: T(M) = β·M with β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte and no start-up "
               "cost (α = 0), so no gradient spends more time starting up than transferring.")
else:
    st.caption("One GPU: no all-reduce, so the α and β·M bars are empty. Pick more GPUs in the sidebar.")

ui.chart(figures.layer_figure(layers), "layer_chart", f"layers-{cfg.model_label}")

st.subheader("Iteration DAG")
if model.num_layers <= MAX_DAG_LAYERS:
    dag = ui.guarded(cached.iteration_dag, cfg, scheduler)
    ui.chart(figures.dag_figure(dag, f"{dag.number_of_nodes()} tasks, {dag.number_of_edges()} dependencies ({scheduler})"),
             "dag_chart", f"dag-{cfg.model_label}-{scheduler}")
    st.caption("Top row: forward, input to output. Middle: backward, which runs right to left. "
               "Bottom: all-reduce messages, each under the layers whose gradients it carries; "
               "the update waits for all of them.")
else:
    small = [name for name in DAG_MODELS if name != cfg.model]
    st.caption(f"The DAG is drawn for models of at most {MAX_DAG_LAYERS} rows (this one has {model.num_layers:,} "
               f"{'gradient tensors and layers without parameters' if per_tensor else 'layers'}); "
               f"try {' or '.join(small)}.")

st.subheader("Layer table")
st.dataframe(
    layers.rename(columns={"grad_bytes": "gradient bytes", "fwd_ms": "forward (ms)", "bwd_ms": "backward (ms)",
                           "alpha_ms": "α (ms)", "beta_ms": "β·M (ms)", "allreduce_ms": "all-reduce alone (ms)",
                           "message": "message (-1: none)"}),
    hide_index=True, key="layer_table",
)
ui.download_metrics(layers, f"layers-{cfg.model_label}", "dl_layers", label="Layer table (CSV)")
