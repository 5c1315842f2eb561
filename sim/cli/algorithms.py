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
from sim.cluster import Cluster
from sim.comm import COLLECTIVES
from sim.errors import SimInputError
from sim.model import BYTES_PER_PARAM, load_model

NAME = "algorithms"
HELP = "BSP, ASP, SSP, EASGD, AR-SGD, GoSGD, AD-PSGD: speed and accuracy"
TABLE_COLUMNS = ["algorithm", "throughput_samples_per_s", "time_to_accuracy_s", "final_accuracy", "bytes_per_worker",
                 "server_bytes", "server_link_utilisation", "staleness_mean", "staleness_max"]


def add_arguments(al) -> None:
    from sim.algorithms import ALGORITHMS

    al.add_argument("--model", required=True, help="zoo name or path to a layer CSV")
    al.add_argument("--gpus", type=positive_int, default=16, help="workers P")
    al.add_argument("--gpus-per-node", type=positive_int, default=1, help="GPUs per node (AR-SGD's collective)")
    al.add_argument("--gpu", default="v100-sxm2", help="GPU type, for the estimated compute times of zoo models")
    al.add_argument("--network", default="10gbe", help="network preset: every worker's and the server's link")
    al.add_argument("--intra", default="pcie3", help="intra-node link preset (AR-SGD)")
    al.add_argument("--collective", default="ring", help=f"AR-SGD's all-reduce: one of {', '.join(COLLECTIVES)}")
    al.add_argument("--batch-size", type=positive_int, default=32, help="samples per worker per step")
    al.add_argument("--precision", choices=list(BYTES_PER_PARAM), default="fp32", help="parameter width on the wire")
    al.add_argument("--algorithms", type=name_list, default=list(ALGORITHMS), help="e.g. BSP,ASP,AR-SGD")
    al.add_argument("--steps", type=positive_int, default=100, help="gradients per worker (the budget is P x steps)")
    al.add_argument("--staleness", type=nonneg_int, default=3, help="SSP's staleness bound s")
    al.add_argument("--tau", type=positive_int, default=4, help="EASGD's communication period, in steps")
    al.add_argument("--gossip-p", type=nonneg_float, default=0.5, help="GoSGD's probability of gossip per step")
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
    if args.gossip_p > 1:
        raise SimInputError(f"--gossip-p must be from 0 to 1, got {args.gossip_p:g}")
    if args.target_accuracy is not None and args.target_accuracy > 1:
        raise SimInputError(f"--target-accuracy must be at most 1, got {args.target_accuracy:g}")


def run(args, out) -> None:
    from sim.algorithms import AlgorithmConfig
    from sim.training import DEFAULT_LR, compare_algorithms

    check(args)
    spec = straggler_spec(args, [args.gpus])
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
        write_json(table.to_dict("records"), out)
    elif args.format == "csv":
        table.to_csv(out, index=False)
    else:
        out.write(table[TABLE_COLUMNS].to_string(index=False) + "\n")
        out.write(f"target accuracy {comparison.target_accuracy:.4f} (Bayes {comparison.bayes_accuracy:.4f}); "
                  f"{args.steps} steps per worker, seed {args.seed or 0}\n")
