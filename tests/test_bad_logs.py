"""Hostile logs and traces (hostile review, 2026-11-25): each is refused up front with one line naming the file,
line, count or limit, and the command exits 2, in bounded time; none is read into a silently wrong result."""

from __future__ import annotations

import gzip
import io
import shutil
from pathlib import Path

import pytest

import sim.calib.fit
import sim.calib.importers
import sim.calib.kineto
from sim.calib.fit import parse_nccl_tests
from sim.calib.importers import bcaffe_layers
from sim.calib.validation import run_validation
from sim.cli import main
from sim.errors import SimInputError

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "kineto" / "nccl_data.json.gz"

NCCL_HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw "
               "  busbw #wrong\n")


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def assert_refused(code: int, err: str, *parts: str) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for part in parts:
        assert part in err, err


# ---------------------------------------------------------------- fit-network: bounded points and lines


def test_fit_network_refuses_more_data_points_than_the_limit(tmp_path):
    """hostile review, 2026-11-25: an OSU log of 1 M valid lines took 12 s and 1.7 GB and wrote 150 MB of JSON;
    a log of more than `sim.calib.fit.MAX_POINTS` data lines is refused up front, naming the count and the limit."""
    limit = sim.calib.fit.MAX_POINTS
    log = tmp_path / "osu_many.txt"
    log.write_text("# OSU MPI Allreduce Latency Test\n" + "".join(f"{4 * (i % 50 + 1)} {10 + i % 50}.0\n"
                                                                  for i in range(limit + 1)))
    code, _, err = cli("fit-network", log, "--format", "json")
    assert_refused(code, err, f"{limit + 1:,} data lines", f"at most {limit:,}", "MAX_POINTS")


def test_fit_network_refuses_more_lines_than_the_limit(tmp_path):
    """hostile review, 2026-11-25: a 95 MB log of 8.2 M lines ran out of time and memory; a log of more than
    `sim.calib.fit.MAX_LOG_LINES` lines is refused before it is split, naming the count and the limit."""
    limit = sim.calib.fit.MAX_LOG_LINES
    log = tmp_path / "osu_comments.txt"
    log.write_text("# comment\n" * limit + "4 10.0\n8 11.0\n16 12.0\n")
    code, _, err = cli("fit-network", log)
    assert_refused(code, err, f"{limit + 3:,} lines", f"at most {limit:,}", "MAX_LOG_LINES")


def test_fit_network_at_the_point_limit_is_bounded(tmp_path):
    """hostile review, 2026-11-25: at `sim.calib.fit.MAX_POINTS` points the fit still runs, and its
    JSON (every point's error) stays near a megabyte."""
    limit = sim.calib.fit.MAX_POINTS
    log = tmp_path / "osu_limit.txt"
    log.write_text("".join(f"{4 * (i % 100 + 1)} {10 + (i % 100) * 0.5:.2f}\n" for i in range(limit)))
    code, out, err = cli("fit-network", log, "--format", "json")
    assert code == 0, err
    assert len(out) < 3 * 10**6


# ---------------------------------------------------------------- fit-network: nccl-tests time unit


def nccl_log(size: int, algbw: str, time_us: str = "113.2") -> str:
    row = f"{size:>12} {size // 4:>13}     float     sum      -1 {time_us:>8} {algbw:>7}   18.53      0    93.35   22.46   22.46      0\n"
    return NCCL_HEADER + row + row.replace(f"{size:>12}", f"{2 * size:>12}", 1)


@pytest.mark.parametrize(
    "text, match",
    [
        (nccl_log(2097152, "inf"), r"line 2: nccl-tests time and algbw must be finite.*'inf'"),
        (nccl_log(2097152, "nan"), r"line 2: nccl-tests time and algbw must be finite.*'nan'"),
        (nccl_log(2097152, "-3.5"), r"line 2: nccl-tests time and algbw must be finite, algbw >= 0"),
        (nccl_log(2097152, "18.5", time_us="inf"), r"line 2: nccl-tests time and algbw must be finite.*'inf'"),
        (nccl_log(0, "0.5"), "no row with positive size, time, algbw"),
        (nccl_log(2097152, "1e-300"), r"line 3: size / algbw / time is .* neither us nor ms"),
        (nccl_log(2097152, "0.00"), "no row with positive size, time, algbw"),
    ],
    ids=["inf-algbw", "nan-algbw", "negative-algbw", "inf-time", "zero-sizes", "tiny-algbw", "zero-algbw"],
)
def test_nccl_time_unit_is_never_guessed_from_a_bad_row(text, match):
    """hostile review, 2026-11-25: without a units line, an ``inf`` algbw or all-zero sizes crashed with
    ``math domain error`` and a ``nan`` algbw silently made the times milliseconds (alpha 1000 times too large);
    such a row is refused naming its line, and a unit neither us nor ms within a factor of ten is refused."""
    with pytest.raises(SimInputError, match=match):
        parse_nccl_tests(text)


def test_nccl_time_unit_still_inferred_from_a_sound_row():
    """hostile review, 2026-11-25: a sound row without a units line still tells us (2 MiB at 18.5 GB/s in 113 us)."""
    df = parse_nccl_tests(nccl_log(2097152, "18.53"))
    assert df["time_s"].tolist() == pytest.approx([113.2e-6, 113.2e-6])


@pytest.mark.parametrize("algbw", ["inf", "nan"])
def test_fit_network_cli_refuses_a_non_finite_algbw(tmp_path, algbw):
    """hostile review, 2026-11-25: ``fit-network`` on such a log exits 2 with one line naming the line, not 1
    with a traceback (inf) nor 0 with a fit in the wrong unit (nan)."""
    log = tmp_path / f"nccl_{algbw}.txt"
    log.write_text(nccl_log(2097152, algbw))
    code, _, err = cli("fit-network", log)
    assert_refused(code, err, "line 2", algbw)


# ---------------------------------------------------------------- import-bcaffe


def test_import_bcaffe_refuses_a_log_of_too_many_dumps(tmp_path):
    """hostile review, 2026-11-25: 200,000 lines each starting a new dump took 34 s and 1.2 GB (a DataFrame a
    dump); past `sim.calib.importers.MAX_DUMPS` dumps the log is refused at the first line over, in well under
    a second."""
    limit = sim.calib.importers.MAX_DUMPS
    log = tmp_path / "bc_dumps.log"
    log.write_text("x [0, 10, 5, 3, 3]\n" * 200_000)
    code, _, err = cli("import-bcaffe", log, "-o", tmp_path / "out.csv")
    assert_refused(code, err, f"bc_dumps.log line {limit + 1}", f"at most {limit:,}", "MAX_DUMPS")
    assert not (tmp_path / "out.csv").exists()


def test_bcaffe_log_of_too_many_lines_refused_up_front():
    """hostile review, 2026-11-25: a log of more than `sim.calib.importers.MAX_LINES` lines is refused before any
    line is parsed, naming the count and the limit."""
    limit = sim.calib.importers.MAX_LINES
    with pytest.raises(SimInputError, match=rf"big.log: {limit + 1:,} lines; .* at most {limit:,} .*MAX_LINES"):
        bcaffe_layers("x [0, 10, 5, 3, 3]\n" * (limit + 1), "big.log")


def test_bcaffe_log_at_the_dump_limit_is_read():
    """hostile review, 2026-11-25: `sim.calib.importers.MAX_DUMPS` dumps are read, and ``dump=-1`` is the last."""
    limit = sim.calib.importers.MAX_DUMPS
    text = "x [0, 10, 5, 3, 3]\nx [1, 20, 5, 0, 3]\n" * (limit - 1) + "x [0, 7, 9, 3, 3]\n"
    layers = bcaffe_layers(text, dump=-1)
    assert layers["params"].tolist() == [7]


# ---------------------------------------------------------------- import-trace


def test_trace_with_more_events_to_keep_than_the_limit_is_refused(monkeypatch):
    """hostile review, 2026-11-25: nothing bounded the kept events (3.4 M minimal kernels: 23 s, 2.7 GB); past
    `sim.calib.kineto.MAX_EVENTS` the trace is refused as soon as the count is passed."""
    monkeypatch.setattr(sim.calib.kineto, "MAX_EVENTS", 1000)
    with pytest.raises(SimInputError, match=r"nccl_data.json.gz: over 1,000 events to keep .*MAX_EVENTS"):
        sim.calib.kineto.read_trace(TRACE)


def test_import_trace_refuses_a_small_gzip_of_too_many_kernels(tmp_path):
    """hostile review, 2026-11-25: a small ``.json.gz`` of `sim.calib.kineto.MAX_EVENTS` + 1 minimal kernel
    events is refused by ``import-trace`` with one line and exit 2."""
    limit = sim.calib.kineto.MAX_EVENTS
    kernel = '{"ph":"X","cat":"kernel","ts":1000,"dur":1},'
    nccl = '{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","ts":5,"dur":3}'
    trace = tmp_path / "many.json.gz"
    trace.write_bytes(gzip.compress(('{"traceEvents":[' + kernel * limit + nccl + "]}").encode(), 1))
    code, _, err = cli("import-trace", trace)
    assert_refused(code, err, "many.json.gz", f"over {limit:,} events to keep", "MAX_EVENTS")


# ---------------------------------------------------------------- validate --reference


@pytest.fixture
def bad_reference(tmp_path) -> Path:
    folder = tmp_path / "ref"
    shutil.copytree(ROOT / "data" / "reference", folder)
    log = folder / "bcaffe_k80_10gbe" / "tmp8comm.log"
    log.chmod(0o644)
    log.write_bytes(b"abc\xff")
    return folder


def test_validate_refuses_a_reference_log_that_is_not_utf8(bad_reference):
    """hostile review, 2026-11-25: ``validate --reference DIR`` with a non-UTF-8 B-Caffe log exited 1 with a
    UnicodeDecodeError traceback; it exits 2 with one line naming the file."""
    code, _, err = cli("validate", "--reference", bad_reference)
    assert_refused(code, err, "tmp8comm.log", "not a UTF-8 text file")


def test_run_validation_raises_sim_input_error_for_a_non_utf8_log(bad_reference):
    """hostile review, 2026-11-25: the API raises `SimInputError` naming the file, not UnicodeDecodeError."""
    with pytest.raises(SimInputError, match=r"tmp8comm.log: not a UTF-8 text file \(byte 3\)"):
        run_validation(reference_dir=bad_reference)


def test_logs_with_cr_only_line_ends_read_as_before(tmp_path):
    """Splitting at \\n alone read a CR-only B-Caffe log as one line (a 1-layer model, no error) and a CR-only OSU
    log as no data (final review, 2026-11-25): CR, CRLF and LF all end a line, as they did."""
    from sim.calib.fit import parse_osu_allreduce
    from sim.calib.importers import parse_bcaffe_blobs

    ref = Path(__file__).resolve().parent.parent / "data" / "reference" / "bcaffe_k80_10gbe"
    blobs = (ref / "tmp8comm.log").read_text()
    osu = (ref / "allreduce8.log").read_text()
    for end in ("\r", "\r\n"):
        dumps, again = parse_bcaffe_blobs(blobs.replace("\n", end), "x"), parse_bcaffe_blobs(blobs, "x")
        assert len(dumps) == len(again) and all(a.equals(b) for a, b in zip(dumps, again, strict=True))
        assert parse_osu_allreduce(osu.replace("\n", end)).equals(parse_osu_allreduce(osu))
