"""The validated grid of a sweep: each configuration's cluster, workload and evaluation.

`sim.parallel.run_grid` builds a `Grid` in the caller's process: every
configuration is checked, each distinct cluster, workload (the model timed for
its GPU, batch and precision, and its one-GPU iteration time) and evaluation
(workload, scheduler, bucket size where the scheduler reads it, all-reduce
cost) is made once, and each row keeps three ids. A `ConfigProduct` hands its
rows over as value tuples (no dict per row), and the few distinct run settings,
clusters and framework costs are looked up by their values, so a row costs a
handful of dict lookups.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import os
from array import array
from collections.abc import Sequence
from itertools import repeat

import numpy as np

from sim.cluster import Cluster
from sim.core.cost import NO_COMM, CommCost
from sim.core.plan import NO_GRADIENTS
from sim.core.run import single_gpu_iteration_s
from sim.core.workload import check_run_args, check_run_options, resolve_model, with_sync_wait
from sim.errors import SimInputError
from sim.model import Model, load_model
from sim.schedulers import DEFAULT_BUCKET_MB, make_plan
from sim.schedulers.names import WFBP
from sim.schedulers.registry import knob_reads
from sim.sweep_plans import one_gpu_scheduler

__all__ = ["CLUSTER_DEFAULTS", "GRID_KEYS", "MAX_CLUSTERS", "MAX_WORKLOADS", "MISSING", "ConfigProduct", "Grid",
           "Workload", "check_distinct", "timing_cost"]

#: An absent key in a configuration's value tuple.
MISSING = object()
CLUSTER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Cluster)}
RUN_DEFAULTS = {
    "scheduler": WFBP,
    "precision": "fp32",
    "prefetch": False,
    "bucket_mb": DEFAULT_BUCKET_MB,
    "calibrate_iteration_s": None,
}
#: Keys a configuration may hold; ``model`` and ``batch_size`` are required.
GRID_KEYS = ("model", "batch_size", *RUN_DEFAULTS, *CLUSTER_DEFAULTS)
N_RUN = 2 + len(RUN_DEFAULTS)
#: Distinct clusters and workloads a grid may have at most (raise them here). Each is worked out once,
#: in the caller's process, before the workers start: a cluster (its costs) about 0.4 ms, a workload (the
#: model timed for its GPU, batch and precision, and kept) 0.5-1.2 ms and 9-27 KB on the 2-core
#: development machine, so the limits keep that under about 5 and 25 seconds. The zoo's million-
#: configuration sweep has 88 clusters and 1,900 workloads.
MAX_CLUSTERS = 10_000
MAX_WORKLOADS = 20_000
_LIMITS = {"clusters": "MAX_CLUSTERS", "workloads": "MAX_WORKLOADS"}


class GridTooBig(SimInputError):
    """A grid over `MAX_CLUSTERS` or `MAX_WORKLOADS`: refused as a whole, not by a row."""


def check_distinct(what: str, count: int) -> None:
    """Refuse a grid of more distinct ``what`` (clusters or workloads) than its limit."""
    limit = globals()[_LIMITS[what]]
    if count > limit:
        raise GridTooBig(f"the sweep has {count:,} distinct {what}; at most {limit:,} are allowed "
                            f"(sim.grid.{_LIMITS[what]}): split it, or take fewer GPU counts, networks or batch sizes")


class ConfigProduct(Sequence):
    """Every combination of some values, as configuration dicts made on demand.

    ``ConfigProduct(model=["resnet50", "vgg16"], gpus=[2, 4], batch_size=32)``
    is the four configurations of the two models and GPU counts (a value that
    is not a list or tuple is the same in every one), the last key varying
    fastest. `run_grid` takes it as it takes a list, without a million dicts
    held at once.
    """

    def __init__(self, **axes):
        unknown = sorted(set(axes) - set(GRID_KEYS))
        if unknown:
            raise SimInputError(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(GRID_KEYS)}")
        self.keys = tuple(axes)
        self.values = tuple(tuple(v) if isinstance(v, list | tuple) else (v,) for v in axes.values())
        self._len = int(np.prod([len(v) for v in self.values], dtype=object)) if self.values else 0

    def __len__(self) -> int:
        return self._len

    def __iter__(self):
        keys = self.keys
        if not keys:  # no axes: no configuration (as `__len__` says), not one empty one
            return
        for combo in itertools.product(*self.values):
            yield dict(zip(keys, combo, strict=True))

    def grid_rows(self):
        """Each configuration as a tuple of its values in `GRID_KEYS` order (absent: `MISSING`),
        without a dict per row (the keys were checked once, by the constructor)."""
        if not self.keys:
            return iter(())
        tail = (MISSING,)
        pick = operator.itemgetter(*(self.keys.index(k) if k in self.keys else len(self.keys) for k in GRID_KEYS))
        return map(pick, map(operator.add, itertools.product(*self.values), repeat(tail)))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._len))]
        if not -self._len <= i < self._len:
            raise IndexError("configuration index out of range")
        i %= self._len
        combo = []
        for values in reversed(self.values):
            i, k = divmod(i, len(values))
            combo.append(values[k])
        return dict(zip(self.keys, reversed(combo), strict=True))


def timing_cost(cost: CommCost) -> CommCost:
    """``cost`` without its label when only alpha and beta (and size regimes) time it, so that
    equal costs from different collectives are one evaluation."""
    return dataclasses.replace(cost, label="") if type(cost) is CommCost else cost


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
    """A model with compute times, and what the rows of its configurations share."""

    model: Model
    precision: str
    prefetch: bool
    batch_size: int
    single_gpu_iteration_s: float
    #: The one-GPU reference of a plan that updates per layer (the next batch read while the GPU updates:
    #: `sim.core.run.single_gpu_iteration_s`, ``update_overlaps_io``); the same without io or host copies.
    single_gpu_iteration_overlap_s: float


class Grid:
    """The validated grid: per row, its cluster, workload and evaluation ids (public for the benchmarks)."""

    def __init__(self, configs: Sequence[dict]):
        self._reset()
        product = isinstance(configs, ConfigProduct)
        self._typed = not product or any(map(_mixes_types, configs.values))
        if product and not self._typed and len(configs) and self._resolve_product(configs):
            return
        cids, wids, uids = array("q"), array("q"), array("q")  # per row, compact (a million rows: 24 MB)
        codes = array("q")
        code_of: dict[str, int] = {}
        rows = configs.grid_rows() if product else map(_values_of, configs)
        values: tuple = ()
        try:
            for values in rows:
                cid, wid, uid, scheduler = self._resolve(values)
                cids.append(cid)
                wids.append(wid)
                uids.append(uid)
                code = code_of.get(scheduler)
                if code is None:
                    code = code_of[scheduler] = len(self.schedulers)
                    self.schedulers.append(scheduler)
                codes.append(code)
        except (SimInputError, TypeError) as exc:  # the rows before it all passed
            raise SimInputError(f"configuration {len(cids)}: {_unhashable(values) or exc}") from None
        self.cluster_of_row = np.frombuffer(cids, dtype=np.int64).copy()
        self.workload_of_row = np.frombuffer(wids, dtype=np.int64).copy()
        self.unit_of_row = np.frombuffer(uids, dtype=np.int64).copy()
        self.scheduler_code_of_row = np.frombuffer(codes, dtype=np.int64).copy()
        self._drop_lookups()

    def _reset(self) -> None:
        """Nothing resolved yet."""
        self.clusters: list[tuple[Cluster, CommCost]] = []
        self.workloads: list[Workload] = []
        self.units: list[tuple] = []  # (workload id, scheduler or None, bucket_mb or None, cost)
        self.schedulers: list[str] = []  # the distinct scheduler names, by code
        self._models: dict[str, Model] = {}
        self._cluster_ids: dict[tuple, int] = {}
        self._runs: dict[tuple, tuple] = {}
        self._workload_ids: dict[tuple, int] = {}
        self._unit_ids: dict[tuple, int] = {}
        self._costs: dict[tuple, tuple[CommCost, int]] = {}  # (cluster id, scheduler) -> (cost, its id)
        self._cost_ids: dict[CommCost, int] = {}
        self._cost_of: list[CommCost] = []

    def _drop_lookups(self) -> None:
        """Forget what is needed only while rows resolve."""
        self._unit_ids, self._costs, self._cost_ids, self._cost_of = {}, {}, {}, []

    def _resolve_product(self, configs: ConfigProduct) -> bool:
        """Resolve a product by its axes instead of row by row: each distinct run setting, cluster,
        workload and evaluation once (in the order the rows first show them, as `_resolve` would),
        every row's ids by numpy. False, with nothing kept, where a value fails or a model brings its
        own communication times: then the rows resolve one by one (and the first bad one is named)."""
        try:
            ids = self._product_ids(configs)
        except GridTooBig:
            raise
        except (SimInputError, TypeError):
            ids = None
        if ids is None:
            self._reset()
            return False
        self.cluster_of_row, self.workload_of_row, self.unit_of_row, self.scheduler_code_of_row = ids
        self._drop_lookups()
        return True

    def _product_ids(self, configs: ConfigProduct) -> tuple | None:
        """(cluster, workload, evaluation, scheduler code) of every row of a product whose axes mix no
        types, or None for a trace-driven model."""
        run_values, run_row = _combos(configs, GRID_KEYS[2:N_RUN])
        cluster_values, cluster_row = _combos(configs, GRID_KEYS[N_RUN:])
        check_distinct("clusters", len(set(cluster_values)))
        runs = []
        for values in run_values:
            if values not in self._runs:
                self._runs[values] = _run_settings(values)
            runs.append(self._runs[values])
        cids = []
        for values in cluster_values:
            cid = self._cluster_ids.get(values)
            cids.append(self._add_cluster(values, values) if cid is None else cid)
        code_of: dict[str, int] = {}
        for run in runs:
            if run[0] not in code_of:
                code_of[run[0]] = len(self.schedulers)
                self.schedulers.append(run[0])
        wid_row = self._product_workloads(configs, runs, cids, run_row, cluster_row)
        if any(w.model.comm_s is not None for w in self.workloads):
            return None
        uid_row = self._product_units(runs, cids, wid_row, run_row, cluster_row)
        codes = np.array([code_of[run[0]] for run in runs], dtype=np.int64)
        return np.array(cids, dtype=np.int64)[cluster_row], wid_row, uid_row, codes[run_row]

    def _product_workloads(self, configs: ConfigProduct, runs: list, cids: list, run_row, cluster_row) -> np.ndarray:
        """Every row's workload id: a workload is the model, batch, the run's precision, prefetch and
        calibration and the cluster's GPU and wait factor, so rows are told apart by those only."""
        models, model_row = _combos(configs, ("model",))
        batches, batch_row = _combos(configs, ("batch_size",))
        model_part, model_key = _first_ids(models)  # (an axis may repeat a value)
        batch_part, batch_key = _first_ids(batches)
        run_part, run_key = _first_ids([run[1:4] for run in runs])
        clusters = [self.clusters[cid][0] for cid in cids]
        cluster_part, cluster_key = _first_ids([(c.gpu, c.sync_wait_factor()) for c in clusters])
        key = ((model_part[model_row] * len(batch_key) + batch_part[batch_row]) * len(run_key) + run_part[run_row])
        key *= len(cluster_key)
        key += cluster_part[cluster_row]
        first, inverse = _first_appearance(key)
        check_distinct("workloads", len(first))
        wids = np.empty(len(first), dtype=np.int64)
        for j, r in enumerate(first.tolist()):
            run, cluster = runs[run_row[r]], clusters[cluster_row[r]]
            wkey = (models[model_row[r]][0], cluster.gpu, batches[batch_row[r]][0], *run[1:4], None,
                    cluster.sync_wait_factor())
            wid = self._workload_ids.get(wkey)
            wids[j] = self._add_workload(wkey, cluster) if wid is None else wid
        return wids[inverse]

    def _product_units(self, runs: list, cids: list, wid_row, run_row, cluster_row) -> np.ndarray:
        """Every row's evaluation id: (workload, scheduler and bucket, cost), none on one GPU."""
        sched_part, sched_key = _first_ids([(run[0], run[4]) for run in runs])
        one_gpu = np.array([self.clusters[cid][0].gpus == 1 for cid in cids])
        cost_ids = np.full((len(cids), len(runs)), -1, dtype=np.int64)
        for c, cid in enumerate(cids):
            if one_gpu[c]:  # one GPU sends nothing: no cost
                continue
            for r, run in enumerate(runs):
                found = self._costs.get((cid, run[0]))
                if found is None:
                    cost = self.clusters[cid][0].framework_cost(self.clusters[cid][1], run[0])
                    found = self._costs[(cid, run[0])] = (cost, self._cost_id(cost))
                cost_ids[c, r] = found[1]
        alone = one_gpu[cluster_row]
        layered = np.array([one_gpu_scheduler(run[0]) is not None for run in runs], dtype=bool)
        sched = np.where(alone, len(sched_key) + layered[run_row], sched_part[run_row])
        cost = np.where(alone, -1, cost_ids[cluster_row, run_row]) + 1
        first, inverse = _first_appearance((wid_row * (len(sched_key) + 2) + sched) * (len(self._cost_of) + 1) + cost)
        costs = [NO_COMM, *self._cost_of]
        self.units.extend((wid, one_gpu_scheduler(runs[r][0]), None, NO_COMM) if one
                          else (wid, runs[r][0], runs[r][4], costs[c])
                          for wid, r, one, c in zip(wid_row[first].tolist(), run_row[first].tolist(),
                                                    alone[first].tolist(), cost[first].tolist(), strict=True))
        return inverse

    @property
    def scheduler_of_row(self) -> list[str]:
        """Each row's scheduler name."""
        return [self.schedulers[c] for c in self.scheduler_code_of_row.tolist()]

    def _resolve(self, values: tuple) -> tuple[int, int, int, str]:
        """Find or add one configuration's (values in `GRID_KEYS` order) cluster, workload and evaluation.

        Values are looked up with their types: 4 and 4.0, or 1 and True, are equal keys, but only
        one of each is a GPU count or a batch size, and a row is checked as if it came alone."""
        model, batch_size = values[0], values[1]
        if self._typed:
            types = tuple(map(type, values))
            run_key, cluster_key, types = (values[2:N_RUN], types[2:N_RUN]), (values[N_RUN:], types[N_RUN:]), types[:N_RUN]
        else:  # a product whose axes mix no types: equal values in a column are of one type
            run_key, cluster_key, types = values[2:N_RUN], values[N_RUN:], None
        run = self._runs.get(run_key)
        if run is None:
            run = self._runs[run_key] = _run_settings(values[2:N_RUN])
        scheduler, precision, prefetch, calibrate, bucket_key = run
        cid = self._cluster_ids.get(cluster_key)
        if cid is None:
            cid = self._add_cluster(cluster_key, values[N_RUN:])
        cluster = self.clusters[cid][0]
        wkey = (model, cluster.gpu, batch_size, precision, prefetch, calibrate, types, cluster.sync_wait_factor())
        wid = self._workload_ids.get(wkey)
        if wid is None:
            wid = self._add_workload(wkey, cluster)
        if cluster.gpus == 1:  # one GPU sends nothing: no plan
            ukey = (wid, one_gpu_scheduler(scheduler), None, -1)
        elif self.workloads[wid].model.comm_s is not None:  # trace-driven: the model's measured times
            w = self.workloads[wid]
            cost = cluster.framework_cost(cluster.comm_cost(w.model, w.precision), scheduler)
            ukey = (wid, scheduler, bucket_key, self._cost_id(cost))
        else:  # a cluster's cost with a scheduler's framework: worked out once
            found = self._costs.get((cid, scheduler))
            if found is None:
                cost = cluster.framework_cost(self.clusters[cid][1], scheduler)
                found = self._costs[(cid, scheduler)] = (cost, self._cost_id(cost))
            ukey = (wid, scheduler, bucket_key, found[1])
        uid = self._unit_ids.get(ukey)
        if uid is None:
            uid = self._unit_ids[ukey] = len(self.units)
            self.units.append((wid, ukey[1], ukey[2], NO_COMM if ukey[3] < 0 else self._cost_of[ukey[3]]))
        return cid, wid, uid, scheduler

    def _cost_id(self, cost: CommCost) -> int:
        """One id per distinct cost (equal costs from different clusters are one evaluation)."""
        cid = self._cost_ids.get(cost)
        if cid is None:
            cid = self._cost_ids[cost] = len(self._cost_of)
            self._cost_of.append(cost)
        return cid

    def _add_cluster(self, cluster_key: tuple, cluster_values: tuple) -> int:
        check_distinct("clusters", len(self.clusters) + 1)
        given = {k: v for k, v in zip(CLUSTER_DEFAULTS, cluster_values, strict=True) if v is not MISSING}
        cluster = Cluster(**given)
        cid = self._cluster_ids[cluster_key] = len(self.clusters)
        self.clusters.append((cluster, timing_cost(cluster.comm_cost())))
        return cid

    def _add_workload(self, wkey: tuple, cluster: Cluster) -> int:
        model, _, batch_size, precision, prefetch, calibrate, _, _ = wkey
        for key, value in (("model", model), ("batch_size", batch_size)):
            if value is MISSING:
                raise SimInputError(f"{key!r} is required")
        if isinstance(model, os.PathLike):  # a CSV path, as `load_model` takes it
            model = os.fspath(model)
        if isinstance(model, str):
            if model not in self._models:
                self._models[model] = load_model(model)
            model = self._models[model]
        elif not isinstance(model, Model):
            raise SimInputError(f"model must be a sim.Model or a name, got {type(model).__name__}")
        check_run_args(batch_size, 1, precision)
        check_distinct("workloads", len(self.workloads) + 1)
        timed = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate)
        single = single_gpu_iteration_s(timed, precision, prefetch)
        overlap = single_gpu_iteration_s(timed, precision, prefetch, update_overlaps_io=True)
        wid = self._workload_ids[wkey] = len(self.workloads)
        self.workloads.append(Workload(with_sync_wait(timed, cluster), precision, prefetch, int(batch_size), single,
                                       overlap))
        return wid

    def work(self, unit_ids) -> float:
        """Estimated work of some evaluations, in layer units (see `SERIAL_WORK_LIMIT`)."""
        return float(self._layers_of(np.fromiter(unit_ids, dtype=np.int64)).sum())

    def _layers_of(self, unit_ids: np.ndarray) -> np.ndarray:
        """Each evaluation's layers (its workload's), as floats."""
        layers = np.array([float(w.model.num_layers) for w in self.workloads])
        wids = np.fromiter((u[0] for u in self.units), dtype=np.int64, count=len(self.units))
        return layers[wids[unit_ids]] if len(unit_ids) else np.zeros(0)

    def chunks(self, parts: int) -> list[list[int]]:
        """Evaluation ids in ``parts`` runs of about equal work, evaluations
        that may share a plan kept next to each other (sorted by workload, scheduler,
        bucket size, alpha and beta)."""
        units = self.units
        names = sorted({str(u[1]) for u in units})
        rank = {name: i for i, name in enumerate(names)}
        columns = [[u[3].beta_s_per_byte for u in units], [u[3].alpha_s for u in units],
                   [u[2] or 0.0 for u in units], [rank[str(u[1])] for u in units], [u[0] for u in units]]
        order = np.lexsort([np.array(c) for c in columns])  # the last column first; stable
        weights = self._layers_of(order)
        bounds = np.searchsorted(np.cumsum(weights), np.linspace(0, weights.sum(), parts + 1)[1:-1], side="right")
        return [chunk.tolist() for chunk in np.split(order.astype(np.int64), bounds) if chunk.size]

    def payload(self, unit_ids: list[int]) -> tuple[dict, np.ndarray, list[tuple]]:
        """What a worker needs for these evaluations: their workloads, ids and keys."""
        units = list(map(self.units.__getitem__, unit_ids))
        workloads = {wid: self.workloads[wid] for wid in dict.fromkeys(u[0] for u in units)}
        return workloads, np.asarray(unit_ids, dtype=np.int64), units


def _combos(configs: ConfigProduct, keys: tuple) -> tuple[list[tuple], np.ndarray]:
    """The distinct combinations of ``keys``' values in a product, in the order its rows first show
    them, as value tuples in ``keys`` order (absent: `MISSING`), and each row's combination: the
    rows run through the axes' values with the last axis fastest, so the combinations of some axes
    first appear in their own product's order."""
    shape = [len(v) for v in configs.values]
    on = [a for a, k in enumerate(configs.keys) if k in keys]
    ids = np.zeros([1] * len(shape), dtype=np.int64)
    step = 1
    for a in reversed(on):
        ids = ids + (np.arange(shape[a], dtype=np.int64) * step).reshape([-1 if b == a else 1 for b in range(len(shape))])
        step *= shape[a]
    rows = np.broadcast_to(ids, shape).ravel()
    where = {configs.keys[a]: j for j, a in enumerate(on)}
    combos = [tuple(combo[where[k]] if k in where else MISSING for k in keys)
              for combo in itertools.product(*(configs.values[a] for a in on))]
    return combos, rows


def _first_ids(values: list) -> tuple[np.ndarray, dict]:
    """An id per value, equal values one id (numbered as they first come)."""
    ids: dict = {}
    return np.array([ids.setdefault(v, len(ids)) for v in values], dtype=np.int64), ids


def _first_appearance(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each distinct key first appears, in that order, and each key's rank in it."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.ravel()]


def _values_of(config) -> tuple:
    """A configuration dict's values in `GRID_KEYS` order (absent: `MISSING`)."""
    if not isinstance(config, dict):
        raise SimInputError(f"a configuration is a dict, got {type(config).__name__}")
    if not config.keys() <= _KNOWN:
        unknown = ", ".join(sorted(map(str, config.keys() - _KNOWN)))
        raise SimInputError(f"unknown key(s) {unknown}; valid: {', '.join(GRID_KEYS)}")
    return tuple(map(config.get, GRID_KEYS, repeat(MISSING)))


_KNOWN = frozenset(GRID_KEYS)


def _mixes_types(values) -> bool:
    """Whether equal values of different types (4 and 4.0, 1 and True) are among ``values``."""
    seen: dict = {}
    try:
        return any(seen.setdefault(v, type(v)) is not type(v) for v in values)
    except TypeError:  # an unhashable value: looked up with the types, the row will name it
        return True


def _unhashable(values: tuple) -> str | None:
    """What is wrong with a configuration that holds a list (or another unhashable value) where
    one value belongs; None if it holds none."""
    for key, value in zip(GRID_KEYS, values, strict=False):
        try:
            hash(value)
        except TypeError:
            return f"{key} must be one value, got a {type(value).__name__}"
    return None


def _run_settings(run_values: tuple) -> tuple:
    """(scheduler, precision, prefetch, calibrate_iteration_s, bucket_mb if the scheduler reads it else
    None) of a configuration's run values, defaults filled in and the scheduler and bucket checked."""
    scheduler, precision, prefetch, bucket_mb, calibrate = [
        d if v is MISSING else v for v, d in zip(run_values, RUN_DEFAULTS.values(), strict=True)]
    make_plan(scheduler, NO_GRADIENTS, NO_COMM, bucket_mb=bucket_mb)  # checks the name
    check_run_options(prefetch, bucket_mb)  # as `sim.simulate` checks them
    # make_plan hands bucket_mb to the bucket scheduler only
    return scheduler, precision, bool(prefetch), calibrate, bucket_mb if knob_reads("bucket_mb", scheduler,
                                                                                      "allreduce") else None
