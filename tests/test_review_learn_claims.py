"""Review of the Learn page's claims against what it computes and draws (issue 15).

Each test pins a claim that was false, or did not match the chart beside it:

* section 2 said gradients of "a few KiB to a few MiB" are α-dominated; on the default
  16-GPU 10GbE ring α/β is about 0.67 MiB, so most MiB-sized layers are bandwidth-bound;
* the step-by-step table timed MG-WFBP's decisions from the start of backward while the
  toy chart above it starts at forward (4 ms earlier), so no time in it matched a bar;
* section 7 put amp's longer iteration down to exposed communication, which on ib-edr-100
  is the same as fp16's (0.3 ms): there the gap is interference;
* section 6 said interference "adds 3.0 ms of compute" beside a row 14.0 ms faster
  without it, not saying that those 14.0 ms are its other side (communication slowed);
* the page follows none of the sidebar's settings and did not say so.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from helpers import needs_zoo
from streamlit.testing.v1 import AppTest

import sim
from dashboard import learn_view, state
from dashboard.cached import toy_model
from sim.schedulers.names import MGWFBP

REPO = Path(__file__).resolve().parent.parent
BETA = 1e-9


def _learn(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    at.query_params.update(query or {})
    at.switch_page(str(REPO / "pages" / "learn.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _main_text(at: AppTest) -> list[str]:
    """Everything the page itself writes (not the sidebar)."""
    return ([m.value for m in at.main.markdown] + [c.value for c in at.main.caption]
            + [f"{m.label} {m.value}" for m in at.main.metric] + [d.value.to_csv() for d in at.main.dataframe])


# --- section 2: which gradients alpha dominates -------------------------------------------


@needs_zoo
def test_the_alpha_bound_sentence_is_the_cost_models():
    facts = learn_view.alpha_bound_facts()
    model = sim.load_model("resnet50")
    nbytes = np.asarray(model.gradient_bytes("fp32"), float)
    nbytes = nbytes[nbytes > 0]
    assert facts["layers"] == len(nbytes)
    for point in facts["points"]:
        cluster = sim.Cluster(gpus=point["gpus"], gpus_per_node=4, network="10gbe")
        cost = cluster.comm_cost(model, "fp32")
        assert not cost.regimes  # one line: alpha / beta is where the start-up stops dominating
        assert point["bound_bytes"] == pytest.approx(cost.alpha_s / cost.beta_s_per_byte)
        assert point["alpha_bound_layers"] == int((cost.time_s(0.0) > cost.beta_s_per_byte * nbytes).sum())
    # the old sentence: "a few KiB to a few MiB, so for them alpha dominates"; on 16 GPUs a 1 MiB gradient
    # already costs more in bytes than in start-up, and fewer than half the layers are alpha-bound
    sixteen = facts["points"][0]
    assert sixteen["gpus"] == 16 and sixteen["bound_bytes"] < 2**20
    assert sixteen["alpha_bound_layers"] < facts["layers"] / 2
    claim = learn_view.alpha_bound_claim(facts)
    assert f"for {sixteen['alpha_bound_layers']} of them on 16 GPUs" in claim
    assert "682 KiB on 16 GPUs" in claim


@needs_zoo
def test_the_page_states_the_alpha_bound_it_computes():
    text = " ".join(_main_text(_learn()))
    assert "a few KiB to a few MiB" not in text
    assert learn_view.alpha_bound_claim(learn_view.alpha_bound_facts()) in text


# --- section 4: the steps on the chart's time axis -----------------------------------------


def _run(alpha_us: float) -> sim.SimResult:
    return sim.simulate(toy_model(), sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6, beta_s_per_byte=BETA), MGWFBP,
                        batch_size=1)


def _sent(steps) -> list:
    return [s for s in steps if not s.merged]


@pytest.mark.parametrize("alpha_us", state.TOY_ALPHAS_US)
def test_each_message_sent_starts_and_ends_where_the_chart_draws_it(alpha_us):
    res = _run(alpha_us)
    origin = learn_view.backward_start_s(res.timeline)
    assert origin == pytest.approx(res.metrics["forward_s"])  # the toy's forward is drawn first
    model = toy_model()
    cost = sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6, beta_s_per_byte=BETA).comm_cost(model, "fp32")
    steps = learn_view.mgwfbp_steps(model, cost, origin_s=origin)
    comm = res.timeline[res.timeline["kind"] == "comm"].sort_values("start_s")
    for step, (_, bar) in zip(_sent(steps), comm.iterrows(), strict=False):
        assert bar["layer"] == "+".join(step.message)
        assert step.start_ms == pytest.approx(bar["start_s"] * 1e3)
        assert step.end_ms == pytest.approx(bar["end_s"] * 1e3)
    bwd = res.timeline[res.timeline["kind"] == "backward"].set_index("layer")
    for step in steps:  # "ready at" is when that layer's backward bar ends
        assert step.next_ready_ms == pytest.approx(bwd.loc[step.next_layer, "end_s"] * 1e3)


@pytest.mark.parametrize("alpha_us", state.TOY_ALPHAS_US)
def test_every_time_in_a_reason_is_the_tables(alpha_us):
    """The reasons gave times to 3 significant digits: on the chart's axis 10.05 ms read "10"."""
    res = _run(alpha_us)
    model = toy_model()
    cost = sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6, beta_s_per_byte=BETA).comm_cost(model, "fp32")
    for s in learn_view.mgwfbp_steps(model, cost, origin_s=learn_view.backward_start_s(res.timeline)):
        stated = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) ms", s.why)]
        shown = [s.start_ms, s.end_ms, s.next_ready_ms, s.next_ready_ms - s.start_ms, alpha_us * 1e-3]
        for value in stated:
            assert min(abs(value - v) for v in shown) < 5e-4, (s.why, shown)


def test_the_page_steps_match_the_toy_chart():
    at = _learn({"toy_alpha_us": "50"})
    steps = next(d.value for d in at.dataframe if "decision" in d.value.columns)
    res = _run(50)
    comm = res.timeline[res.timeline["kind"] == "comm"].sort_values("start_s")
    sent = steps[steps["decision"] == "send the message"]
    assert list(sent["could start (ms)"]) == pytest.approx(list(comm["start_s"] * 1e3)[: len(sent)])
    assert list(sent["would end (ms)"]) == pytest.approx(list(comm["end_s"] * 1e3)[: len(sent)])
    text = " ".join(m.value for m in at.markdown)
    assert "backward starts at 4.000 ms" in text and "from the start of backward" not in text


# --- section 7: where amp's extra time comes from -------------------------------------------


def _numbers_before(text: str, what: str) -> float:
    found = re.search(r"(\d+\.\d) ms (?:more|less) " + re.escape(what), text)
    return float(found.group(1)) if found else 0.0


@needs_zoo
@pytest.mark.parametrize("network", ["10gbe", "ib-edr-100"])
def test_the_amp_gap_is_put_down_to_what_makes_it(network):
    frame = learn_view.precision_frame(network)
    by = frame.set_index("precision")
    amp, fp16 = by.loc["amp"], by.loc["fp16"]
    for row in (amp, fp16):  # the parts the sentence names make the iteration
        assert row["iteration_ms"] == pytest.approx(row["one_gpu_ms"] + row["interference_ms"] + row["exposed_ms"],
                                                    abs=0.05)
    claim = learn_view.precision_claims(frame)[1]
    gap = amp["iteration_ms"] - fp16["iteration_ms"]
    assert f"{gap:.1f} ms longer" in claim
    exposed = _numbers_before(claim, "of its communication exposed")
    stretched = _numbers_before(claim, "of compute stretched by interference")
    assert exposed == pytest.approx(amp["exposed_ms"] - fp16["exposed_ms"], abs=0.05)
    assert stretched == pytest.approx(amp["interference_ms"] - fp16["interference_ms"], abs=0.05)
    if network == "ib-edr-100":  # the same exposure: interference, not exposure, makes the gap
        assert exposed == 0.0 and stretched > 0.5 * gap


# --- section 6: both sides of interference --------------------------------------------------


@needs_zoo
@pytest.mark.parametrize("network", ["10gbe", "ib-edr-100"])
def test_the_interference_sentence_adds_up_to_its_row(network):
    frame = learn_view.mechanism_frame(network)
    by = frame.set_index("variant")
    on = by.iloc[0]["iteration_ms"]
    both = by.loc["no interference", "iteration_ms"]
    comm = by.loc["communication not slowed by compute (comm_slowdown 0)", "iteration_ms"]
    claim = learn_view.mechanism_claims(frame)[-1]
    assert f"stretches compute by {by.iloc[0]['interference_ms']:.1f} ms" in claim
    assert f"Of the {on - both:.1f} ms that switching it off saves here" in claim
    assert f"accounts for {on - comm:.1f} ms and the stretched compute for {comm - both:.1f} ms" in claim


# --- the sidebar ----------------------------------------------------------------------------


@needs_zoo
def test_the_page_says_it_does_not_follow_the_sidebar_and_does_not():
    plain = _learn()
    other = _learn({"model": "vgg16", "gpus": "64", "net": "ib-edr-100", "precision": "fp16", "fw": "none"})
    assert other.sidebar.selectbox(key="model").value == "vgg16"  # the sidebar took the settings
    assert _main_text(plain) == _main_text(other)
    assert any("do not follow the sidebar" in c.value for c in plain.caption)
