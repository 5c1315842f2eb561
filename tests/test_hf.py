"""Models from Hugging Face config.json files (`sim.zoo.hf`, ``--model hf:PATH``).

Parameter totals against the published figures (data/models/hf/README.md for
the sources), the tensors per layer by hand, the BERT and GPT-2 configs against
the zoo's own tables, and bad configs refused with one line naming the key.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.cli import main
from sim.errors import SimInputError
from sim.schedulers.names import DDP

HF = Path(__file__).resolve().parent.parent / "data" / "models" / "hf"

#: sum(p.numel() for p in model.parameters()) of BertModel (with pooler), GPT2LMHeadModel (tied lm_head),
#: LlamaForCausalLM and MistralForCausalLM; the Hub's safetensors metadata gives 6.74 B and 7.24 B for the last two.
PUBLISHED = {
    "bert-base-uncased": (109_482_240, 199),
    "gpt2": (124_439_808, 148),
    "Llama-2-7b-hf": (6_738_415_616, 291),
    "Mistral-7B-v0.1": (7_241_732_096, 291),
}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_parameter_totals_and_tensor_counts_match_the_published_models(name):
    model = sim.load_model(f"hf:{HF / name / 'config.json'}")
    assert (model.total_params, model.num_tensors) == PUBLISHED[name]
    assert model.name == name


def test_a_folder_holding_config_json_works_too():
    assert sim.load_model(f"hf:{HF / 'gpt2'}").total_params == PUBLISHED["gpt2"][0]


@pytest.mark.parametrize("config, zoo", [("bert-base-uncased", "bert_base"), ("gpt2", "gpt2")])
def test_bert_and_gpt2_configs_give_the_zoo_tables(config, zoo):
    hf, ref = sim.load_model(f"hf:{HF / config}"), sim.load_model(zoo)
    assert hf.layer_names == ref.layer_names and hf.tensor_params == ref.tensor_params
    assert np.array_equal(hf.fwd_flops, ref.fwd_flops) and np.array_equal(hf.out_elems, ref.out_elems)


def test_llama_layer_tensors_by_hand():
    model = sim.load_model(f"hf:{HF / 'Llama-2-7b-hf'}")
    d, ff, vocab = 4096, 11008, 32000
    rows = dict(zip(model.layer_names, model.tensor_params, strict=True))
    # backward order: o, v, k, q, then the input RMSNorm that fed them
    assert rows["model.layers.0.self_attn"] == (d * d, d * d, d * d, d * d, d)
    assert rows["model.layers.0.mlp"] == (ff * d, d * ff, d * ff, d)  # down, up, gate, post-attention norm
    assert rows["model.embed_tokens"] == (vocab * d,) and rows["lm_head"] == (d * vocab,)
    assert rows["model.norm"] == (d,)


def test_mistral_grouped_query_attention():
    model = sim.load_model(f"hf:{HF / 'Mistral-7B-v0.1'}")
    rows = dict(zip(model.layer_names, model.tensor_params, strict=True))
    d, kv = 4096, 8 * 128
    assert rows["model.layers.31.self_attn"] == (d * d, d * kv, d * kv, d * d, d)


def test_tied_embeddings_drop_the_head_weight(tmp_path):
    config = json.loads((HF / "Llama-2-7b-hf" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "tie_word_embeddings": True}))
    assert sim.load_model(f"hf:{path}").total_params == PUBLISHED["Llama-2-7b-hf"][0] - 32000 * 4096


def test_seq_len_changes_flops_not_params():
    short = sim.load_model(f"hf:{HF / 'Mistral-7B-v0.1'}", seq_len=512)
    long = sim.load_model(f"hf:{HF / 'Mistral-7B-v0.1'}", seq_len=1024)
    assert short.total_params == long.total_params
    assert long.fwd_flops.sum() > 2 * short.fwd_flops.sum()
    with pytest.raises(SimInputError, match="no argument 'image_size'"):
        sim.load_model(f"hf:{HF / 'gpt2'}", image_size=224)


def test_run_json_reports_params_and_simulates_with_tensors():
    code, out, err = run_cli("run", "--model", f"hf:{HF / 'gpt2' / 'config.json'}", "--gpus", "8",
                             "--gpus-per-node", "8", "--scheduler", DDP, "--batch-size", "4", "--seq-len", "256",
                             "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["params"] == PUBLISHED["gpt2"][0] and data["model"] == "gpt2"
    assert data["iteration_time_s"] > 0


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "config.json"
    path.write_text(text)
    return f"hf:{path}"


BERT = json.loads((HF / "bert-base-uncased" / "config.json").read_text())


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (json.dumps({**BERT, "model_type": "t5"}), "model_type 't5'; supported: bert, gpt2, llama, mistral"),
    (json.dumps({k: v for k, v in BERT.items() if k != "model_type"}), "model_type missing"),
    (json.dumps({k: v for k, v in BERT.items() if k != "hidden_size"}), "missing key 'hidden_size'"),
    (json.dumps({**BERT, "num_hidden_layers": -2}), "num_hidden_layers must be a whole number >= 1, got -2"),
    (json.dumps({**BERT, "hidden_size": 7680000}), "hidden_size must be a whole number <= 131072"),
    (json.dumps({**BERT, "vocab_size": 30522.5}), "vocab_size must be a whole number"),
    (json.dumps({**BERT, "num_attention_heads": 7}), "num_attention_heads 7 must divide hidden_size 768"),
    (json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "num_key_value_heads": 3, "intermediate_size": 128, "vocab_size": 100,
                 "max_position_embeddings": 64}), "num_key_value_heads 3 must divide num_attention_heads 4"),
    (json.dumps({"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 64,
                 "tie_word_embeddings": "yes"}), "tie_word_embeddings must be true or false"),
])
def test_bad_configs_get_one_line_naming_the_key(tmp_path, text, message):
    source = _write(tmp_path, text)
    with pytest.raises(SimInputError, match=message):
        sim.load_model(source)
    code, _, err = run_cli("run", "--model", source)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_config_is_refused():
    with pytest.raises(SimInputError, match="does not exist"):
        sim.load_model("hf:/no/such/config.json")


def test_the_dashboard_upload_reads_a_config_json():
    from dashboard.upload import model_from_csv_text

    model = model_from_csv_text((HF / "gpt2" / "config.json").read_text(), "gpt2.json")
    assert model.total_params == PUBLISHED["gpt2"][0] and not model.is_timed  # times estimated for the GPU
    with pytest.raises(SimInputError, match="'x.json': not JSON"):
        model_from_csv_text("{bad", "x.json")
