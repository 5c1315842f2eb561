"""Node topologies and measured size-regime tables, read from ``data/``.

* ``data/topologies.csv``: how the GPUs of a node reach its NICs and each
  other (`Topology`, `get_topology`);
* ``data/network_regimes.csv``: per-link alpha-beta size regimes of a network
  preset, fitted from measured all-reduce logs, one table per node count
  measured (`network_regimes`).

Both are pure lookups; `sim.comm` applies them to the collectives' links.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from dataclasses import dataclass

from sim.catalog import DATA_DIR, get_network
from sim.checks import check_int
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
    if field not in row:
        raise SimInputError(f"{path.name} line {line}: no {field} column")
    text = row[field]
    kind = "a whole number" if integer else "a number"
    try:
        if integer and not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError
        value = int(text) if integer else float(text)
        finite = math.isfinite(value)
    except ValueError:
        raise SimInputError(f"{path.name} line {line}: {field} must be {kind}, got {text!r}") from None
    except OverflowError:  # an integer beyond a float's range
        finite = False
    if not (finite or field == "effective_gbps") or value < 0:
        raise SimInputError(f"{path.name} line {line}: {field} must be a finite number >= 0, got {text[:40]!r}")
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
            raise SimInputError(f"{REGIMES_FILE.name} line {line}: nodes must be a whole number >= 2 (the ranks the "
                                f"table was measured on), got {row['nodes']!r}")
        gbps = _number(REGIMES_FILE, line, row, "effective_gbps")
        beta = 0.0 if math.isinf(gbps) else 8.0 / (gbps * 1e9) if gbps > 0 else math.inf
        if not math.isfinite(beta):
            raise SimInputError(f"{REGIMES_FILE.name} line {line}: effective_gbps must be > 0")
        grouped.setdefault(name, {}).setdefault(nodes, []).append(Regime(
            _number(REGIMES_FILE, line, row, "from_bytes"), _number(REGIMES_FILE, line, row, "alpha_us") * 1e-6, beta,
            f"{name} from {row['from_bytes']} B ({nodes} nodes)"))
    out = {}
    for name, tables in grouped.items():
        out[name] = {}
        for nodes, rs in sorted(tables.items()):
            try:
                out[name][nodes] = check_regimes(sorted(rs, key=lambda r: r.from_bytes))
            except SimInputError as err:
                raise SimInputError(f"{REGIMES_FILE.name}: {name}'s table for {nodes} nodes: {err}") from None
    return out


def regime_nodes(name: str) -> tuple[int, ...]:
    """The node counts network preset ``name`` has a measured size-regime table for (ascending; () for none)."""
    return tuple(_regime_table().get(name, {}))


def network_regimes(name: str, nodes: int | None = None) -> tuple[Regime, ...]:
    """Per-link size regimes of network preset ``name`` (alpha and beta of one ring step,
    starting at all-reduce message sizes), or () if it has no measured table.

    A preset may have a table per node count it was measured on (an all-reduce benchmark
    on 2, 4 and 8 nodes, one rank a node, say): the cost of an all-reduce does not follow
    the ring's ``2 (P-1)/P`` from one count to another (MPI changes algorithm with the
    ranks), so a run on ``nodes`` nodes takes the table measured on that many. Between two
    measured counts ``lo < nodes < hi`` the measured all-reduce times are interpolated in
    log(nodes): over the union of both tables' size cuts, ``T(M) = (1 - w) T_lo(M) + w T_hi(M)``
    with ``w = log(nodes / lo) / log(hi / lo)``, each ``T_k`` the all-reduce the ``k``-node table
    gives on its own ``k`` nodes, and the result inverted for a ring on ``nodes`` (as the tables
    are): a ring reproduces it, the time is continuous in the node count, and it lies between
    the two measurements. Outside the measured counts, the nearest table, carried by the
    collective's formula. ``nodes`` None: the table measured on the most nodes."""
    tables = _regime_table().get(name)
    if not tables:
        return ()
    if nodes is None:
        return tables[max(tables)]
    return _at_nodes(name, check_int("nodes", nodes, 1))


@functools.lru_cache(maxsize=256)
def _at_nodes(name: str, nodes: int) -> tuple[Regime, ...]:
    tables = _regime_table()[name]
    counts = sorted(tables)
    if nodes in tables:
        return tables[nodes]
    if nodes < counts[0] or nodes > counts[-1]:
        return tables[counts[0] if nodes < counts[0] else counts[-1]]
    hi = next(k for k in counts if k > nodes)
    lo = max(k for k in counts if k < nodes)
    w = math.log(nodes / lo) / math.log(hi / lo)
    cuts = sorted({r.from_bytes for r in tables[lo]} | {r.from_bytes for r in tables[hi]})
    steps = 2 * (nodes - 1)  # a ring on ``nodes`` ranks: 2 (P-1) alpha + 2 (P-1)/P M beta per link
    out = []
    for cut in cuts:
        (a_lo, b_lo), (a_hi, b_hi) = (_ring_allreduce(_regime_at(tables[k], cut), k) for k in (lo, hi))
        alpha_ar, beta_ar = (1 - w) * a_lo + w * a_hi, (1 - w) * b_lo + w * b_hi
        out.append(Regime(cut, alpha_ar / steps, beta_ar * nodes / steps,
                          f"{name} from {cut:.0f} B ({nodes} nodes: between the {lo}- and {hi}-node tables)"))
    return tuple(out)


def _ring_allreduce(regime: Regime, ranks: int) -> tuple[float, float]:
    """The all-reduce alpha and beta a ring on ``ranks`` gives with this per-link regime (what the
    table's benchmark measured, inverted by `sim.calib.regimes.regimes_to_network`)."""
    steps = 2 * (ranks - 1)
    return steps * regime.alpha_s, steps * regime.beta_s_per_byte / ranks


def _regime_at(regimes: tuple[Regime, ...], nbytes: float) -> Regime:
    """The regime a message of ``nbytes`` falls in (the last starting at or below it)."""
    return [r for r in regimes if r.from_bytes <= nbytes][-1]
