"""Node topologies and measured size-regime tables, read from ``data/``.

* ``data/topologies.csv``: how the GPUs of a node reach its NICs and each
  other (`Topology`, `get_topology`);
* ``data/network_regimes.csv``: per-link alpha-beta size regimes of a network
  preset, fitted from a measured all-reduce log (`network_regimes`).

Both are pure lookups; `sim.comm` applies them to the collectives' links.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass

from sim.catalog import DATA_DIR, get_network
from sim.core.cost import Regime, check_regimes
from sim.errors import SimInputError

__all__ = ["TOPOLOGIES_FILE", "REGIMES_FILE", "Topology", "get_topology", "network_regimes", "regime_nodes",
           "topologies"]

TOPOLOGIES_FILE = DATA_DIR / "topologies.csv"
REGIMES_FILE = DATA_DIR / "network_regimes.csv"


def _rows(path) -> list[tuple[int, dict[str, str]]]:
    """``(line number, row)`` of a bundled CSV; every row must cite its source."""
    text = path.read_text(encoding="utf-8")
    rows = []
    reader = csv.DictReader(io.StringIO(text), skipinitialspace=True)
    for row in reader:
        line = reader.line_num
        if not (row.get("source") or "").strip():
            raise SimInputError(f"{path.name} line {line}: source is empty; every row must cite its source")
        rows.append((line, {k: (v or "").strip() for k, v in row.items()}))
    return rows


def _number(path, line: int, row: dict, field: str, *, integer: bool = False):
    text = row.get(field, "")
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise SimInputError(f"{path.name} line {line}: {field} must be a number, got {text!r}") from None
    if not (math.isfinite(value) or field == "effective_gbps") or value < 0:
        raise SimInputError(f"{path.name} line {line}: {field} must be a finite number >= 0, got {text!r}")
    return value


@dataclass(frozen=True)
class Topology:
    """How the GPUs of a node reach its NICs and each other.

    ``nics_per_node`` NICs share the node's network traffic (NCCL spreads its
    channels over them). ``intra`` (optional) is the intra-node link preset
    the topology is made of, and the largest key of ``nvlink_rings`` the most
    GPUs a node has (`sim.cluster.Cluster` refuses others). GPUs beyond the first ``nic_near_gpus`` (None: all
    are near) reach a NIC across ``nic_path``, a link preset (e.g. the PCIe
    path through the CPU socket). ``nvlink_rings`` maps a number of GPUs used
    in the node to the directed NVLink rings NCCL can build over them; the
    intra link's rate is scaled by rings / ``links_per_gpu`` (a partly
    connected NVLink mesh). Empty: the intra link runs at its preset rate.
    """

    name: str
    nics_per_node: int = 1
    nic_near_gpus: int | None = None
    nic_path: str | None = None
    intra: str | None = None
    nvlink_rings: tuple[tuple[int, int], ...] = ()
    links_per_gpu: int | None = None
    source: str = ""
    note: str = ""

    def far_gpus(self, gpus_in_node: int) -> int:
        """GPUs of the node that reach the NIC across ``nic_path``."""
        if self.nic_near_gpus is None or self.nic_path is None:
            return 0
        return max(0, gpus_in_node - self.nic_near_gpus)

    @property
    def max_gpus_per_node(self) -> int | None:
        """The most GPUs a node of this topology has (None: no limit)."""
        return self.nvlink_rings[-1][0] if self.nvlink_rings else None

    def intra_scale(self, gpus_in_node: int) -> float:
        """Fraction of the intra link's preset rate that NCCL's rings reach over ``gpus_in_node`` GPUs."""
        if not self.nvlink_rings or not self.links_per_gpu:
            return 1.0
        rings = [r for g, r in self.nvlink_rings if g <= gpus_in_node]
        return (rings[-1] if rings else self.nvlink_rings[0][1]) / self.links_per_gpu


def _ring_table(path, line: int, text: str) -> tuple[tuple[int, int], ...]:
    if not text:
        return ()
    try:
        pairs = tuple(sorted((int(g), int(r)) for g, r in (part.split(":") for part in text.split(";"))))
    except ValueError:
        raise SimInputError(f"{path.name} line {line}: nvlink_rings must be 'gpus:rings;...', got {text!r}") from None
    return pairs


@functools.cache
def _topologies() -> dict[str, Topology]:
    out = {}
    for line, row in _rows(TOPOLOGIES_FILE):
        near = row.get("nic_near_gpus", "")
        links = row.get("links_per_gpu", "")
        out[row["name"]] = Topology(
            name=row["name"],
            nics_per_node=_number(TOPOLOGIES_FILE, line, row, "nics_per_node", integer=True),
            nic_near_gpus=_number(TOPOLOGIES_FILE, line, row, "nic_near_gpus", integer=True) if near else None,
            nic_path=row.get("nic_path") or None,
            intra=row.get("intra") or None,
            nvlink_rings=_ring_table(TOPOLOGIES_FILE, line, row.get("nvlink_rings", "")),
            links_per_gpu=_number(TOPOLOGIES_FILE, line, row, "links_per_gpu", integer=True) if links else None,
            source=row["source"], note=row.get("note", ""),
        )
    return out


def topologies() -> list[Topology]:
    """Every topology preset."""
    return list(_topologies().values())


def get_topology(name: str) -> Topology:
    """The topology preset ``name``."""
    table = _topologies()
    if name not in table:
        raise SimInputError(f"unknown topology {name!r}; valid: {', '.join(table)}")
    return table[name]


@functools.cache
def _regime_table() -> dict[str, dict[int, tuple[Regime, ...]]]:
    """Per preset, its tables by the node count each was measured on (``nodes``: ranks of the
    all-reduce benchmark, one a node)."""
    grouped: dict[str, dict[int, list[Regime]]] = {}
    for line, row in _rows(REGIMES_FILE):
        name = row["network"]
        get_network(name)
        nodes = _number(REGIMES_FILE, line, row, "nodes", integer=True)
        if nodes < 2:
            raise SimInputError(f"{REGIMES_FILE.name} line {line}: nodes must be >= 2 (the ranks the table was "
                                f"measured on), got {row['nodes']!r}")
        gbps = _number(REGIMES_FILE, line, row, "effective_gbps")
        beta = 0.0 if math.isinf(gbps) else 8.0 / (gbps * 1e9) if gbps > 0 else math.inf
        if not math.isfinite(beta):
            raise SimInputError(f"{REGIMES_FILE.name} line {line}: effective_gbps must be > 0")
        grouped.setdefault(name, {}).setdefault(nodes, []).append(Regime(
            _number(REGIMES_FILE, line, row, "from_bytes"), _number(REGIMES_FILE, line, row, "alpha_us") * 1e-6, beta,
            f"{name} from {row['from_bytes']} B ({nodes} nodes)"))
    return {name: {nodes: check_regimes(sorted(rs, key=lambda r: r.from_bytes)) for nodes, rs in sorted(tables.items())}
            for name, tables in grouped.items()}


def regime_nodes(name: str) -> tuple[int, ...]:
    """The node counts network preset ``name`` has a measured size-regime table for (ascending; () for none)."""
    return tuple(_regime_table().get(name, {}))


def network_regimes(name: str, nodes: int | None = None) -> tuple[Regime, ...]:
    """Per-link size regimes of network preset ``name`` (alpha and beta of one ring step,
    starting at all-reduce message sizes), or () if it has no measured table.

    A preset may have a table per node count it was measured on (an all-reduce benchmark
    on 2, 4 and 8 nodes, say): the cost of an all-reduce does not follow the ring's
    ``2 (P-1)/P`` from one count to another (MPI changes algorithm with the rank count),
    so a run on ``nodes`` nodes takes the table measured on that many, else on the nearest
    count measured (by ratio; a tie goes to the larger), which the ring then carries to
    ``nodes``. ``nodes`` None: the table measured on the most nodes."""
    tables = _regime_table().get(name)
    if not tables:
        return ()
    if nodes is None:
        return tables[max(tables)]
    n = max(int(nodes), 1)
    return tables[min(tables, key=lambda k: (abs(math.log(k / n)), -k))]
