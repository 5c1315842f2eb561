"""``python -m sim tune``: sweep one scheduler knob; the best value and its gain over the default."""

from __future__ import annotations

from sim.cli.args import float_list, write_json
from sim.cli.workload import (
    add_workload_flags,
    bucket_mb,
    check_cluster_flags,
    check_not_blank,
    cluster,
    given_knobs,
    model,
    options,
)
from sim.errors import SimInputError
from sim.schedulers.knobs import KNOBS
from sim.schedulers.registry import check_knobs_apply

NAME = "tune"
HELP = "sweep one scheduler knob; print the best value and its gain over the default"


def add_arguments(parser) -> None:
    from sim.tune import KNOBS as TUNABLE

    add_workload_flags(parser, many=False)
    parser.add_argument("--knob", required=True, choices=list(TUNABLE))
    parser.add_argument("--values", required=True, type=float_list, help="values to try, e.g. 1,5,25,100")
    parser.add_argument("--format", choices=["json", "table"], default="table")


def run(args, out) -> None:
    from sim.tune import tune, tune_setup

    check_not_blank(args)
    if args.scheduler and args.method:
        raise SimInputError("--method sets the scheduler: give --method or --scheduler, not both")
    scheduler, architecture, _ = tune_setup(args.knob, scheduler=args.scheduler, method=args.method,
                                            architecture=args.architecture, options=options(args))
    check_cluster_flags(args, [architecture])
    check_knobs_apply(given_knobs(args), [(scheduler, architecture)], label=lambda k: KNOBS[k].flag)
    res = tune(model(args), cluster(args, args.gpus), args.knob, args.values, batch_size=args.batch_size,
               scheduler=args.scheduler, method=args.method, architecture=args.architecture,
               options=options(args), precision=args.precision, bucket_mb=bucket_mb(args))
    if args.format == "json":
        write_json({"best": res.best, "rows": res.frame.to_dict("records")}, out)
        return
    out.write(res.frame.to_string(index=False) + "\n")
    b = res.best
    out.write(f"best {b['knob']} = {_g(b['value'])}: {b['iteration_time_s'] * 1e3:.3f} ms per iteration, "
              f"{b['gain_pct']:+.2f} % against the default {_g(b['default_value'])} "
              f"({b['default_iteration_time_s'] * 1e3:.3f} ms)\n")
    if b["same_for_every_value"]:
        out.write(f"every value gives the default's iteration time: {b['knob']} does not change the timing of this "
                  "configuration\n")


def _g(value) -> str:
    return "default" if value is None else f"{value:g}"
