"""``python -m sim algorithms``: BSP, ASP, SSP, EASGD, AR-SGD, GoSGD and AD-PSGD, speed and accuracy."""

from __future__ import annotations

from sim.cli.args import (
    name_list,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    write_json,
)
from sim.cli.stragglers import add_straggler_flags, straggler_spec
from sim.cli.workload import PRECISION_HELP, add_size_regimes_flag, add_tree_chunk_flag
from sim.cluster import Cluster
from sim.comm import COLLECTIVES
from sim.errors import SimInputError
from sim.model import BYTES_PER_PARAM, load_model

NAME = "algorithms"
HELP = "BSP, ASP, SSP, EASGD, AR-SGD, GoSGD, AD-PSGD: speed and accuracy"
#: Flags read by some algorithms only: given for none of the selected ones, they are an error.
FLAG_USERS = {"--staleness": ("SSP",), "--tau": ("EASGD",), "--gossip-p": ("GoSGD",),
              "--collective": ("AR-SGD",), "--intra": ("AR-SGD",), "--gpus-per-node": ("AR-SGD",)}
CONFIG_FLAGS = ("staleness", "tau", "gossip_p")
TABLE_COLUMNS = ["algorithm", "throughput_samples_per_s", "time_to_accuracy_s", "final_accuracy", "bytes_per_worker",
                 "server_bytes", "server_link_utilisation", "staleness_mean", "staleness_max"]


def add_arguments(al) -> None:
    from sim.algorithms import ALGORITHMS

    al.add_argument("--model", required=True, help="zoo name or path to a layer CSV")
    al.add_argument("--gpus", type=positive_int, default=16, help="workers P")
    al.add_argument("--gpus-per-node", type=positive_int, default=None, help="GPUs per node (AR-SGD's collective; default 1)")
    al.add_argument("--gpu", default=None, help="GPU type, for the estimated compute times of zoo models (default v100-sxm2)")
    al.add_argument("--network", default=None, help="network preset: every worker's and the server's link (default 10gbe)")
    al.add_argument("--intra", default=None, help="intra-node link preset (AR-SGD; default pcie3)")
    al.add_argument("--collective", default=None, help=f"AR-SGD's all-reduce: one of {', '.join(COLLECTIVES)} (default ring)")
    add_tree_chunk_flag(al)
    add_size_regimes_flag(al)
    al.add_argument("--batch-size", type=positive_int, default=32, help="samples per worker per step")
    al.add_argument("--precision", choices=list(BYTES_PER_PARAM), default="fp32", help=PRECISION_HELP)
    al.add_argument("--algorithms", type=name_list, default=list(ALGORITHMS), help="e.g. BSP,ASP,AR-SGD")
    al.add_argument("--steps", type=positive_int, default=100, help="gradients per worker (the budget is P x steps)")
    al.add_argument("--staleness", type=nonneg_int, default=None, help="SSP's staleness bound s (default 3)")
    al.add_argument("--tau", type=positive_int, default=None, help="EASGD's communication period, in steps (default 4)")
    al.add_argument("--gossip-p", type=nonneg_float, default=None,
                    help="GoSGD's probability of gossip per step (default 0.5)")
    al.add_argument("--lr", type=positive_float, default=None, help="learning rate of the training replay (default 0.5)")
    al.add_argument("--target-accuracy", type=positive_float, default=None,
                    help="for time-to-accuracy (default: the dataset's Bayes accuracy - 0.02)")
    al.add_argument("--format", choices=["json", "csv", "table"], default="table")
    add_straggler_flags(al)


def check(args) -> None:
    from sim.algorithms import ALGORITHMS

    for name in args.algorithms:
        if name not in ALGORITHMS:
            raise SimInputError(f"--algorithms: unknown algorithm {name!r}; valid: {', '.join(ALGORITHMS)}")
    if args.steps < 2:
        raise SimInputError("--steps must be >= 2")
    for flag, users in FLAG_USERS.items():
        if getattr(args, flag.removeprefix("--").replace("-", "_")) is not None and not set(users) & set(args.algorithms):
            raise SimInputError(f"{flag} does nothing for {', '.join(args.algorithms)}; it applies to: {', '.join(users)}")
    if args.gossip_p is not None and args.gossip_p > 1:
        raise SimInputError(f"--gossip-p must be from 0 to 1, got {args.gossip_p:g}")
    if args.target_accuracy is not None and args.target_accuracy > 1:
        raise SimInputError(f"--target-accuracy must be at most 1, got {args.target_accuracy:g}")


def run(args, out) -> None:
    from sim.algorithms import AlgorithmConfig
    from sim.training import DEFAULT_LR, compare_algorithms

    check(args)
    spec = straggler_spec(args, [args.gpus])
    given = {k: getattr(args, k) for k in ("gpus_per_node", "network", "intra", "collective", "gpu", "staleness", "tau",
                                           "gossip_p", "tree_chunk_bytes", "size_regimes") if getattr(args, k) is not None}
    cluster = Cluster(gpus=args.gpus, **{k: v for k, v in given.items() if k not in CONFIG_FLAGS})
    config = AlgorithmConfig(**{k: v for k, v in given.items() if k in CONFIG_FLAGS})
    the_model = load_model(args.model)
    if args.gpu is not None and the_model.is_timed:
        raise SimInputError("--gpu does nothing for a layer CSV: its compute times are given, not estimated")
    comparison = compare_algorithms(
        the_model, cluster, batch_size=args.batch_size, algorithms=args.algorithms, steps=args.steps,
        seed=args.seed or 0, straggler=spec, config=config, precision=args.precision,
        lr=args.lr or DEFAULT_LR, target_accuracy=args.target_accuracy,
    )
    table = comparison.table
    if args.format == "json":
        write_json(table.to_dict("records"), out)
    elif args.format == "csv":
        table.to_csv(out, index=False)
    else:
        out.write(table[TABLE_COLUMNS].to_string(index=False) + "\n")
        out.write(f"target accuracy {comparison.target_accuracy:.4f} (Bayes {comparison.bayes_accuracy:.4f}); "
                  f"{args.steps} steps per worker, seed {args.seed or 0}\n")
