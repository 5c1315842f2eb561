"""The timing core: plan -> lowering -> engine -> timeline -> metrics."""
