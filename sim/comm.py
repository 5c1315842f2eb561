"""Communication cost: all-reduce time T(M, P) in alpha-beta-gamma form.

Every collective here is affine in the message size M for a fixed cluster,
so each returns a `CommCost` with ``T(M) = alpha_s + beta_s_per_byte * M``.
The formulas follow Thakur, Rabenseifner and Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005, with

* alpha: per-message latency of a link, in seconds;
* beta: transfer time per byte of a link, in seconds per byte;
* gamma: reduction (add) time per byte on the GPU, in seconds per byte.

A cluster is N nodes of k GPUs, ranks placed node-major. Intra-node steps use
the ``intra`` link, inter-node steps the ``network`` link. Each node has one
network interface, shared by its k GPUs: when all k GPUs of a node send across
the network in the same step, the step moves k times the bytes through it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.errors import SimInputError

__all__ = [
    "COLLECTIVES",
    "CommCost",
    "Link",
    "MeasuredCommCost",
    "allreduce_cost",
    "binary_tree",
    "hierarchical",
    "measured_cost",
    "recursive_doubling",
    "recursive_halving_doubling",
    "ring",
]


@dataclass(frozen=True)
class Link:
    """A link's latency ``alpha_s`` and per-byte time ``beta_s_per_byte``."""

    alpha_s: float
    beta_s_per_byte: float


@dataclass(frozen=True)
class CommCost:
    """All-reduce time of one message: ``T(M) = alpha_s + beta_s_per_byte * M``.

    ``alpha_s`` is the start-up cost that merging two messages saves, the
    quantity the MG-WFBP merge rule compares waiting time against.
    """

    alpha_s: float
    beta_s_per_byte: float
    label: str = ""

    def __post_init__(self) -> None:
        for name in ("alpha_s", "beta_s_per_byte"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise SimInputError(f"{name} must be a finite number >= 0, got {value}")

    def time_s(self, nbytes):
        """Time to all-reduce ``nbytes`` (scalar or array)."""
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)

    @property
    def is_free(self) -> bool:
        return self.alpha_s == 0 and self.beta_s_per_byte == 0

    @property
    def is_measured(self) -> bool:
        """True when single-layer messages take measured times (trace-driven)."""
        return False

    def message_time_s(self, members, nbytes) -> float:
        """Time of one message carrying the gradients of layers ``members``."""
        return float(self.time_s(nbytes))


@dataclass(frozen=True)
class MeasuredCommCost(CommCost):
    """Trace-driven communication: measured times for single-layer messages.

    ``layer_s[i]`` is the measured all-reduce time of model layer i's gradient
    alone. A message of one layer takes that time; a merged message, which was
    never measured, takes ``alpha_s + beta_s_per_byte * M`` from a least-squares
    fit of the measured points (`measured_cost`).
    """

    layer_s: tuple = ()

    @property
    def is_measured(self) -> bool:
        return True

    def message_time_s(self, members, nbytes) -> float:
        if len(members) == 1:
            return float(self.layer_s[members[0]])
        return float(self.time_s(nbytes))


def measured_cost(layer_comm_s, layer_bytes) -> MeasuredCommCost:
    """Fit ``T(M) = alpha + beta M`` to the measured per-layer all-reduce times
    (ordinary least squares over the layers that send something, alpha and
    beta clipped at 0) and keep the measured times for single-layer messages."""
    comm = np.asarray(layer_comm_s, dtype=float)
    nbytes = np.asarray(layer_bytes, dtype=float)
    sends = (nbytes > 0) & (comm > 0)
    if sends.sum() >= 2 and np.ptp(nbytes[sends]) > 0:
        beta, alpha = np.polyfit(nbytes[sends], comm[sends], 1)
        alpha, beta = max(float(alpha), 0.0), max(float(beta), 0.0)
    elif sends.any():
        alpha, beta = 0.0, float(comm[sends].sum() / nbytes[sends].sum())
    else:
        alpha, beta = 0.0, 0.0
    return MeasuredCommCost(alpha, beta, "measured per layer, alpha-beta fit for merged messages", tuple(comm.tolist()))


NO_COMM = CommCost(0.0, 0.0, "P = 1: no communication")


def _lg(p: int) -> int:
    """ceil(log2 p)."""
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def _bottleneck(nodes: int, k: int, intra: Link, inter: Link) -> Link:
    if nodes == 1:
        return intra
    if k == 1:
        return inter
    return Link(max(intra.alpha_s, inter.alpha_s), max(intra.beta_s_per_byte, inter.beta_s_per_byte))


def ring(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Ring: 2(P-1)alpha + 2(P-1)/P M beta + (P-1)/P M gamma, on the slowest link.

    Each of the 2(P-1) steps moves M/P bytes along every ring edge at once, so a
    step takes as long as the slowest edge. Placed node-major, one ring edge
    enters and one leaves each node, so the network interface is not shared.
    """
    p = nodes * k
    link = _bottleneck(nodes, k, intra, inter)
    f = (p - 1) / p
    return CommCost(2 * (p - 1) * link.alpha_s, 2 * f * link.beta_s_per_byte + f * gamma, "ring")


def binary_tree(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Binomial-tree reduce then broadcast: 2 lg P (alpha + M beta) + lg P M gamma.

    With node-major placement and partner distance doubling, the first
    ceil(lg k) steps stay inside a node; the next ceil(lg N) steps cross the
    network, with one active rank per node, so the interface is not shared.
    """
    si, se = _lg(k), _lg(nodes)
    alpha = 2 * (si * intra.alpha_s + se * inter.alpha_s)
    beta = 2 * (si * intra.beta_s_per_byte + se * inter.beta_s_per_byte) + (si + se) * gamma
    return CommCost(alpha, beta, "binary_tree")


def _non_power_of_two_extra(p: int, link: Link, gamma: float) -> tuple[float, float]:
    """Thakur et al. 2005, Sec. 4: with p not a power of two, p - p' ranks first
    hand their data to a partner (alpha + M beta + M gamma) and get the result
    back at the end (alpha + M beta), where p' is the largest power of two <= p."""
    if p & (p - 1) == 0:
        return 0.0, 0.0
    return 2 * link.alpha_s, 2 * link.beta_s_per_byte + gamma


def _split_power_of_two(nodes: int, k: int) -> tuple[int, int]:
    """lg of the power-of-two part inside a node and across nodes."""
    p2 = 1 << int(math.floor(math.log2(nodes * k)))
    si = int(math.floor(math.log2(k))) if k > 1 else 0
    se = int(math.log2(p2)) - si
    return si, max(se, 0)


def recursive_doubling(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Recursive doubling: lg P (alpha + M beta + M gamma).

    The first lg k steps pair ranks inside a node. In each of the lg N steps
    across the network all k ranks of a node exchange M bytes, so k M bytes
    pass its shared interface. Non-powers of two add two steps (Thakur 2005).
    """
    si, se = _split_power_of_two(nodes, k)
    alpha = si * intra.alpha_s + se * inter.alpha_s
    beta = si * intra.beta_s_per_byte + se * k * inter.beta_s_per_byte + (si + se) * gamma
    ea, eb = _non_power_of_two_extra(nodes * k, _bottleneck(nodes, k, intra, inter), gamma)
    return CommCost(alpha + ea, beta + eb, "recursive_doubling")


def recursive_halving_doubling(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Rabenseifner: 2 lg P alpha + 2 (P-1)/P M beta + (P-1)/P M gamma.

    Reduce-scatter by recursive halving (nearest partner first), then
    all-gather by recursive doubling. Inside a node the halving moves
    (k-1)/k M bytes; across the network the k ranks of a node each move
    (N-1)/N M/k bytes through the shared interface, (N-1)/N M in all.
    """
    si, se = _split_power_of_two(nodes, k)
    kk, nn = 1 << si, 1 << se
    p2 = kk * nn
    alpha = 2 * (si * intra.alpha_s + se * inter.alpha_s)
    beta = (
        2 * ((kk - 1) / kk) * intra.beta_s_per_byte
        + 2 * ((nn - 1) / nn) * inter.beta_s_per_byte
        + ((p2 - 1) / p2) * gamma
    )
    ea, eb = _non_power_of_two_extra(nodes * k, _bottleneck(nodes, k, intra, inter), gamma)
    return CommCost(alpha + ea, beta + eb, "recursive_halving_doubling")


def hierarchical(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Two levels: ring reduce-scatter in each node, ring all-reduce across nodes,
    ring all-gather in each node.

    T = 2 (k-1) alpha_i + 2 (k-1)/k M beta_i + (k-1)/k M gamma          (intra)
      + 2 (N-1) alpha_e + 2 (N-1)/N M beta_e + (N-1)/N M/k gamma        (inter)

    Across nodes, the k GPUs of a node each all-reduce their M/k shard at the
    same time over the shared interface, so M bytes in all pass through it.
    """
    fk = (k - 1) / k
    fn = (nodes - 1) / nodes
    alpha = 2 * (k - 1) * intra.alpha_s + 2 * (nodes - 1) * inter.alpha_s
    beta = 2 * fk * intra.beta_s_per_byte + fk * gamma + 2 * fn * inter.beta_s_per_byte + fn * gamma / k
    return CommCost(alpha, beta, "hierarchical")


COLLECTIVES: dict[str, Callable[[int, int, Link, Link, float], CommCost]] = {
    "ring": ring,
    "binary_tree": binary_tree,
    "recursive_doubling": recursive_doubling,
    "recursive_halving_doubling": recursive_halving_doubling,
    "hierarchical": hierarchical,
}


def allreduce_cost(
    collective: str, nodes: int, gpus_per_node: int, intra: Link, inter: Link, gamma_s_per_byte: float = 0.0
) -> CommCost:
    """All-reduce cost for ``nodes`` x ``gpus_per_node`` GPUs; free when P = 1."""
    if collective not in COLLECTIVES:
        raise SimInputError(f"unknown collective {collective!r}; valid: {', '.join(COLLECTIVES)}")
    if nodes * gpus_per_node == 1:
        return NO_COMM
    return COLLECTIVES[collective](nodes, gpus_per_node, intra, inter, gamma_s_per_byte)
