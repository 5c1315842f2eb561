"""The Learn page's live explanations, computed from the simulator (no Streamlit here).

* `mgwfbp_steps`: MG-WFBP's merge decisions one by one. Each decision is the real
  scheduler's (`sim.schedulers.mgwfbp.mgwfbp`), run on the layers it has seen so
  far: the walk goes from the output layer down and never revisits a decision, so
  the plan it makes for gradients l-1 .. n-1 holds its decision about layer l. The
  times beside each decision (when the current message would start and end, when
  the next gradient is ready) explain it; a test checks that the explanation's
  rule gives the real decision at every step.
* `alpha_claims`: the sentences under the α sweep, written from the sweep itself,
  so the text cannot say what the chart does not show.
* `mechanism_frame`, `mechanism_claims`: what per-tensor gradients, framework costs
  and interference change on a real cluster, each switched off in turn.
* `alpha_bound_facts`, `alpha_bound_claim`: which of a real model's gradients the
  start-up α dominates, on a ring of 16 and of 64 GPUs (section 2).
* `precision_frame`, `precision_claims`: one case at each precision, and where amp's
  longer iteration comes from (exposed communication, interference, compute).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.core.plan import GradientLayers, gradient_layers
from sim.schedulers.mgwfbp import mgwfbp
from sim.schedulers.names import MGWFBP, OPTIMAL, SYNCEASGD, WFBP

__all__ = ["ALPHA_BOUND_CASE", "COUNTER_ALPHA_US", "MECHANISM_CASE", "MECHANISM_VARIANTS", "TIE_PCT", "Step",
           "alpha_bound_claim", "alpha_bound_facts", "alpha_claims", "backward_start_s", "claim_facts",
           "mechanism_claims", "mechanism_frame", "mgwfbp_steps", "precision_claims", "precision_frame", "steps_frame",
           "steps_text"]

#: Iteration times within this many percent are called a tie on the Learn page.
TIE_PCT = 0.5
#: The α (µs) of the Learn page's counter-example on its toy model: optimal is strictly faster
#: than MG-WFBP there (tests/test_learn.py checks it, and finds other cases by search).
COUNTER_ALPHA_US = 2000


@dataclass(frozen=True)
class Step:
    """One of MG-WFBP's decisions: merge layer ``layer`` 's message with the next gradient, or send it."""

    layer: str  # the layer whose gradient closes the current message so far
    message: tuple[str, ...]  # the current message's layers, output side first
    start_ms: float  # when the current message could start (channel free and its gradients ready)
    end_ms: float  # when it would end if sent now
    next_layer: str  # the gradient below it
    next_ready_ms: float  # when that gradient is ready
    merged: bool  # the real scheduler's decision
    why: str
    alpha_saved_us: float  # the start-up a merge saves (0 when sent)


def _suffix(grads: GradientLayers, lo: int) -> GradientLayers:
    """Gradient positions ``lo .. n-1`` (the layers from ``lo`` up to the output)."""
    return GradientLayers(index=grads.index[lo:], ready_s=grads.ready_s[lo:], nbytes=grads.nbytes[lo:])


def _merged_by_mgwfbp(grads: GradientLayers, cost, l: int) -> bool:
    """The real scheduler's decision about gradient position ``l`` (merge it with ``l - 1``?)."""
    plan = mgwfbp(_suffix(grads, l - 1), cost)
    a, b = int(grads.index[l]), int(grads.index[l - 1])
    return any(a in members and b in members for members in plan.groups)


def _ms(seconds: float) -> str:
    """Milliseconds to the µs, trailing zeros dropped (10.05, 6, 0.01): never rounded to fewer digits than
    the table beside the text shows, so the reason cannot misstate an order (``.3g`` gave 10.05 as "10")."""
    return f"{seconds * 1e3:.3f}".rstrip("0").rstrip(".")


def _why(merged: bool, start: float, end: float, ready: float, alpha: float) -> str:
    if ready >= end:
        return (f"the message would be sent by {_ms(end)} ms, before the next gradient is ready "
                f"({_ms(ready)} ms): send it now")
    if start > ready:
        return (f"the channel is busy until {_ms(start)} ms, after the next gradient is ready "
                f"({_ms(ready)} ms): merging costs no wait and saves one α")
    wait = ready - start
    if merged:
        return f"waiting {_ms(wait)} ms for the next gradient costs less than the α = {_ms(alpha)} ms it saves"
    return f"waiting {_ms(wait)} ms for the next gradient would cost more than the α = {_ms(alpha)} ms it saves"


def mgwfbp_steps(model, cost, precision: str = "fp32", origin_s: float = 0.0) -> list[Step]:
    """MG-WFBP's decisions on ``model`` with the all-reduce cost ``cost`` (a `sim.comm.CommCost`),
    from the output layer down; the merged groups they make are `sim.simulate`'s.

    Times are from the start of backward plus ``origin_s``: pass `backward_start_s` of a run's
    timeline to state them on that run's time axis (the chart's)."""
    grads = gradient_layers(model, precision)
    names, r, n = model.layer_names, grads.ready_s, grads.n
    steps: list[Step] = []
    prev_end, hi, nbytes = -np.inf, n - 1, float(grads.nbytes[n - 1]) if n else 0.0
    for l in range(n - 1, 0, -1):
        start = max(prev_end, float(r[l]))
        end = start + float(cost.time_s(nbytes))
        merged = _merged_by_mgwfbp(grads, cost, l)
        at, until, ready = origin_s + start, origin_s + end, origin_s + float(r[l - 1])
        steps.append(Step(
            layer=names[int(grads.index[l])], message=tuple(names[int(i)] for i in grads.index[l:hi + 1][::-1]),
            start_ms=at * 1e3, end_ms=until * 1e3, next_layer=names[int(grads.index[l - 1])],
            next_ready_ms=ready * 1e3, merged=merged, why=_why(merged, at, until, ready, cost.alpha_s),
            alpha_saved_us=cost.alpha_s * 1e6 if merged else 0.0,
        ))
        if merged:
            nbytes += float(grads.nbytes[l - 1])
        else:
            prev_end, hi, nbytes = end, l - 1, float(grads.nbytes[l - 1])
    return steps


def backward_start_s(timeline: pd.DataFrame) -> float:
    """When the first backward task of a run starts (its timeline's ``start_s``; 0 without one)."""
    starts = timeline.loc[timeline["kind"] == "backward", "start_s"]
    return float(starts.min()) if len(starts) else 0.0


def steps_frame(steps: list[Step]) -> pd.DataFrame:
    """The decisions as a table for the page."""
    return pd.DataFrame({
        "step": range(1, len(steps) + 1),
        "message so far": [" + ".join(s.message) for s in steps],
        "could start (ms)": [s.start_ms for s in steps],
        "would end (ms)": [s.end_ms for s in steps],
        "next gradient": [s.next_layer for s in steps],
        "ready at (ms)": [s.next_ready_ms for s in steps],
        "decision": [f"merge {s.next_layer} in" if s.merged else "send the message" for s in steps],
        "α saved (µs)": [s.alpha_saved_us for s in steps],
        "α saved so far (µs)": np.cumsum([s.alpha_saved_us for s in steps]),
    })


def steps_text(steps: list[Step]) -> str:
    """The decisions as a numbered Markdown list, each with its reason in full."""
    return "\n".join(
        f"{i}. Message **{' + '.join(s.message)}** could start at {s.start_ms:.3f} ms and end at {s.end_ms:.3f} ms; "
        f"**{s.next_layer}** is ready at {s.next_ready_ms:.3f} ms: "
        f"**{'merge it in' if s.merged else 'send the message'}** — {s.why}"
        + (f" (α saved: {s.alpha_saved_us:,.0f} µs)." if s.merged else ".")
        for i, s in enumerate(steps, start=1))


def claim_facts(sweep: pd.DataFrame, tie_pct: float = TIE_PCT) -> dict:
    """What the α sweep shows (``alpha_us, scheduler, iteration_ms`` rows), as numbers:

    * ``tie_upto_us``: the largest α up to which wfbp, mgwfbp and optimal stay within
      ``tie_pct`` % of each other (None if they never do);
    * ``merging_pays_from_us``: the smallest α at which optimal is more than ``tie_pct`` %
      faster than wfbp;
    * ``greedy_misses_us``: the α at which mgwfbp is strictly slower than optimal;
    * ``all_merged_from_us``: the smallest α from which mgwfbp and optimal both equal
      synceasgd (one message) to the last α of the sweep;
    * ``wfbp_never_better``: optimal is never slower than wfbp.
    """
    table = sweep.pivot(index="alpha_us", columns="scheduler", values="iteration_ms").sort_index()
    three = table[[WFBP, MGWFBP, OPTIMAL]]
    spread = (three.max(axis=1) / three.min(axis=1) - 1) * 100
    tie = spread <= tie_pct
    tie_upto = None
    for alpha, ok in tie.items():
        if not ok:
            break
        tie_upto = float(alpha)
    pays = table.index[(table[WFBP] / table[OPTIMAL] - 1) * 100 > tie_pct]
    misses = table.index[table[MGWFBP] > table[OPTIMAL] * (1 + 1e-9)]
    same = None
    if SYNCEASGD in table:
        same = pd.Series(np.isclose(table[MGWFBP], table[SYNCEASGD], rtol=1e-9)
                         & np.isclose(table[OPTIMAL], table[SYNCEASGD], rtol=1e-9), index=table.index)
    all_merged = None
    if same is not None:
        for alpha in table.index[::-1]:
            if not same[alpha]:
                break
            all_merged = float(alpha)
    return {
        "tie_upto_us": tie_upto,
        "merging_pays_from_us": float(pays[0]) if len(pays) else None,
        "greedy_misses_us": [float(a) for a in misses],
        "all_merged_from_us": all_merged,
        "wfbp_never_better": bool((table[OPTIMAL] <= table[WFBP] * (1 + 1e-9)).all()),
    }


def alpha_claims(sweep: pd.DataFrame) -> list[str]:
    """The sentences under the α sweep, each one read off ``sweep`` (`claim_facts`)."""
    facts = claim_facts(sweep)
    out = []
    if facts["tie_upto_us"] is not None:
        out.append(f"Up to α = {facts['tie_upto_us']:g} µs the three plans are **within {TIE_PCT:g} %** of each "
                   "other: start-ups are cheap, so merging saves little and one message per layer (**wfbp**) is "
                   "as good as any merging (how much of the communication hides is the toy chart's, not this one's).")
    if facts["merging_pays_from_us"] is not None:
        out.append(f"From α = {facts['merging_pays_from_us']:g} µs merging pays: **optimal** is more than "
                   f"{TIE_PCT:g} % faster than wfbp, and the gap grows with α.")
    if facts["greedy_misses_us"]:
        listed = ", ".join(f"{a:g}" for a in facts["greedy_misses_us"])
        out.append(f"At α = {listed} µs MG-WFBP's greedy merging is **slower than optimal** (section 5).")
    if facts["all_merged_from_us"] is not None:
        out.append(f"From α = {facts['all_merged_from_us']:g} µs both send everything as one message after "
                   "backward, exactly like **synceasgd**.")
    if facts["wfbp_never_better"]:
        out.append("**optimal** is never slower than wfbp: one message per layer is one of the plans it weighs.")
    return out


#: Section 2's example of where α dominates: a ring all-reduce over this network, 4 GPUs a node, at each count.
ALPHA_BOUND_CASE = {"model": "resnet50", "network": "10gbe", "gpus_per_node": 4, "gpus": (16, 64)}


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**20:.3g} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.3g} KiB"


def alpha_bound_facts(case: dict = ALPHA_BOUND_CASE) -> dict:
    """Where α dominates, for each GPU count of ``case``: the ring all-reduce's α and β, the size
    ``bound_bytes`` = α/β below which a message costs more in start-up than in bytes, and how many
    of the model's layer gradients (fp32) are smaller (``alpha_bound_layers``: α > β·M)."""
    import sim

    model = sim.load_model(case["model"])
    nbytes = np.asarray(model.gradient_bytes("fp32"), float)
    nbytes = nbytes[nbytes > 0]
    points = []
    for p in case["gpus"]:
        cluster = sim.Cluster(gpus=p, gpus_per_node=case["gpus_per_node"], network=case["network"])
        cost = cluster.comm_cost(model, "fp32")
        alpha, beta = float(cost.alpha_s), float(cost.beta_s_per_byte)
        points.append({"gpus": p, "alpha_s": alpha, "beta_s_per_byte": beta, "bound_bytes": alpha / beta,
                       "alpha_bound_layers": int((alpha > beta * nbytes).sum())})
    return {"model": case["model"], "network": case["network"], "gpus_per_node": case["gpus_per_node"],
            "layers": len(nbytes), "min_bytes": float(nbytes.min()), "max_bytes": float(nbytes.max()),
            "points": points}


def alpha_bound_claim(facts: dict) -> str:
    """Section 2's sentence on which gradients α dominates, read off `alpha_bound_facts`."""
    pts = facts["points"]
    bounds = " and ".join(f"{_size(q['bound_bytes'])} on {q['gpus']} GPUs" for q in pts)
    counts = " and for ".join(f"{q['alpha_bound_layers']}" + (" of them" if i == 0 else "") + f" on {q['gpus']} GPUs"
                              for i, q in enumerate(pts))
    return (f"A message costs more in start-up than in bytes (α > β·M) while M < α/β, and for a ring "
            f"α/β = P·α_link/β_link grows with P: over {facts['network']} ({facts['gpus_per_node']} GPUs a node) "
            f"it is {bounds}. The {facts['layers']} layer gradients of {facts['model']} (fp32) run from "
            f"{_size(facts['min_bytes'])} to {_size(facts['max_bytes'])}: **α dominates** for {counts}, "
            "the bytes for the rest.")


#: The Learn page's cluster for "what real clusters add": ResNet-50 on 16 V100-PCIe, 4 a node.
MECHANISM_CASE = {"model": "resnet50", "gpus": 16, "gpus_per_node": 4, "gpu": "v100-pcie", "batch_size": 64}
#: Each row: what is switched off, as Cluster settings and the simulate gradients argument.
MECHANISM_VARIANTS = (
    ("everything on (the defaults)", {}, None),
    ("one gradient per layer, not per tensor", {}, "layer"),
    ("no framework costs (framework none)", {"framework": "none"}, None),
    ("no interference", {"interference": False}, None),
    ("communication not slowed by compute (comm_slowdown 0)", {"comm_slowdown": 0.0}, None),
    ("none of the three (the papers' α-β DAG model)", {"framework": "none", "interference": False}, "layer"),
    ("per-iteration jitter of cv 0.02 between the GPUs (off by default)", {"sync_jitter_cv": 0.02}, None),
    ("NCCL's tree or ring per message size (collective nccl, not the default ring)", {"collective": "nccl"}, None),
    ("collective nccl, its trees without their pipeline fill (tree_chunk_bytes 0)",
     {"collective": "nccl", "tree_chunk_bytes": 0.0}, None),
    ("the network preset's one α-β line, not its measured size-regime table (size_regimes False)",
     {"size_regimes": False}, None),
)


def mechanism_frame(network: str, scheduler: str = WFBP) -> pd.DataFrame:
    """The iteration of `MECHANISM_CASE` on ``network`` with each mechanism switched off in turn."""
    import sim

    case = MECHANISM_CASE
    model = sim.load_model(case["model"])
    rows = []
    for label, settings, gradients in MECHANISM_VARIANTS:
        cluster = sim.Cluster(gpus=case["gpus"], gpus_per_node=case["gpus_per_node"], network=network,
                              gpu=case["gpu"], **settings)
        res = sim.simulate(model, cluster, scheduler, batch_size=case["batch_size"], gradients=gradients)
        m = res.metrics
        rows.append({"variant": label, "messages": m["num_messages"], "iteration_ms": 1e3 * m["iteration_time_s"],
                     "exposed_ms": 1e3 * m["comm_exposed_s"], "interference_ms": 1e3 * m["interference_s"],
                     "framework": m["framework"]})
    return pd.DataFrame(rows)


def mechanism_claims(frame: pd.DataFrame) -> list[str]:
    """Sentences read off `mechanism_frame`, so the text says what the table shows."""
    by = frame.set_index("variant")
    on = by.iloc[0]
    out = []
    for label in by.index[1:]:
        diff = by.loc[label, "iteration_ms"] - on["iteration_ms"]
        if abs(diff) < 0.05:
            out.append(f"With {label}: the same iteration, {on['iteration_ms']:.1f} ms.")
            continue
        verb = "faster" if diff < 0 else "slower"
        out.append(f"With {label}: {abs(diff):.1f} ms {verb} than the defaults ({by.loc[label, 'iteration_ms']:.1f} "
                   f"against {on['iteration_ms']:.1f} ms).")
    out.append(_interference_claim(by))
    return out


def _interference_claim(by: pd.DataFrame) -> str:
    """Interference's two sides as the table shows them: the compute it stretches, and what switching off
    first its communication side, then its compute side too, takes off the iteration."""
    on = by.iloc[0]
    text = (f"Interference stretches compute by {on['interference_ms']:.1f} ms under the defaults; it stretches only "
            "what overlaps communication, so it lengthens the iteration only where compute is on the critical path")
    both, comm = MECHANISM_VARIANTS[3][0], MECHANISM_VARIANTS[4][0]
    if both not in by.index or comm not in by.index:
        return text + "."
    comm_side = on["iteration_ms"] - by.loc[comm, "iteration_ms"]
    compute_side = by.loc[comm, "iteration_ms"] - by.loc[both, "iteration_ms"]
    return (text + f". Of the {comm_side + compute_side:.1f} ms that switching it off saves here, its other side "
            f"(communication slowed by compute) accounts for {comm_side:.1f} ms and the stretched compute "
            f"for {compute_side:.1f} ms.")


def precision_frame(network: str, scheduler: str = WFBP) -> pd.DataFrame:
    """`MECHANISM_CASE` on ``network`` at each precision (`sim.model.PRECISIONS`): what it computes and sends."""
    import sim

    case = MECHANISM_CASE
    model = sim.load_model(case["model"])
    cluster = sim.Cluster(gpus=case["gpus"], gpus_per_node=case["gpus_per_node"], network=network, gpu=case["gpu"])
    rows = []
    for precision, meaning in sim.model.PRECISIONS.items():
        m = sim.simulate(model, cluster, scheduler, batch_size=case["batch_size"], precision=precision).metrics
        rows.append({"precision": precision, "meaning": meaning, "one_gpu_ms": 1e3 * m["single_gpu_iteration_time_s"],
                     "gradient_mb": model.total_params * sim.model.bytes_per_param(precision) / 1e6,
                     "comm_ms": 1e3 * m["comm_s"], "exposed_ms": 1e3 * m["comm_exposed_s"],
                     "interference_ms": 1e3 * m["interference_s"], "iteration_ms": 1e3 * m["iteration_time_s"]})
    return pd.DataFrame(rows)


def precision_claims(frame: pd.DataFrame) -> list[str]:
    """Sentences read off `precision_frame`, so the text says what the table shows."""
    by = frame.set_index("precision")
    fp32, fp16, amp = by.loc["fp32"], by.loc["fp16"], by.loc["amp"]
    like = "like" if abs(amp["one_gpu_ms"] - fp16["one_gpu_ms"]) < 0.05 * fp16["one_gpu_ms"] else "unlike"
    return [
        f"On one GPU amp takes {amp['one_gpu_ms']:.1f} ms an iteration, {like} fp16 ({fp16['one_gpu_ms']:.1f} ms; "
        f"fp32 {fp32['one_gpu_ms']:.1f} ms), but sends {amp['gradient_mb']:.0f} MB of gradients, as fp32 does, where fp16 "
        f"sends {fp16['gradient_mb']:.0f} MB.",
        f"So its communication takes {amp['comm_ms']:.1f} ms against {fp16['comm_ms']:.1f} ms for fp16, and "
        f"{amp['exposed_ms']:.1f} ms of it is exposed against {fp16['exposed_ms']:.1f} ms: an iteration of "
        f"{amp['iteration_ms']:.1f} ms against {fp16['iteration_ms']:.1f} ms{_gap_parts(amp, fp16)}. Simulating "
        f"autocast as fp16 would predict it {100 * (amp['iteration_ms'] / fp16['iteration_ms'] - 1):.0f}% too fast "
        "here.",
        _tf32_claim(by),
    ]


#: The parts of an iteration (iteration = one-GPU compute + the interference stretch + exposed communication).
_GAP_PARTS = (("exposed_ms", "of its communication exposed"),
              ("interference_ms", "of compute stretched by interference (its longer all-reduce overlaps more of "
                                  "the backward pass)"),
              ("one_gpu_ms", "of compute on one GPU"))


def _gap_parts(amp: pd.Series, fp16: pd.Series) -> str:
    """``, X ms longer: A ms more of ..., B ms more of ...``: where amp's extra iteration time comes from,
    read off the table (without an ``interference_ms`` column: nothing)."""
    if "interference_ms" not in amp.index:
        return ""
    gap = amp["iteration_ms"] - fp16["iteration_ms"]
    parts = [(amp[key] - fp16[key], what) for key, what in _GAP_PARTS]
    rest = gap - sum(d for d, _ in parts)
    parts += [(rest, "elsewhere")]
    said = [f"{abs(d):.1f} ms {'more' if d > 0 else 'less'} {what}" for d, what in parts if abs(d) >= 0.05]
    if not said:
        return ""
    return f", {abs(gap):.1f} ms {'longer' if gap > 0 else 'shorter'}: " + ", ".join(said)


def _tf32_claim(by: pd.DataFrame) -> str:
    """What the table's tf32 row says against its fp32 row."""
    fp32, tf32 = by.loc["fp32"], by.loc["tf32"]
    if tf32["one_gpu_ms"] == fp32["one_gpu_ms"]:
        return (f"tf32 takes fp32's {fp32['one_gpu_ms']:.1f} ms on one GPU here: this GPU has no TF32 tensor cores "
                "(data/gpus.csv: its tf32 rate is its fp32 rate). On an A100 or H100 PyTorch runs convolutions "
                "in TF32 by default, so pick tf32 there for a convolutional model; matrix products run in TF32 "
                "only where allowed (torch.backends.cuda.matmul.allow_tf32), which tf32 assumes too.")
    return (f"tf32 takes {tf32['one_gpu_ms']:.1f} ms on one GPU against fp32's {fp32['one_gpu_ms']:.1f} ms "
            f"(convolutions and matrix products on TF32 tensor cores) and sends the same "
            f"{tf32['gradient_mb']:.0f} MB of fp32 gradients.")
