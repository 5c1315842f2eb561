"""Fitting alpha and beta to all-reduce benchmark logs (OSU and nccl-tests)."""

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from sim.catalog import Network, get_network
from sim.cli import main
from sim.comm import Link, ring
from sim.errors import SimInputError
from sim.fit import (
    Fit,
    fit_alpha_beta,
    fit_to_network,
    parse_allreduce_log,
    parse_nccl_tests,
    parse_osu_allreduce,
)

REPO = Path(__file__).resolve().parents[1]
OSU_LOG_8 = REPO / "data" / "reference" / "bcaffe_k80_10gbe" / "allreduce8.log"

# nccl-tests all_reduce_perf, one process driving 8 GPUs (-g 8) of a V100 SXM2
# node. Times follow 24 us + M / (120 GB/s busbw) x 2(P-1)/P with a few percent
# of noise; algbw = M / t and busbw = algbw x 2(P-1)/P as nccl-tests prints.
NCCL_TESTS_SAMPLE = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41873 on    node07 device  0 [0x06] Tesla V100-SXM2-32GB
#  Rank  1 Group  0 Pid  41873 on    node07 device  1 [0x07] Tesla V100-SXM2-32GB
#  Rank  2 Group  0 Pid  41873 on    node07 device  2 [0x0a] Tesla V100-SXM2-32GB
#  Rank  3 Group  0 Pid  41873 on    node07 device  3 [0x0b] Tesla V100-SXM2-32GB
#  Rank  4 Group  0 Pid  41873 on    node07 device  4 [0x85] Tesla V100-SXM2-32GB
#  Rank  5 Group  0 Pid  41873 on    node07 device  5 [0x86] Tesla V100-SXM2-32GB
#  Rank  6 Group  0 Pid  41873 on    node07 device  6 [0x89] Tesla V100-SXM2-32GB
#  Rank  7 Group  0 Pid  41873 on    node07 device  7 [0x8a] Tesla V100-SXM2-32GB
NCCL version 2.18.3+cuda12.2
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    24.72    0.00    0.00      0    24.82    0.00    0.00      0
          32             8     float     sum      -1    23.52    0.00    0.00      0    23.61    0.00    0.00      0
         128            32     float     sum      -1    24.24    0.01    0.01      0    24.34    0.01    0.01      0
         512           128     float     sum      -1    23.77    0.02    0.04      0    23.87    0.02    0.04      0
        2048           512     float     sum      -1    24.51    0.08    0.15      0    24.61    0.08    0.15      0
        8192          2048     float     sum      -1    23.40    0.35    0.61      0    23.49    0.35    0.61      0
       32768          8192     float     sum      -1    24.48    1.34    2.34      0    24.58    1.33    2.33      0
      131072         32768     float     sum      -1    26.43    4.96    8.68      0    26.54    4.94    8.64      0
      524288        131072     float     sum      -1    31.33   16.73   29.29      0    31.46   16.67   29.16      0
     2097152        524288     float     sum      -1    55.13   38.04   66.57      0    55.35   37.89   66.31      0
     8388608       2097152     float     sum      -1   143.41   58.49  102.36      0   143.98   58.26  101.96      0
    33554432       8388608     float     sum      -1   518.47   64.72  113.26      0   520.54   64.46  112.81      0
   134217728      33554432     float     sum      -1  1981.34   67.74  118.55      0  1989.27   67.47  118.07      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 34.5187
#
"""

# Older nccl-tests (NCCL 2.4 era): no root column, no units line, time in ms.
# Two ranks over TCP: 0.5 ms + M / 1.2 GB/s.
NCCL_TESTS_OLD_MS = """\
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 16777216 step: 2(factor) warmup iters: 5 iters: 20 validation: 0
# Using devices
#   Rank  0 on     host-a device  0 [0x00] Tesla V100-SXM2-16GB
#   Rank  1 on     host-b device  0 [0x00] Tesla V100-SXM2-16GB
#
#                                                     out-of-place                       in-place
#       bytes             N    type      op     time  algbw  busbw    res     time  algbw  busbw    res
     1048576        262144   float     sum    1.374   0.76   0.76    N/A    1.380   0.76   0.76    N/A
     4194304       1048576   float     sum    3.995   1.05   1.05    N/A    4.010   1.05   1.05    N/A
    16777216       4194304   float     sum   14.481   1.16   1.16    N/A   14.502   1.16   1.16    N/A
"""

OSU_PLAIN = """\
# OSU MPI Allreduce Latency Test v5.6.2
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations
4                      10.50             10.10             11.00        1000
1024                   12.50             12.00             13.10        1000
1048576              2010.50           1990.00           2040.00         100
"""


class TestFitAlphaBeta:
    @pytest.mark.parametrize("weighting", ["relative", "absolute"])
    def test_recovers_exact_synthetic(self, weighting):
        nbytes = 2.0 ** np.arange(2, 27)
        times = 50e-6 + 8e-10 * nbytes
        fit = fit_alpha_beta(nbytes, times, weighting=weighting)
        assert fit.alpha_s == pytest.approx(50e-6, rel=1e-9)
        assert fit.beta_s_per_byte == pytest.approx(8e-10, rel=1e-9)
        assert fit.r2 == pytest.approx(1.0, abs=1e-12)
        assert (fit.n_points, fit.min_bytes, fit.max_bytes) == (25, 4, 2**26)
        assert fit.weighting == weighting

    def test_two_points_by_hand(self):
        # 1000 B in 30 us, 3000 B in 50 us: beta = 20 us / 2000 B = 1e-8 s/B,
        # alpha = 30 us - 1000 B x 1e-8 s/B = 20 us.
        fit = fit_alpha_beta([1000, 3000], [30e-6, 50e-6])
        assert fit.alpha_s == pytest.approx(20e-6, rel=1e-12)
        assert fit.beta_s_per_byte == pytest.approx(1e-8, rel=1e-12)
        assert fit.r2 == pytest.approx(1.0)

    def test_three_points_absolute_by_hand(self):
        # x = 0, 1, 2; y = 1, 2, 4. Ordinary least squares: slope
        # sum((x-1)(y-7/3)) / sum((x-1)^2) = 3/2, intercept 7/3 - 3/2 = 5/6;
        # residuals 1/6, -1/3, 1/6 so SS_res = 1/6, SS_tot = 42/9, R2 = 27/28.
        fit = fit_alpha_beta([0, 1, 2], [1.0, 2.0, 4.0], weighting="absolute")
        assert fit.alpha_s == pytest.approx(5 / 6, rel=1e-12)
        assert fit.beta_s_per_byte == pytest.approx(3 / 2, rel=1e-12)
        assert fit.r2 == pytest.approx(27 / 28, rel=1e-12)

    def test_three_points_relative_by_hand(self):
        # Same points, weights 1/y^2 = 1, 1/4, 1/16. Normal equations
        # [21/16 3/8; 3/8 1/2] [a b] = [7/4 1], determinant 33/64, so
        # a = (7/8 - 3/8) / (33/64) = 32/33 and b = (21/16 - 21/32) / (33/64) = 14/11.
        # The small-message point (y = 1) is missed by 1/33, not 1/6.
        fit = fit_alpha_beta([0, 1, 2], [1.0, 2.0, 4.0])
        assert fit.alpha_s == pytest.approx(32 / 33, rel=1e-12)
        assert fit.beta_s_per_byte == pytest.approx(14 / 11, rel=1e-12)

    def test_min_bytes_keeps_the_bandwidth_regime(self):
        # A protocol switch: flat 40 us up to 8 KiB, then 30 us + 1e-9 s/B.
        nbytes = 2.0 ** np.arange(2, 25)
        times = np.where(nbytes <= 8192, 40e-6, 30e-6 + 1e-9 * nbytes)
        fit = fit_alpha_beta(nbytes, times, min_bytes=16384)
        assert fit.alpha_s == pytest.approx(30e-6, rel=1e-9)
        assert fit.beta_s_per_byte == pytest.approx(1e-9, rel=1e-9)
        assert fit.min_bytes == 16384
        assert fit.n_points == 11

    def test_time_s_evaluates_the_line(self):
        fit = Fit(1e-5, 1e-9, 1.0, 2, 0, 10)
        assert fit.time_s(1000) == pytest.approx(1.1e-5)

    @given(
        exponents=st.sets(st.integers(0, 30), min_size=2, max_size=25),
        alpha=st.floats(1e-7, 1e-2),
        beta=st.floats(1e-12, 1e-8),
        weighting=st.sampled_from(["relative", "absolute"]),
    )
    def test_exact_affine_data_is_fitted_exactly(self, exponents, alpha, beta, weighting):
        nbytes = np.array(sorted(2.0**e for e in exponents))
        times = alpha + beta * nbytes
        # A benchmark sweep that crosses the latency/bandwidth crossover point, so
        # both parameters show in the data, and spans at most 1e5 in time (an
        # 8 B - 8 GiB nccl-tests sweep spans ~2e3): beyond that, float64 rounding
        # of the largest times alone exceeds 1e-9 of the smallest.
        assume(beta * nbytes[0] <= alpha <= beta * nbytes[-1])
        assume(times[-1] / times[0] <= 1e5)
        fit = fit_alpha_beta(nbytes, times, weighting=weighting)
        assert fit.alpha_s == pytest.approx(alpha, rel=1e-9)
        assert fit.beta_s_per_byte == pytest.approx(beta, rel=1e-9)
        np.testing.assert_allclose(fit.time_s(nbytes), times, rtol=1e-9)
        assert fit.r2 == pytest.approx(1.0, abs=1e-9)

    def test_unknown_weighting_lists_valid(self):
        with pytest.raises(SimInputError, match="unknown weighting 'l1'; valid: relative, absolute"):
            fit_alpha_beta([1, 2], [1.0, 2.0], weighting="l1")

    @pytest.mark.parametrize(
        ("nbytes", "times", "match"),
        [
            ([1, 2, 3], [1.0, 2.0], "differ in length"),
            ([8, 8, 8], [1.0, 1.1, 0.9], "two distinct message sizes"),
            ([1, 2], [1.0, -2.0], "time_s must be finite and > 0"),
            ([1, 2], [1.0, float("nan")], "time_s must be finite"),
            ([-1, 2], [1.0, 2.0], "bytes must be finite and >= 0"),
            (["a", "b"], [1.0, 2.0], "must be numbers"),
        ],
    )
    def test_bad_input_refused(self, nbytes, times, match):
        with pytest.raises(SimInputError, match=match):
            fit_alpha_beta(nbytes, times)

    def test_min_bytes_leaving_too_few_sizes_refused(self):
        with pytest.raises(SimInputError, match="at or above min_bytes = 100"):
            fit_alpha_beta([1, 10, 100], [1.0, 2.0, 3.0], min_bytes=100)


class TestParseOSU:
    def test_plain_output_with_extra_columns(self):
        df = parse_osu_allreduce(OSU_PLAIN)
        assert list(df.columns) == ["bytes", "time_s"]
        assert df["bytes"].tolist() == [4, 1024, 1048576]
        np.testing.assert_allclose(df["time_s"], [10.5e-6, 12.5e-6, 2010.5e-6])
        assert df.attrs["ranks"] is None
        assert df.attrs["format"] == "osu"

    def test_rank_prefixed_lines(self):
        df = parse_osu_allreduce("# Size  Avg Latency(us)\n8,4      82.28\n8,8   68.72\n\n")
        assert df["bytes"].tolist() == [4, 8]
        np.testing.assert_allclose(df["time_s"], [82.28e-6, 68.72e-6])
        assert df.attrs["ranks"] == 8

    def test_malformed_line_named(self):
        with pytest.raises(SimInputError, match=r"line 3: expected '<bytes> <avg latency us>'"):
            parse_osu_allreduce("# OSU\n4  10.0\nsegfault in rank 3\n")

    def test_zero_latency_refused(self):
        with pytest.raises(SimInputError, match="line 1: time must be a finite number > 0"):
            parse_osu_allreduce("4  0.0\n")

    def test_mixed_rank_counts_refused(self):
        with pytest.raises(SimInputError, match=r"mixes rank counts \[2, 4\]"):
            parse_osu_allreduce("2,4  10.0\n4,4  20.0\n")

    def test_no_rows_refused(self):
        with pytest.raises(SimInputError, match="no data lines"):
            parse_osu_allreduce("# OSU MPI Allreduce Latency Test\n# Size Avg Latency(us)\n")


class TestParseNcclTests:
    def test_sample_rows_and_units(self):
        df = parse_nccl_tests(NCCL_TESTS_SAMPLE)
        assert len(df) == 13
        assert df["bytes"].iloc[0] == 8
        assert df["bytes"].iloc[-1] == 134217728
        assert df["time_s"].iloc[0] == pytest.approx(24.72e-6)  # out-of-place, not 24.82
        assert df["time_s"].iloc[-1] == pytest.approx(1981.34e-6)
        assert df.attrs["ranks"] == 8
        assert df.attrs["format"] == "nccl-tests"

    def test_fit_of_sample_gives_nvlink2_rates(self):
        # Generated with alpha_AR = 24 us and busbw 120 GB/s on P = 8, so the ring
        # link is 120 GB/s = 960 Gb/s (the nvlink2 preset) and alpha_link = 24/14 us.
        df = parse_nccl_tests(NCCL_TESTS_SAMPLE)
        fit = fit_alpha_beta(df["bytes"], df["time_s"])
        assert fit.alpha_s == pytest.approx(24e-6, rel=0.05)
        row = fit_to_network(fit, "node07-nvlink", df.attrs["ranks"], scope="intra", line_rate_gbps=1200)
        assert row["effective_gbps"] == pytest.approx(960, rel=0.03)
        assert row["alpha_us"] == pytest.approx(24 / 14, rel=0.05)

    def test_old_format_in_milliseconds(self):
        # No units line: 1 MiB / 0.76 GB/s = 1.38 ms, so the column is in ms.
        df = parse_nccl_tests(NCCL_TESTS_OLD_MS)
        assert df["time_s"].tolist() == pytest.approx([1.374e-3, 3.995e-3, 14.481e-3])
        assert df.attrs["ranks"] == 2

    def test_logging_lines_skipped(self):
        noisy = NCCL_TESTS_SAMPLE.replace(
            "NCCL version 2.18.3+cuda12.2\n",
            "NCCL version 2.18.3+cuda12.2\nnode07:41873:41873 [0] NCCL INFO Bootstrap : Using eth0\n",
        )
        assert len(parse_nccl_tests(noisy)) == 13

    def test_short_row_named(self):
        bad = NCCL_TESTS_SAMPLE.replace("     2097152        524288     float     sum      -1    55.13", "     2097152")
        with pytest.raises(SimInputError, match="line 26: nccl-tests row does not match the 13-column header"):
            parse_nccl_tests(bad)

    def test_no_header_refused(self):
        with pytest.raises(SimInputError, match="no header line"):
            parse_nccl_tests("8 2 float sum -1 24.0 0.0 0.0 0\n")

    def test_no_rows_refused(self):
        header_only = NCCL_TESTS_SAMPLE.split("           8             2")[0]
        with pytest.raises(SimInputError, match="no data rows"):
            parse_nccl_tests(header_only)


class TestParseAllreduceLog:
    def test_detects_nccl_tests(self):
        assert parse_allreduce_log(NCCL_TESTS_SAMPLE).attrs["format"] == "nccl-tests"

    def test_detects_osu(self):
        assert parse_allreduce_log(OSU_PLAIN).attrs["format"] == "osu"
        assert parse_allreduce_log("8,4  82.28\n8,8  68.72\n").attrs["ranks"] == 8

    def test_unrecognised_refused(self):
        with pytest.raises(SimInputError, match="unrecognised all-reduce log.*first line: 'hello world'"):
            parse_allreduce_log("hello world\n")

    def test_empty_refused(self):
        with pytest.raises(SimInputError, match="no data rows"):
            parse_allreduce_log("")

    def test_osu_header_without_rows_refused(self):
        with pytest.raises(SimInputError, match="no data lines"):
            parse_allreduce_log("# OSU MPI Allreduce Latency Test v5.4.0\n# Size Avg Latency(us)\n")


class TestFitToNetwork:
    def test_ring_inversion_by_hand(self):
        # P = 8: 2(P-1) = 14 steps. alpha_AR = 14 us -> 1 us per step;
        # beta_AR = 1.75e-9 s/B = 2(P-1)/P x beta_link -> beta_link = 1e-9 s/B = 8 Gb/s.
        fit = Fit(14e-6, 1.75e-9, 0.99, 10, 4, 2**20)
        row = fit_to_network(fit, "lab", 8, line_rate_gbps=10, source="our OSU run")
        assert row["alpha_us"] == pytest.approx(1.0)
        assert row["effective_gbps"] == pytest.approx(8.0)
        assert set(row) == {"name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source", "note"}
        assert "P=8" in row["note"]

    def test_two_workers(self):
        # P = 2: T = 2 alpha_link + M beta_link.
        row = fit_to_network(Fit(2e-5, 1e-9, 1.0, 2, 1, 2), "x", 2)
        assert row["alpha_us"] == pytest.approx(10.0)
        assert row["effective_gbps"] == pytest.approx(8.0)
        assert row["line_rate_gbps"] is None

    def test_preset_reproduces_the_fit_through_sim_comm_ring(self):
        fit = Fit(93e-6, 4.7e-9, 0.9, 10, 4, 2**20)
        row = fit_to_network(fit, "lab", 8, line_rate_gbps=10, source="test")
        net = Network.from_row(row)
        link = Link(net.alpha_s, net.beta_s_per_byte)
        cost = ring(8, 1, link, link, 0.0)
        assert cost.alpha_s == pytest.approx(fit.alpha_s, rel=1e-12)
        assert cost.beta_s_per_byte == pytest.approx(fit.beta_s_per_byte, rel=1e-12)

    def test_faster_than_line_rate_refused(self):
        with pytest.raises(SimInputError, match="implies 16 Gb/s per link, above the line rate 10"):
            fit_to_network(Fit(1e-5, 8.75e-10, 1.0, 2, 1, 2), "x", 8, line_rate_gbps=10)

    def test_unknown_collective_lists_valid(self):
        with pytest.raises(SimInputError, match="unknown collective 'butterfly'; valid: ring"):
            fit_to_network(Fit(1e-5, 1e-9, 1.0, 2, 1, 2), "x", 4, collective="butterfly")

    @pytest.mark.parametrize("gpus", [1, 0, 2.5, True])
    def test_bad_gpus_refused(self, gpus):
        with pytest.raises(SimInputError, match="gpus must be a whole number >= 2"):
            fit_to_network(Fit(1e-5, 1e-9, 1.0, 2, 1, 2), "x", gpus)

    def test_negative_alpha_refused(self):
        with pytest.raises(SimInputError, match="alpha = -1e-05 s is negative"):
            fit_to_network(Fit(-1e-5, 1e-9, 1.0, 2, 1, 2), "x", 4)


class TestRealOSULog:
    """B-Caffe's OSU osu_allreduce on 8 K80 nodes over 10GbE (reference README)."""

    @pytest.fixture(scope="class")
    def log(self):
        return parse_allreduce_log(OSU_LOG_8.read_text())

    def test_parsed(self, log):
        assert log.attrs["format"] == "osu"
        assert log.attrs["ranks"] == 8
        assert len(log) == 266
        assert (log["bytes"].min(), log["bytes"].max()) == (4, 1048576)

    def test_alpha_beta_sane_for_10gbe(self, log):
        fit = fit_alpha_beta(log["bytes"], log["time_s"])
        # beta: any all-reduce on P ranks sends at least 2(P-1)/P x M bytes out of
        # each rank (nccl-tests doc/PERFORMANCE.md), so at the 10 Gb/s line rate
        # beta_AR >= 2 x 7/8 x 8 / 10e9 = 1.4e-9 s/B. MPI over TCP on these 2015
        # hosts, with messages of at most 1 MiB, is far from line rate; allow down
        # to 2 Gb/s effective, i.e. 5 x the bound = 7e-9 s/B.
        assert 1.4e-9 <= fit.beta_s_per_byte <= 7e-9
        # alpha: the measured all-reduce of 8-64 B takes 68-71 us, so the
        # intercept should be within a factor of two of ~70 us.
        assert 35e-6 <= fit.alpha_s <= 140e-6
        assert fit.r2 > 0.85
        assert fit.n_points == 266

    def test_absolute_weighting_overshoots_alpha(self, log):
        # The docstring's argument for relative weighting: the absolute fit's
        # intercept is far above the measured 82 us of a 4-byte all-reduce.
        fit = fit_alpha_beta(log["bytes"], log["time_s"], weighting="absolute")
        assert fit.alpha_s > 5 * 82.28e-6

    def test_catalog_row_is_this_fit(self, log, monkeypatch, tmp_path):
        monkeypatch.delenv("SSGD_NETWORKS", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path))  # no user presets
        fit = fit_alpha_beta(log["bytes"], log["time_s"])
        row = fit_to_network(fit, "10gbe-k80-osu", 8, line_rate_gbps=10)
        net = get_network("10gbe-k80-osu")
        assert net.effective_gbps == pytest.approx(row["effective_gbps"], rel=5e-3)
        assert net.alpha_s * 1e6 == pytest.approx(row["alpha_us"], rel=5e-3)


def test_an_nccl_tests_row_with_wrong_results_is_refused():
    """A row whose #wrong count is not 0 timed an all-reduce that gave wrong sums: not a measurement to fit
    (the hostile review found it fitted)."""
    rows = NCCL_TESTS_SAMPLE.splitlines()
    at = next(i for i, r in enumerate(rows) if r.strip().startswith("524288"))
    rows[at] = rows[at][: rows[at].rindex("0")] + "3"  # the in-place #wrong column
    with pytest.raises(SimInputError, match=rf"line {at + 1}: nccl-tests counts 3 wrong results"):
        parse_allreduce_log("\n".join(rows) + "\n")
    assert len(parse_allreduce_log(NCCL_TESTS_SAMPLE)) == 13


def test_fit_network_warns_of_a_falling_log_and_refuses_one_rank(tmp_path):
    log = tmp_path / "falling.txt"
    log.write_text("# OSU MPI Allreduce Latency Test\n4 100.0\n1024 50.0\n1048576 10.0\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["fit-network", str(log)], out=out, err=err) == 0
    assert err.getvalue().startswith("warning: the fitted line has a negative beta")
    out, err = io.StringIO(), io.StringIO()
    assert main(["fit-network", str(log), "--gpus", "1"], out=out, err=err) == 2
    assert "--gpus: an all-reduce log has 2 to" in err.getvalue()
