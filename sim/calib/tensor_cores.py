"""Fit the tensor cores' share of the fp32 efficiency on one-GPU measurements; report the rest.

The compute model (`sim.compute`) takes each layer type's efficiency as a
fraction of the GPU's peak. Tensor cores do not reach the same fraction of
their (eight times higher) fp16 peak as CUDA cores of the fp32 peak, and
convolutions fall further short than large matrix products, so each family of
layer types (``data/tensor_cores.csv``: ``conv`` and ``gemm``) has a scale on
its efficiency at fp16 and amp. A scale is fitted so that the simulated
one-GPU speedup from fp32 to mixed precision matches the measured one, on the
rows of ``data/validation/mixed_precision.csv`` whose ``split`` is
``calibration`` and whose ``fits`` names that family; every other row is held
out and reported (`tensor_core_report`). A row's base precision is ``fp32``
unless its optional ``base_precision`` column says ``tf32`` (an Ampere GPU's
TF32 against its mixed precision; the ``fp32_*`` columns then hold the TF32
run). Both sides of such a row take the same scales, which cancel: it checks
the ratio of the GPU's TF32 and FP16 peaks, not the scales, and is reported
apart from them. The speedup is a ratio of two
measurements on the same GPU and software, so the fp32 efficiencies, which are
assumptions, cancel to first order.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sim.calib.fit_validation import golden_section
from sim.calib.validation import model_kwargs
from sim.catalog import DATA_DIR
from sim.compute import layer_times_s, tensor_core_families, tensor_core_scales, update_time_s
from sim.errors import SimInputError
from sim.model import load_model

__all__ = ["MIXED_PRECISION_PATH", "families", "fit_rows", "fit_tensor_cores", "load_speedups", "predicted_speedup",
           "tensor_core_report"]

MIXED_PRECISION_PATH = DATA_DIR / "validation" / "mixed_precision.csv"
_COLUMNS = ("case", "citation", "model", "model_kwargs", "gpu", "optimizer", "fp32_batch", "fp32_samples_per_s",
            "mixed_batch", "mixed_precision", "mixed_samples_per_s", "split", "fits")
#: Bounds of a fitted scale: a tenth to all of the fp32 efficiency.
_LOW, _HIGH = 0.05, 1.0


def families() -> dict[str, tuple[str, ...]]:
    """Family -> its layer types, as ``data/tensor_cores.csv`` lists them (`sim.compute.tensor_core_families`)."""
    return {family: types for family, (types, _) in tensor_core_families().items()}


def load_speedups(path=MIXED_PRECISION_PATH) -> pd.DataFrame:
    """The one-GPU fp32 and mixed-precision measurements, checked: every column, a citation each."""
    table = pd.read_csv(path, keep_default_na=False)
    missing = [c for c in _COLUMNS if c not in table.columns]
    if missing:
        raise SimInputError(f"mixed_precision.csv: missing column(s) {', '.join(missing)}")
    if "base_precision" not in table.columns:
        table["base_precision"] = "fp32"
    table["base_precision"] = table["base_precision"].replace("", "fp32")
    for i, row in enumerate(table.itertuples(index=False), start=2):
        if row.base_precision not in ("fp32", "tf32"):
            raise SimInputError(f"mixed_precision.csv row {i}: base_precision must be fp32 or tf32, "
                                f"got {row.base_precision!r}")
        if not row.citation.strip():
            raise SimInputError(f"mixed_precision.csv row {i}: every row needs a citation")
        if row.split not in ("calibration", "held-out"):
            raise SimInputError(f"mixed_precision.csv row {i}: split must be calibration or held-out")
    return table


def _per_sample_s(model, gpu: str, batch: int, precision: str, optimizer: str, scale) -> float:
    fwd, bwd = layer_times_s(model.layer_types, model.fwd_flops, model.params, model.out_elems, gpu=gpu,
                             batch_size=batch, precision=precision, tensor_core_scale=scale)
    update = update_time_s(model.total_params, gpu=gpu, precision=precision, optimizer=optimizer)
    return (float(np.sum(fwd)) + float(np.sum(bwd)) + update) / batch


def predicted_speedup(row, scale: dict[str, float] | None = None) -> float:
    """The simulated one-GPU speedup of ``row`` from its base precision (fp32, or tf32) to its mixed
    precision (samples per second)."""
    model = load_model(row.model, **model_kwargs(row.model_kwargs))
    fp32 = _per_sample_s(model, row.gpu, int(row.fp32_batch), row.base_precision, row.optimizer, scale)
    mixed = _per_sample_s(model, row.gpu, int(row.mixed_batch), row.mixed_precision, row.optimizer, scale)
    return fp32 / mixed


def _loss(rows: pd.DataFrame, scale: dict[str, float]) -> float:
    return sum(abs(math.log(predicted_speedup(r, scale) * r.fp32_samples_per_s / r.mixed_samples_per_s))
               for r in rows.itertuples(index=False))


def fit_tensor_cores(cases: pd.DataFrame | None = None, rounds: int = 2) -> dict[str, float]:
    """Each family's scale, fitted on its calibration rows (the sum of absolute log ratios of
    simulated to measured speedup, golden-section search in [0.05, 1]), one family after the
    other, twice round, the others at their current values."""
    cases = load_speedups() if cases is None else cases
    types = families()
    values = {family: 1.0 for family in types}

    def scale_of(vals: dict[str, float]) -> dict[str, float]:
        return {t: vals[family] for family, members in types.items() for t in members}

    for _ in range(rounds):
        for family in types:
            rows = cases[(cases["split"] == "calibration") & (cases["fits"] == family)]
            if len(rows):
                values[family] = round(golden_section(lambda v, f=family, r=rows: _loss(r, scale_of({**values, f: v})),
                                                      _LOW, _HIGH, 1e-4), 3)
    return values


def fit_rows(fitted: dict[str, float]) -> list[dict]:
    """Per family: its layer types, the ``fitted`` scale and the one ``data/tensor_cores.csv`` holds."""
    return [{"family": family, "layer_types": ";".join(types), "fitted": fitted[family], "stored": stored}
            for family, (types, stored) in tensor_core_families().items()]


def tensor_core_report(cases: pd.DataFrame | None = None, scale: dict[str, float] | None = None) -> pd.DataFrame:
    """Every row's measured and simulated speedup under ``scale`` (None: the stored scales), and the
    signed error of the simulated one in percent."""
    cases = load_speedups() if cases is None else cases
    scale = tensor_core_scales() if scale is None else scale
    rows = []
    for r in cases.itertuples(index=False):
        measured = r.mixed_samples_per_s / r.fp32_samples_per_s
        simulated = predicted_speedup(r, scale)
        rows.append({"case": r.case, "split": r.split, "base_precision": r.base_precision,
                     "mixed_precision": r.mixed_precision,
                     "measured_speedup": measured, "simulated_speedup": simulated,
                     "error_pct": 100 * (simulated - measured) / measured})
    return pd.DataFrame(rows)
