"""Framework costs per message: what a collective costs beyond its links.

A training framework does work around every message it sends: a launch
(Horovod's negotiation of the tensor, ByteScheduler's per-partition task,
NCCL's kernel launch) and copies through device memory (a fusion buffer or a
DDP bucket, filled before the all-reduce and emptied after). Each framework
in ``data/frameworks.csv`` (`FRAMEWORKS_PATH`) gives

* ``launch_us``: a fixed time per message (per collective call, or per
  partition where a message is partitioned), added to the cost's alpha;
* ``copy_bytes_per_byte``: bytes moved through device memory per gradient
  byte, timed at the GPU's memory bandwidth and added to the cost's beta;

with the source of each number, or how it was fitted. ``framework="auto"``
(the default of `sim.cluster.Cluster`) takes the framework the scheduler's
reference implementation runs on (`DEFAULT_FRAMEWORK`); ``"none"`` leaves
the links' cost alone. A measured per-layer cost (trace-driven mode) already
holds the framework's costs and is left as it is.

>>> from sim.core.cost import CommCost
>>> c = with_framework(CommCost(1e-4, 1e-9), get_framework("nccl"), gpu="v100-pcie")
>>> round(c.alpha_s * 1e6, 1)
108.4
"""

from __future__ import annotations

import csv
import dataclasses
import functools
from dataclasses import dataclass

from sim.catalog import DATA_DIR, get_gpu
from sim.checks import check_float
from sim.core.cost import PSCost
from sim.errors import SimInputError
from sim.schedulers.names import (
    BUCKET,
    BYTESCHEDULER,
    DDP,
    HOROVOD,
    MGWFBP,
    OPTIMAL,
    SEQUENTIAL,
    SYNCEASGD,
    WFBP,
)

__all__ = ["AUTO", "DEFAULT_FRAMEWORK", "FRAMEWORKS_PATH", "FRAMEWORK_ALIASES", "Framework", "canonical_framework",
           "framework_for", "framework_name", "framework_names", "get_framework", "resolve_framework", "with_framework"]

FRAMEWORKS_PATH = DATA_DIR / "frameworks.csv"
AUTO = "auto"
#: Beyond this a per-message overhead is absurd (ten seconds per message).
MAX_LAUNCH_US = 1e7

#: The framework each scheduler's reference implementation runs on: WFBP, MG-WFBP and
#: SyncEASGD as the MG-WFBP authors' and the survey's code run them (over Horovod;
#: HKBU-HPML/MG-WFBP, HKBU-HPML/ddl-benchmarks); ``ddp`` and ``bucket`` as PyTorch DDP.
#: ByteScheduler on its own per-partition task (the ``bytescheduler`` framework, fitted):
#: it lowers the held-out median (6.70 % to 6.39 %) and worst case (64.7 % to 30.6 %);
#: the calibration cases do not move (`sim.calib.fit_validation.ablation`).
#: Any other scheduler: a bare NCCL call per message.
#: (The Horovod and ByteScheduler frameworks share their schedulers' names.)
DEFAULT_FRAMEWORK = {
    SEQUENTIAL: HOROVOD, WFBP: HOROVOD, MGWFBP: HOROVOD, SYNCEASGD: HOROVOD, OPTIMAL: HOROVOD,
    HOROVOD: HOROVOD, DDP: "pytorch-ddp", BUCKET: "pytorch-ddp", BYTESCHEDULER: BYTESCHEDULER,
}
#: Other names a framework is known by: ``ddp`` is PyTorch DDP (the scheduler's name, and the
#: issue tracker's); `canonical_framework` turns them into the preset's name.
FRAMEWORK_ALIASES = {DDP: "pytorch-ddp"}
#: The parameter-server architecture's framework (its costs are in the fitted link efficiency).
PS_FRAMEWORK = "byteps"


@dataclass(frozen=True)
class Framework:
    """One framework's per-message costs (see the module docstring)."""

    name: str
    launch_s: float
    copy_bytes_per_byte: float
    source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        check_float(f"framework {self.name!r}: launch_s", self.launch_s, 0, MAX_LAUNCH_US * 1e-6)
        check_float(f"framework {self.name!r}: copy_bytes_per_byte", self.copy_bytes_per_byte, 0)

    @property
    def launch_us(self) -> float:
        return self.launch_s * 1e6


@functools.lru_cache(maxsize=1)
def _frameworks() -> dict[str, Framework]:
    out = {}
    with open(FRAMEWORKS_PATH, newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                launch, copies = float(row["launch_us"]), float(row["copy_bytes_per_byte"])
            except (TypeError, ValueError):
                raise SimInputError(f"{FRAMEWORKS_PATH.name} line {line}: launch_us and copy_bytes_per_byte "
                                    "must be numbers") from None
            out[row["name"]] = Framework(row["name"], launch * 1e-6, copies, row["source"], row["note"])
    return out


def framework_names() -> tuple[str, ...]:
    """The framework presets, plus ``auto``."""
    return (AUTO, *_frameworks())


def canonical_framework(name: str) -> str:
    """The preset name of ``name``, which may be an alias (`FRAMEWORK_ALIASES`)."""
    return FRAMEWORK_ALIASES.get(name, name)


def get_framework(name: str) -> Framework:
    frameworks = _frameworks()
    name = canonical_framework(name)
    if name not in frameworks:
        raise SimInputError(f"unknown framework {name!r}; valid: {', '.join(framework_names())}")
    return frameworks[name]


def framework_for(scheduler: str, architecture: str = "allreduce") -> str:
    """The framework ``auto`` stands for with this scheduler and architecture."""
    if architecture == "ps":
        return PS_FRAMEWORK
    return DEFAULT_FRAMEWORK.get(scheduler, "nccl")


def resolve_framework(name: str, scheduler: str, architecture: str = "allreduce",
                      launch_us: float | None = None) -> Framework:
    """The framework a run uses: ``name`` (or the scheduler's, for ``auto``),
    with its launch overridden by ``launch_us`` when given."""
    fw = get_framework(framework_for(scheduler, architecture) if name == AUTO else name)
    if launch_us is not None:
        fw = dataclasses.replace(fw, launch_s=float(launch_us) * 1e-6)
    return fw


def framework_name(cluster, scheduler: str, architecture: str = "allreduce") -> str:
    """The framework whose per-message costs a run includes (``none`` with a fixed alpha-beta)."""
    if cluster.alpha_s is not None:
        return "none"
    return resolve_framework(cluster.framework, scheduler, architecture).name


def with_framework(cost, framework: Framework, *, gpu: str):
    """``cost`` with the framework's per-message costs added.

    An all-reduce cost gets the launch on alpha (kept as its ``launch_s``, which a
    plan whose launches run ahead of the transfers times on a lane of its own) and
    the copies on beta; a parameter server's push and pull each get the launch (a
    partition is pushed and pulled by separate calls). A free cost (one GPU) and a
    measured one stay as they are.
    """
    if getattr(cost, "is_free", False) or getattr(cost, "is_measured", False):
        return cost
    if framework.launch_s == 0 and framework.copy_bytes_per_byte == 0:
        return cost
    from sim.compute import MEM_EFFICIENCY

    copy_s_per_byte = framework.copy_bytes_per_byte / (get_gpu(gpu).mem_bw_bytes_per_s * MEM_EFFICIENCY)
    label = f"{cost.label} + {framework.name}"
    if isinstance(cost, PSCost):  # push and pull are calls of their own: the launch only
        return cost.plus(framework.launch_s, 0.0, label)
    return cost.with_launch(framework.launch_s, copy_s_per_byte, label)
