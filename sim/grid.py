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

__all__ = ["CLUSTER_DEFAULTS", "GRID_KEYS", "MISSING", "ConfigProduct", "Grid", "Workload", "timing_cost"]

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


class Grid:
    """The validated grid: per row, its cluster, workload and evaluation ids (public for the benchmarks)."""

    def __init__(self, configs: Sequence[dict]):
        self.clusters: list[tuple[Cluster, CommCost]] = []
        self.workloads: list[Workload] = []
        self.units: list[tuple] = []  # (workload id, scheduler or None, bucket_mb or None, cost)
        self._models: dict[str, Model] = {}
        self._cluster_ids: dict[tuple, int] = {}
        self._runs: dict[tuple, tuple] = {}
        self._workload_ids: dict[tuple, int] = {}
        self._unit_ids: dict[tuple, int] = {}
        self._costs: dict[tuple, tuple[CommCost, int]] = {}  # (cluster id, scheduler) -> (cost, its id)
        self._cost_ids: dict[CommCost, int] = {}
        self._cost_of: list[CommCost] = []
        cids, wids, uids = array("q"), array("q"), array("q")  # per row, compact (a million rows: 24 MB)
        self.schedulers: list[str] = []  # the distinct scheduler names, by code
        codes = array("q")
        code_of: dict[str, int] = {}
        product = isinstance(configs, ConfigProduct)
        self._typed = not product or any(map(_mixes_types, configs.values))
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
        self._unit_ids, self._costs, self._cost_ids, self._cost_of = {}, {}, {}, []  # only while rows resolve

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
            ukey = (wid, None, None, -1)
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
        if isinstance(model, str):
            if model not in self._models:
                self._models[model] = load_model(model)
            model = self._models[model]
        elif not isinstance(model, Model):
            raise SimInputError(f"model must be a sim.Model or a name, got {type(model).__name__}")
        check_run_args(batch_size, 1, precision)
        timed = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate)
        single = single_gpu_iteration_s(timed, precision, prefetch)
        wid = self._workload_ids[wkey] = len(self.workloads)
        self.workloads.append(Workload(with_sync_wait(timed, cluster), precision, prefetch, int(batch_size), single))
        return wid

    def work(self, unit_ids) -> float:
        """Estimated work of some evaluations, in layer units (see `SERIAL_WORK_LIMIT`)."""
        return float(sum(self.workloads[self.units[uid][0]].model.num_layers for uid in unit_ids))

    def chunks(self, parts: int) -> list[list[int]]:
        """Evaluation ids in ``parts`` runs of about equal work, evaluations
        that may share a plan kept next to each other."""
        def key(uid):
            wid, scheduler, bucket_mb, cost = self.units[uid]
            return wid, str(scheduler), bucket_mb or 0.0, cost.alpha_s, cost.beta_s_per_byte

        order = sorted(range(len(self.units)), key=key)
        weights = np.array([self.work([u]) for u in order])
        bounds = np.searchsorted(np.cumsum(weights), np.linspace(0, weights.sum(), parts + 1)[1:-1], side="right")
        return [chunk.tolist() for chunk in np.split(np.asarray(order, dtype=np.int64), bounds) if chunk.size]

    def payload(self, unit_ids: list[int]) -> tuple[dict, list[tuple]]:
        """What a worker needs for these evaluations: their workloads and keys."""
        units = [(uid, *self.units[uid]) for uid in unit_ids]
        workloads = {wid: self.workloads[wid] for _, wid, *_ in units}
        return workloads, units


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
