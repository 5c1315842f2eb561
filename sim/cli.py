"""Command line: ``python -m sim run|sweep|trace|list``.

Bad input (an unknown name, a malformed CSV, an absurd value, a flag that
makes no sense) prints one line ``error: ...`` to stderr and exits with 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import pandas as pd

from sim.api import simulate, sweep
from sim.catalog import gpus, networks
from sim.cluster import Cluster
from sim.comm import COLLECTIVES
from sim.errors import SimInputError
from sim.methods import method_table
from sim.model import BYTES_PER_PARAM, load_model, zoo_model, zoo_names
from sim.schedulers import DEFAULT_BUCKET_MB, SCHEDULERS
from sim.trace import chrome_trace

__all__ = ["main"]

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SimInputError(message)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= {minimum}")
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def _int_list(text: str) -> list[int]:
    return [_positive_int(part.strip()) for part in text.split(",") if part.strip()] or _empty(text)


def _name_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()] or _empty(text)


def _empty(text: str):
    raise argparse.ArgumentTypeError(f"{text!r} is an empty list")


def _float_list(text: str) -> list[float]:
    values = [_nonneg_float(part.strip()) for part in text.split(",") if part.strip()] or _empty(text)
    return [int(v) if float(v).is_integer() else v for v in values]


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def _positive_float(text: str) -> float:
    value = _nonneg_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _add_workload_flags(p: argparse.ArgumentParser, *, many: bool) -> None:
    p.add_argument("--model", required=True, help="zoo name or path to a layer CSV (name,params,fwd_ms,bwd_ms)")
    if many:
        p.add_argument("--gpus", type=_int_list, default=[1, 2, 4, 8, 16], help="GPU counts, e.g. 1,2,4,8")
        p.add_argument("--scheduler", type=_name_list, default=None, help="schedulers, e.g. wfbp,mgwfbp (default wfbp,mgwfbp)")
        p.add_argument("--method", type=_name_list, default=None,
                       help="survey methods instead of schedulers, e.g. BSP-A2A,BSP-PS (python -m sim list methods)")
    else:
        p.add_argument("--gpus", type=_positive_int, default=1, help="number of GPUs P")
        p.add_argument("--scheduler", default=None, help=f"one of {', '.join(SCHEDULERS)} (default wfbp)")
        p.add_argument("--method", default=None,
                       help="a survey method (architecture + scheduler + settings), e.g. BSP-PS; see list methods")
    p.add_argument("--gpus-per-node", type=_positive_int, default=1, help="GPUs per node (sharing one NIC)")
    p.add_argument("--gpu", default="v100-sxm2", help="GPU type, for the estimated compute times of zoo models")
    p.add_argument("--calibrate-iteration-s", type=_positive_float, default=None,
                   help="measured one-GPU iteration time at this batch size; compute times are scaled to match")
    p.add_argument("--seq-len", type=_positive_int, default=None, help="sequence length of a transformer zoo model")
    p.add_argument("--image-size", type=_positive_int, default=None, help="input image side of a CNN zoo model")
    p.add_argument("--network", default="10gbe", help="inter-node network preset")
    p.add_argument("--intra", default="pcie3", help="intra-node link preset")
    p.add_argument("--collective", default="ring", help=f"one of {', '.join(COLLECTIVES)}")
    p.add_argument("--batch-size", type=_positive_int, default=32, help="samples per GPU per iteration")
    p.add_argument("--precision", choices=list(BYTES_PER_PARAM), default="fp32", help="gradient precision")
    p.add_argument("--alpha", type=_nonneg_float, default=None, help="all-reduce start-up time, seconds")
    p.add_argument("--beta", type=_nonneg_float, default=None, help="all-reduce time per byte, seconds")
    p.add_argument("--bucket-mb", type=_positive_float, default=None,
                   help=f"bucket size in MiB for the bucket scheduler (default {DEFAULT_BUCKET_MB:g})")
    p.add_argument("--architecture", choices=["allreduce", "ps"], default=None,
                   help="all-reduce among workers (default) or parameter servers")
    p.add_argument("--fusion-threshold-mb", type=_nonneg_float, default=None,
                   help="horovod: fusion threshold in MiB (default 64; 0 disables fusion)")
    p.add_argument("--cycle-time-ms", type=_nonneg_float, default=None, help="horovod: cycle time in ms (default 1)")
    p.add_argument("--first-bucket-mb", type=_positive_float, default=None, help="ddp: first bucket cap in MiB (default 1)")
    p.add_argument("--partition-bytes", type=_positive_int, default=None,
                   help="bytescheduler and ps: partition size in bytes (default 4096000)")
    p.add_argument("--credit", type=_positive_int, default=None, help="bytescheduler: partitions in flight (default 4)")
    p.add_argument("--servers", type=_positive_int, default=None, help="ps: parameter servers (default: one per node)")
    p.add_argument("--colocated", action="store_true", default=None, help="ps: servers on the worker machines")
    p.add_argument("--iterations", type=_positive_int, default=1, help="iterations in the timeline")
    p.add_argument("--prefetch", action="store_true", help="overlap io/h2d of the next iteration")
    p.add_argument("--io-ms", type=_nonneg_float, default=0.0, help="data read time per iteration, ms")
    p.add_argument("--h2d-ms", type=_nonneg_float, default=0.0, help="host-to-device copy time per iteration, ms")
    p.add_argument("--update-ms", type=_nonneg_float, default=0.0, help="parameter update time per iteration, ms")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m sim", description="Simulate distributed synchronous SGD iterations.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="simulate one configuration")
    _add_workload_flags(run, many=False)
    run.add_argument("--format", choices=["json", "table"], default="table")
    _add_straggler_flags(run)

    sw = sub.add_parser("sweep", help="simulate every (gpus, scheduler) pair")
    _add_workload_flags(sw, many=True)
    sw.add_argument("--format", choices=["json", "csv", "table"], default="table")
    sw.add_argument("--jobs", type=_positive_int, default=None,
                    help="worker processes on this machine (default: one per core for a big sweep, none for a small one)")
    sw.add_argument("--dask-address", metavar="tcp://HOST:PORT", default=None,
                    help="run the sweep on this Dask scheduler's workers (they need sim importable)")
    sw.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                    help="progress bar on stderr (auto: when stderr is a terminal)")
    _add_straggler_flags(sw)
    _add_algorithms_parser(sub)

    tr = sub.add_parser("trace", help="write the timeline as Chrome Trace Event JSON")
    _add_workload_flags(tr, many=False)
    tr.add_argument("-o", "--output", required=True, help="output file (.json)")

    fn = sub.add_parser("fit-network", help="fit alpha and beta to an OSU or nccl-tests all-reduce log")
    fn.add_argument("file", help="osu_allreduce or all_reduce_perf output")
    fn.add_argument("--gpus", type=_positive_int, default=None, help="ranks in the all-reduce (read from the log if it says)")
    fn.add_argument("--min-bytes", type=_positive_int, default=None, help="ignore messages smaller than this")
    fn.add_argument("--weighting", choices=["relative", "absolute"], default="relative")
    fn.add_argument("--save", metavar="NAME", default=None, help="save as a network preset that --network accepts")
    fn.add_argument("--line-rate-gbps", type=_positive_float, default=None, help="the link's nominal rate (with --save)")
    fn.add_argument("--scope", choices=["inter", "intra"], default="inter", help="link scope of the saved preset")
    fn.add_argument("--format", choices=["json", "table"], default="table")

    ib = sub.add_parser("import-bcaffe", help="turn a B-Caffe per-blob log into a layer CSV with comm_ms")
    ib.add_argument("log", help="a B-Caffe tmp*comm.log")
    ib.add_argument("-o", "--output", required=True, help="layer CSV to write")
    ib.add_argument("--dump", type=int, default=0, help="which dump of the log (0 = first, -1 = last)")

    va = sub.add_parser("validate", help="simulate every published measurement in data/validation and report the error")
    va.add_argument("--format", choices=["json", "table", "csv"], default="table")
    va.add_argument("--reference", default=None, help="folder of the shared reference traces (default ../shared/reference)")
    va.add_argument("--source", default=None, help="only the cases of this source")

    gp = sub.add_parser("gap", help="how far mgwfbp falls short of optimal on seeded random models")
    gp.add_argument("--trials", type=_positive_int, default=1000, help="random models to draw")
    gp.add_argument("--seed", type=int, default=0, help="random seed")
    gp.add_argument("--gpus", type=_positive_int, default=16, help="workers P")
    gp.add_argument("--format", choices=["json", "table", "csv"], default="table")

    ls = sub.add_parser("list", help="show models, networks, collectives and schedulers")
    ls.add_argument("what", nargs="?", default="all",
                    choices=["all", "models", "gpus", "networks", "collectives", "schedulers", "methods"])

    tu = sub.add_parser("tune", help="sweep one scheduler knob; print the best value and its gain over the default")
    _add_workload_flags(tu, many=False)
    tu.add_argument("--knob", required=True, choices=["bucket-mb", "fusion-threshold-mb", "partition-bytes", "credit"])
    tu.add_argument("--values", required=True, type=_float_list, help="values to try, e.g. 1,5,25,100")
    tu.add_argument("--format", choices=["json", "table"], default="table")
    ls.add_argument("--format", choices=["json", "table"], default="table")
    return parser


def _cluster(args, gpus: int) -> Cluster:
    return Cluster(
        gpus=gpus, gpus_per_node=args.gpus_per_node, network=args.network, intra=args.intra,
        collective=args.collective, alpha_s=args.alpha, beta_s_per_byte=args.beta, gpu=args.gpu,
    )


_OPTION_FLAGS = {
    "fusion_threshold_mb": ("--fusion-threshold-mb", {"horovod"}),
    "cycle_time_ms": ("--cycle-time-ms", {"horovod"}),
    "first_bucket_mb": ("--first-bucket-mb", {"ddp"}),
    "partition_bytes": ("--partition-bytes", {"bytescheduler", "ps"}),
    "credit": ("--credit", {"bytescheduler"}),
    "servers": ("--servers", {"ps"}),
    "colocated": ("--colocated", {"ps"}),
}


def _runs(args) -> list[tuple[str | None, str, str]]:
    """(method, scheduler, architecture) of each run the flags ask for; checks them."""
    from sim.methods import method_config

    methods = args.method if isinstance(args.method, list) else ([args.method] if args.method else [])
    given = args.scheduler if isinstance(args.scheduler, list) else ([args.scheduler] if args.scheduler else [])
    if methods and given:
        raise SimInputError("--method sets the scheduler: give --method or --scheduler, not both")
    if methods and args.architecture is not None:
        raise SimInputError("--method sets the architecture: give --method or --architecture, not both")
    if methods:
        runs = []
        for name in methods:
            try:
                cfg = method_config(name)
            except SimInputError as exc:
                raise SimInputError(f"--method: {exc}") from None
            runs.append((name, cfg.scheduler, cfg.architecture))
    else:
        if not given:
            given = ["wfbp", "mgwfbp"] if isinstance(args.scheduler, list) or args.command == "sweep" else ["wfbp"]
        runs = [(None, name, args.architecture or "allreduce") for name in given]
    for key, (flag, users) in _OPTION_FLAGS.items():
        if getattr(args, key, None) is not None and not any(users & {s, a} for _, s, a in runs):
            raise SimInputError(f"{flag} applies only to {' or '.join(sorted(users))}")
    return runs


def _options(args) -> dict | None:
    opts = {k: getattr(args, k) for k in _OPTION_FLAGS if getattr(args, k, None) is not None}
    return opts or None


def _check_flags(args, schedulers: list[str]) -> None:
    if (args.alpha is None) != (args.beta is None):
        raise SimInputError("--alpha and --beta go together: give both or neither")
    if args.bucket_mb is not None and not {"bucket", "ddp"} & set(schedulers):
        raise SimInputError("--bucket-mb applies only to --scheduler bucket or ddp")
    for name in schedulers:
        if name not in SCHEDULERS:
            raise SimInputError(f"--scheduler: unknown scheduler {name!r}; valid: {', '.join(SCHEDULERS)}")


def _model(args):
    arch = {k: v for k, v in (("seq_len", args.seq_len), ("image_size", args.image_size)) if v is not None}
    if arch and args.model not in zoo_names():
        raise SimInputError("--seq-len and --image-size apply only to zoo models")
    return load_model(args.model, io_ms=args.io_ms, h2d_ms=args.h2d_ms, update_ms=args.update_ms, **arch)


def _run_one(args):
    (method, scheduler, architecture), = _runs(args)
    args.scheduler = scheduler
    _check_flags(args, [scheduler])
    extended = {}
    if method is not None or architecture != "allreduce" or _options(args):
        extended = {"method": method, "architecture": architecture, "options": _options(args)}
    return simulate(
        _model(args), _cluster(args, args.gpus), scheduler, batch_size=args.batch_size,
        precision=args.precision, iterations=args.iterations, prefetch=args.prefetch,
        bucket_mb=args.bucket_mb or DEFAULT_BUCKET_MB, calibrate_iteration_s=args.calibrate_iteration_s, **extended,
    )


def _table(metrics: dict) -> str:
    width = max(len(k) for k in metrics)
    lines = []
    for key, value in metrics.items():
        if key == "groups":
            value = " | ".join("+".join(g) for g in value)
        elif isinstance(value, float):
            value = f"{value:.6g}"
        lines.append(f"{key.ljust(width)}  {value}")
    return "\n".join(lines)


def _cmd_run(args, out) -> None:
    res = _run_one(args)
    metrics = _with_stragglers(args, res.metrics) if _straggler_given(args) else res.metrics
    if args.format == "json":
        json.dump(metrics, out, indent=2)
        out.write("\n")
    else:
        out.write(_table(metrics) + "\n")


class _ProgressBar:
    """``sweep [##########..........] 512/1024 configurations, 1.2 s`` on one line of ``stream``."""

    WIDTH = 30

    def __init__(self, stream):
        self.stream = stream
        self.start_s = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        filled = self.WIDTH * done // max(total, 1)
        elapsed_s = time.perf_counter() - self.start_s
        self.stream.write(f"\rsweep [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} "
                          f"configurations, {elapsed_s:.1f} s")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise SimInputError("--dask-address needs dask.distributed (pip install distributed)") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise SimInputError(f"--dask-address: cannot reach a Dask scheduler at {address!r} ({exc})") from None


def _extended_sweep(args, runs) -> pd.DataFrame:
    """A sweep over methods, an architecture or scheduler options: one `simulate` per row."""
    model = _model(args)
    rows = []
    for p in args.gpus:
        for method, scheduler, architecture in runs:
            res = simulate(model, _cluster(args, p), scheduler, batch_size=args.batch_size, precision=args.precision,
                           prefetch=args.prefetch, bucket_mb=args.bucket_mb or DEFAULT_BUCKET_MB,
                           calibrate_iteration_s=args.calibrate_iteration_s, method=method,
                           architecture=architecture, options=_options(args))
            rows.append(res.metrics)
    return pd.DataFrame(rows)


def _cmd_sweep(args, out) -> None:
    runs = _runs(args)
    args.scheduler = [s for _, s, _ in runs]
    _check_flags(args, args.scheduler)
    if args.method or args.architecture == "ps" or _options(args):
        if _straggler_given(args):
            raise SimInputError("straggler flags do not combine with --method, --architecture or scheduler options")
        frame = _extended_sweep(args, runs)
        _write_sweep(args, frame, out)
        return
    if args.jobs is not None and args.dask_address is not None:
        raise SimInputError("--jobs and --dask-address exclude each other: the Dask cluster's workers run the sweep")
    model = _model(args)
    err = sys.stderr
    show = args.progress == "on" or (args.progress == "auto" and err.isatty())
    client = _dask_client(args.dask_address) if args.dask_address else None
    try:
        frame = sweep(
            model, _cluster(args, 1), gpus=args.gpus, schedulers=args.scheduler, batch_size=args.batch_size,
            precision=args.precision, prefetch=args.prefetch, bucket_mb=args.bucket_mb or DEFAULT_BUCKET_MB,
            calibrate_iteration_s=args.calibrate_iteration_s, jobs=args.jobs, client=client,
            progress=_ProgressBar(err) if show else None,
        )
    finally:
        if client is not None:
            client.close()
    if _straggler_given(args):
        frame = _sweep_with_stragglers(args, model, frame)
    _write_sweep(args, frame, out)


def _write_sweep(args, frame: pd.DataFrame, out) -> None:
    if args.format == "json":
        json.dump(frame.to_dict("records"), out, indent=2)
        out.write("\n")
        return
    flat = frame.assign(groups=frame["groups"].map(lambda gs: "|".join("+".join(g) for g in gs)))
    if args.format == "csv":
        flat.to_csv(out, index=False)
    else:
        cols = ["gpus", *(["method"] if "method" in flat.columns else []), "scheduler", "iteration_time_s", "throughput_samples_per_s", "comm_exposed_s",
                "speedup", "scaling_efficiency", "num_messages"]
        cols += [c for c in ("iteration_p50_s", "iteration_p99_s") if c in flat.columns]
        out.write(flat[cols].to_string(index=False) + "\n")


def _cmd_trace(args, out) -> None:
    res = _run_one(args)
    trace = chrome_trace(res.timeline, title=f"{res.metrics['model']} {res.metrics['scheduler']} P={res.metrics['gpus']}")
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            json.dump(trace, fh)
    except OSError as exc:
        raise SimInputError(f"-o: cannot write {args.output!r}: {exc.strerror}") from None
    out.write(f"wrote {len(trace['traceEvents'])} events to {args.output}\n")


def _listing() -> dict[str, list[dict]]:
    models = [zoo_model(name) for name in zoo_names()]
    return {
        "models": [
            {"name": m.name, "layers": m.num_layers, "params": m.total_params, "source": m.source} for m in models
        ],
        "gpus": [
            {"name": g.name, "fp32_tflops": g.fp32_tflops, "tf32_tflops": g.tf32_tflops,
             "fp16_tensor_tflops": g.fp16_tensor_tflops, "mem_bw_gb_per_s": g.mem_bw_gb_per_s,
             "mem_gb": g.mem_gb, "source": g.source}
            for g in gpus().values()
        ],
        "networks": [
            {"name": n.name, "scope": n.scope, "line_rate_gbps": n.line_rate_gbps, "effective_gbps": n.effective_gbps,
             "alpha_s": n.alpha_s, "source": n.source}
            for n in networks().values()
        ],
        "collectives": [{"name": k, "formula": (f.__doc__ or "").strip().splitlines()[0]} for k, f in COLLECTIVES.items()],
        "schedulers": [{"name": k, "description": (f.__doc__ or "").strip().splitlines()[0]} for k, f in SCHEDULERS.items()],
        "methods": method_table(),
    }


def _cmd_list(args, out) -> None:
    listing = _listing()
    chosen = listing if args.what == "all" else {args.what: listing[args.what]}
    if args.format == "json":
        json.dump(chosen if args.what == "all" else chosen[args.what], out, indent=2)
        out.write("\n")
        return
    for what, rows in chosen.items():
        out.write(f"{what}:\n")
        out.write(pd.DataFrame(rows).to_string(index=False) + "\n\n")


def _read_text(path) -> str:
    """A log file's text; an unreadable file is bad input."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SimInputError(f"cannot read {str(path)!r}: {exc.strerror}") from None


def _cmd_fit_network(args, out) -> None:
    import csv
    from pathlib import Path

    from sim.catalog import USER_NETWORKS_ENV, Network, user_networks_path
    from sim.fit import fit_alpha_beta, fit_to_network, parse_allreduce_log

    path = Path(args.file)
    text = _read_text(path)
    points = parse_allreduce_log(text)
    fit = fit_alpha_beta(points["bytes"], points["time_s"], min_bytes=args.min_bytes, weighting=args.weighting)
    ranks = args.gpus or points.attrs.get("ranks")
    result = {
        "file": path.name, "format": points.attrs.get("format"), "ranks": ranks,
        "alpha_s": fit.alpha_s, "beta_s_per_byte": fit.beta_s_per_byte, "r2": fit.r2,
        "n_points": fit.n_points, "min_bytes": fit.min_bytes, "max_bytes": fit.max_bytes, "weighting": fit.weighting,
    }
    if args.save:
        if args.line_rate_gbps is None:
            raise SimInputError("--save needs --line-rate-gbps, the link's nominal rate")
        if not ranks:
            raise SimInputError("--save needs --gpus: the log does not say how many ranks ran")
        row = fit_to_network(fit, args.save, int(ranks), scope=args.scope, line_rate_gbps=args.line_rate_gbps,
                             source=f"fit of {path.name} by python -m sim fit-network")
        Network.from_row(row)  # validate before writing
        target = user_networks_path()
        columns = ["name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source", "note"]
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.stat().st_size == 0:
                with target.open("w", newline="", encoding="utf-8") as fh:
                    csv.DictWriter(fh, fieldnames=columns).writeheader()
            if args.save in networks():
                raise SimInputError(f"--save: a network called {args.save!r} exists already")
            with target.open("a", newline="", encoding="utf-8") as fh:
                csv.DictWriter(fh, fieldnames=columns).writerow({k: row[k] for k in columns})
        except OSError as exc:
            raise SimInputError(f"--save: cannot write {str(target)!r}: {exc.strerror}") from None
        result["saved_as"] = args.save
        result["saved_to"] = f"{target} (set ${USER_NETWORKS_ENV} to use another file)"
        result["preset"] = row
    if args.format == "json":
        json.dump(result, out, indent=2)
        out.write("\n")
    else:
        out.write(_table({k: v for k, v in result.items() if k != "preset"}) + "\n")


def _cmd_import_bcaffe(args, out) -> None:
    from pathlib import Path

    from sim.importers import bcaffe_layers

    path = Path(args.log)
    text = _read_text(path)
    table = bcaffe_layers(text, where=path.name, dump=args.dump)
    try:
        table.to_csv(args.output, index=False)
    except OSError as exc:
        raise SimInputError(f"-o: cannot write {args.output!r}: {exc.strerror}") from None
    out.write(
        f"wrote {len(table)} layers ({int(table['params'].sum()):,} params, backward {table['bwd_ms'].sum():.1f} ms, "
        f"all-reduce {table['comm_ms'].sum():.1f} ms) to {args.output}\n"
    )


def _cmd_validate(args, out) -> None:
    from sim.validation import coarse_versus_fine, load_cases, run_validation, summarize

    cases = load_cases()
    if args.source is not None:
        if args.source not in set(cases["source"]):
            raise SimInputError(f"--source: unknown source {args.source!r}; valid: {', '.join(sorted(set(cases['source'])))}")
        cases = cases.loc[cases["source"] == args.source]
    results = run_validation(cases, reference_dir=args.reference)
    summary = summarize(results)
    coarse = coarse_versus_fine(results) if (results["status"] == "ok").sum() >= 2 else {}
    columns = ["case", "source", "measured", "simulated", "error_pct", "status"]
    if args.format == "json":
        payload = {"cases": results[columns + ["citation"]].to_dict("records"), "summary": summary.to_dict("records"),
                   "coarse_vs_fine": coarse}
        json.dump(payload, out, indent=2, default=lambda v: None)
        out.write("\n")
    elif args.format == "csv":
        results[columns + ["citation"]].to_csv(out, index=False)
    else:
        out.write(results[columns].to_string(index=False, float_format=lambda v: f"{v:.2f}") + "\n\n")
        out.write(summary.to_string(index=False, float_format=lambda v: f"{v:.2f}") + "\n")
        if coarse:
            out.write("\ncoarse-grained predictor (Li et al. 2022) beside this DAG model:\n" + _table(coarse) + "\n")


def _cmd_gap(args, out) -> None:
    from sim.gap import gap_study

    cases = gap_study(args.trials, seed=args.seed, gpus=args.gpus)
    if args.format == "csv":
        cases.to_csv(out, index=False)
        return
    worse = cases.loc[cases["gap"] > 1e-9, "gap"]
    summary = {
        "trials": len(cases),
        "seed": args.seed,
        "mgwfbp_slower_fraction": len(worse) / len(cases),
        "gap_mean_pct": 100 * float(cases["gap"].mean()),
        "gap_median_pct_when_slower": 100 * float(worse.median()) if len(worse) else 0.0,
        "gap_p95_pct_when_slower": 100 * float(worse.quantile(0.95)) if len(worse) else 0.0,
        "gap_max_pct": 100 * float(cases["gap"].max()),
    }
    if args.format == "json":
        json.dump(summary, out, indent=2)
        out.write("\n")
    else:
        out.write(_table(summary) + "\n")


# --- stragglers (run, sweep) and the seven algorithms ---------------------------------

#: Iterations the per-worker engine runs for --straggler-* statistics (at least).
STRAGGLER_ITERATIONS = 100


def _add_straggler_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("stragglers (any of these switches to the per-worker engine, sim.workers)")
    g.add_argument("--straggler-dist", choices=["constant", "normal", "lognormal", "exponential"], default=None,
                   help="distribution of each worker's compute time per iteration (mean 1)")
    g.add_argument("--straggler-cv", type=_nonneg_float, default=None, help="its coefficient of variation")
    g.add_argument("--stragglers", type=_positive_int, default=None, help="number of persistently slow workers")
    g.add_argument("--straggler-factor", type=_positive_float, default=None,
                   help="how many times slower they compute (default 2 with --stragglers)")
    g.add_argument("--straggler-jitter-cv", type=_nonneg_float, default=None,
                   help="coefficient of variation of a lognormal factor on every message's time")
    g.add_argument("--seed", type=_nonneg_int, default=None, help="seed of every random draw (default 0)")


def _nonneg_int(text: str) -> int:
    return _int_at_least(text, 0)


def _straggler_given(args) -> bool:
    names = ("straggler_dist", "straggler_cv", "stragglers", "straggler_factor", "straggler_jitter_cv", "seed")
    return any(getattr(args, n, None) is not None for n in names)


def _straggler_spec(args, gpus: list[int]):
    """The `StragglerSpec` the flags describe; errors name the flag."""
    from sim.workers import StragglerSpec

    dist = args.straggler_dist or "constant"
    cv = args.straggler_cv
    if cv is not None and dist == "constant":
        raise SimInputError("--straggler-cv needs --straggler-dist normal, lognormal or exponential")
    if dist != "constant" and cv is None:
        raise SimInputError(f"--straggler-dist {dist} needs --straggler-cv (its coefficient of variation)")
    if dist == "exponential" and cv > 1:
        raise SimInputError(f"--straggler-cv must be <= 1 for --straggler-dist exponential, got {cv:g}")
    if cv is not None and cv > 2:
        raise SimInputError(f"--straggler-cv must be <= 2, got {cv:g}")
    if args.straggler_factor is not None and args.stragglers is None:
        raise SimInputError("--straggler-factor needs --stragglers K")
    factor = args.straggler_factor if args.straggler_factor is not None else 2.0
    if not 1 <= factor <= 1000:
        raise SimInputError(f"--straggler-factor must be from 1 to 1000 (times slower), got {factor:g}")
    k = args.stragglers or 0
    if k > min(gpus):
        raise SimInputError(f"--stragglers {k} exceeds --gpus {min(gpus)}")
    jitter = args.straggler_jitter_cv or 0.0
    if jitter > 2:
        raise SimInputError(f"--straggler-jitter-cv must be <= 2, got {jitter:g}")
    return StragglerSpec(dist=dist, cv=cv or 0.0, stragglers=k, factor=factor if k else 1.0, jitter_cv=jitter)


def _worker_run(args, model, gpus: int, scheduler: str, spec):
    from sim.workers import simulate_workers

    return simulate_workers(
        model, _cluster(args, gpus), scheduler, batch_size=args.batch_size, straggler=spec,
        iterations=max(getattr(args, "iterations", 1), STRAGGLER_ITERATIONS), seed=args.seed or 0,
        precision=args.precision, prefetch=args.prefetch, bucket_mb=args.bucket_mb or DEFAULT_BUCKET_MB,
        calibrate_iteration_s=args.calibrate_iteration_s,
    )


def _straggler_metrics(metrics: dict, wm: dict) -> dict:
    """Plain metrics with the iteration time (and what follows from it) from the per-worker engine."""
    t = wm["iteration_time_s"]
    out = dict(metrics)
    out.update(
        iteration_time_s=t, throughput_samples_per_s=wm["throughput_samples_per_s"],
        speedup=metrics["gpus"] * metrics["single_gpu_iteration_time_s"] / t,
        scaling_efficiency=metrics["single_gpu_iteration_time_s"] / t,
    )
    keys = ("iteration_p50_s", "iteration_p99_s", "ideal_iteration_time_s", "straggler_slowdown", "wait_mean_s",
            "seed", "straggler_dist", "straggler_cv", "stragglers", "straggler_factor", "jitter_cv",
            "straggler_workers")
    out.update({k: wm[k] for k in keys})
    out["straggler_iterations"] = wm["iterations"]
    return out


def _with_stragglers(args, metrics: dict) -> dict:
    spec = _straggler_spec(args, [args.gpus])
    wr = _worker_run(args, _model(args), args.gpus, args.scheduler, spec)
    return _straggler_metrics(metrics, wr.metrics)


def _sweep_with_stragglers(args, model, frame: pd.DataFrame) -> pd.DataFrame:
    spec = _straggler_spec(args, list(args.gpus))
    rows = []
    for row in frame.to_dict("records"):
        wr = _worker_run(args, model, int(row["gpus"]), row["scheduler"], spec)
        rows.append(_straggler_metrics(row, wr.metrics))
    return pd.DataFrame(rows)


def _add_algorithms_parser(sub) -> None:
    from sim.algorithms import ALGORITHMS

    al = sub.add_parser("algorithms", help="BSP, ASP, SSP, EASGD, AR-SGD, GoSGD, AD-PSGD: speed and accuracy")
    al.add_argument("--model", required=True, help="zoo name or path to a layer CSV")
    al.add_argument("--gpus", type=_positive_int, default=16, help="workers P")
    al.add_argument("--gpus-per-node", type=_positive_int, default=1, help="GPUs per node (AR-SGD's collective)")
    al.add_argument("--gpu", default="v100-sxm2", help="GPU type, for the estimated compute times of zoo models")
    al.add_argument("--network", default="10gbe", help="network preset: every worker's and the server's link")
    al.add_argument("--intra", default="pcie3", help="intra-node link preset (AR-SGD)")
    al.add_argument("--collective", default="ring", help=f"AR-SGD's all-reduce: one of {', '.join(COLLECTIVES)}")
    al.add_argument("--batch-size", type=_positive_int, default=32, help="samples per worker per step")
    al.add_argument("--precision", choices=list(BYTES_PER_PARAM), default="fp32", help="parameter width on the wire")
    al.add_argument("--algorithms", type=_name_list, default=list(ALGORITHMS), help="e.g. BSP,ASP,AR-SGD")
    al.add_argument("--steps", type=_positive_int, default=100, help="gradients per worker (the budget is P x steps)")
    al.add_argument("--staleness", type=_nonneg_int, default=3, help="SSP's staleness bound s")
    al.add_argument("--tau", type=_positive_int, default=4, help="EASGD's communication period, in steps")
    al.add_argument("--gossip-p", type=_nonneg_float, default=0.5, help="GoSGD's probability of gossip per step")
    al.add_argument("--lr", type=_positive_float, default=None, help="learning rate of the training replay (default 0.5)")
    al.add_argument("--target-accuracy", type=_positive_float, default=None,
                    help="for time-to-accuracy (default: the dataset's Bayes accuracy - 0.02)")
    al.add_argument("--format", choices=["json", "csv", "table"], default="table")
    _add_straggler_flags(al)


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _cmd_algorithms(args, out) -> None:
    from sim.algorithms import ALGORITHMS, AlgorithmConfig
    from sim.training import DEFAULT_LR, compare_algorithms

    for name in args.algorithms:
        if name not in ALGORITHMS:
            raise SimInputError(f"--algorithms: unknown algorithm {name!r}; valid: {', '.join(ALGORITHMS)}")
    if args.steps < 2:
        raise SimInputError("--steps must be >= 2")
    if args.gossip_p > 1:
        raise SimInputError(f"--gossip-p must be from 0 to 1, got {args.gossip_p:g}")
    if args.target_accuracy is not None and args.target_accuracy > 1:
        raise SimInputError(f"--target-accuracy must be at most 1, got {args.target_accuracy:g}")
    spec = _straggler_spec(args, [args.gpus])
    cluster = Cluster(gpus=args.gpus, gpus_per_node=args.gpus_per_node, network=args.network, intra=args.intra,
                      collective=args.collective, gpu=args.gpu)
    config = AlgorithmConfig(staleness=args.staleness, tau=args.tau, gossip_p=args.gossip_p)
    comparison = compare_algorithms(
        load_model(args.model), cluster, batch_size=args.batch_size, algorithms=args.algorithms, steps=args.steps,
        seed=args.seed or 0, straggler=spec, config=config, precision=args.precision,
        lr=args.lr or DEFAULT_LR, target_accuracy=args.target_accuracy,
    )
    table = comparison.table
    if args.format == "json":
        json.dump([_json_safe(r) for r in table.to_dict("records")], out, indent=2)
        out.write("\n")
    elif args.format == "csv":
        table.to_csv(out, index=False)
    else:
        cols = ["algorithm", "throughput_samples_per_s", "time_to_accuracy_s", "final_accuracy", "bytes_per_worker",
                "server_bytes", "server_link_utilisation", "staleness_mean", "staleness_max"]
        out.write(table[cols].to_string(index=False) + "\n")
        out.write(f"target accuracy {comparison.target_accuracy:.4f} (Bayes {comparison.bayes_accuracy:.4f}); "
                  f"{args.steps} steps per worker, seed {args.seed or 0}\n")


def _cmd_tune(args, out) -> None:
    from sim.tune import tune

    method = args.method
    if args.scheduler and method:
        raise SimInputError("--method sets the scheduler: give --method or --scheduler, not both")
    res = tune(_model(args), _cluster(args, args.gpus), args.knob, args.values, batch_size=args.batch_size,
               scheduler=args.scheduler, method=method, architecture=args.architecture or "allreduce",
               options=_options(args), precision=args.precision, bucket_mb=args.bucket_mb or DEFAULT_BUCKET_MB)
    if args.format == "json":
        json.dump({"best": _json_safe(res.best), "rows": [_json_safe(r) for r in res.frame.to_dict("records")]},
                  out, indent=2, default=float)
        out.write("\n")
        return
    out.write(res.frame.to_string(index=False) + "\n")
    b = res.best
    out.write(f"best {b['knob']} = {b['value']:g}: {b['iteration_time_s'] * 1e3:.3f} ms per iteration, "
              f"{b['gain_pct']:+.2f} % against the default {b['default_value']:g} "
              f"({b['default_iteration_time_s'] * 1e3:.3f} ms)\n")


COMMANDS = {"tune": _cmd_tune, "run": _cmd_run, "sweep": _cmd_sweep, "trace": _cmd_trace, "list": _cmd_list, "gap": _cmd_gap, "fit-network": _cmd_fit_network,
            "import-bcaffe": _cmd_import_bcaffe, "validate": _cmd_validate, "algorithms": _cmd_algorithms}


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        COMMANDS[args.command](args, out)
    except SimInputError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    return 0
