"""Review of the README's numbers and of the fitted values' declared subsets (a helper's audit).

Every number the README states about `python -m sim validate`, `python -m sim fit-validation`
and `python -m sim fit-network` on the bundled K80 logs was re-run and matched; what did not
match is below, one test per defect:

* README.md:336 counts the inputs of `tests/bad_input_cases.py` as 466; the file lists more.
* data/interference.csv: the `comm_slowdown` source texts name a calibration subset the fit
  (`sim.calib.fit_validation.FITTED`, kind ``comm``) does not use: WFBP-A2A rows inside one node
  (all held out, so never fitted) and 4-GPU rows on the networks (one node: they cross pcie3).
  README.md:895 and the fit's own printed rule say the same of pcie3.
* data/frameworks.csv: Horovod's launch is said to be fitted on "the survey's Horovod 0.19 rows";
  it is fitted on the 8-GPU WFBP-A2A calibration rows only.
* sim/calib/validation.py `coarse_versus_fine`: the coarse predictor's overlap rho, printed by
  `python -m sim validate` and the Validation page, is fitted on the even rows of every case, 75
  of them held out, not on the calibration split.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from sim.calib.fit_validation import FITTED, _fitted_cases
from sim.calib.validation import coarse_versus_fine, load_cases, run_validation

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SURVEY_METHODS = ("ByteScheduler-A2A", "ByteScheduler-PS", "WFBP-A2A", "WFBP-PS", "MG-WFBP", "BSP-A2A", "BSP-PS")


def _csv_rows(name: str) -> dict[str, dict]:
    with open(ROOT / "data" / name, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    key = next(iter(rows[0]))
    return {r[key]: r for r in rows}


def _methods_named(text: str) -> set[str]:
    found, rest = set(), text
    for m in SURVEY_METHODS:  # longest names first, so "WFBP-A2A" is not also read as "WFBP"
        if m in rest:
            found.add(m)
            rest = rest.replace(m, " ")
    return found


def _gpus_named(text: str) -> set[int]:
    """The GPU counts a text gives in parentheses: "(4 GPUs)", "(4 and 8 GPUs)"."""
    hit = re.search(r"\(((?:\d+(?:, | and )?)+) GPUs\)", text)
    return {int(n) for n in re.findall(r"\d+", hit.group(1))} if hit else set()


@pytest.fixture(scope="module")
def cases():
    return load_cases()


@pytest.fixture(scope="module")
def validation():
    """One `python -m sim validate` run (its results frame), shared by the module."""
    return run_validation()


def test_readme_counts_the_bad_input_corpus_right():
    """README.md:336 says `tests/bad_input_cases.py` "lists 466 such inputs (command lines, API
    calls, dashboard URL values, uploads)"; the file lists 310 + 174 + 20 + 14 = 518."""
    from tests.bad_input_cases import API_CASES, CLI_CASES, DASHBOARD_CASES, UPLOAD_CASES

    stated = int(re.search(r"`tests/bad_input_cases.py` lists ([\d,]+) such inputs", README).group(1).replace(",", ""))
    actual = len(CLI_CASES) + len(API_CASES) + len(DASHBOARD_CASES) + len(UPLOAD_CASES)
    assert stated == actual, f"README says {stated} inputs; tests/bad_input_cases.py lists {actual}"


@pytest.mark.parametrize("link", ["pcie3", "10gbe", "100gbe", "ib-edr-100"])
def test_comm_slowdown_source_names_the_subset_its_fit_uses(cases, link):
    """data/interference.csv's `comm_slowdown` source must name the calibration cases
    `fit-validation` fits it on: pcie3's text names "WFBP-A2A and MG-WFBP rows inside one node
    (4 GPUs)", but the one-node WFBP-A2A rows are all held out, so the fit sees MG-WFBP only; the
    networks' texts say "(4 and 8 GPUs)", but a 4-GPU row is one node and crosses pcie3, so the fit
    sees the 8-GPU rows only."""
    param = next(p for p in FITTED if p.kind == "comm" and p.name == link)
    used = _fitted_cases(cases, param)
    assert len(used) and set(used["split"]) == {"calibration"}
    text = _csv_rows("interference.csv")[link]["source"].split("comm_slowdown:", 1)[1]
    text = text.split("Mechanism")[0]
    named = (_methods_named(text), _gpus_named(text))
    actual = (set(used["method"]), set(used["gpus"].astype(int)))
    assert named == actual, f"{link}: source names methods/GPUs {named}, the fit uses {actual}"


def test_pcie3_comm_slowdown_rule_and_readme_row_name_the_methods_fitted(cases):
    """fit-validation prints the rule "WFBP-A2A and MG-WFBP calibration rows over pcie3" and
    README.md:895 gives "WFBP-A2A and MG-WFBP over that link" for pcie3 too; the 9 cases that
    fit pcie3's comm_slowdown are all MG-WFBP (the same 9 as its compute_slowdown)."""
    param = next(p for p in FITTED if p.kind == "comm" and p.name == "pcie3")
    used = set(_fitted_cases(cases, param)["method"])
    cell = next(line for line in README.splitlines() if line.startswith("| communication slowed by compute")
                ).split("|")[2]
    wrong = []
    if _methods_named(param.rule) != used:
        wrong.append(f"fit-validation's rule {param.rule!r}")
    # the README row covers pcie3 / 10gbe / 100gbe / ib-edr-100 with one cell: "... over that link"
    if "over that link" in cell and not _methods_named(cell) <= used:
        wrong.append(f"README.md row {cell.strip()!r}")
    assert not wrong, f"pcie3's comm_slowdown is fitted on {sorted(used)} rows only; " + "; ".join(wrong)


def test_horovod_launch_source_names_the_rows_it_is_fitted_on(cases):
    """data/frameworks.csv: Horovod's launch is "fitted ... on the calibration subset ...: the
    survey's Horovod 0.19 rows" (BSP-A2A, WFBP-A2A and MG-WFBP at 4-32 GPUs); `fit-validation`
    fits it on the WFBP-A2A calibration rows at 8 GPUs only (9 cases), as README.md:890 says."""
    param = next(p for p in FITTED if p.kind == "launch" and p.name == "horovod")
    used = _fitted_cases(cases, param)
    assert set(used["method"]) == {"WFBP-A2A"} and set(used["gpus"].astype(int)) == {8}
    launch_text = _csv_rows("frameworks.csv")["horovod"]["source"].split("Copies:")[0]
    assert _methods_named(launch_text) == {"WFBP-A2A"}, f"source names {launch_text!r}"


def test_coarse_overlap_is_not_fitted_on_held_out_cases(validation):
    """`python -m sim validate` prints coarse_rho_fitted_on_train (0.21), fitted by
    `coarse_versus_fine` on the even rows of all 204 cases: 75 of its 102 are held out (and 60 of
    the 102 it reports its test error on are calibration cases). A value fitted to measurements
    must be fitted on the calibration split, so changing only held-out measurements must not
    move it; today doubling them moves rho from 0.21 to 1.0."""
    base = coarse_versus_fine(validation)["coarse_rho_fitted_on_train"]
    moved = validation.copy()
    held_out = moved["split"] == "held-out"
    moved.loc[held_out, "measured"] = moved.loc[held_out, "measured"] * 2.0
    assert coarse_versus_fine(moved)["coarse_rho_fitted_on_train"] == base
