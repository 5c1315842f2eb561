"""The Learn page's explanations against the simulator: MG-WFBP's steps are the real
scheduler's, the counter-example is one, and every claim under the α sweep holds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from dashboard import learn_view
from dashboard.cached import TOY_LAYERS, toy_model
from sim.schedulers.names import MGWFBP, OPTIMAL, SYNCEASGD, WFBP

ALPHAS_US = [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]  # the page's slider
BETA = 1e-9


def _toy_run(model, alpha_us: float, scheduler: str) -> sim.SimResult:
    cluster = sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6, beta_s_per_byte=BETA)
    return sim.simulate(model, cluster, scheduler, batch_size=1)


def _steps(model, alpha_us: float):
    cluster = sim.Cluster(gpus=2, alpha_s=alpha_us * 1e-6, beta_s_per_byte=BETA)
    return learn_view.mgwfbp_steps(model, cluster.comm_cost(model, "fp32"))


def _groups_from_steps(model, steps) -> list[list[str]]:
    """The messages the steps make, in sending order (output side first)."""
    groups, current = [], [steps[0].message[0]] if steps else list(model.layer_names)
    for step in steps:
        if step.merged:
            current.append(step.next_layer)
        else:
            groups.append(current)
            current = [step.next_layer]
    groups.append(current)
    return groups


def _random_model(rng, n: int):
    frame = pd.DataFrame({
        "name": [f"l{i}" for i in range(n)],
        "params": rng.integers(1_000, 2_000_000, n),
        "fwd_ms": np.round(rng.uniform(0.1, 3.0, n), 3),
        "bwd_ms": np.round(rng.uniform(0.1, 5.0, n), 3),
    })
    return sim.model_from_frame(frame, "random")


@pytest.mark.parametrize("alpha_us", ALPHAS_US)
def test_the_steps_make_the_schedulers_groups(alpha_us):
    model = toy_model()
    steps = _steps(model, alpha_us)
    assert len(steps) == len(TOY_LAYERS) - 1
    assert _groups_from_steps(model, steps) == _toy_run(model, alpha_us, MGWFBP).groups
    saved = sum(s.alpha_saved_us for s in steps)
    merges = len(TOY_LAYERS) - len(_toy_run(model, alpha_us, MGWFBP).groups)
    assert saved == pytest.approx(merges * alpha_us)


def test_each_explanation_gives_the_real_decision():
    """The rule the table states (ready before the end, and channel busy or wait < alpha)
    agrees with sim/schedulers/mgwfbp.py at every step of 40 random models."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(40):
        model = _random_model(rng, int(rng.integers(3, 9)))
        alpha_us = float(rng.choice(ALPHAS_US))
        steps = _steps(model, alpha_us)
        assert _groups_from_steps(model, steps) == _toy_run(model, alpha_us, MGWFBP).groups
        for s in steps:
            rule = s.next_ready_ms < s.end_ms and (s.start_ms > s.next_ready_ms
                                                   or s.next_ready_ms - s.start_ms < alpha_us * 1e-3)
            assert rule == s.merged, s
            assert ("merg" in s.why or "saves" in s.why) if s.merged else ("send" in s.why or "more than" in s.why)
            checked += 1
    assert checked > 100


def test_the_counter_example_is_one():
    model = toy_model()
    mg = _toy_run(model, learn_view.COUNTER_ALPHA_US, MGWFBP)
    opt = _toy_run(model, learn_view.COUNTER_ALPHA_US, OPTIMAL)
    assert opt.iteration_time_s < mg.iteration_time_s * (1 - 0.01)  # strictly, by more than 1 %
    assert mg.groups != opt.groups


def test_a_search_finds_counter_examples_on_small_models():
    """MG-WFBP is not optimal in general: among random 3-5-layer models, some have a
    strictly (> 1 %) faster grouping than MG-WFBP's."""
    rng = np.random.default_rng(2019)
    found = []
    for _ in range(60):
        model = _random_model(rng, int(rng.integers(3, 6)))
        for alpha_us in (500, 2000, 5000):
            mg, opt = _toy_run(model, alpha_us, MGWFBP), _toy_run(model, alpha_us, OPTIMAL)
            assert opt.iteration_time_s <= mg.iteration_time_s * (1 + 1e-9)  # optimal is never worse
            if opt.iteration_time_s < mg.iteration_time_s * 0.99:
                found.append((model.layer_names, alpha_us))
    assert found


def _sweep() -> pd.DataFrame:
    model = toy_model()
    rows = [{"alpha_us": a, "scheduler": s, "iteration_ms": _toy_run(model, a, s).iteration_time_s * 1e3}
            for a in ALPHAS_US for s in (WFBP, MGWFBP, OPTIMAL, SYNCEASGD)]
    return pd.DataFrame(rows)


def test_every_claim_under_the_alpha_chart_holds():
    sweep = _sweep()
    facts = learn_view.claim_facts(sweep)
    t = sweep.pivot(index="alpha_us", columns="scheduler", values="iteration_ms")
    spread = (t[[WFBP, MGWFBP, OPTIMAL]].max(axis=1) / t[[WFBP, MGWFBP, OPTIMAL]].min(axis=1) - 1) * 100
    tie = facts["tie_upto_us"]
    assert tie is not None
    assert (spread[spread.index <= tie] <= learn_view.TIE_PCT).all()
    assert spread[spread.index > tie].iloc[0] > learn_view.TIE_PCT
    pays = facts["merging_pays_from_us"]
    gain = (t[WFBP] / t[OPTIMAL] - 1) * 100
    assert gain[pays] > learn_view.TIE_PCT and (gain[gain.index < pays] <= learn_view.TIE_PCT).all()
    assert gain.loc[pays:].is_monotonic_increasing  # "the gap grows with alpha"
    assert facts["greedy_misses_us"] == [a for a in ALPHAS_US if t.at[a, MGWFBP] > t.at[a, OPTIMAL] * (1 + 1e-9)]
    assert learn_view.COUNTER_ALPHA_US in facts["greedy_misses_us"]
    merged = facts["all_merged_from_us"]
    assert merged is not None
    for a in (a for a in ALPHAS_US if a >= merged):
        assert t.at[a, MGWFBP] == pytest.approx(t.at[a, SYNCEASGD], rel=1e-9)
        assert t.at[a, OPTIMAL] == pytest.approx(t.at[a, SYNCEASGD], rel=1e-9)
    assert facts["wfbp_never_better"] and (t[OPTIMAL] <= t[WFBP] * (1 + 1e-9)).all()
    claims = learn_view.alpha_claims(sweep)
    assert len(claims) == 5
    # the old claim, "with a small alpha wfbp is best", contradicted a chart that shows a tie
    assert not any("wfbp" in c and "best" in c for c in claims)


def test_what_real_clusters_add_is_read_off_the_simulator():
    """Learn, section 6: the table switches each mechanism off in turn, and its sentences
    state the differences the table shows."""
    from dashboard.learn_view import MECHANISM_VARIANTS, mechanism_claims, mechanism_frame

    frame = mechanism_frame("ib-edr-100")
    by = frame.set_index("variant")
    assert len(frame) == len(MECHANISM_VARIANTS)
    assert by.iloc[0]["messages"] == 161 and by.loc["one gradient per layer, not per tensor", "messages"] == 54
    assert by.loc["no interference", "interference_ms"] == 0 < by.iloc[0]["interference_ms"]
    assert by.loc["no interference", "iteration_ms"] <= by.iloc[0]["iteration_ms"]
    claims = mechanism_claims(frame)
    off = by.loc["no interference", "iteration_ms"]
    assert any(f"{off:.1f} against {by.iloc[0]['iteration_ms']:.1f} ms" in c for c in claims)


def test_the_size_regime_row_differs_only_on_a_preset_with_a_table():
    """Learn, section 6, last row: a preset's one line instead of its measured size regimes changes nothing where
    the preset has no table (10gbe), and on 10gbe-k80-osu charges ResNet-50's large gradients the small
    messages' rate; the sentence states what the table shows."""
    from dashboard.learn_view import MECHANISM_VARIANTS, mechanism_claims, mechanism_frame
    from dashboard.state import LEARN_MECHANISM_NETS

    label = MECHANISM_VARIANTS[-1][0]
    assert "size_regimes False" in label and "10gbe-k80-osu" in LEARN_MECHANISM_NETS
    plain = mechanism_frame("10gbe").set_index("variant")
    assert plain.loc[label, "iteration_ms"] == plain.iloc[0]["iteration_ms"]
    assert f"With {label}: the same iteration" in " ".join(mechanism_claims(plain.reset_index()))
    k80 = mechanism_frame("10gbe-k80-osu").set_index("variant")
    line, table = k80.loc[label, "iteration_ms"], k80.iloc[0]["iteration_ms"]
    assert line > table
    assert f"({line:.1f} against {table:.1f} ms)" in " ".join(mechanism_claims(k80.reset_index()))


@pytest.mark.parametrize("network", ["10gbe", "ib-edr-100"])
def test_what_mixed_precision_sends_is_read_off_the_simulator(network):
    """Learn, section 7: autocast computes as fp16 does and sends as fp32 does; the sentences state the table."""
    from dashboard.learn_view import precision_claims, precision_frame

    by = precision_frame(network).set_index("precision")
    assert list(by.index) == list(sim.model.PRECISIONS)
    assert by.loc["amp", "gradient_mb"] == by.loc["fp32", "gradient_mb"] == 2 * by.loc["fp16", "gradient_mb"]
    assert by.loc["amp", "one_gpu_ms"] == pytest.approx(by.loc["fp16", "one_gpu_ms"], rel=0.05)
    assert by.loc["amp", "comm_ms"] > by.loc["fp16", "comm_ms"]
    assert by.loc["amp", "iteration_ms"] > by.loc["fp16", "iteration_ms"]
    claims = " ".join(precision_claims(by.reset_index()))
    for key in ("one_gpu_ms", "comm_ms", "exposed_ms", "iteration_ms"):
        assert f"{by.loc['amp', key]:.1f} ms" in claims and f"{by.loc['fp16', key]:.1f} ms" in claims, key
    assert f"{100 * (by.loc['amp', 'iteration_ms'] / by.loc['fp16', 'iteration_ms'] - 1):.0f}% too fast" in claims
    # the case's V100 has no TF32 tensor cores: its tf32 row is its fp32 row, and the text says so
    assert by.loc["tf32", "one_gpu_ms"] == by.loc["fp32", "one_gpu_ms"]
    assert by.loc["tf32", "gradient_mb"] == by.loc["fp32", "gradient_mb"]
    assert f"tf32 takes fp32's {by.loc['fp32', 'one_gpu_ms']:.1f} ms" in claims


def test_the_tf32_sentence_on_a_gpu_with_tf32():
    from dashboard.learn_view import precision_claims

    rows = [{"precision": p, "one_gpu_ms": ms, "gradient_mb": mb, "comm_ms": 5.0, "exposed_ms": 1.0, "iteration_ms": 50.0}
            for p, ms, mb in (("fp32", 60.0, 100.0), ("tf32", 30.0, 100.0), ("fp16", 20.0, 50.0), ("amp", 21.0, 100.0))]
    claims = " ".join(precision_claims(pd.DataFrame(rows)))
    assert "tf32 takes 30.0 ms on one GPU against fp32's 60.0 ms" in claims and "same 100 MB" in claims
