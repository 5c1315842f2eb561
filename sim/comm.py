"""Communication cost: all-reduce time T(M, P) in alpha-beta-gamma form.

Every collective here is affine in the message size M for a fixed cluster,
so each returns a `CommCost` with ``T(M) = alpha_s + beta_s_per_byte * M``.
A link with size regimes (a measured table, `sim.topology.network_regimes`)
makes `allreduce_cost` piecewise: the collective's formula is evaluated on
the links of each regime, with the regimes' bounds kept at the all-reduce
message sizes where they were measured (MPI and NCCL choose their algorithm
and protocol by the size of the whole message: Open MPI's fixed decision
rule switches from recursive doubling to a ring at 10,000 bytes, open-mpi/ompi
``coll_tuned_decision_fixed.c``). A node topology (`sim.topology.Topology`,
applied by `topology_links`) rescales the links first.

The formulas follow Thakur, Rabenseifner and Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005, with

* alpha: per-message latency of a link, in seconds;
* beta: transfer time per byte of a link, in seconds per byte;
* gamma: reduction (add) time per byte on the GPU, in seconds per byte.

A cluster is N nodes of k GPUs, ranks placed node-major. Intra-node steps use
the ``intra`` link, inter-node steps the ``network`` link. Each node has one
network interface, shared by its k GPUs: when all k GPUs of a node send across
the network in the same step, the step moves k times the bytes through it. A
node-major ring (NCCL orders its rings so) crosses each NIC once per direction
per channel; its channels split the data, so sharing the NIC adds no bytes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from sim.checks import check_float, check_int
from sim.core.cost import (
    NO_COMM,
    CommCost,
    MeasuredCommCost,
    PSCost,
    Regime,
    lines,
    lower_envelope,
    measured_cost,
)
from sim.errors import SimInputError

__all__ = [
    "CHUNKED",
    "COLLECTIVES",
    "CommCost",
    "Link",
    "MeasuredCommCost",
    "PSCost",
    "Regime",
    "allreduce_cost",
    "binary_tree",
    "double_binary_tree",
    "hierarchical",
    "nccl",
    "ps",
    "ps_cost",
    "measured_cost",
    "recursive_doubling",
    "recursive_halving_doubling",
    "ring",
    "TREE_CHUNK_BYTES",
    "topology_links",
    "torus_2d",
]


@dataclass(frozen=True)
class Link:
    """A link's latency ``alpha_s`` and per-byte time ``beta_s_per_byte``.

    ``regimes`` (optional) give the link's alpha and beta per size regime,
    starting at all-reduce message sizes; the collectives' formulas use
    ``alpha_s`` and ``beta_s_per_byte``, `allreduce_cost` the regimes.
    """

    alpha_s: float
    beta_s_per_byte: float
    regimes: tuple[Regime, ...] = ()

    def at(self, nbytes: float) -> Link:
        """The link (without regimes) in the regime of an all-reduce of ``nbytes``."""
        if not self.regimes:
            return self
        r = [r for r in self.regimes if r.from_bytes <= nbytes][-1]
        return Link(r.alpha_s, r.beta_s_per_byte)

    def adjusted(self, beta=lambda b: b, extra_alpha_s: float = 0.0) -> Link:
        """This link with ``beta`` applied to its per-byte time and ``extra_alpha_s`` added, in every regime."""
        regimes = tuple(Regime(r.from_bytes, r.alpha_s + extra_alpha_s, beta(r.beta_s_per_byte), r.label)
                        for r in self.regimes)
        return Link(self.alpha_s + extra_alpha_s, beta(self.beta_s_per_byte), regimes)


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


def _torus_width(nodes: int, k: int) -> int:
    """Ranks in a row of the 2D torus: the GPUs of a node, or, with one GPU
    per node, the largest divisor of P that is at most sqrt(P)."""
    if k > 1:
        return k
    p = nodes
    return max(d for d in range(1, math.isqrt(p) + 1) if p % d == 0)


def torus_2d(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """2D torus (Mikami et al. 2018, arXiv 1811.05233): X-ring reduce-scatter, Y-ring all-reduce, X-ring all-gather.

    P = X x Y ranks in a grid. Rows (X ranks) are the GPUs of a node; with one
    GPU per node, X is the largest divisor of P at most sqrt(P) and rows cross
    the network. With Y = P / X:

    T = 2 (X-1) alpha_x + 2 (X-1)/X M beta_x + (X-1)/X M gamma          (rows)
      + 2 (Y-1) alpha_y + 2 (Y-1)/Y (M/X) s beta_y + (Y-1)/Y M/X gamma  (columns)

    where s = X when the X column rings of a node share its interface (rows
    inside a node), else 1. The bandwidth term equals the ring's,
    2 (P-1)/P M beta on equal links, with 2(X-1) + 2(Y-1) latency steps
    instead of 2(P-1). With rows inside nodes it equals `hierarchical`.
    """
    p = nodes * k
    x = _torus_width(nodes, k)
    y = p // x
    row = intra if k > 1 else inter
    share = x if k > 1 else 1
    fx, fy = (x - 1) / x, (y - 1) / y
    alpha = 2 * (x - 1) * row.alpha_s + 2 * (y - 1) * inter.alpha_s
    beta = 2 * fx * row.beta_s_per_byte + fx * gamma + 2 * fy * share * inter.beta_s_per_byte / x + fy * gamma / x
    return CommCost(alpha, beta, "torus_2d")


#: NCCL's tree pipelines a message in chunks, and a chunk crosses every hop of the tree before the
#: pipeline is full: NVIDIA/nccl src/graph/tuning.cc (commit 01afd20) models a tree hop of the Simple
#: protocol as "the latency [of] a 256kB chunk, which is ~ base lat + 256k/12GB/s (+ 256k/12GB/s for
#: the network)". A message smaller than a chunk is one chunk.
TREE_CHUNK_BYTES = 262144


def double_binary_tree(nodes: int, k: int, intra: Link, inter: Link, gamma: float,
                       chunk_bytes: float = TREE_CHUNK_BYTES) -> CommCost:
    """NCCL's double binary tree, pipelined in chunks of C = ``chunk_bytes``:
    H alpha + M gamma plus min(M, C) sum_h beta_h + 2 max(M - C, 0) beta, over the H = 2 (ceil(lg N) + k - 1) hops.

    NCCL 2.4 (Sanders, Speck and Traeff, Parallel Computing 35(12), 2009;
    NVIDIA, "Massively Scale Your Deep Learning Training with NCCL 2.4", 2019):
    two complementary binary trees across the nodes, each reducing and then
    broadcasting half of the data; inside a node the k GPUs form a chain, so a
    message climbs and descends ceil(lg N) hops across the network and k-1
    along the chain, each at its own latency. The data move in chunks of C
    (`TREE_CHUNK_BYTES`): a message no larger than a chunk crosses every hop
    once, each hop at its own rate (sum_h beta_h M); a larger one fills the
    pipeline with its first chunk and streams the rest through the slowest
    link, where every rank, interior in one tree and a leaf in the other,
    sends and receives 2 bytes a byte (2 (M - C) beta). Two size regimes,
    continuous at C; ``chunk_bytes`` 0 gives the model without the fill,
    H alpha + 2 M beta + M gamma. One rank per node sends across the network
    at a time, so the interface is not shared.
    """
    link = _bottleneck(nodes, k, intra, inter)
    alpha = 2 * (_lg(nodes) * inter.alpha_s + (k - 1) * intra.alpha_s)
    stream = 2 * link.beta_s_per_byte
    hops = 2 * (_lg(nodes) * inter.beta_s_per_byte + (k - 1) * intra.beta_s_per_byte)  # one byte through every hop
    if hops <= stream or chunk_bytes == 0:  # (no hop at the slowest link's rate: nothing to fill)
        return CommCost(alpha, stream + gamma, "double_binary_tree")
    return CommCost.piecewise([Regime(0.0, alpha, hops + gamma, "tree, one chunk"),
                               Regime(float(chunk_bytes), alpha + (hops - stream) * chunk_bytes, stream + gamma,
                                      "tree, pipelined")], "double_binary_tree")


def ps_cost(nodes: int, k: int, intra: Link, inter: Link, gamma: float = 0.0, *, servers: int | None = None,
            colocated: bool = False, in_flight: int | None = None, link_efficiency: float = 1.0) -> PSCost:
    """Parameter server (BytePS; Jiang et al., OSDI 2020): push and pull costs for N nodes of k GPUs.

    Inside a node the k GPUs first reduce (ring reduce-scatter,
    (k-1) alpha_i + (k-1)/k M beta_i, folded into the push) and finally
    broadcast (the same, folded into the pull); then one push and one pull of
    M bytes per node. Partitions go round-robin over S servers, every node
    pushing each byte to one server, so a server's link carries N_r M / S
    bytes for the M each worker's link carries (N_r = N workers on separate
    hosts; N - 1 remote ones when a server sits on every worker machine, whose
    own share, M / S, stays local). With ``in_flight`` partitions at a time
    (ByteScheduler's credit), only min(S, in_flight) servers are busy at once:

    push(M) = (k-1) alpha_i + alpha_e + M [(k-1)/k beta_i + beta_e max(w, N_r / S') + (N_r / S') gamma]

    with w = 1 on separate hosts, (S-1)/S colocated, and S' = min(S,
    in_flight). pull(M) is the same without gamma. One node (N = 1) sends
    nothing across the network: BytePS skips push and pull with a single
    worker machine, leaving the node's reduce and broadcast. Both are rings
    over the same intra-node links, so they share one lane (``shared_lane``)
    rather than overlap as a push and a pull over a full-duplex NIC do.

    Parameters
    ----------
    servers : int, optional
        S; default N (the survey's setting: as many servers as worker machines).
    colocated : bool
        One server on every worker machine (S = N).
    in_flight : int, optional
        Partitions in flight at once; default unbounded.
    link_efficiency : float
        Fraction e of the network's effective rate that push and pull reach:
        every network term beta_e above becomes beta_e / e.
    """
    if not 0 < link_efficiency <= 1:
        raise SimInputError(f"link_efficiency must be in (0, 1], got {link_efficiency}")
    s = nodes if servers is None else check_int("servers", servers, 1)
    if colocated and s != nodes:
        raise SimInputError(f"servers = {s}: colocated servers sit one per worker machine, so servers = nodes = {nodes}")
    a_i = (k - 1) * intra.alpha_s if k > 1 else 0.0
    b_i = (k - 1) / k * intra.beta_s_per_byte if k > 1 else 0.0
    if nodes == 1:  # the reduce and the broadcast are both rings over the same PCIe/NVLink links: one lane
        return PSCost(a_i, b_i, a_i, b_i, True, "ps (one node: reduce and broadcast inside it)")
    busy = s if in_flight is None else min(s, int(in_flight))
    remote = nodes - 1 if colocated else nodes
    w = (s - 1) / s if colocated else 1.0
    net_b = inter.beta_s_per_byte / link_efficiency * max(w, remote / busy)
    push_b = b_i + net_b + remote / busy * gamma
    pull_b = b_i + net_b
    label = f"ps ({s} servers{', colocated' if colocated else ''})"
    return PSCost(a_i + inter.alpha_s, push_b, a_i + inter.alpha_s, pull_b, colocated, label)


def ps(nodes: int, k: int, intra: Link, inter: Link, gamma: float) -> CommCost:
    """Parameter server, push then pull: 2 [(k-1) alpha_i + alpha_e] + 2 M [(k-1)/k beta_i + beta_e] + M gamma.

    `ps_cost` with S = N servers on separate hosts, push and pull not
    overlapped (one message). As an all-reduce it moves M bytes each way
    through each worker's interface, against the ring's 2 (P-1)/P M.
    """
    c = ps_cost(nodes, k, intra, inter, gamma)
    return CommCost(c.push_alpha_s + c.pull_alpha_s, c.push_beta_s_per_byte + c.pull_beta_s_per_byte, "ps")


def nccl(nodes: int, k: int, intra: Link, inter: Link, gamma: float,
         chunk_bytes: float = TREE_CHUNK_BYTES) -> CommCost:
    """NCCL's choice per message: the faster of `ring` and `double_binary_tree` at each size.

    NCCL 2.4 added the double binary tree and ran it below a message-size
    threshold (``NCCL_TREE_THRESHOLD``; "Massively Scale Your Deep Learning
    Training with NCCL 2.4", 2019; on PCIe systems "trees on small sizes, then
    rings for larger sizes", S. Jeaugey, NVIDIA/nccl issue 226); later releases
    time every collective with their own cost model and run the algorithm it
    predicts fastest (NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoGetAlgoTime``).
    Modelled as the later rule (the 2.4 threshold approximated by it): the
    lower envelope of the two costs, size regimes cut where they cross
    (`sim.core.cost.lower_envelope`). Inside one node NCCL runs rings.
    """
    r = ring(nodes, k, intra, inter, gamma)
    if nodes == 1:
        return CommCost(r.alpha_s, r.beta_s_per_byte, "nccl (ring)")
    return lower_envelope([double_binary_tree(nodes, k, intra, inter, gamma, chunk_bytes), r], "nccl",
                          names=("tree", "ring"))


#: The collectives whose cost depends on the tree's chunk (``tree_chunk_bytes``).
CHUNKED = ("double_binary_tree", "nccl")

COLLECTIVES: dict[str, Callable[[int, int, Link, Link, float], CommCost]] = {
    "ring": ring,
    "binary_tree": binary_tree,
    "recursive_doubling": recursive_doubling,
    "recursive_halving_doubling": recursive_halving_doubling,
    "hierarchical": hierarchical,
    "torus_2d": torus_2d,
    "double_binary_tree": double_binary_tree,
    "nccl": nccl,
    "ps": ps,
}


def allreduce_cost(
    collective: str, nodes: int, gpus_per_node: int, intra: Link, inter: Link, gamma_s_per_byte: float = 0.0,
    tree_chunk_bytes: float = TREE_CHUNK_BYTES,
) -> CommCost:
    """All-reduce cost for ``nodes`` x ``gpus_per_node`` GPUs; free when P = 1.

    With links that carry size regimes, the cost is piecewise: one regime per
    distinct regime start of either link, each the collective's formula on
    the links of that regime (`Link.at`), cut further where the collective
    cuts its own regimes (`nccl`'s tree then ring, the tree's chunk).
    ``tree_chunk_bytes`` is the chunk of the collectives that pipeline a
    tree (`double_binary_tree`, `nccl`); 0 leaves their pipeline's fill out.
    """
    if collective not in COLLECTIVES:
        raise SimInputError(f"unknown collective {collective!r}; valid: {', '.join(COLLECTIVES)}")
    if nodes * gpus_per_node == 1:
        return NO_COMM
    formula = COLLECTIVES[collective]
    tree_chunk_bytes = check_float("tree_chunk_bytes", tree_chunk_bytes, 0)
    if collective in CHUNKED:
        formula = functools.partial(formula, chunk_bytes=tree_chunk_bytes)
    if not intra.regimes and not (inter.regimes and nodes > 1):
        return formula(nodes, gpus_per_node, intra, inter, gamma_s_per_byte)
    starts = sorted({0.0, *(r.from_bytes for r in intra.regimes),
                     *(r.from_bytes for r in (inter.regimes if nodes > 1 else ()))})
    regimes = []
    for lo, hi in zip(starts, starts[1:] + [math.inf], strict=True):
        cost = formula(nodes, gpus_per_node, intra.at(lo), inter.at(lo), gamma_s_per_byte)
        own = lines(cost)  # a collective may cut size regimes of its own (nccl, the tree's chunks)
        for r in [x for x in own if x.from_bytes <= lo][-1:] + [x for x in own if lo < x.from_bytes < hi]:
            at = max(lo, r.from_bytes)
            regimes.append(Regime(at, r.alpha_s, r.beta_s_per_byte, f"from {at:.0f} B"))
    return CommCost.piecewise(regimes, f"{collective} (size regimes)")


#: Collectives that send one stream per node across the network at a time. NCCL
#: starts a node's network send at a GPU far from the NIC and receives at a near
#: one (NVIDIA/nccl issue 392), so with GPUs across the socket the whole stream
#: crosses the NIC path; the others spread the node's traffic over all its GPUs.
ONE_STREAM = ("ring", "binary_tree", "double_binary_tree", "nccl", "ps")


def topology_links(collective: str, gpus_in_node: int, intra: Link, inter: Link, topology,
                   path: Link | None = None) -> tuple[Link, Link]:
    """The intra and inter links as ``topology`` (a `sim.topology.Topology`) makes them.

    * intra: beta / ``topology.intra_scale(k)`` (a partly connected NVLink mesh
      builds fewer rings over fewer GPUs);
    * inter: beta / min(nics_per_node, k) (NCCL spreads its channels over the
      node's NICs, one per GPU at most);
    * GPUs across ``path`` (``topology.far_gpus(k)`` > 0): the share s of the
      node's network bytes that crosses the path (1 for the collectives of
      `ONE_STREAM`, the far GPUs' share otherwise) streams through it while the
      NIC sends, so beta_e becomes max(beta_e, s beta_path) (the slower stage of
      a pipeline) and alpha_e gains the path's alpha.
    """
    k = gpus_in_node
    scale = topology.intra_scale(k)
    if scale != 1.0:
        intra = intra.adjusted(lambda b: b / scale)
    nics = min(topology.nics_per_node, k)
    if nics > 1:
        inter = inter.adjusted(lambda b: b / nics)
    far = topology.far_gpus(k)
    if far and path is not None:
        share = 1.0 if collective in ONE_STREAM else far / k
        inter = inter.adjusted(lambda b: max(b, share * path.beta_s_per_byte), path.alpha_s)
    return intra, inter
