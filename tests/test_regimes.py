"""Size regimes: piecewise alpha-beta costs (`sim.core.cost`), their fit from benchmark logs
(`sim.calib.regimes`, ``fit-network``) and the measured regime table of a preset."""

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
import sim.topology as topology
from sim import fast
from sim.calib.fit import parse_allreduce_log, parse_nccl_tests
from sim.calib.regimes import fit_regimes, regimes_to_network
from sim.cli import main
from sim.comm import Link, allreduce_cost
from sim.core import engine
from sim.core.cost import CommCost, PSCost, Regime, measured_cost
from sim.core.lower import lower
from sim.core.plan import gradient_layers
from sim.core.timeline import graph_timeline
from sim.schedulers.names import MGWFBP, OPTIMAL, SEQUENTIAL, WFBP
from sim.topology import network_regimes, regime_nodes

ROOT = Path(__file__).resolve().parent.parent
K80_LOG = ROOT / "data" / "reference" / "bcaffe_k80_10gbe" / "allreduce8.log"
NCCL_SAMPLE = Path(__file__).resolve().parent / "data" / "nccl_tests_h100_2node_tree.txt"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# eager below 64 KiB (50 us + 1 ns/B), rendezvous from 64 KiB (400 us + 0.25 ns/B)
TWO = CommCost.piecewise([Regime(0, 50e-6, 1e-9), Regime(65536, 400e-6, 0.25e-9)], "two")


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class TestPiecewiseCost:
    def test_time_picks_the_regime_of_each_message(self):
        sizes = np.array([0, 1000, 65535, 65536, 1 << 20])
        expected = [50e-6, 50e-6 + 1e-6, 50e-6 + 65535e-9, 400e-6 + 65536 * 0.25e-9, 400e-6 + (1 << 20) * 0.25e-9]
        np.testing.assert_allclose(TWO.time_s(sizes), expected, rtol=1e-15)
        assert float(TWO.time_s(65536)) == pytest.approx(expected[3], rel=1e-15)

    def test_alpha_is_the_small_message_alpha_and_beta_the_large_message_beta(self):
        assert (TWO.alpha_s, TWO.beta_s_per_byte) == (50e-6, 0.25e-9)
        assert TWO.alpha_at(100) == 50e-6 and TWO.alpha_at(1 << 20) == 400e-6

    def test_merge_saving(self):
        assert CommCost(1e-4, 1e-9).merge_saving_s(1000, 2000) == 1e-4  # exactly alpha when affine
        assert TWO.merge_saving_s(1000, 2000) == pytest.approx(50e-6, rel=1e-9)  # both and the sum eager
        # two eager halves merged into one rendezvous message: 2 x (50 us + 40 us) - (400 us + 20 us) < 0
        assert TWO.merge_saving_s(40000, 40000) == pytest.approx(2 * (50e-6 + 40e-6) - (400e-6 + 80000 * 0.25e-9))

    def test_one_regime_is_the_affine_cost(self):
        assert CommCost.piecewise([Regime(0, 1e-4, 2e-9)], "x") == CommCost(1e-4, 2e-9, "x")

    @pytest.mark.parametrize("regimes, match", [
        ([], "at least one regime"),
        ([Regime(10, 1e-5, 1e-9)], "start at 0 bytes"),
        ([Regime(0, 1e-5, 1e-9), Regime(0, 2e-5, 1e-9)], "increase strictly"),
        ([Regime(0, 1e-5, 1e-9), Regime(500, 2e-5, 1e-9), Regime(100, 2e-5, 1e-9)], "increase strictly"),
    ])
    def test_bad_regimes(self, regimes, match):
        with pytest.raises(sim.SimInputError, match=match):
            CommCost.piecewise(regimes)

    def test_negative_regime_values_are_refused(self):
        with pytest.raises(sim.SimInputError, match="regime alpha_s must be a finite number >= 0"):
            Regime(0, -1e-6, 1e-9)

    def test_summary_must_match_the_regimes(self):
        with pytest.raises(sim.SimInputError, match="CommCost.piecewise"):
            CommCost(1.0, 1e-9, "", TWO.regimes)


class TestPlus:
    def test_plus_adds_to_every_regime(self):
        more = TWO.plus(10e-6, 0.5e-9, label="with overheads")
        sizes = np.array([100, 65536, 1 << 22])
        np.testing.assert_allclose(more.time_s(sizes), TWO.time_s(sizes) + 10e-6 + 0.5e-9 * sizes, rtol=1e-14)
        assert more.label == "with overheads" and more.alpha_s == pytest.approx(60e-6)
        assert [r.from_bytes for r in more.regimes] == [0, 65536]

    def test_plus_on_an_affine_cost(self):
        assert CommCost(1e-4, 1e-9, "a").plus(1e-5) == CommCost(1e-4 + 1e-5, 1e-9, "a")
        assert CommCost(1e-4, 1e-9, "a").plus() == CommCost(1e-4, 1e-9, "a")

    def test_plus_refuses_negative_terms(self):
        with pytest.raises(sim.SimInputError, match="plus: alpha_s"):
            TWO.plus(-1e-6)

    def test_measured_single_layer_times_get_the_terms_too(self):
        cost = measured_cost([1e-3, 2e-3, 3e-3], [100, 200, 400]).plus(1e-4, 1e-9)
        assert cost.message_time_s((1,), 200) == pytest.approx(2e-3 + 1e-4 + 200e-9, rel=1e-15)
        assert cost.message_time_s((0, 1), 300) == pytest.approx(float(cost.time_s(300)), rel=1e-15)

    def test_push_and_pull_each_get_the_terms(self):
        ps = PSCost(1e-4, 1e-9, 2e-4, 2e-9).plus(1e-5, 1e-10)
        assert ps.push_time_s(1000) == pytest.approx(1e-4 + 1e-5 + 1000 * 1.1e-9)
        assert ps.pull_time_s(1000) == pytest.approx(2e-4 + 1e-5 + 1000 * 2.1e-9)


@st.composite
def models(draw):
    n = draw(st.integers(1, 8))
    params = draw(st.lists(st.integers(0, 200_000), min_size=n, max_size=n))
    fwd = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-9, 5.0)), min_size=n, max_size=n))
    bwd = draw(st.lists(st.one_of(st.just(0.0), st.floats(1e-9, 5.0)), min_size=n, max_size=n))
    return make_model(params, fwd, bwd)


class TestSchedulersAndTimingWithRegimes:
    @SETTINGS
    @given(models(), st.sampled_from([SEQUENTIAL, WFBP, MGWFBP, OPTIMAL]), st.booleans())
    def test_fast_path_equals_the_engine(self, model, scheduler, prefetch):
        plan = sim.schedulers.make_plan(scheduler, gradient_layers(model, "fp32"), TWO, bucket_mb=1.0)
        graph = lower(model, plan, TWO, iterations=2, prefetch=prefetch)
        start, end = engine.run(graph)
        run = fast.evaluate(model, plan, TWO, iterations=2, prefetch=prefetch)
        pd.testing.assert_frame_equal(run.timeline(row=0), graph_timeline(graph, start, end), check_exact=True)

    @SETTINGS
    @given(models())
    def test_optimal_merge_is_no_slower_than_the_other_plans(self, model):
        """The optimal merge plans over the piecewise time of every merged size, so it beats the heuristics."""
        grads = gradient_layers(model, "fp32")
        plans = {s: sim.schedulers.make_plan(s, grads, TWO, bucket_mb=1.0) for s in (WFBP, MGWFBP, OPTIMAL)}
        iters = {s: fast.evaluate(model, p, TWO, iterations=2).iteration_time_s[0] for s, p in plans.items()}
        assert iters[OPTIMAL] <= min(iters[WFBP], iters[MGWFBP]) * (1 + 1e-12)


class TestFitRegimes:
    def test_k80_osu_log_fits_within_5_percent(self):
        """Published measurement (B-Caffe OSU log, 266 sizes): one line misses by 15%, regimes by under 5%."""
        points = parse_allreduce_log(K80_LOG.read_text())
        fit = fit_regimes(points["bytes"], points["time_s"])
        line = fit_regimes(points["bytes"], points["time_s"], max_regimes=1)
        assert fit.median_error_pct(points["bytes"], points["time_s"]) <= 5.0
        assert line.median_error_pct(points["bytes"], points["time_s"]) > 10.0
        assert 12288 in [r.from_bytes for r in fit.regimes]  # the jump after 8 KiB (182 -> 792 us)

    def test_synthetic_two_regimes_are_recovered_exactly(self):
        sizes = np.unique(np.r_[2 ** np.arange(2, 24), 3 * 2 ** np.arange(2, 22)]).astype(float)
        fit = fit_regimes(sizes, TWO.time_s(sizes))
        assert len(fit.regimes) == 2
        assert fit.regimes[1].from_bytes == 65536
        for got, want in zip(fit.regimes, TWO.regimes, strict=True):
            assert got.alpha_s == pytest.approx(want.alpha_s, rel=1e-9)
            assert got.beta_s_per_byte == pytest.approx(want.beta_s_per_byte, rel=1e-9)

    def test_synthetic_two_regimes_with_noise(self):
        sizes = np.unique(np.r_[2 ** np.arange(2, 24), 3 * 2 ** np.arange(2, 22)]).astype(float)
        noise = 1 + 0.01 * np.where(np.arange(sizes.size) % 2, 1.0, -1.0)  # +-1 %, alternating
        fit = fit_regimes(sizes, TWO.time_s(sizes) * noise)
        assert [r.from_bytes for r in fit.regimes] == [0, 65536]
        for got, want in zip(fit.regimes, TWO.regimes, strict=True):
            assert got.alpha_s == pytest.approx(want.alpha_s, rel=0.05)
            assert got.beta_s_per_byte == pytest.approx(want.beta_s_per_byte, rel=0.05)

    def test_one_line_with_noise_stays_one_regime(self):
        sizes = 2.0 ** np.arange(2, 24)
        noise = 1 + 0.02 * np.where(np.arange(sizes.size) % 2, 1.0, -1.0)
        fit = fit_regimes(sizes, (30e-6 + 1e-9 * sizes) * noise)
        assert len(fit.regimes) == 1

    def test_errors_table(self):
        fit = fit_regimes([4, 1024, 65536, 1 << 20], [10e-6, 11e-6, 80e-6, 1e-3], max_regimes=1)
        table = fit.errors([4, 1024], [10e-6, 11e-6])
        assert list(table.columns) == ["bytes", "measured_s", "fitted_s", "error_pct"]
        assert table["error_pct"].iloc[0] == pytest.approx((table["fitted_s"].iloc[0] / 10e-6 - 1) * 100)

    @pytest.mark.parametrize("kwargs, match", [
        ({"max_regimes": 0}, "max_regimes"), ({"min_points": 1}, "min_points"), ({"min_gain": 1.5}, "min_gain"),
        ({"weighting": "squared"}, "weighting"),
    ])
    def test_bad_options(self, kwargs, match):
        with pytest.raises(sim.SimInputError, match=match):
            fit_regimes([1, 2, 3], [1e-5, 2e-5, 3e-5], **kwargs)


def _nccl_table(cost: CommCost, sizes) -> str:
    """A synthetic nccl-tests all_reduce_perf output (for parsing and fitting tests only)."""
    head = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 33554432 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#  Rank  0 Group  0 Pid 1 on a device  0 [0x07] synthetic\n"
            "#  Rank  1 Group  0 Pid 2 on b device  0 [0x07] synthetic\n#\n"
            "#                                                              out-of-place                       in-place\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n")
    rows = []
    for m in sizes:
        t_us = float(cost.time_s(m)) * 1e6
        bw = m / (t_us * 1e3)
        rows.append(f"{m:12d} {m // 4:13d}     float     sum      -1 {t_us:8.2f} {bw:7.2f} {bw:7.2f}      0 "
                    f"{t_us:8.2f} {bw:7.2f} {bw:7.2f}      0")
    return head + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n"


class TestNcclTests:
    def test_the_typed_sample_parses(self):
        points = parse_nccl_tests(NCCL_SAMPLE.read_text())
        assert points["bytes"].tolist() == [2097152, 4194304, 8388608, 16777216, 33554432]
        assert points["time_s"].iloc[0] == pytest.approx(113.2e-6) and points["time_s"].iloc[-1] == pytest.approx(812.3e-6)

    def test_fit_network_recovers_regimes_from_nccl_tests_output(self, tmp_path):
        log = tmp_path / "all_reduce_perf.txt"
        log.write_text(_nccl_table(TWO, [8 * 2 ** i for i in range(23)]))
        code, out, err = cli("fit-network", log, "--format", "json")
        assert code == 0, err
        result = json.loads(out)
        assert result["format"] == "nccl-tests" and result["ranks"] == 2
        assert [r["from_bytes"] for r in result["regimes"]] == [0, 65536]
        assert result["regimes"][1]["beta_s_per_byte"] == pytest.approx(0.25e-9, rel=0.01)
        assert result["median_error_pct"] < 0.5 < result["line_median_error_pct"]
        assert len(result["errors"]) == 23


class TestFitNetworkCli:
    def test_table_reports_error_per_size_and_the_median(self):
        code, out, err = cli("fit-network", K80_LOG)
        assert code == 0, err
        assert "size (B)" in out and "error %" in out and "regime from (B)" in out
        last = out.strip().splitlines()[-1]
        assert last.startswith("median |error|:") and "3 regime(s)" in last

    def test_one_line_on_request(self):
        code, out, err = cli("fit-network", K80_LOG, "--max-regimes", "1", "--format", "json")
        result = json.loads(out)
        assert code == 0 and len(result["regimes"]) == 1
        assert result["median_error_pct"] == result["line_median_error_pct"] > 10

    @pytest.mark.parametrize("argv, match", [
        (["--max-regimes", "0"], "--max-regimes"),
        (["--max-regimes", "11"], "--max-regimes must be at most 10"),
        (["--min-gain", "1"], "--min-gain"),
        (["--min-gain", "x"], "--min-gain"),
    ])
    def test_bad_flags_give_one_line(self, argv, match):
        code, _, err = cli("fit-network", K80_LOG, *argv)
        assert code == 2 and match in err and err.count("\n") == 1

    @pytest.mark.parametrize("text, match", [
        ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
         "#  (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n 8 2 float sum -1 10.0 0.0 0.0\n", "line 3"),
        ("# OSU MPI Allreduce Latency Test\n4 10.0\n8 abc\n", "line 3"),
        ("# OSU MPI Allreduce Latency Test\n4 10.0\n", "two distinct message sizes"),
    ])
    def test_bad_logs_give_one_line(self, tmp_path, text, match):
        log = tmp_path / "bad.log"
        log.write_text(text)
        code, _, err = cli("fit-network", log)
        assert code == 2 and match in err and err.count("\n") == 1 and "Traceback" not in err


class TestPresetTable:
    def test_the_k80_preset_table_reproduces_the_log(self):
        """10gbe-k80-osu's regime table, simulated as a ring on the 8 measured nodes, fits the log as the fit does."""
        points = parse_allreduce_log(K80_LOG.read_text())
        cluster = sim.Cluster(gpus=8, gpus_per_node=1, network="10gbe-k80-osu", size_regimes=True)
        cost = cluster.comm_cost()
        assert len(cost.regimes) == 3
        err = np.abs(cost.time_s(points["bytes"]) / points["time_s"] - 1) * 100
        assert np.median(err) <= 5.0

    @pytest.mark.parametrize("nodes", [2, 4, 8])
    def test_each_node_counts_table_is_its_log_refitted(self, nodes):
        """The preset has a table per OSU log (2, 4 and 8 nodes): each row is `fit_regimes` on that log, inverted
        for a ring on its node count, to the 4 decimals the CSV keeps; and a ring on those nodes reproduces the log."""
        log = K80_LOG.parent / f"allreduce{nodes}.log"
        points = parse_allreduce_log(log.read_text())
        rows = regimes_to_network(fit_regimes(points["bytes"], points["time_s"]), "10gbe-k80-osu", nodes)
        stored = pd.read_csv(topology.REGIMES_FILE)
        stored = stored.loc[(stored.network == "10gbe-k80-osu") & (stored.nodes == nodes)]
        assert stored.from_bytes.tolist() == [r["from_bytes"] for r in rows]
        np.testing.assert_allclose(stored.alpha_us, [r["alpha_us"] for r in rows], atol=5e-5)
        np.testing.assert_allclose(stored.effective_gbps, [r["effective_gbps"] for r in rows], atol=5e-5)
        assert all(f"allreduce{nodes}.log" in src for src in stored.source)
        cost = sim.Cluster(gpus=nodes, gpus_per_node=1, network="10gbe-k80-osu", collective="ring").comm_cost()
        err = np.abs(cost.time_s(points["bytes"]) / points["time_s"] - 1) * 100
        assert np.median(err) <= 3.0

    @pytest.mark.parametrize("nodes", [2, 4])
    def test_the_eight_node_table_does_not_carry_to_fewer_nodes(self, nodes):
        """Why a table per node count: MPI's all-reduce does not scale as the ring's 2 (P-1)/P from 8 nodes down
        (1 MiB takes 1.84 ms on 2 nodes, 2.25 on 4, 4.68 on 8), so the 8-node table, carried to 2 or 4 nodes by
        the ring, misses those logs by over 10 % at the median (17 % and 16 %) where their own tables miss by 3 % or
        less (above)."""
        points = parse_allreduce_log((K80_LOG.parent / f"allreduce{nodes}.log").read_text())
        net = sim.catalog.get_network("10gbe-k80-osu")
        carried = allreduce_cost("ring", nodes, 1, Link(0.0, 0.0),
                                 Link(net.alpha_s, net.beta_s_per_byte, network_regimes("10gbe-k80-osu", 8)))
        err = np.abs(carried.time_s(points["bytes"]) / points["time_s"] - 1) * 100
        assert np.median(err) > 10.0

    def test_a_run_takes_its_node_counts_table_or_interpolates_between_two(self):
        """Exact where measured; between two measured counts the all-reduce times the two tables give on their
        own counts, interpolated in log(nodes) and inverted for a ring on the run's count; outside them the
        nearest table; None: the most nodes measured. The inter-node link is looked up by the nodes."""
        name = "10gbe-k80-osu"
        assert regime_nodes(name) == (2, 4, 8) and regime_nodes("10gbe") == ()
        tables = {n: network_regimes(name, n) for n in (2, 4, 8)}
        assert len({tables[2], tables[4], tables[8]}) == 3
        for nodes, measured in [(1, 2), (2, 2), (4, 4), (8, 8), (16, 8), (1024, 8)]:
            assert network_regimes(name, nodes) == tables[measured], nodes
        assert network_regimes(name) == tables[8] and network_regimes("10gbe", 4) == ()
        for gpus, per_node, nodes in [(4, 2, 2), (8, 2, 4), (16, 2, 8), (24, 4, 6), (3, 1, 3)]:
            got = sim.Cluster(gpus=gpus, gpus_per_node=per_node, network=name).links()[1]
            assert got.regimes == network_regimes(name, nodes), (gpus, per_node)

        def measured(k, sizes):  # the k-node table's all-reduce on its own k nodes
            net = sim.catalog.get_network(name)
            return allreduce_cost("ring", k, 1, Link(0.0, 0.0), Link(net.alpha_s, net.beta_s_per_byte, tables[k])
                                  ).time_s(sizes)

        sizes = np.array([4.0, 8192, 12288, 65536, 262144, 524288, 2 ** 20, 1e8])
        for nodes, lo, hi in [(3, 2, 4), (5, 4, 8), (6, 4, 8), (7, 4, 8)]:
            w = np.log(nodes / lo) / np.log(hi / lo)
            ring = sim.Cluster(gpus=nodes, gpus_per_node=1, network=name, collective="ring").comm_cost()
            np.testing.assert_allclose(ring.time_s(sizes), (1 - w) * measured(lo, sizes) + w * measured(hi, sizes),
                                       rtol=1e-12)

    def test_the_cost_is_continuous_in_the_node_count(self):
        """No jump from one measured table to the next: a large message's all-reduce grows with the nodes from 2
        to 16 as the logs do between their counts (167, 176 and 178 ms for 100 MB on 2, 4 and 8 nodes)."""
        times = [float(sim.Cluster(gpus=n, gpus_per_node=1, network="10gbe-k80-osu", collective="ring").comm_cost()
                       .time_s(1e8)) for n in range(2, 17)]
        assert all(b >= a for a, b in zip(times, times[1:], strict=False)), times

    @pytest.mark.parametrize("nodes, match", [
        (0, "nodes must be a whole number >= 1"), (-3, ">= 1"), (True, "whole number"), (2.5, "whole number"),
        ("4", "whole number"), (float("nan"), "whole number"), (10 ** 400, None),
    ])
    def test_a_bad_node_count_is_refused(self, nodes, match):
        if match is None:  # a huge count is the nearest (the largest) table, not an error
            assert network_regimes("10gbe-k80-osu", nodes) == network_regimes("10gbe-k80-osu", 8)
            return
        with pytest.raises(sim.SimInputError, match=match):
            network_regimes("10gbe-k80-osu", nodes)

    @pytest.mark.parametrize("text, match", [
        ("network,from_bytes,alpha_us,effective_gbps,source\n10gbe,0,1,1,x\n", "line 2: no nodes column"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,1,0,1,1,x\n",
         "line 2: nodes must be a whole number >= 2"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,-3,0,1,1,x\n", "line 2: nodes must be"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,2.5,0,1,1,x\n",
         "line 2: nodes must be a whole number"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,4_000,0,1,1,x\n",
         "line 2: nodes must be a whole number"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe," + "9" * 400 + ",0,1,1,x\n",
         "line 2: nodes must be a finite number"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,2,0,1,1,x\n10gbe,2,0,1,1,x\n",
         "10gbe's table for 2 nodes: regime starts must increase"),
        ("network,nodes,from_bytes,alpha_us,effective_gbps,source\n10gbe,2,5,1,1,x\n",
         "10gbe's table for 2 nodes: the first regime must start at 0 bytes"),
    ])
    def test_a_bad_nodes_column_names_the_line(self, tmp_path, monkeypatch, text, match):
        bad = tmp_path / "network_regimes.csv"
        bad.write_text(text)
        monkeypatch.setattr(topology, "REGIMES_FILE", bad)
        topology._regime_table.cache_clear()
        try:
            with pytest.raises(sim.SimInputError, match=match):
                network_regimes("10gbe", 2)
        finally:
            topology._regime_table.cache_clear()

    def test_ring_inversion_round_trips(self):
        points = parse_allreduce_log(K80_LOG.read_text())
        fit = fit_regimes(points["bytes"], points["time_s"])
        rows = regimes_to_network(fit, "x", 8)
        link = Link(0.0, 1.0, tuple(Regime(r["from_bytes"], r["alpha_us"] * 1e-6, 8 / (r["effective_gbps"] * 1e9))
                                    for r in rows))
        cost = allreduce_cost("ring", 8, 1, Link(0.0, 0.0), link)
        sizes = points["bytes"].to_numpy()
        np.testing.assert_allclose(cost.time_s(sizes), fit.time_s(sizes), rtol=1e-12)

    def test_presets_without_a_table_are_unchanged(self):
        assert network_regimes("10gbe") == ()
        for collective in sorted(sim.COLLECTIVES):
            plain = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", collective=collective, size_regimes=False)
            for regimes in (True, None):
                kw = {} if regimes is None else {"size_regimes": regimes}
                assert sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", collective=collective,
                                   **kw).comm_cost() == plain.comm_cost()

    def test_a_preset_uses_its_measured_table_by_default(self):
        """Issue 13: presets use measured tables where one exists; size_regimes=False keeps the one line."""
        default = sim.Cluster(gpus=8, gpus_per_node=1, network="10gbe-k80-osu").comm_cost()
        table = sim.Cluster(gpus=8, gpus_per_node=1, network="10gbe-k80-osu", size_regimes=True).comm_cost()
        line = sim.Cluster(gpus=8, gpus_per_node=1, network="10gbe-k80-osu", size_regimes=False).comm_cost()
        assert default == table and len(default.regimes) == 3
        assert line.regimes == () and line == sim.Cluster(gpus=8, network="10gbe-k80-osu", collective="ring",
                                                          size_regimes=False).comm_cost()
        # The one line is the OSU fit over 4 B - 1 MiB, dominated by small messages: for a 100 MB message the
        # table's large-message regime (fitted on 0.5-1 MiB) is about 2.7 times faster.
        assert float(line.time_s(1e8)) > 2.5 * float(default.time_s(1e8))
