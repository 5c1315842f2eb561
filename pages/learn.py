"""Learn: S-SGD, WFBP, why merging helps, MG-WFBP and its limits, with live examples."""

import streamlit as st

import sim
from dashboard import cached, figures, learn_view, state, ui
from sim.schedulers.names import MGWFBP, OPTIMAL, SYNCEASGD, WFBP

ALPHAS_US = state.TOY_ALPHAS_US
BETA_S_PER_BYTE = 1e-9  # 1 ns per byte: a 1 GB/s all-reduce
SCHEDULERS = (WFBP, MGWFBP, OPTIMAL)
COUNTER_ALPHA_US = learn_view.COUNTER_ALPHA_US

ui.ensure_frame()

st.title("Learn: why merging gradients speeds up S-SGD")
st.caption("Assumptions: this page's examples are its own and do not follow the sidebar. Sections 4 and 5: a toy model whose "
           "compute times are given in its table (not estimated), identical workers, 2 GPUs whose every all-reduce "
           "of M bytes takes α + β·M with β = 1 ns/byte. Sections 6 and 7: the cluster named above each table.")

st.header("1. One iteration of synchronous SGD")
st.markdown(
    """
Every one of the **P** workers holds a full copy of the model. In each iteration it reads its own
mini-batch, runs the **forward** pass layer by layer (input → output), then the **backward** pass
(output → input), which produces one gradient per layer. The gradients are averaged across workers
with an **all-reduce**, and every worker applies the same **update**. Without any overlap:
"""
)
st.latex(r"t_{\mathrm{iter}} = t_{\mathrm{io}} + t_f + t_b + t_c + t_u")
st.markdown("Compute ($t_f, t_b$) does not shrink as P grows, so communication $t_c$ decides how well it scales.")

st.header("2. The cost of one all-reduce")
st.markdown("Sending a message of **M** bytes costs a fixed start-up **α** plus **β** per byte:")
st.latex(r"T(M) = \alpha + \beta M")
st.markdown(
    r"""
For a ring all-reduce over P GPUs, $\alpha = 2(P-1)\,\alpha_{\mathrm{link}}$ and
$\beta = \tfrac{2(P-1)}{P}\,\beta_{\mathrm{link}}$: the start-up grows with P.
"""
)
st.markdown(learn_view.alpha_bound_claim(ui.guarded(learn_view.alpha_bound_facts))
            + " See the *Model* page for the α and β·M part of every layer of the sidebar's model.")

st.header("3. WFBP: communicate while computing")
st.markdown(
    r"""
*Wait-free backpropagation* sends each layer's gradient as soon as it is ready, while backward goes on
with the layers below. Layer *l*'s gradient is ready at $\tau_b(l) + t_b(l)$; messages go one at a
time, so its all-reduce starts at
"""
)
st.latex(r"\tau_c(l) = \max\big(\tau_c(l+1) + t_c(l+1),\; \tau_b(l) + t_b(l)\big)")
st.markdown("Only the communication still running after backward ends is **exposed**; the rest is hidden. "
            "But every layer pays its own α.")

st.header("4. Why merging helps, and MG-WFBP")
st.markdown(r"Two messages cost $2\alpha + \beta(M_1 + M_2)$; merged, they cost one start-up less:")
st.latex(r"T(M_1) + T(M_2) = 2\alpha + \beta (M_1 + M_2) \;>\; T(M_1 + M_2) = \alpha + \beta (M_1 + M_2)")
st.markdown(
    """
The price: a merged message can only start when its *last* gradient is ready. **MG-WFBP**
(Shi, Chu and Li, INFOCOM 2019) walks from the output layer down. When the gradient of layer *l − 1*
is ready before the current message would be done, it merges it in if the message would be waiting for
the channel anyway, or if waiting for layer *l − 1* costs less than the α it saves. It is greedy: each decision is final and looks one layer ahead.
**optimal** tries every grouping of consecutive layers (dynamic programming) and keeps the fastest under
the message costs it plans with. Like MG-WFBP it does not see interference (section 6): with interference on,
the run it is timed by can come out slower than another scheduler's grouping.
"""
)

st.subheader("Live: a four-layer toy model")
st.dataframe(cached.TOY_LAYERS, hide_index=True)
alpha_us = st.select_slider("α, the start-up cost of one message (µs)", ALPHAS_US, value=state.default("toy_alpha_us"),
                            key="toy_alpha_us", bind="query-params")
results = ui.guarded(cached.toy_results, alpha_us * 1e-6, BETA_S_PER_BYTE, SCHEDULERS)


def _groups(res) -> str:
    return " | ".join("+".join(g) for g in res.groups)


titles = {s: f"<b>{s}</b>: {ui.fmt_ms(r.iteration_time_s)} — messages {_groups(r)}" for s, r in results.items()}
ui.chart(lambda: figures.gantt_stack_figure({s: r.timeline for s, r in results.items()}, titles), "toy_chart",
         f"toy-alpha{alpha_us}us", cache_key=("toy", alpha_us, tuple(titles.items())))
wf, mg, opt = (results[s].iteration_time_s for s in SCHEDULERS)
c = st.columns(3)
c[0].metric(WFBP, ui.fmt_ms(wf), ui.plural(len(results[WFBP].groups), "message"), delta_color="off",
            delta_arrow="off")
c[1].metric(MGWFBP, ui.fmt_ms(mg), **ui.delta(mg, wf, WFBP, inverse=True))
c[2].metric(OPTIMAL, ui.fmt_ms(opt), **ui.delta(opt, wf, WFBP, inverse=True))

st.subheader(f"MG-WFBP's decisions, step by step (α = {alpha_us} µs)")
toy = cached.toy_model()
backward_at = learn_view.backward_start_s(results[MGWFBP].timeline)
steps = learn_view.mgwfbp_steps(toy, sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6,
                                                 beta_s_per_byte=BETA_S_PER_BYTE).comm_cost(toy, "fp32"),
                                origin_s=backward_at)
st.markdown(
    "MG-WFBP starts with the output layer's gradient as the current message and walks down. At each step it "
    "compares when the current message could start and end with when the next gradient is ready, and either "
    "**merges** that gradient in (one α fewer) or **sends** the message and starts a new one. Each decision below "
    "is the real scheduler's (`sim/schedulers/mgwfbp.py`, run on the layers seen so far); times are on the chart's "
    f"axis above, where backward starts at {backward_at * 1e3:.3f} ms."
)
st.dataframe(learn_view.steps_frame(steps), hide_index=True, key="toy_steps",
             column_config={c: st.column_config.NumberColumn(format="%.3f") for c in
                            ("could start (ms)", "would end (ms)", "ready at (ms)")}
             | {c: st.column_config.NumberColumn(format="%.0f") for c in ("α saved (µs)", "α saved so far (µs)")})
st.markdown(learn_view.steps_text(steps))
st.caption(f"Result: messages **{_groups(results[MGWFBP])}**, "
           f"{sum(s.alpha_saved_us for s in steps):,.0f} µs of start-ups saved against one message per layer.")

st.header("5. Why MG-WFBP is not always optimal")
example = ui.guarded(cached.toy_results, COUNTER_ALPHA_US * 1e-6, BETA_S_PER_BYTE, (MGWFBP, OPTIMAL))
ex_mg, ex_opt = example[MGWFBP], example[OPTIMAL]
st.markdown(
    f"""
A counter-example on the same toy model, at α = {COUNTER_ALPHA_US} µs (a search over small models in
`tests/test_learn.py` finds many such cases; this is the one shown). MG-WFBP sends **{_groups(ex_mg)}** and
takes {ui.fmt_ms(ex_mg.iteration_time_s)}; the optimal plan sends **{_groups(ex_opt)}** and takes
{ui.fmt_ms(ex_opt.iteration_time_s)}, {1 - ex_opt.iteration_time_s / ex_mg.iteration_time_s:.1%} less.
"""
)
if len(ex_mg.groups[0]) > 1 and len(ex_opt.groups[0]) == 1:
    st.markdown(
        f"""
MG-WFBP merged **{ex_mg.groups[0][0]}**, the first gradient ready, with the layers below it: each merge looked
cheaper than paying another α, but together they kept the first message waiting until **{ex_mg.groups[0][-1]}**
was ready, and the network idled meanwhile. The optimal plan sends **{ex_opt.groups[0][0]}** alone at once and
merges the rest behind it. A greedy rule that decides one layer at a time, and never revisits a decision,
cannot see that trade.
"""
    )
ex_titles = {s: f"<b>{s}</b>: {ui.fmt_ms(r.iteration_time_s)} — messages {_groups(r)}" for s, r in example.items()}
ui.chart(lambda: figures.gantt_stack_figure({s: r.timeline for s, r in example.items()}, ex_titles),
         "counter_chart", f"mgwfbp-counter-example-alpha{COUNTER_ALPHA_US}us",
         cache_key=("toy-counter", COUNTER_ALPHA_US, tuple(ex_titles.items())))

st.subheader("Where merging starts to pay")
sweep = ui.guarded(cached.toy_alpha_sweep, tuple(a * 1e-6 for a in ALPHAS_US), BETA_S_PER_BYTE,
                   SCHEDULERS + (SYNCEASGD,))
left, right = st.columns([3, 2])
with left:
    ui.chart(lambda: figures.alpha_sweep_figure(sweep, marked_alpha_us=alpha_us), "alpha_chart", "toy-alpha-sweep",
             cache_key=("toy-sweep", alpha_us))
with right:
    st.markdown("Read off the chart beside (the same simulations):")
    st.markdown("\n".join(f"- {claim}" for claim in learn_view.alpha_claims(sweep)))

st.header("6. What real clusters add")
st.markdown(
    "The papers' DAG model times each layer's gradient as one message costing α + βM. Real frameworks differ "
    "in three ways this simulator models (see the README's *What the simulator models* for sources):\n"
    "- **Gradients per tensor.** A framework all-reduces one gradient per parameter tensor (a convolution's weight, "
    "a batch norm's weight and bias): ResNet-50 has 161 of them in 54 layers, each paying the start-up α.\n"
    "- **Framework costs per message.** Horovod negotiates each tensor and copies it through a fusion buffer; DDP "
    "copies into buckets; NCCL launches a kernel (the sidebar's *Framework*, `--framework`, "
    "`data/frameworks.csv`). ByteScheduler schedules "
    "every partition in Python (about 2 ms each, fitted); with a credit of 2 or more it launches the next "
    "partitions while one is on the wire, so the Timeline shows the launches on a lane of their own: hidden "
    "behind the transfers where those are slow (BERT-Large across 10GbE nodes), setting the pace where they are "
    "quick (inside one node) or the partitions many and small (ResNet-50).\n"
    "- **Interference.** While an all-reduce overlaps the backward pass, NCCL's kernels take SMs and memory "
    "bandwidth, so the overlapped compute runs longer: 1 + κ × (overlapped fraction) times. And the other way: "
    "while the backward pass runs, a message makes only 1 / (1 + κc) of its progress (`comm_slowdown`; over TCP "
    "the CPU threads and PCIe that stage the data are shared with the step), so a message started in the "
    "backward pass ends later and less of it hides (`--no-interference` turns both off; `--compute-slowdown`, "
    "`--comm-slowdown`, `data/interference.csv`). The Timeline shows the stretched bars, compute and "
    "communication.\n"
    "Each was fitted on part of the published measurements and kept on by default only where it lowers the "
    "error on the rest (README, *Validation*). A fourth, **waiting for the slowest GPU**, is a what-if: when each "
    "GPU's compute varies from one iteration to the next (coefficient of variation cv), a synchronous step goes "
    "at the pace of the slowest of P GPUs, on average 1 + cv × E[max of P normals] times the mean (E[max] is 1.42 "
    "for 8 GPUs and 2.07 for 32, so cv 0.02 costs 2.8 % and 4.1 %; `--sync-jitter-cv`, Chen et al. 2016). Fitted on the same cases it comes out 0, so it is "
    "off unless you give it.\n\n"
    "The network's collectives have structure of their own. NCCL picks, per message size, its ring or its double "
    "binary tree (`--collective nccl`; the survey's cases ran it): the tree's latency grows with lg N where the "
    "ring's grows with P, but the tree pipelines a message in 256 KiB chunks: a message up to a chunk crosses "
    "every hop once, each at that hop's rate, and a larger one fills the pipeline with its first chunk, then "
    "streams the rest. Over 10GbE a full chunk takes about 0.22 ms a hop, so a tree's messages of a few hundred "
    "KiB are not nearly as cheap as its hops' latencies alone. The chunk is NCCL's: its cost model charges a "
    "tree hop of its Simple protocol one constant, the time of a 256 KiB chunk at an assumed 12 GB/s. Taking the "
    "chunk at each hop's own rate, and a smaller message at its own size, is this simulator's extrapolation; "
    "NCCL's LL and LL128 protocols (tree hops of 0.5–8.5 µs), which it picks for a size where they are faster, "
    "are not modelled (`--tree-chunk-bytes 0` leaves the fill out). Two rows show both.\n\n"
    "A link's cost also changes with the message size where the library switches algorithm or protocol (Open MPI "
    "from recursive doubling to a ring at 10,000 bytes, say). A preset with a measured size-regime table "
    "(`data/network_regimes.csv`; today `10gbe-k80-osu`, fitted to the OSU all-reduce logs of the B-Caffe K80 "
    "cluster, one table for each of 2, 4 and 8 nodes, since the all-reduce's cost does not scale from one node "
    "count to another as a ring's would) takes its α and β per message size by default, from the table of the "
    "run's node count (between two measured counts, interpolated); its one line, fitted over every size of the "
    "8-node log "
    "and so mostly over small messages, charges a large message the small messages' rate "
    "(`--no-size-regimes`). The last row shows it: the same iteration on a preset without a table, and on "
    "`10gbe-k80-osu` the difference a large gradient makes.")
net = st.radio("Network", state.LEARN_MECHANISM_NETS, index=state.index_of("learn_mech_net", state.LEARN_MECHANISM_NETS),
               horizontal=True, key="learn_mech_net", bind="query-params")
case = learn_view.MECHANISM_CASE
st.caption(f"{case['model']}, {case['gpus']} × {case['gpu']} ({case['gpus_per_node']} a node), batch "
           f"{case['batch_size']}, WFBP, over {net}: each row switches one mechanism off.")
mech = ui.guarded(cached.mechanisms, net)
st.dataframe(mech, hide_index=True, key="learn_mechanisms")
st.markdown("\n".join(f"- {claim}" for claim in learn_view.mechanism_claims(mech)))

st.header("7. What mixed precision sends")
st.markdown(
    "Mixed precision comes in two kinds that compute alike and send differently (`--precision`). An **fp16** "
    "model (apex O2, DeepSpeed's fp16) keeps fp16 weights and all-reduces fp16 gradients, with fp32 master "
    "weights in the optimizer. **amp** (`torch.autocast` with `GradScaler`, TensorFlow's AMP, apex O1) runs "
    "convolutions and matrix products in fp16 on the tensor cores but keeps the weights fp32, so their "
    "gradients are fp32 too: twice the bytes on the wire (PyTorch's `GradScaler` refuses to unscale fp16 "
    "gradients; DDP's `fp16_compress_hook`, here `--compression fp16`, exists to halve them). Its update adds "
    "`GradScaler`'s unscaling pass over the fp32 gradients, and its memory the fp16 copies of the weights "
    "that autocast keeps for the backward pass. Short fp16 iterations hide less, so sending fp32 gradients "
    "weighs more there. (The tensor cores do not reach the share of their peak that CUDA cores reach of "
    "theirs, convolutions less than large matrix products: `data/tensor_cores.csv`, fitted on NVIDIA's "
    "one-GPU speedups, which is why fp16 compute below is not eight times faster than fp32.) **tf32** keeps "
    "everything fp32 but runs convolutions and matrix products on TF32 tensor cores, on GPUs that have them "
    "(Ampere and later: PyTorch's default for convolutions there, TensorFlow's for both).")
st.caption(f"{case['model']}, {case['gpus']} × {case['gpu']} ({case['gpus_per_node']} a node), batch "
           f"{case['batch_size']}, WFBP, over {net}, at each precision.")
prec = ui.guarded(cached.precisions, net)
st.dataframe(prec, hide_index=True, key="learn_precisions")
st.markdown("\n".join(f"- {claim}" for claim in learn_view.precision_claims(prec)))
