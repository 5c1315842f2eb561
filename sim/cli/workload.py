"""The flags that describe one workload (run, sweep, trace, tune) and what they resolve to.

Every scheduler knob's flag is generated from `sim.schedulers.knobs.KNOBS`;
a knob given for runs that do not read it is an error naming who does.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings
from dataclasses import fields

from sim.api import ARCHITECTURES, simulate
from sim.cli.args import (
    add_gradients_flag,
    int_list,
    knob_type,
    name_list,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
)
from sim.cluster import Cluster
from sim.comm import CHUNKED, COLLECTIVES
from sim.compression import parse_compression
from sim.errors import SimInputError, SimInputWarning
from sim.frameworks import framework_names
from sim.model import BYTES_PER_PARAM, HF_PREFIX, PRECISIONS, load_model, zoo_names
from sim.runs import (
    DEFAULT_ARCHITECTURE,
    DEFAULT_SCHEDULER,
    DEFAULT_SWEEP_SCHEDULERS,
    Run,
    resolve_runs,
)
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, KNOBS
from sim.schedulers.registry import PS_ARCHITECTURE, check_knobs_apply, knob_users, scheduler_names
from sim.topology import network_regimes

__all__ = ["add_compression_flag", "add_knob_flags", "add_workload_flags", "bucket_mb", "check_cluster_flags", "check_not_blank", "checked_runs", "cluster", "model", "options",
           "run_one"]

#: ``--precision``'s help: each precision and what it computes and sends (`sim.precision.PRECISIONS`).
PRECISION_HELP = "; ".join(f"{name}: {meaning}" for name, meaning in PRECISIONS.items())


def add_workload_flags(p: argparse.ArgumentParser, *, many: bool) -> None:
    p.add_argument("--model", required=True, help="zoo name, path to a layer CSV (name,params,fwd_ms,bwd_ms) or "
                                                  "hf:PATH/config.json (a Hugging Face BERT, GPT-2, Llama or Mistral)")
    add_gradients_flag(p)
    if many:
        p.add_argument("--gpus", type=int_list, default=[1, 2, 4, 8, 16], help="GPU counts, e.g. 1,2,4,8")
        p.add_argument("--scheduler", type=name_list, default=None,
                       help=f"schedulers, e.g. {','.join(DEFAULT_SWEEP_SCHEDULERS)} "
                            f"(default {','.join(DEFAULT_SWEEP_SCHEDULERS)})")
        p.add_argument("--method", type=name_list, default=None,
                       help="survey methods instead of schedulers, e.g. BSP-A2A,BSP-PS (python -m sim list methods)")
    else:
        p.add_argument("--gpus", type=positive_int, default=1, help="number of GPUs P")
        p.add_argument("--scheduler", default=None,
                       help=f"one of {', '.join(scheduler_names())} (default {DEFAULT_SCHEDULER})")
        p.add_argument("--method", default=None,
                       help="a survey method (architecture + scheduler + settings), e.g. BSP-PS; see list methods")
    p.add_argument("--gpus-per-node", type=positive_int, default=1, help="GPUs per node (sharing one NIC)")
    p.add_argument("--gpu", default=None, help="GPU type, for the estimated compute times of zoo models "
                                                "(default v100-sxm2)")
    p.add_argument("--calibrate-iteration-s", type=positive_float, default=None,
                   help="measured one-GPU iteration time at this batch size; compute times are scaled to match")
    p.add_argument("--seq-len", type=positive_int, default=None, help="sequence length of a transformer zoo model")
    p.add_argument("--image-size", type=positive_int, default=None, help="input image side of a CNN zoo model")
    p.add_argument("--network", default=None, help=f"inter-node network preset (default {DEFAULTS['network']})")
    p.add_argument("--intra", default=None, help=f"intra-node link preset (default {DEFAULTS['intra']})")
    p.add_argument("--collective", default=None, help=f"one of {', '.join(COLLECTIVES)} (default ring)")
    p.add_argument("--framework", default=None,
                   help=f"per-message costs of the training framework: one of {', '.join(framework_names())} "
                        "(default auto: the scheduler's reference framework; none: the links alone; ddp is pytorch-ddp)")
    p.add_argument("--launch-us", type=nonneg_float, default=None,
                   help="override the framework's launch cost per message, microseconds")
    p.add_argument("--no-interference", dest="interference", action="store_const", const=False, default=None,
                   help="compute does not slow while communication overlaps it, nor communication while compute "
                        "does (default: by the link's compute_slowdown and comm_slowdown, data/interference.csv)")
    p.add_argument("--compute-slowdown", type=nonneg_float, default=None,
                   help="override the link's interference coefficient: overlapped compute runs 1 + this x the "
                        "overlapped fraction times as long (0 to 1)")
    p.add_argument("--comm-slowdown", type=nonneg_float, default=None, help="override the link's coefficient the "
                   "other way: a message makes 1 / (1 + this) of its progress while its worker computes (0 to 10)")
    p.add_argument("--sync-jitter-cv", type=nonneg_float, default=None,
                   help="per-iteration jitter of each GPU's compute (coefficient of variation): a step waits for "
                        "the slowest GPU (default: the fitted value, data/sync_jitter.csv; 0 turns it off)")
    add_link_flags(p)
    add_topology_flags(p)
    p.add_argument("--batch-size", type=positive_int, default=32, help="samples per GPU per iteration")
    p.add_argument("--precision", choices=list(BYTES_PER_PARAM), default="fp32", help=PRECISION_HELP)
    p.add_argument("--alpha", type=nonneg_float, default=None, help="all-reduce start-up time, seconds")
    p.add_argument("--beta", type=nonneg_float, default=None, help="all-reduce time per byte, seconds")
    p.add_argument("--architecture", choices=list(ARCHITECTURES), default=None,
                   help="all-reduce among workers (default) or parameter servers")
    add_knob_flags(p)
    p.add_argument("--iterations", type=positive_int, default=1, help="iterations in the timeline")
    p.add_argument("--prefetch", action="store_true", help="overlap io/h2d of the next iteration")
    p.add_argument("--io-ms", type=nonneg_float, default=0.0, help="data read time per iteration, ms")
    p.add_argument("--h2d-ms", type=nonneg_float, default=0.0, help="host-to-device copy time per iteration, ms")
    p.add_argument("--update-ms", type=nonneg_float, default=0.0, help="parameter update time per iteration, ms")


def add_compression_flag(p: argparse.ArgumentParser) -> None:
    """``--compression`` (run, sweep, trace): gradient compression of an all-reduce scheduler."""
    p.add_argument("--compression", default=None, metavar="KIND",
                   help="gradient compression of an all-reduce scheduler: fp16, bf16, topk:RATIO (0 < RATIO <= 1) "
                        "or powersgd:RANK (see sim.compression)")


def compression_of(args) -> dict:
    """``{"compression": ...}`` when the flag is given (checked here, so that its error names the flag)."""
    text = getattr(args, "compression", None)
    if text is None:
        return {}
    return {"compression": parse_compression(text, "--compression")}


def refuse_compression_with_stragglers(args, straggling: bool) -> None:
    if straggling and getattr(args, "compression", None) is not None:
        raise SimInputError("--compression does not combine with the straggler flags (the per-worker engine "
                            "does not compress)")


def add_tree_chunk_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tree-chunk-bytes", type=nonneg_float, default=None,
                   help="the chunk NCCL's tree pipelines a message in (collectives double_binary_tree and nccl): "
                        "the pipeline fills with one chunk through every hop (default 262144, NCCL's cost model; "
                        "0 leaves the fill out)")


def add_size_regimes_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size-regimes", action=argparse.BooleanOptionalAction, default=None,
                   help="use a link preset's measured size-regime table (data/network_regimes.csv) where it "
                        "has one (the default); --no-size-regimes keeps the preset's one alpha-beta line")


def add_link_flags(p: argparse.ArgumentParser) -> None:
    """The flags that change how the links cost a message: the tree's chunk and the presets' rates."""
    add_tree_chunk_flag(p)
    p.add_argument("--network-gbps", type=positive_float, default=None,
                   help="override the network preset's effective rate, Gb/s")
    p.add_argument("--intra-gbps", type=positive_float, default=None,
                   help="override the intra-node preset's effective rate, Gb/s")


def add_topology_flags(p: argparse.ArgumentParser) -> None:
    """Size regimes and node topology (`sim.cluster.Cluster`); the defaults: a preset's measured size regimes where
    it has a table, a flat node."""
    add_size_regimes_flag(p)
    p.add_argument("--topology", default=None, help="node topology preset: flat (default), dgx1, dgx1-4nic, pcie-2socket")
    p.add_argument("--nics-per-node", type=positive_int, default=None, help="NICs per node (overrides the topology)")
    p.add_argument("--nic-near-gpus", type=nonneg_int, default=None,
                   help="GPUs of a node that reach the NIC directly (overrides the topology)")
    p.add_argument("--nic-path", default=None,
                   help="link preset the other GPUs cross to reach the NIC, e.g. pcie3 (overrides the topology)")


TOPOLOGY_FLAGS = ("size_regimes", "topology", "nics_per_node", "nic_near_gpus", "nic_path")


def add_knob_flags(p: argparse.ArgumentParser) -> None:
    """One flag per knob of the registry, with its type, bounds, unit and who reads it."""
    for knob in KNOBS.values():
        default = "" if knob.default in (None, False) else f" (default {knob.default:g})"
        text = f"{', '.join(knob_users(knob.name))}: {knob.help}{default}"
        if knob.kind is bool:
            p.add_argument(knob.flag, action="store_true", default=None, help=text)
        else:
            p.add_argument(knob.flag, type=knob_type(knob), default=None, metavar=(knob.unit or "N").upper(),
                           help=text)


def given_knobs(args) -> list[str]:
    return [k for k in KNOBS if getattr(args, k, None) is not None]


def options(args) -> dict | None:
    """The `SchedulerOptions` fields the flags set, or None."""
    opts = {k: getattr(args, k) for k in KNOBS if k != "bucket_mb" and getattr(args, k, None) is not None}
    return opts or None


def bucket_mb(args) -> float:
    return args.bucket_mb or DEFAULT_BUCKET_MB


def check_not_blank(args) -> None:
    """An empty ``--scheduler ''`` or ``--method ''`` is a mistake, not the default."""
    for flag in ("scheduler", "method"):
        value = getattr(args, flag, None)
        if isinstance(value, str) and not value.strip():
            raise SimInputError(f"--{flag}: empty name; leave the flag out for the default")


def checked_runs(args, *, default=None) -> list[Run]:
    """The runs the flags ask for; every flag is checked against them."""
    check_not_blank(args)
    methods = args.method if isinstance(args.method, list) else ([args.method] if args.method else [])
    given = args.scheduler if isinstance(args.scheduler, list) else ([args.scheduler] if args.scheduler else [])
    if methods and given:
        raise SimInputError("--method sets the scheduler: give --method or --scheduler, not both")
    if methods and args.architecture is not None:
        raise SimInputError("--method sets the architecture: give --method or --architecture, not both")
    flag = "--method" if methods else "--scheduler"
    if default is None:
        default = DEFAULT_SWEEP_SCHEDULERS if isinstance(args.scheduler, list) else (DEFAULT_SCHEDULER,)
    try:
        runs = resolve_runs(methods, given, args.architecture, default=default)
    except SimInputError as exc:
        raise SimInputError(f"{flag}: {exc}") from None
    check_knobs_apply(given_knobs(args), [(r.scheduler, r.architecture) for r in runs], label=lambda k: KNOBS[k].flag)
    check_cluster_flags(args, [r.architecture for r in runs])
    return runs


def check_cluster_flags(args, architectures) -> None:
    """--alpha/--beta replace the links and the collective; a parameter server has no collective."""
    if (args.alpha is None) != (args.beta is None):
        raise SimInputError("--alpha and --beta go together: give both or neither")
    for flag in ("network", "intra", "collective", "framework", "launch_us", "network_gbps", "intra_gbps",
                 "tree_chunk_bytes", *TOPOLOGY_FLAGS):
        value = getattr(args, flag, None)
        if args.alpha is not None and value is not None:  # 0 and False (--no-size-regimes) are values given too
            name = ("no-" if value is False else "") + flag.replace("_", "-")
            raise SimInputError(f"--{name} does nothing with --alpha/--beta (they replace the "
                                "links, the collective and the framework): give one or the other")
    if args.collective is not None and architectures and all(a == PS_ARCHITECTURE for a in architectures):
        raise SimInputError("--collective does nothing with a parameter server (push and pull, no all-reduce)")
    warn_unused_links(args)


def warn_unused_links(args) -> None:
    """A link or collective that describes the cluster but that this run does not use (every GPU in one
    node, one GPU per node, one GPU) is valid: a script describes its cluster once and varies the GPU
    count. It does nothing here, so the run says so (`SimInputWarning`, a ``warning:`` line) and goes on."""
    gpus = args.gpus if isinstance(args.gpus, list) else [args.gpus]
    unused = []
    if args.intra is not None and args.gpus_per_node == 1:
        unused.append("--intra does nothing with one GPU per node (no intra-node link): give --gpus-per-node")
    if args.network is not None and max(gpus) <= args.gpus_per_node:
        unused.append(f"--network does nothing when every GPU is in one node (--gpus {max(gpus)}, "
                      f"--gpus-per-node {args.gpus_per_node}): no inter-node link is used")
    collective = args.collective or DEFAULTS["collective"]
    if getattr(args, "tree_chunk_bytes", None) is not None:
        if collective not in CHUNKED:
            unused.append(f"--tree-chunk-bytes does nothing with collective {collective!r}: "
                          f"only {' and '.join(CHUNKED)} pipeline a tree")
        elif max(gpus) <= args.gpus_per_node:
            unused.append("--tree-chunk-bytes does nothing when every GPU is in one node: NCCL runs rings there")
    if args.collective is not None and max(gpus) == 1:
        unused.append("--collective does nothing with one GPU (nothing is all-reduced): give --gpus")
    unused += _unused_overrides(args, gpus)
    for message in unused:
        warnings.warn(message, SimInputWarning, stacklevel=2)


def _links_with_a_table(args, gpus: list[int]) -> list[str]:
    """The link presets of these runs that take a measured size-regime table: the network where a run crosses
    nodes, the intra-node link where a node holds more than one GPU, each unless its rate is overridden."""
    used = []
    if max(gpus) > args.gpus_per_node and getattr(args, "network_gbps", None) is None:
        used.append(getattr(args, "network", None) or DEFAULTS["network"])
    if args.gpus_per_node > 1 and min(max(gpus), args.gpus_per_node) > 1 and getattr(args, "intra_gbps", None) is None:
        used.append(getattr(args, "intra", None) or DEFAULTS["intra"])
    return [name for name in used if network_regimes(name)]


def _unused_overrides(args, gpus: list[int]) -> list[str]:
    """The overrides this run ignores: interference coefficients with interference off, a link's rate where
    that link is not used, size regimes without a table or under --network-gbps."""
    out = []
    if getattr(args, "interference", None) is False:
        out += [f"--{k} does nothing with --no-interference" for k in ("compute-slowdown", "comm-slowdown")
                if getattr(args, k.replace("-", "_"), None) is not None]
    if getattr(args, "network_gbps", None) is not None and max(gpus) <= args.gpus_per_node:
        out.append("--network-gbps does nothing when every GPU is in one node: no inter-node link is used")
    if getattr(args, "intra_gbps", None) is not None and args.gpus_per_node == 1:
        out.append("--intra-gbps does nothing with one GPU per node (no intra-node link): give --gpus-per-node")
    if getattr(args, "size_regimes", None) is not None and not _links_with_a_table(args, gpus):
        flag = "--size-regimes" if args.size_regimes else "--no-size-regimes"
        network = getattr(args, "network", None) or DEFAULTS["network"]
        if getattr(args, "network_gbps", None) is not None and network_regimes(network):
            out.append(f"{flag} does nothing with --network-gbps: the measured table is replaced")
        elif network_regimes(network):
            out.append(f"{flag} does nothing: every GPU is in one node, so --network {network}'s measured table "
                       "is not used, and the intra-node link has none")
        else:
            out.append(f"{flag} does nothing with --network {network}: it has no measured size-regime "
                       "table (data/network_regimes.csv), nor has the intra-node link a run uses")
    nics = getattr(args, "nics_per_node", None)
    if nics is not None and nics > args.gpus_per_node:
        out.append(f"--nics-per-node {nics}: a node of {args.gpus_per_node} GPU(s) uses {args.gpus_per_node} of them "
                   "(NCCL spreads its channels over one NIC per GPU at most)")
    if getattr(args, "nic_near_gpus", None) is not None and getattr(args, "nic_path", None) is None \
            and (getattr(args, "topology", None) in (None, "flat")):
        out.append("--nic-near-gpus does nothing without --nic-path (or a topology with one): the other GPUs "
                   "cross no link to the NIC")
    return out


#: The cluster flags' defaults (None on the command line, so that a flag given for nothing is seen).
DEFAULTS = {f.name: f.default for f in fields(Cluster)
            if f.name in ("network", "intra", "collective", "gpu", "framework", "launch_us", "network_gbps",
                          "intra_gbps", "interference", "compute_slowdown", "comm_slowdown", "sync_jitter_cv",
                          "tree_chunk_bytes")}


def cluster(args, gpus: int) -> Cluster:
    given = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k, None) is not None}
    topology = {k: getattr(args, k) for k in TOPOLOGY_FLAGS if getattr(args, k, None) is not None}
    return Cluster(gpus=gpus, gpus_per_node=args.gpus_per_node, alpha_s=args.alpha, beta_s_per_byte=args.beta,
                   **{**DEFAULTS, **given}, **topology)


def model(args):
    arch = {k: v for k, v in (("seq_len", args.seq_len), ("image_size", args.image_size)) if v is not None}
    if arch and args.model not in zoo_names() and not (args.model.startswith(HF_PREFIX) and "image_size" not in arch):
        raise SimInputError("--seq-len and --image-size apply only to zoo models (--seq-len also to hf: configs)")
    loaded = load_model(args.model, io_ms=args.io_ms, h2d_ms=args.h2d_ms, update_ms=args.update_ms, **arch)
    if getattr(args, "gradients", None) is not None:
        loaded = dataclasses.replace(loaded, gradients=args.gradients)
    if args.gpu is not None and loaded.is_timed:
        raise SimInputError("--gpu does nothing for a layer CSV: its compute times are given, not estimated")
    if loaded.comm_s is not None:
        given = [f"--{k}" for k in ("network", "intra", "collective", "alpha") if getattr(args, k, None) is not None]
        if given:
            raise SimInputError(f"{', '.join(given)} does nothing for a CSV with measured comm_ms: its all-reduce "
                                "times are measured, not modelled")
    return loaded


def run_one(args):
    """`sim.simulate` of the one run the flags describe (run, trace)."""
    (method, scheduler, architecture), = checked_runs(args)
    args.scheduler = scheduler
    extended = {}
    if method is not None or architecture != DEFAULT_ARCHITECTURE or options(args):
        extended = {"method": method, "architecture": architecture, "options": options(args)}
    return simulate(
        model(args), cluster(args, args.gpus), scheduler, batch_size=args.batch_size,
        precision=args.precision, iterations=args.iterations, prefetch=args.prefetch,
        bucket_mb=bucket_mb(args), calibrate_iteration_s=args.calibrate_iteration_s, **extended,
        **compression_of(args),
    )
