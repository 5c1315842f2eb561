"""The catalogs as rows: models, GPUs, networks, collectives, schedulers and methods.

What ``python -m sim list`` prints; each row is a plain dict.
"""

from __future__ import annotations

from sim.catalog import gpus, networks
from sim.comm import COLLECTIVES
from sim.methods import method_table
from sim.model import zoo_model, zoo_names
from sim.schedulers.registry import specs

__all__ = ["CATALOGS", "catalog_listing"]

#: What `catalog_listing` holds, in order.
CATALOGS = ("models", "gpus", "networks", "collectives", "schedulers", "methods")


def catalog_listing() -> dict[str, list[dict]]:
    """Every catalog (`CATALOGS`) as a list of rows."""
    models = [zoo_model(name) for name in zoo_names()]
    return {
        "models": [
            {"name": m.name, "layers": m.num_layers, "params": m.total_params, "source": m.source} for m in models
        ],
        "gpus": [
            {"name": g.name, "fp32_tflops": g.fp32_tflops, "tf32_tflops": g.tf32_tflops,
             "fp16_tensor_tflops": g.fp16_tensor_tflops, "mem_bw_gb_per_s": g.mem_bw_gb_per_s,
             "mem_gb": g.mem_gb, "source": g.source}
            for g in gpus().values()
        ],
        "networks": [
            {"name": n.name, "scope": n.scope, "line_rate_gbps": n.line_rate_gbps, "effective_gbps": n.effective_gbps,
             "alpha_s": n.alpha_s, "source": n.source}
            for n in networks().values()
        ],
        "collectives": [{"name": k, "formula": (f.__doc__ or "").strip().splitlines()[0]} for k, f in COLLECTIVES.items()],
        "schedulers": [{"name": s.name, "description": s.description} for s in specs()],
        "methods": method_table(),
    }
