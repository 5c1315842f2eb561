"""The cluster: how many GPUs, how they are grouped in nodes, and their links."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sim.catalog import MAX_LINK_GBPS, MIN_LINK_GBPS, get_gpu, get_network, is_builtin_network
from sim.checks import check_float, check_int
from sim.comm import (
    COLLECTIVES,
    NO_COMM,
    TREE_CHUNK_BYTES,
    CommCost,
    Link,
    PSCost,
    allreduce_cost,
    measured_cost,
    ps_cost,
    topology_links,
)
from sim.core.cost import check_slowdown
from sim.errors import SimInputError
from sim.frameworks import (
    AUTO,
    MAX_LAUNCH_US,
    canonical_framework,
    get_framework,
    resolve_framework,
    with_framework,
)
from sim.interference import coefficient
from sim.jitter import MAX_SYNC_JITTER_CV, default_sync_jitter_cv, sync_wait_factor
from sim.topology import Topology, get_topology, network_regimes

__all__ = ["MAX_GPUS", "Cluster"]

MAX_GPUS = 1 << 20
#: A link rate above `MAX_LINK_GBPS` (1 Pb/s) or below `MIN_LINK_GBPS` is absurd (10 kb/s), and so a time per
#: byte above `MAX_S_PER_BYTE` (0.8 ms); both bounds are `sim.catalog`'s, which a preset file's rows meet too.
MAX_S_PER_BYTE = 8 / (MIN_LINK_GBPS * 1e9)
#: A tree chunk over 1 GiB is absurd (NCCL's are 64 KiB to a few MiB).
MAX_TREE_CHUNK_BYTES = float(1 << 30)


@dataclass(frozen=True)
class Cluster:
    """A data-parallel cluster of identical GPUs.

    Parameters
    ----------
    gpus : int
        Number of workers P.
    gpus_per_node : int
        GPUs that share a node (and its one network interface). A cluster
        of fewer GPUs than ``gpus_per_node`` is one partly filled node.
    network : str
        Inter-node link preset (see ``python -m sim list networks``).
    intra : str
        Intra-node link preset.
    collective : str
        All-reduce algorithm (see `sim.comm.COLLECTIVES`).
    alpha_s, beta_s_per_byte : float, optional
        Give both to fix every all-reduce of M bytes at ``alpha_s +
        beta_s_per_byte * M`` seconds, whatever P and the collective (the form
        the MG-WFBP authors fit from measurements).
    gamma_s_per_byte : float
        Reduction time per byte on the GPU; 0 ignores it.
    gpu : str
        GPU type (see ``python -m sim list gpus``); it sets the estimated
        compute times of zoo models. CSV models carry their own times.
    framework : str
        The training framework whose per-message costs (launch, copies) add
        to every message (`sim.frameworks`, ``data/frameworks.csv``):
        ``auto`` takes the scheduler's reference framework, ``none`` adds
        nothing. Not applied with ``alpha_s``/``beta_s_per_byte`` given or
        measured per-layer times, which already hold them.
    launch_us : float, optional
        Overrides the framework's launch cost per message, in microseconds.
    interference : bool
        Let compute overlapped by communication slow down
        (`sim.core.interference`), by the ``compute_slowdown`` of the link the
        messages cross (``data/interference.csv``: the network across nodes,
        the intra-node link inside one), and communication overlapped by
        compute, by its ``comm_slowdown``. False turns both off.
    compute_slowdown : float, optional
        Overrides that coefficient (0 turns it off), at most 1
        (`sim.core.cost.MAX_COMPUTE_SLOWDOWN`: above it a task's stretch has more than one solution).
    comm_slowdown : float, optional
        Overrides the link's coefficient the other way: a message makes
        ``1 / (1 + comm_slowdown)`` of its progress while its worker computes
        (`sim.core.channel`; ``data/interference.csv``); 0 turns it off, at most 10.
    network_gbps, intra_gbps : float, optional
        Override the effective rate of the ``network`` or ``intra`` preset
        (what-if: "my 100 GbE reaches only 20 Gb/s"), in Gb/s; the preset's
        latency stays.
    size_regimes : bool
        Use the network preset's measured size-regime table
        (``data/network_regimes.csv``) where it has one (the default: a preset
        uses its measured table, issue 13): alpha and beta per message-size
        regime instead of one line, from the table measured on this
        cluster's node count, interpolated between two measured counts, the
        nearest beyond them (`sim.topology.network_regimes`). False keeps the
        preset's one line. A preset without a table has its one line either way.
    topology : str
        Node topology preset (``data/topologies.csv``): ``flat`` (every GPU
        reaches the NIC directly, the intra link at its preset rate),
        ``dgx1`` (NVLink hybrid cube-mesh, one NIC that GPUs 4-7 reach across
        the socket), ``dgx1-4nic``. See `sim.comm.topology_links`.
    nics_per_node, nic_near_gpus, nic_path : optional
        Override the topology's NICs per node, GPUs near a NIC and the link
        preset the other GPUs cross to reach it.
    sync_jitter_cv : float, optional
        Each worker's compute varies from one iteration to the next by this
        coefficient of variation, and a synchronous step waits for the slowest
        worker (`sim.jitter`): compute is timed at ``1 + cv E[max of P
        normals]`` times the one-GPU figure. Default: the fitted value
        (``data/sync_jitter.csv``); 0 turns it off.
    tree_chunk_bytes : float, optional
        The chunk NCCL's tree pipelines a message in (collectives
        ``double_binary_tree`` and ``nccl``): a tree's pipeline fills with one
        chunk through every hop. Default `sim.comm.TREE_CHUNK_BYTES` (256 KiB,
        NCCL's own cost model); 0 leaves the fill out.
    """

    gpus: int = 1
    gpus_per_node: int = 1
    network: str = "10gbe"
    intra: str = "pcie3"
    collective: str = "ring"
    alpha_s: float | None = None
    beta_s_per_byte: float | None = None
    gamma_s_per_byte: float = 0.0
    gpu: str = "v100-sxm2"
    framework: str = "auto"
    launch_us: float | None = None
    network_gbps: float | None = None
    intra_gbps: float | None = None
    interference: bool = True
    compute_slowdown: float | None = None
    comm_slowdown: float | None = None
    size_regimes: bool = True
    topology: str = "flat"
    nics_per_node: int | None = None
    nic_near_gpus: int | None = None
    nic_path: str | None = None
    sync_jitter_cv: float | None = None
    tree_chunk_bytes: float | None = None

    def __post_init__(self) -> None:
        for name in ("network", "intra", "gpu", "collective", "framework", "topology", "nic_path"):
            value = getattr(self, name)
            if not isinstance(value, str) and (value is not None or name != "nic_path"):
                raise SimInputError(f"{name} must be a name (a string), got {type(value).__name__} {value!r}")
        for name in ("gpus", "gpus_per_node"):
            value = check_int(name, getattr(self, name), 1)
            object.__setattr__(self, name, value)
            if value > MAX_GPUS:
                raise SimInputError(f"{name} = {value} is absurd; at most {MAX_GPUS} are supported")
        if self.gpus > self.gpus_per_node and self.gpus % self.gpus_per_node:
            raise SimInputError(
                f"gpus = {self.gpus} does not fill whole nodes of gpus_per_node = {self.gpus_per_node}"
            )
        if self.collective not in COLLECTIVES:
            raise SimInputError(f"unknown collective {self.collective!r}; valid: {', '.join(COLLECTIVES)}")
        if (self.alpha_s is None) != (self.beta_s_per_byte is None):
            raise SimInputError("give both alpha and beta, or neither")
        for name in ("alpha_s", "beta_s_per_byte", "gamma_s_per_byte"):
            if getattr(self, name) is not None or name == "gamma_s_per_byte":
                check_float(name, getattr(self, name), 0, None if name == "alpha_s" else MAX_S_PER_BYTE)
        if self.alpha_s is not None and self.alpha_s > 10:
            raise SimInputError(f"alpha = {self.alpha_s} s is absurd for one message (give seconds)")
        get_network(self.network)  # any preset may play either role: a what-if (NVLink between nodes, say)
        get_network(self.intra)
        get_gpu(self.gpu)
        if self.framework != AUTO:
            object.__setattr__(self, "framework", canonical_framework(self.framework))  # an alias: its preset
            get_framework(self.framework)
        if self.launch_us is not None:
            check_float("launch_us", self.launch_us, 0, MAX_LAUNCH_US)
        if not isinstance(self.interference, bool):
            raise SimInputError(f"interference must be True or False, got {self.interference!r}")
        for name in ("compute_slowdown", "comm_slowdown"):  # at most MAX_COMPUTE_SLOWDOWN, MAX_COMM_SLOWDOWN
            if getattr(self, name) is not None:
                check_float(name, getattr(self, name), 0, None)
                check_slowdown(getattr(self, name), name)  # (its bound, and why: sim.core.cost)
        if self.sync_jitter_cv is not None:
            check_float("sync_jitter_cv", self.sync_jitter_cv, 0, MAX_SYNC_JITTER_CV)
        if self.tree_chunk_bytes is not None:
            check_float("tree_chunk_bytes", self.tree_chunk_bytes, 0, MAX_TREE_CHUNK_BYTES)
        for name in ("network_gbps", "intra_gbps"):
            if getattr(self, name) is not None:
                check_float(name, getattr(self, name), MIN_LINK_GBPS, MAX_LINK_GBPS)
        self._check_topology()

    def _check_topology(self) -> None:
        if not isinstance(self.size_regimes, bool):
            raise SimInputError(f"size_regimes must be true or false, got {self.size_regimes!r}")
        for name, low in (("nics_per_node", 1), ("nic_near_gpus", 0)):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(name, getattr(self, name), low, MAX_GPUS))
        topo = self.node_topology
        if topo.intra is not None and topo.intra != self.intra:
            raise SimInputError(f"topology {topo.name!r} is built of intra link {topo.intra!r}, not {self.intra!r}: "
                                f"give intra {topo.intra!r} (--intra {topo.intra})")
        if topo.max_gpus_per_node is not None and self.gpus_per_node > topo.max_gpus_per_node:
            raise SimInputError(f"topology {topo.name!r} has at most {topo.max_gpus_per_node} GPUs a node, "
                                f"got gpus_per_node = {self.gpus_per_node}")
        if topo.nic_path is not None:
            get_network(topo.nic_path)
            if topo.nic_near_gpus is None:
                raise SimInputError(f"nic_path {topo.nic_path!r} needs nic_near_gpus, the GPUs that reach "
                                    "the NIC without it")

    @property
    def node_topology(self) -> Topology:
        """The topology preset with this cluster's overrides."""
        topo = get_topology(self.topology)
        overrides = {k: getattr(self, k) for k in ("nics_per_node", "nic_near_gpus", "nic_path")
                     if getattr(self, k) is not None}
        return dataclasses.replace(topo, **overrides) if overrides else topo

    def links(self, collective: str | None = None) -> tuple[Link, Link]:
        """The intra- and inter-node links of the presets, with ``intra_gbps``/``network_gbps``,
        size regimes (``size_regimes``) and the node topology applied for ``collective``
        (default: the cluster's)."""
        def link(name: str, gbps: float | None, ranks: int) -> Link:  # a rate override replaces line and regimes
            net = get_network(name)
            if gbps is not None:
                return Link(net.alpha_s, 8.0 / (gbps * 1e9))
            # a preset's measured table is the built-in's: a user's preset of the same name (fit-network
            # --save --overwrite-builtin) is its own line
            regimes = network_regimes(name, ranks) if self.size_regimes and is_builtin_network(name) else ()
            return Link(net.alpha_s, net.beta_s_per_byte, regimes)

        # (a table is taken at the ranks its link joins: the GPUs of a node inside it, the nodes across)
        intra = link(self.intra, self.intra_gbps, self.gpus_in_node)
        inter = link(self.network, self.network_gbps, self.nodes)
        topo = self.node_topology
        path = None
        if topo.nic_path is not None:
            path_net = get_network(topo.nic_path)
            path = Link(path_net.alpha_s, path_net.beta_s_per_byte)
        return topology_links(collective or self.collective, self.gpus_in_node, intra, inter, topo, path)

    @property
    def nodes(self) -> int:
        return max(1, self.gpus // self.gpus_per_node)

    @property
    def gpus_in_node(self) -> int:
        """GPUs actually used in each node."""
        return min(self.gpus, self.gpus_per_node)

    def framework_cost(self, cost, scheduler: str, architecture: str = "allreduce"):
        """``cost`` as a run times it: with the per-message costs of this
        cluster's framework for ``scheduler`` (`sim.frameworks.with_framework`)
        and the interference of its link (`compute_slowdown_of_link`). A fixed
        ``alpha_s``/``beta_s_per_byte`` gets no framework costs and interference
        only from an explicit ``compute_slowdown``."""
        if self.alpha_s is None:
            fw = resolve_framework(self.framework, scheduler, architecture, self.launch_us)
            cost = with_framework(cost, fw, gpu=self.gpu)
        if getattr(cost, "is_free", False):
            return cost
        # a measured trace's compute already ran beside its communication: no slowdown on top,
        # either way, unless a coefficient is given for it
        measured = getattr(cost, "is_measured", False)
        for name in ("compute_slowdown", "comm_slowdown"):
            kappa = self._slowdown_of_link(name)
            if kappa > 0 and not (measured and getattr(self, name) is None):
                cost = dataclasses.replace(cost, **{name: kappa})
        return cost

    def sync_wait_factor(self) -> float:
        """The slowest worker's compute over the mean, on average (`sim.jitter.sync_wait_factor`):
        1 on one GPU."""
        cv = default_sync_jitter_cv() if self.sync_jitter_cv is None else float(self.sync_jitter_cv)
        return sync_wait_factor(self.gpus, cv)

    def compute_slowdown_of_link(self) -> float:
        """Interference coefficient of the link the messages cross (0 when switched off)."""
        return self._slowdown_of_link("compute_slowdown")

    def comm_slowdown_of_link(self) -> float:
        """The other way's coefficient for the link the messages cross (0 when switched off)."""
        return self._slowdown_of_link("comm_slowdown")

    def _slowdown_of_link(self, name: str) -> float:
        """``name`` (``compute_slowdown`` or ``comm_slowdown``) as given, else the crossed link's
        (``data/interference.csv``); 0 with interference off or a fixed alpha-beta, which names no link."""
        if not self.interference:
            return 0.0
        if getattr(self, name) is not None:
            return float(getattr(self, name))
        if self.alpha_s is not None:
            return 0.0
        return coefficient(self.network if self.gpus > self.gpus_per_node else self.intra, name)

    def with_gpus(self, gpus: int) -> Cluster:
        return dataclasses.replace(self, gpus=gpus)

    def comm_cost(self, model=None, precision: str = "fp32") -> CommCost:
        """The all-reduce cost model for this cluster.

        Given a ``model`` that carries measured per-layer all-reduce times
        (``comm_s``, trace-driven mode), those times stand for single-layer
        messages and a least-squares alpha-beta fit of them for merged ones,
        whatever the cluster's links and collective say (`measured_cost`).
        """
        if self.gpus == 1:
            return NO_COMM
        if model is not None and getattr(model, "comm_s", None) is not None:
            return measured_cost(model.comm_s, model.gradient_bytes(precision))
        if self.alpha_s is not None:
            return CommCost(self.alpha_s, self.beta_s_per_byte, "user alpha-beta")
        intra, inter = self.links()
        chunk = TREE_CHUNK_BYTES if self.tree_chunk_bytes is None else self.tree_chunk_bytes
        return allreduce_cost(self.collective, self.nodes, self.gpus_in_node, intra, inter, self.gamma_s_per_byte,
                              chunk)

    def ps_cost(self, *, servers: int | None = None, colocated: bool = False,
                in_flight: int | None = None, model=None, link_efficiency: float = 1.0) -> PSCost:
        """Push and pull costs in the parameter-server architecture (`sim.comm.ps_cost`).

        ``servers`` defaults to one per worker machine (the survey's setting).
        Needs the link presets: a fixed ``alpha_s``/``beta_s_per_byte`` or a
        model with measured all-reduce times describes an all-reduce, not a
        push and a pull. The node topology applies (as for one stream per
        node); size regimes do not (push and pull stay affine).
        """
        if self.alpha_s is not None:
            raise SimInputError("the parameter-server architecture needs network presets, not --alpha/--beta")
        if model is not None and getattr(model, "comm_s", None) is not None:
            raise SimInputError("the parameter-server architecture cannot use a model's measured all-reduce times")
        if self.gpus == 1:
            return PSCost(0.0, 0.0, 0.0, 0.0, colocated, "P = 1: no communication")
        intra, inter = self.links("ps")  # push and pull stay affine: the links' lines, without size regimes
        return ps_cost(self.nodes, self.gpus_in_node, Link(intra.alpha_s, intra.beta_s_per_byte),
                       Link(inter.alpha_s, inter.beta_s_per_byte), self.gamma_s_per_byte, servers=servers,
                       colocated=colocated, in_flight=in_flight, link_efficiency=link_efficiency)
