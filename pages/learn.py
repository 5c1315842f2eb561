"""Learn: S-SGD, WFBP, why merging helps, MG-WFBP and its limits, with live examples."""

import streamlit as st

from dashboard import cached, figures, state, ui
from sim.schedulers.names import MGWFBP, OPTIMAL, SYNCEASGD, WFBP

ALPHAS_US = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
BETA_S_PER_BYTE = 1e-9  # 1 ns per byte: a 1 GB/s all-reduce
SCHEDULERS = (WFBP, MGWFBP, OPTIMAL)

ui.ensure_frame()

st.title("Learn: why merging gradients speeds up S-SGD")
st.caption("Assumptions: α-β cost model, identical workers, compute times given in the toy table below "
           "(not estimated); 2 GPUs whose every all-reduce of M bytes takes α + β·M with β = 1 ns/byte.")

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
Many CNN layers have small gradients (a few KiB to a few MiB), so for them **α dominates**.
See the *Model* page for the α and β·M part of every layer of a real model.
"""
)

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
(Shi, Chu and Li, INFOCOM 2019) walks from the output layer down and merges layer *l* into the next
message when that message would be waiting for the channel anyway, or when waiting for layer *l − 1*
costs less than the α it saves. It is greedy: each decision is final and looks one layer ahead.
**optimal** tries every grouping of consecutive layers (dynamic programming) and keeps the fastest.
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
st.plotly_chart(figures.gantt_stack_figure({s: r.timeline for s, r in results.items()}, titles),
                key="toy_chart", config=ui.PLOTLY_CONFIG)
wf, mg, opt = (results[s].iteration_time_s for s in SCHEDULERS)
c = st.columns(3)
c[0].metric(WFBP, ui.fmt_ms(wf), ui.plural(len(results[WFBP].groups), "message"), delta_color="off",
            delta_arrow="off")
c[1].metric(MGWFBP, ui.fmt_ms(mg), f"{mg / wf - 1:+.1%} vs wfbp", delta_color="inverse")
c[2].metric(OPTIMAL, ui.fmt_ms(opt), f"{opt / wf - 1:+.1%} vs wfbp", delta_color="inverse")

st.header("5. Why MG-WFBP is not always optimal")
mg_groups, opt_groups = results[MGWFBP].groups, results[OPTIMAL].groups
if mg > opt * (1 + 1e-9):
    st.markdown(
        f"""
At α = {alpha_us} µs, MG-WFBP sends **{_groups(results[MGWFBP])}** and takes {ui.fmt_ms(mg)}, while the
optimal plan sends **{_groups(results[OPTIMAL])}** and takes {ui.fmt_ms(opt)} ({1 - opt / mg:.1%} less).
"""
    )
    if len(mg_groups[0]) > 1 and len(opt_groups[0]) == 1:
        st.markdown(
            f"""
MG-WFBP merged **{mg_groups[0][0]}**, the first gradient ready, with the layers below it: each merge
looked cheaper than paying another α, but together they made the first message wait until
**{mg_groups[0][-1]}** was ready, and the network idled meanwhile. The optimal plan sends
**{opt_groups[0][0]}** alone at once and merges the rest behind it. Greedy, one-layer-ahead decisions
cannot see that trade.
"""
        )
else:
    st.markdown(
        f"At α = {alpha_us} µs, MG-WFBP finds an optimal plan (**{_groups(results[OPTIMAL])}**). "
        "Move the slider to **2000 µs** to see a case where its greedy choice costs time."
    )

st.subheader("Where merging starts to pay")
sweep = ui.guarded(cached.toy_alpha_sweep, tuple(a * 1e-6 for a in ALPHAS_US), BETA_S_PER_BYTE,
                   SCHEDULERS + (SYNCEASGD,))
st.plotly_chart(figures.alpha_sweep_figure(sweep, marked_alpha_us=alpha_us), key="alpha_chart",
                config=ui.PLOTLY_CONFIG)
st.markdown(
    """
With a small α, one message per layer (**wfbp**) is best: everything overlaps and start-ups are cheap.
As α grows, merging pays: **mgwfbp** and **optimal** send fewer messages, and at large α they approach
**synceasgd** (one message after backward). In between, where the two effects balance, the greedy rule
can miss the best plan.
"""
)
