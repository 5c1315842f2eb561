"""Validation against published measurements: simulate every case, report the error.

The cases live in ``data/validation/cases.csv``. Each row cites its paper or
repository (figure or table, and file) and carries what is needed to simulate
it: model and batch size, GPUs and GPUs per node, networks, the method mapped
to a scheduler (a method of the survey, `sim.methods.METHODS`, is simulated
as its preset: architecture, scheduler and settings; others by the
``scheduler`` column), precision, and one measured calibration point
(``calib_gpus`` GPUs in one node reaching ``calib_samples_per_s``).

Calibration is the only use of measured speed: the model's compute times are
scaled by one factor so that the calibration configuration, which has no
network traffic, reaches the measured throughput. Nothing is fitted to the
multi-node rows that the error is measured on.

``model`` is a zoo name (with ``model_kwargs`` such as ``seq_len=64``) or
``bcaffe:<log>``, a layer table imported from the B-Caffe per-blob logs in
``data/reference/bcaffe_k80_10gbe`` (`DEFAULT_REFERENCE_DIR`, or the folder
given as ``reference_dir``); those cases are skipped, with the reason, where
the log is absent. ``model_kwargs`` ``measured_comm=false`` drops the log's
measured all-reduce times so the cost model times the messages.

``error_pct`` is signed: (simulated - measured) / measured x 100.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from sim.api import calibrate, simulate
from sim.calib.coarse import coarse_iteration
from sim.calib.importers import bcaffe_layers
from sim.catalog import DATA_DIR
from sim.cluster import Cluster
from sim.csv_table import read_text_file
from sim.errors import SimInputError
from sim.frameworks import resolve_framework
from sim.methods import METHODS
from sim.model import Model, load_model, model_from_frame
from sim.schedulers.names import WFBP

__all__ = [
    "CASE_COLUMNS",
    "DEFAULT_REFERENCE_DIR",
    "case_model",
    "coarse_versus_fine",
    "fit_ps_link_efficiency",
    "load_cases",
    "method_or_scheduler",
    "model_kwargs",
    "run_validation",
    "summarize",
]

CASES_PATH = DATA_DIR / "validation" / "cases.csv"
#: The measured traces the ``bcaffe:`` cases read: copied into the repository (see its README).
DEFAULT_REFERENCE_DIR = DATA_DIR / "reference"
CASE_COLUMNS = (
    "case", "source", "citation", "model", "model_kwargs", "batch_size", "gpus", "gpus_per_node", "gpu",
    "network", "intra", "collective", "method", "scheduler", "precision", "calib_gpus", "calib_samples_per_s",
    "measured_samples_per_s", "measured_std", "note",
)
#: Optional case columns and their defaults: the framework the case ran on (`sim.frameworks`) and the
#: case's part in fitting (`SPLITS`): parameters are fitted on ``calibration`` cases only
#: (`sim.calib.fit_validation`), and the error is reported on the ``held-out`` rest; the node's
#: topology (`sim.topology`: ``flat``, or ``dgx1-4nic`` for NVIDIA's DGX-1 rows). An empty cell takes the default.
OPTIONAL_COLUMNS = {"framework": "auto", "split": "held-out", "topology": "flat"}
SPLITS = ("calibration", "held-out")


def load_cases(path: Path | str = CASES_PATH) -> pd.DataFrame:
    """The validation table, checked: every column present, every case cited."""
    table = pd.read_csv(path, keep_default_na=False)
    missing = [c for c in CASE_COLUMNS if c not in table.columns]
    if missing:
        raise SimInputError(f"{Path(path).name}: missing column(s) {', '.join(missing)}")
    for i, row in enumerate(table.itertuples(index=False), start=2):
        if not row.citation.strip() or not row.source.strip():
            raise SimInputError(f"{Path(path).name} row {i}: every case needs a source and a citation")
    if table["case"].duplicated().any():
        raise SimInputError(f"{Path(path).name}: duplicate case names")
    for column, default in OPTIONAL_COLUMNS.items():
        table[column] = table[column].replace("", default) if column in table.columns else default
    bad = table.loc[~table["split"].isin(SPLITS), "case"]
    if len(bad):
        raise SimInputError(f"{Path(path).name}: case {bad.iloc[0]}: split must be one of {', '.join(SPLITS)}")
    return table


def model_kwargs(text: str) -> dict:
    """A case's ``model_kwargs`` cell (``key=value;...``) as keyword arguments: digits as ints, true/false as bools."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in str(text).split(";"))):
        key, _, value = part.partition("=")
        value = value.strip()
        out[key.strip()] = int(value) if value.isdigit() else {"true": True, "false": False}.get(value, value)
    return out


def _base_model(spec: str, kwargs: dict, reference_dir: Path) -> Model:
    if spec.startswith("bcaffe:"):
        log = reference_dir / "bcaffe_k80_10gbe" / spec.split(":", 1)[1]
        if not log.is_file():
            raise FileNotFoundError(str(log))
        table = bcaffe_layers(read_text_file(log, str(log), kind="B-Caffe log"), log.name)
        if not kwargs.get("measured_comm", True):
            table = table.drop(columns=["comm_ms"])
        return model_from_frame(table, f"googlenet-caffe ({log.name})", source=f"B-Caffe trace {log.name}")
    return load_model(spec, **{k: v for k, v in kwargs.items() if k != "measured_comm"})


def _calibrated(row, model: Model, cluster: Cluster) -> Model:
    """Scale compute so that ``calib_gpus`` GPUs in one node reach the calibration throughput."""
    batch, precision = int(row.batch_size), row.precision
    model = model.timed(gpu=cluster.gpu, batch_size=batch, precision=precision)
    k = int(row.calib_gpus)
    target_s = batch * k / float(row.calib_samples_per_s)
    measured_backward = model.comm_s is not None
    if measured_backward:
        # A trace's backward times were measured; only its forward (assumed to be half the
        # backward) is not. Keep the measured backward and let the calibration point set the
        # forward, which takes up the rest of the one-node iteration (data layer, solver, and
        # anything else that does not overlap the all-reduces).
        def scaled(scale: float) -> Model:
            return dataclasses.replace(model, fwd_s=model.fwd_s * scale, comm_s=None)
    else:
        def scaled(scale: float) -> Model:
            return model.scaled(scale)

    if k == 1 and not measured_backward:
        return calibrate(model, target_s, precision=precision)
    node = dataclasses.replace(cluster, gpus=k, gpus_per_node=max(k, cluster.gpus_per_node))

    def iteration_s(scale: float) -> float:
        return simulate(scaled(scale), node, WFBP, batch_size=batch, precision=precision).iteration_time_s

    lo, hi = 1e-3, 1e4  # the iteration time grows monotonically with the compute scale
    if not iteration_s(lo) <= target_s <= iteration_s(hi):
        raise SimInputError(f"case {row.case}: calibration point out of reach")
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if iteration_s(mid) < target_s else (lo, mid)
        if hi / lo - 1 < 1e-12:
            break
    best = scaled((lo * hi) ** 0.5)
    return dataclasses.replace(best, comm_s=model.comm_s)


def _cluster(row, links: dict | None = None, slowdowns: dict | None = None,
             sync_jitter_cv: float | None = None, comm_slowdowns: dict | None = None,
             tree_chunk_bytes: float | None = None, size_regimes: bool = True) -> Cluster:
    """The case's cluster; ``links`` maps a network preset to an effective rate
    in Gb/s that replaces the preset's, ``slowdowns`` and ``comm_slowdowns`` a
    link to its interference coefficients (compute slowed by communication,
    communication slowed by compute), ``sync_jitter_cv`` replaces the default
    jitter (all used when fitting them); ``size_regimes`` False gives every
    preset its one line instead of its measured size-regime table."""
    links, slowdowns, comm_slowdowns = links or {}, slowdowns or {}, comm_slowdowns or {}
    crossed = row.network if int(row.gpus) > int(row.gpus_per_node) else row.intra
    return Cluster(gpus=int(row.gpus), gpus_per_node=int(row.gpus_per_node), network=row.network,
                   intra=row.intra, collective=row.collective, gpu=row.gpu,
                   framework=getattr(row, "framework", "auto") or "auto",
                   topology=getattr(row, "topology", "flat") or "flat",
                   network_gbps=links.get(row.network), intra_gbps=links.get(row.intra),
                   compute_slowdown=slowdowns.get(crossed), comm_slowdown=comm_slowdowns.get(crossed),
                   sync_jitter_cv=sync_jitter_cv, tree_chunk_bytes=tree_chunk_bytes, size_regimes=size_regimes)


def case_model(case: str, reference_dir: Path | str | None = None) -> tuple[pd.Series, Model]:
    """One case's row and its calibrated model, as `run_validation` simulates it."""
    cases = load_cases()
    match = cases.loc[cases["case"] == case]
    if match.empty:
        raise SimInputError(f"unknown validation case {case!r}")
    row = next(match.itertuples(index=False))
    reference_dir = Path(reference_dir) if reference_dir is not None else DEFAULT_REFERENCE_DIR
    base = _base_model(row.model, model_kwargs(row.model_kwargs), reference_dir)
    return match.iloc[0], _calibrated(row, base, _cluster(row))


def run_validation(cases: pd.DataFrame | None = None, reference_dir: Path | str | None = None,
                   overrides: dict | None = None, method_options: dict | None = None,
                   links: dict | None = None, launch_us: dict | None = None,
                   slowdowns: dict | None = None, sync_jitter_cv: float | None = None,
                   comm_slowdowns: dict | None = None, tree_chunk_bytes: float | None = None,
                   size_regimes: bool = True) -> pd.DataFrame:
    """Simulate every case; one row each with measured, simulated and signed error.

    ``overrides`` replaces case columns for every case (e.g. ``{"collective":
    "hierarchical"}``), to study how a modelling choice moves the error.
    Cases whose inputs are missing carry ``status = "skipped: ..."``.
    ``method_options`` are laid over the options of every method preset a case
    runs (e.g. ``{"ps_link_efficiency": 0.5}``), to fit or study one setting.
    ``links`` ({preset: effective Gb/s}), ``launch_us`` ({framework: us per
    message}), ``slowdowns`` and ``comm_slowdowns`` ({link: interference
    coefficient}, `sim.interference`) replace those presets' values, for fitting them;
    ``sync_jitter_cv`` and ``tree_chunk_bytes`` replace the clusters' defaults;
    ``size_regimes`` False gives the presets their one line (an ablation).
    """
    cases = load_cases() if cases is None else cases
    reference_dir = Path(reference_dir) if reference_dir is not None else DEFAULT_REFERENCE_DIR
    if overrides:
        cases = cases.assign(**overrides)
    calibrated: dict[tuple, Model] = {}
    rows = []
    for row in cases.itertuples(index=False):
        out = {"case": row.case, "source": row.source, "method": row.method, "scheduler": row.scheduler,
               "model": row.model, "gpus": int(row.gpus), "batch_size": int(row.batch_size),
               "network": row.network, "split": row.split, "measured": float(row.measured_samples_per_s),
               "simulated": np.nan, "error_pct": np.nan, "status": "ok", "citation": row.citation}
        try:
            cluster = _cluster(row, links, slowdowns, sync_jitter_cv, comm_slowdowns, tree_chunk_bytes, size_regimes)
            if launch_us:
                preset = METHODS.get(row.method)
                fw = resolve_framework(cluster.framework, preset.scheduler if preset else row.scheduler,
                                       preset.architecture if preset else "allreduce")
                if fw.name in launch_us:
                    cluster = dataclasses.replace(cluster, launch_us=float(launch_us[fw.name]))
            key = (row.model, row.model_kwargs, row.batch_size, row.precision, row.gpu, row.calib_gpus,
                   row.calib_samples_per_s, row.intra, row.collective, int(row.gpus_per_node))
            if key not in calibrated:
                calibrated[key] = _calibrated(row, _base_model(row.model, model_kwargs(row.model_kwargs), reference_dir),
                                              cluster)
            by_method = {"method": row.method, "options": method_options} if row.method in METHODS else {}
            res = simulate(calibrated[key], cluster, row.scheduler, batch_size=int(row.batch_size),
                           precision=row.precision, **by_method)
            out["simulated"] = res.metrics["throughput_samples_per_s"]
            out["error_pct"] = 100.0 * (out["simulated"] - out["measured"]) / out["measured"]
            coarse = coarse_iteration(calibrated[key], cluster, batch_size=int(row.batch_size), precision=row.precision)
            out["coarse_base_s"] = coarse["iteration_time_s"] - coarse["comm_exposed_s"]
            out["coarse_comm_s"] = coarse["comm_s"]
            out["coarse_backward_s"] = coarse["backward_s"]
        except FileNotFoundError as exc:
            out["status"] = f"skipped: reference file {exc} not found"
        rows.append(out)
    return pd.DataFrame(rows)


def _errors(name: str, grp: pd.DataFrame) -> dict:
    err = grp["error_pct"]
    return {"source": name, "cases": len(grp), "median_abs_error_pct": float(err.abs().median()),
            "worst_abs_error_pct": float(err.abs().max()),
            "worst_case": grp.loc[err.abs().idxmax(), "case"] if len(grp) else "",
            "bias_pct": float(err.median()), "too_fast": int((err > 0).sum()), "too_slow": int((err < 0).sum())}


def method_or_scheduler(results: pd.DataFrame) -> pd.Series:
    """Each case's survey method, or its scheduler when it names none (NVIDIA's DDP and Horovod rows)."""
    method = results["method"].fillna("")
    return method.where(method != "", results["scheduler"]) if "scheduler" in results.columns else method


def summarize(results: pd.DataFrame, by: str = "source") -> pd.DataFrame:
    """Median and worst absolute error and the bias (median signed error; a
    positive error predicts too fast), overall and per ``by`` (``source``,
    ``method`` (or the scheduler of a case without one), ``network`` or ``split``; the first column keeps the name
    ``source``). Only held-out cases when ``split`` is not the grouping and
    some cases are held out; see `summarize_split` for both parts."""
    done = results.loc[results["status"] == "ok"]
    if by != "split" and "split" in done.columns and (done["split"] == "held-out").any():
        done = done.loc[done["split"] == "held-out"]
    if by == "method":
        done = done.assign(method=method_or_scheduler(done))
    parts = [("all", done)] + [(str(key), grp) for key, grp in done.groupby(by, sort=True)]
    return pd.DataFrame([_errors(name, grp) for name, grp in parts])


def summarize_split(results: pd.DataFrame) -> pd.DataFrame:
    """`summarize` of the calibration and the held-out cases apart, and of all."""
    return summarize(results, by="split")


def _coarse_throughput(results: pd.DataFrame, rho: float) -> np.ndarray:
    exposed = np.maximum(results["coarse_comm_s"] - rho * results["coarse_backward_s"], 0.0)
    iteration_s = results["coarse_base_s"] + exposed
    return (results["batch_size"] * results["gpus"] / iteration_s).to_numpy()


def coarse_versus_fine(results: pd.DataFrame) -> dict:
    """The coarse-grained predictor (Li et al., TPDS 2022: phases in sequence, one
    all-reduce of every gradient) against the measurements, beside this DAG model.

    The heuristic's overlap rho is fitted to the measurements, so it is fitted
    on the calibration cases (``split``) and checked on the held-out ones, as
    every fitted value is; both errors are reported (the ``train`` and ``test``
    keys: calibration and held-out). The plain coarse model (rho = 0) fits nothing.
    """
    done = results.loc[results["status"] == "ok"].reset_index(drop=True)
    train, test = done.loc[done["split"] == "calibration"], done.loc[done["split"] == "held-out"]
    if train.empty or test.empty:
        raise SimInputError("the coarse predictor needs calibration and held-out cases to fit and check rho")
    grid = np.linspace(0.0, 1.0, 1001)
    losses = [float(np.median(np.abs(_coarse_throughput(train, r) / train["measured"] - 1))) for r in grid]
    rho = float(grid[int(np.argmin(losses))])

    def median_abs_pct(frame: pd.DataFrame, predicted) -> float:
        return float(100 * np.median(np.abs(np.asarray(predicted) / frame["measured"].to_numpy() - 1)))

    return {
        "cases": len(done),
        "fine_median_abs_error_pct": median_abs_pct(done, done["simulated"]),
        "coarse_median_abs_error_pct": median_abs_pct(done, _coarse_throughput(done, 0.0)),
        "coarse_rho_fitted_on_train": rho,
        "coarse_rho_train_median_abs_error_pct": median_abs_pct(train, _coarse_throughput(train, rho)),
        "coarse_rho_test_median_abs_error_pct": median_abs_pct(test, _coarse_throughput(test, rho)),
        "fine_test_median_abs_error_pct": median_abs_pct(test, test["simulated"]),
    }


def fit_ps_link_efficiency(cases: pd.DataFrame | None = None, grid=None) -> dict:
    """Fit the share of the network's rate that parameter-server push and pull
    reach (``ps_link_efficiency``) to the survey's PS rows.

    Only the PS methods' multi-node rows depend on it. They are split as every
    case is (``split``): the calibration rows (8 and 32 GPUs) fit, the median
    absolute error minimised over ``grid``; the held-out multi-node rows (16
    GPUs) check; both errors are returned.
    """
    cases = load_cases() if cases is None else cases
    ps = cases.loc[cases["method"].map(lambda m: m in METHODS and METHODS[m].architecture == "ps")
                   & (cases["gpus"] > cases["gpus_per_node"])]
    train, test = ps.loc[ps["split"] == "calibration"], ps.loc[ps["split"] == "held-out"]
    grid = np.round(np.arange(0.20, 1.0001, 0.02), 2) if grid is None else np.asarray(grid)

    def median_abs(frame: pd.DataFrame, eff: float) -> float:
        out = run_validation(frame, method_options={"ps_link_efficiency": float(eff)})
        return float(out["error_pct"].abs().median())

    losses = [median_abs(train, e) for e in grid]
    best = float(grid[int(np.argmin(losses))])
    return {"ps_link_efficiency": best, "train_cases": len(train), "test_cases": len(test),
            "train_median_abs_error_pct": min(losses), "test_median_abs_error_pct": median_abs(test, best),
            "test_median_abs_error_pct_at_1": median_abs(test, 1.0)}
