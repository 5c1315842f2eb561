"""Bad files and paths refused in one line (hostile review, 2026-11-25).

A path part the system refuses, a layer CSV too wide or too long, a loosely read presets file, a DataFrame the
layer reader could not take apart, a ``#`` inside a row and a Hugging Face config whose heads do not divide its
width: each is a `SimInputError` naming the file, line, column or key (exit code 2 on the command line), refused
before the heavy work, never a traceback.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sim
import sim.catalog
from sim.cli import main
from sim.csv_table import MAX_COLUMNS, MAX_CSV_BYTES, MAX_LAYERS

ROOT = Path(__file__).resolve().parent.parent
HEADER = "name,params,fwd_ms,bwd_ms\n"
NETWORKS_HEADER = "name,scope,line_rate_gbps,effective_gbps,alpha_us,source\n"
LONG_PART = "b" * 300  # over the 255 bytes a path part may have on Linux


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def refusal(source) -> str:
    with pytest.raises(sim.SimInputError) as info:
        sim.load_model(source)
    assert "\n" not in str(info.value)
    return str(info.value)


# --- 1. a path part of over 255 characters ---------------------------------------------------------------------


@pytest.mark.parametrize(("source", "named"), [
    ("{d}/" + LONG_PART + ".csv", "model path"), ("{d}/" + LONG_PART, "model path"),
    ("hf:{d}/" + LONG_PART + ".json", "hf config"), ("hf:{d}/" + LONG_PART + "/config.json", "hf config"),
], ids=["csv", "name", "hf-file", "hf-folder"])
def test_a_path_part_over_255_characters_is_refused_in_one_line(tmp_path, source, named):
    """``path.is_dir()`` raised OSError 'File name too long' from load_model and read_hf_config (hostile
    review, 2026-11-25): every path, CSV or ``hf:``, goes through the same one-line refusal."""
    source = source.format(d=tmp_path)
    message = refusal(source)
    assert message.startswith(f"{named} '") and message.endswith("': File name too long")
    code, out, err = cli("run", "--model", source, "--gpus", "2")
    assert (code, out) == (2, "") and err.startswith("error: ") and "File name too long" in err


def test_the_reviewers_command_exits_2_without_a_traceback(tmp_path):
    """``python -m sim run --model /tmp/<300 b>.csv --gpus 2`` exited 1 with a traceback (hostile review,
    2026-11-25)."""
    done = subprocess.run([sys.executable, "-m", "sim", "run", "--model", str(tmp_path / f"{LONG_PART}.csv"),
                           "--gpus", "2"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "File name too long" in done.stderr


def test_an_hf_source_over_the_length_limit_is_refused_by_its_length():
    """The `MAX_SOURCE_CHARS` check came after the ``hf:`` branch, so a 5,000-character ``hf:`` path reached the
    file system and raised OSError (hostile review, 2026-11-25)."""
    assert "sim.model.MAX_SOURCE_CHARS" in refusal("hf:/tmp/" + "c" * 5000 + ".json")


def test_a_nul_in_a_path_is_refused_naming_it():
    assert "null byte" in refusal("/tmp/a\0b.csv")


# --- 2. a layer CSV with many columns ---------------------------------------------------------------------------


def test_a_layer_csv_of_more_than_the_column_limit_is_refused_naming_the_count_and_the_limit(tmp_path):
    """5,000 extra columns were read (and warned about); 200,000 took over 120 s in a quadratic duplicate check
    (hostile review, 2026-11-25). More than `MAX_COLUMNS` columns are refused naming the line, the count and the
    limit."""
    path = tmp_path / "wide.csv"
    path.write_text(HEADER.strip() + "," + ",".join(f"x{i}" for i in range(5_000)) + "\nfc,10,1,2\n")
    message = refusal(path)
    assert "wide.csv: 5,004 columns" in message and f"at most {MAX_COLUMNS:,}" in message


def test_commas_inside_quotes_do_not_count_as_columns(tmp_path):
    """A quoted note of 1,200 commas was refused as 1,204 columns (final review, 2026-11-25)."""
    path = tmp_path / "note.csv"
    path.write_text(HEADER.strip() + ",note\nfc,10,1,2,\"" + "," * 1_200 + "\"\n")
    with pytest.warns(sim.SimInputWarning, match="'note' not read"):
        assert sim.load_model(str(path)).num_layers == 1


def test_a_layer_csv_of_200000_columns_is_refused_at_once(tmp_path):
    path = tmp_path / "wider.csv"
    path.write_text(HEADER.strip() + "," + ",".join(f"x{i}" for i in range(200_000)) + "\nfc,10,1,2\n")
    assert "200,003 commas" in refusal(path)  # (the up-front count of commas, before the csv module splits it)


def test_a_duplicate_column_among_many_is_still_named_with_both_places(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text(HEADER.strip() + "," + ",".join(f"x{i}" for i in range(900)) + ",x3\nfc,10,1,2\n")
    assert "duplicate column 'x3' (columns 8 and 905)" in refusal(path)


def test_a_row_of_millions_of_fields_is_refused_before_it_is_split(tmp_path):
    path = tmp_path / "long_row.csv"
    path.write_text(HEADER + "ab," * 2_000_000 + "\n")
    assert "long_row.csv line 2: 2,000,000 commas" in refusal(path)  # (the up-front count, as above)


# --- 3. a layer CSV with millions of rows -----------------------------------------------------------------------


def test_a_layer_csv_of_millions_of_rows_is_refused_before_it_is_parsed(tmp_path):
    """A 2 M-row CSV (31 MB) was parsed by pandas (11 s, 939 MB) before the `MAX_LAYERS` check (hostile review,
    2026-11-25): its lines are counted first, in C, and it is refused naming the count and the limit."""
    path = tmp_path / "tall.csv"
    path.write_text(HEADER + "".join(f"l{i},1,1,1\n" for i in range(2_000_000)))
    tracemalloc.start()
    try:
        message = refusal(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message.startswith("tall.csv: 2,000,001 lines; at most 200,001 are read (sim.csv_table.MAX_CSV_LINES")
    assert peak < 150e6  # (parsing it took 939 MB)


def test_a_layer_csv_of_more_layers_than_the_limit_is_refused_before_pandas_reads_it(tmp_path, monkeypatch):
    path = tmp_path / "many.csv"
    path.write_text(HEADER + "".join(f"l{i},1,1,1\n" for i in range(MAX_LAYERS + 1)))
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: pytest.fail("pandas read a table that is refused"))
    assert refusal(path) == f"many.csv has {MAX_LAYERS + 1} layers; at most {MAX_LAYERS} are allowed " \
                            "(sim.model.MAX_LAYERS)"


def test_a_layer_csv_over_the_byte_limit_is_refused_unread(tmp_path):
    path = tmp_path / "big.csv"
    with path.open("wb") as handle:
        handle.truncate(MAX_CSV_BYTES + 1)  # a sparse file: nothing written
    assert f"big.csv: more than {MAX_CSV_BYTES:,} bytes" in refusal(path)


# --- 4. the user's network presets file -------------------------------------------------------------------------


def user_presets(tmp_path, monkeypatch, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / "presets.csv"
    path.write_text(text, encoding=encoding)
    monkeypatch.setenv(sim.catalog.USER_NETWORKS_ENV, str(path))
    return path


def test_a_presets_file_with_a_duplicated_column_is_refused(tmp_path, monkeypatch):
    """The last ``name`` column silently won (hostile review, 2026-11-25); as in a layer CSV, a column may
    appear once."""
    user_presets(tmp_path, monkeypatch, NETWORKS_HEADER.strip() + ",name\nmy-a,inter,10,9,5,me,my-b\n")
    assert sim.catalog.user_networks_error().endswith("presets.csv: duplicate column 'name' (columns 1 and 7)")
    assert "my-b" not in sim.catalog.networks()


def test_a_presets_file_with_a_byte_order_mark_is_read(tmp_path, monkeypatch):
    """A UTF-8 BOM gave 'line 1: missing column(s) name' (hostile review, 2026-11-25); layer CSVs accept it."""
    user_presets(tmp_path, monkeypatch, NETWORKS_HEADER + "my-a,inter,10,9,5,me\n", encoding="utf-8-sig")
    assert sim.catalog.user_networks_error() is None
    assert sim.catalog.get_network("my-a").effective_gbps == 9


@pytest.mark.parametrize("rows", ['my-a,inter,10,9,5,"me\n', 'my-a,inter,10,9,5,"me\nmy-b,inter,10,9,5,me\n'])
def test_a_presets_file_with_a_quote_left_open_is_refused_on_its_line(tmp_path, monkeypatch, rows):
    """A quote opened and never closed was accepted, its field running on to the end of the file (hostile review,
    2026-11-25); as in a layer CSV, a quoted field must end on its line."""
    user_presets(tmp_path, monkeypatch, NETWORKS_HEADER + rows)
    assert sim.catalog.user_networks_error().endswith("presets.csv line 2: a quote is opened and never closed on "
                                                     "its line, not a readable CSV (a field in quotes must end on "
                                                     "the line it starts)")


def test_a_presets_file_over_its_byte_limit_is_refused_unread(tmp_path, monkeypatch):
    path = user_presets(tmp_path, monkeypatch, "")
    with path.open("wb") as handle:
        handle.truncate(sim.catalog.MAX_PRESETS_BYTES + 1)  # a sparse file: nothing written
    assert sim.catalog.user_networks_error().endswith(f"presets.csv: more than {sim.catalog.MAX_PRESETS_BYTES:,} "
                                                     "bytes, the most this file may have")


def test_a_preset_whose_note_has_a_line_break_is_not_saved(tmp_path):
    """What save_network writes, the strict reader must read back: a note on two lines is refused, the file
    left unwritten."""
    row = {"name": "my-a", "scope": "inter", "line_rate_gbps": 10, "effective_gbps": 9, "alpha_us": 5,
           "source": "me", "note": "one\ntwo"}
    with pytest.raises(sim.SimInputError, match="source and note must be one line each"):
        sim.catalog.save_network(row, path=tmp_path / "presets.csv")
    assert not (tmp_path / "presets.csv").exists()


# --- 5. model_from_frame and Model.timed ------------------------------------------------------------------------


def frame(**columns) -> pd.DataFrame:
    return pd.DataFrame({"name": ["a"], "params": [1], "fwd_ms": [1.0], "bwd_ms": [2.0], **columns})


def test_a_frame_with_a_duplicate_column_is_refused_naming_it():
    """pandas raised TypeError 'arg must be a list, tuple, 1-d array, or Series' (hostile review, 2026-11-25)."""
    table = pd.DataFrame([["a", 1, 1.0, 2.0, 1]], columns=["name", "params", "fwd_ms", "bwd_ms", " params"])
    with pytest.raises(sim.SimInputError, match=r"^m: duplicate column 'params'"):
        sim.model_from_frame(table, "m")


@pytest.mark.parametrize("value", [1 + 2j, np.complex64(1), 10**400])
def test_a_value_that_is_no_real_number_is_refused_naming_its_row_and_column(value):
    """A complex ``fwd_ms`` raised TypeError from float() (hostile review, 2026-11-25); an int beyond a float's
    range raised OverflowError from pandas."""
    column = "params" if isinstance(value, int) else "fwd_ms"
    with pytest.raises(sim.SimInputError, match=f"^m row 2, column '{column}': .* is not a finite number$"):
        sim.model_from_frame(frame(**{column: [value]}), "m")


def test_a_frame_of_more_rows_than_the_layer_limit_is_refused_before_its_rows_are_checked():
    rows = MAX_LAYERS + 1
    table = pd.DataFrame({"name": [f"l{i}" for i in range(rows)], "params": [1] * (rows - 1) + [-1],
                          "fwd_ms": 1.0, "bwd_ms": 1.0})
    with pytest.raises(sim.SimInputError, match=f"^m has {rows} layers; at most {MAX_LAYERS} are allowed"):
        sim.model_from_frame(table, "m")


@pytest.mark.parametrize("source", ["resnet50", str(ROOT / "tests" / "data" / "tiny.csv")])
@pytest.mark.parametrize("batch_size", [0, -3, 2.5, True])
def test_timing_a_model_for_a_batch_size_that_is_no_whole_number_above_0_is_refused(source, batch_size):
    """``Model.timed(batch_size=0)`` was accepted (hostile review, 2026-11-25), by a zoo model and a timed one."""
    with pytest.raises(sim.SimInputError, match="^batch_size must be a whole number"):
        sim.load_model(source).timed(gpu="v100-sxm2", batch_size=batch_size)


# --- 6. a '#' inside a row ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ['"conv#1",1000,1,2', "conv#1,1000,1,2"])
def test_a_hash_inside_a_row_is_text_and_only_a_line_starting_with_it_is_a_comment(tmp_path, row):
    """A '#' anywhere started a comment: '"conv#1",...' got a false 'a quote is opened and never closed' and
    'conv#1,...' a false 'nan is not a finite number' for params (hostile review, 2026-11-25). The README's
    comment lines (``# update_ms: 2.8``) start with '#'."""
    path = tmp_path / "hash.csv"
    path.write_text(f"# update_ms: 2.8\n{HEADER}{row}\n  # an indented comment\nfc,10,1,2\n")
    model = sim.load_model(path)
    assert model.layer_names == ("conv#1", "fc") and model.params.tolist() == [1000, 10]


# --- 7. a Hugging Face config whose heads do not divide its width ------------------------------------------------


@pytest.mark.parametrize(("config", "expected"), [
    ({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 2, "num_attention_heads": 7,
      "intermediate_size": 3072, "vocab_size": 100, "max_position_embeddings": 512},
     "num_attention_heads 7 must divide hidden_size 768"),
    ({"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 7, "vocab_size": 100, "n_positions": 64},
     "n_head 7 must divide n_embd 768"),
])
def test_heads_that_do_not_divide_the_width_are_named_by_file_and_key(tmp_path, config, expected):
    """'n_heads=7 must divide d_model=768' named neither the file nor the config's keys (hostile review,
    2026-11-25)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert refusal(f"hf:{path}") == f"hf config {str(path)!r}: {expected}"


def test_the_dashboards_upload_reads_a_hash_inside_a_row_as_text():
    """The dashboard read uploads with pandas' comment='#', so an unquoted conv#1 lost the rest of its row."""
    from dashboard.upload import model_from_csv_text

    model = model_from_csv_text("# update_ms: 2.5\nname,params,fwd_ms,bwd_ms\nconv#1,1000,1,2\n\"fc#2\",10,1,2\n",
                                "m.csv")
    assert model.layer_names == ("conv#1", "fc#2") and model.params.tolist() == [1000, 10]
    assert model.update_s == 0.0025


@pytest.mark.parametrize("text", ["  # update_ms: 2.8\nname,params,fwd_ms,bwd_ms\nfc,10,1,2\n",
                                  "\ufeff# update_ms: 2.8\nname,params,fwd_ms,bwd_ms\nfc,10,1,2\n"])
def test_an_indented_or_bom_prefixed_time_line_is_read_as_the_table_reader_skips_it(text):
    """The table reader skips an indented comment line and a byte-order mark; the upload's update time was then
    silently 0 (final review, 2026-11-25)."""
    from dashboard.upload import model_from_csv_text

    assert model_from_csv_text(text, "m.csv").update_s == pytest.approx(2.8e-3)


@pytest.mark.parametrize("text, where", [
    ("name,params,fwd_ms,bwd_ms\nconv1,1000,1.0,2.0  # the stem\n", "column 'bwd_ms'"),
    ("name,params,fwd_ms,bwd_ms # columns\nconv1,1000,1.0,2.0\n", "missing column(s) bwd_ms"),
])
def test_a_comment_after_a_cell_says_where_comments_go(tmp_path, text, where):
    """pandas' comment='#' once cut a line at any '#'; now only a line starting with it is a comment, and a '#'
    after a cell was refused without saying why (final review, 2026-11-25)."""
    path = tmp_path / "c.csv"
    path.write_text(text)
    message = refusal(path)
    assert where in message and "a '#' starts a comment only at the start of a line" in message
