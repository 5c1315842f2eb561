"""The MG-WFBP vs optimal gap study."""

import io
import json

from sim.cli import main
from sim.gap import gap_study


def test_gap_is_never_negative_and_is_seeded():
    a = gap_study(20, seed=3)
    b = gap_study(20, seed=3)
    assert a.equals(b)
    assert (a.gap >= 0).all()
    assert (a.optimal_s <= a.mgwfbp_s * (1 + 1e-12)).all()


def test_gap_cli_summary():
    out = io.StringIO()
    assert main(["gap", "--trials", "30", "--seed", "1", "--format", "json"], out=out, err=io.StringIO()) == 0
    summary = json.loads(out.getvalue())
    assert summary["trials"] == 30
    assert 0 <= summary["mgwfbp_slower_fraction"] <= 1
    assert summary["gap_max_pct"] >= summary["gap_median_pct_when_slower"] >= 0
