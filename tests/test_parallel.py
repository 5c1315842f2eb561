"""Grids and sweeps: the same rows in this process, on a process pool and on Dask."""

import io
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import make_model

import sim
from sim import parallel
from sim.api import METRIC_KEYS, RESOURCE_KEYS, resolve_model, single_gpu_iteration_s_of
from sim.cli import main
from sim.parallel import run_grid

TINY = str(Path(__file__).parent / "data" / "tiny.csv")


def small_grid():
    """2 models x 4 GPU counts x 2 networks x 6 schedulers x 2 bucket sizes = 192 configurations."""
    models = [sim.load_model(TINY, io_ms=1, update_ms=0.5),
              make_model([0, 300_000, 2_000_000, 0, 5_000_000], [1, 2, 1, 0.5, 3], [2, 3, 2, 1, 4], name="five")]
    return [
        {"model": m, "gpus": p, "gpus_per_node": 2, "network": net, "scheduler": s, "bucket_mb": b, "batch_size": 16,
         "prefetch": m.name == "five"}
        for m in models for p in (1, 2, 4, 8) for net in ("10gbe", "100gbe") for s in sim.SCHEDULERS for b in (1.0, 25.0)
    ]


def simulate_row(config: dict) -> dict:
    """What `sim.simulate` says for one configuration."""
    config = dict(config)
    model = config.pop("model")
    run = {k: config.pop(k) for k in ("scheduler", "batch_size", "prefetch", "bucket_mb")}
    return sim.simulate(model, sim.Cluster(**config), run.pop("scheduler"), **run).metrics


@pytest.fixture(scope="module")
def serial():
    return run_grid(small_grid(), jobs=1)


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                                  protocol="tcp") as cluster, distributed.Client(cluster) as client:
        yield client


class TestRunGrid:
    def test_rows_are_simulate_to_the_bit(self, serial):
        grid = small_grid()
        expected = pd.DataFrame([simulate_row(c) for c in grid], columns=list(METRIC_KEYS))
        pd.testing.assert_frame_equal(serial, expected, check_exact=True)

    def test_process_pool_gives_the_same_rows(self, serial):
        pd.testing.assert_frame_equal(run_grid(small_grid(), jobs=2), serial, check_exact=True)

    def test_dask_gives_the_same_rows(self, serial, dask_client):
        pd.testing.assert_frame_equal(run_grid(small_grid(), client=dask_client), serial, check_exact=True)

    def test_progress_counts_every_configuration(self):
        calls = []
        grid = small_grid()
        run_grid(grid, jobs=2, progress=lambda done, total: calls.append((done, total)))
        assert calls[-1] == (len(grid), len(grid))
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)

    def test_a_small_grid_stays_in_this_process(self, monkeypatch):
        def no_pool():
            raise AssertionError("a pool was started for a small grid")

        monkeypatch.setattr(parallel, "_pool_context", no_pool)
        assert len(run_grid(small_grid()[:24])) == 24

    def test_models_by_name_and_defaults(self):
        frame = run_grid([{"model": TINY, "batch_size": 8}, {"model": TINY, "batch_size": 8, "gpus": 4}])
        assert list(frame.scheduler) == ["wfbp", "wfbp"] and list(frame.gpus) == [1, 4]
        assert frame.iteration_time_s.iloc[1] == simulate_row(
            {"model": sim.load_model(TINY), "gpus": 4, "scheduler": "wfbp", "batch_size": 8, "prefetch": False,
             "bucket_mb": 25.0})["iteration_time_s"]

    def test_empty_grid(self):
        assert list(run_grid([]).columns) == list(METRIC_KEYS)

    @pytest.mark.parametrize(
        "config, match",
        [
            ({"model": TINY, "batch_size": 8, "gpu_count": 2}, "configuration 1: unknown key"),
            ({"batch_size": 8}, "configuration 1: 'model' is required"),
            ({"model": TINY, "batch_size": 8, "scheduler": "fifo"}, "configuration 1: unknown scheduler 'fifo'"),
            ({"model": TINY, "batch_size": 8, "network": "wifi", "gpus": 2}, "configuration 1: unknown network"),
            ({"model": TINY, "batch_size": 0}, "configuration 1: batch_size"),
            ({"model": TINY, "batch_size": 8, "scheduler": "bucket", "bucket_mb": 0}, "configuration 1: bucket_mb"),
            ({"model": TINY, "batch_size": [8]}, "configuration 1: "),
        ],
    )
    def test_bad_configurations_name_their_position(self, config, match):
        with pytest.raises(sim.SimInputError, match=match):
            run_grid([{"model": TINY, "batch_size": 8}, config])

    def test_jobs_must_be_positive(self):
        with pytest.raises(sim.SimInputError, match="jobs"):
            run_grid([{"model": TINY, "batch_size": 8}], jobs=0)


class TestSweep:
    def test_equals_a_loop_of_simulate(self):
        model = sim.load_model(TINY)
        cluster = sim.Cluster(gpus=1, gpus_per_node=2)
        gpus, schedulers = [1, 2, 8], list(sim.SCHEDULERS)
        t1 = single_gpu_iteration_s_of(resolve_model(model, cluster, 16, "fp32"))
        rows = [sim.simulate(model, cluster.with_gpus(p), s, batch_size=16, single_gpu_iteration_s=t1).metrics
                for p in gpus for s in schedulers]
        expected = pd.DataFrame(rows, columns=[*METRIC_KEYS, *RESOURCE_KEYS])
        for jobs in (1, 2, None):
            frame = sim.sweep(model, cluster, gpus=gpus, schedulers=schedulers, batch_size=16, jobs=jobs)
            pd.testing.assert_frame_equal(frame, expected, check_exact=True)

    def test_networks_and_bucket_sizes(self):
        frame = sim.sweep(sim.load_model(TINY), sim.Cluster(), gpus=[2, 4], schedulers=["wfbp", "bucket"],
                          batch_size=8, networks=["10gbe", "100gbe"], bucket_mbs=[1.0, 50.0])
        assert list(frame.columns) == [*METRIC_KEYS, *RESOURCE_KEYS, "bucket_mb"]
        assert list(zip(frame.network, frame.gpus, frame.scheduler, frame.bucket_mb, strict=True))[:5] == [
            ("10gbe", 2, "wfbp", 1.0), ("10gbe", 2, "wfbp", 50.0), ("10gbe", 2, "bucket", 1.0),
            ("10gbe", 2, "bucket", 50.0), ("10gbe", 4, "wfbp", 1.0)]
        assert len(frame) == 16
        bucket = frame[(frame.scheduler == "bucket") & (frame.gpus == 4) & (frame.network == "100gbe")]
        assert bucket.num_messages.tolist()[0] > bucket.num_messages.tolist()[1]

    def test_sweep_errors_stay_as_they_were(self):
        model = sim.load_model(TINY)
        with pytest.raises(sim.SimInputError, match="^gpus = 6 does not fill whole nodes"):
            sim.sweep(model, sim.Cluster(gpus_per_node=4), gpus=[6], schedulers=["wfbp"], batch_size=8)
        with pytest.raises(sim.SimInputError, match="^unknown scheduler 'fifo'"):
            sim.sweep(model, sim.Cluster(), gpus=[2], schedulers=["fifo"], batch_size=8)


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class TestCli:
    ARGS = ("sweep", "--model", TINY, "--gpus", "1,2,4", "--scheduler", "wfbp,optimal", "--format", "json")

    def test_jobs_and_progress(self, capsys):
        code, serial, _ = run_cli(*self.ARGS, "--jobs", "1")
        assert code == 0
        code, pooled, _ = run_cli(*self.ARGS, "--jobs", "2", "--progress", "on")
        assert code == 0 and pooled == serial
        bar = capsys.readouterr().err
        assert "sweep [" in bar and "6/6 configurations" in bar and bar.endswith("\n")

    def test_no_progress_bar_unless_asked_off_a_terminal(self, capsys):
        assert run_cli(*self.ARGS)[0] == 0
        assert capsys.readouterr().err == ""

    def test_dask_address(self, dask_client):
        code, serial, _ = run_cli(*self.ARGS)
        code, on_dask, _ = run_cli(*self.ARGS, "--dask-address", dask_client.scheduler.address)
        assert code == 0 and json.loads(on_dask) == json.loads(serial)

    @pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\n\r\n", None])
    def test_an_address_that_is_no_dask_scheduler_is_one_line(self, monkeypatch, reply):
        """A server that answers HTTP made Dask read a length of 3 EiB (a traceback); one that never answers
        kept the sweep waiting past Client's own timeout (hostile review, 2026-11-25)."""
        import socket
        import threading

        from sim.cli import sweep as sweep_cli

        monkeypatch.setattr(sweep_cli, "DASK_CONNECT_S", 1)
        server = socket.create_server(("127.0.0.1", 0))
        held = []

        def serve():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                held.append(conn)
                if reply is not None:
                    conn.sendall(reply)

        threading.Thread(target=serve, daemon=True).start()
        try:
            code, _, err = run_cli(*self.ARGS, "--dask-address", f"tcp://127.0.0.1:{server.getsockname()[1]}")
        finally:
            server.close()
            for conn in held:
                conn.close()
        assert code == 2 and err.startswith("error: --dask-address: cannot reach a Dask scheduler") \
            and err.count("\n") == 1

    @pytest.mark.parametrize(
        "extra, match",
        [
            (("--jobs", "0"), "--jobs"),
            (("--jobs", "2", "--dask-address", "tcp://127.0.0.1:1"), "exclude each other"),
            (("--progress", "sometimes"), "--progress"),
        ],
    )
    def test_bad_flags(self, extra, match):
        code, _, err = run_cli(*self.ARGS, *extra)
        assert code == 2 and err.startswith("error: ") and match in err and err.count("\n") == 1


def test_grid_module_needs_no_dask_until_asked():
    import subprocess

    code = "import sim, sim.parallel, sys; assert 'distributed' not in sys.modules and 'dask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent)
