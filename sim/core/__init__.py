"""The timing core: plan -> lowering -> engine -> timeline -> metrics."""

from sim.lazy import submodules

__getattr__ = submodules(__name__)  # (``sim.core.run`` after a bare ``import sim``)
