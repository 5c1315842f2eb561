"""Models from Hugging Face ``config.json`` files: BERT, GPT-2, Llama and Mistral.

``hf_table(config)`` builds the layer table (with each layer's parameter
tensors) of a transformer from the fields of its Hugging Face config, with the
zoo's row granularity and FLOP conventions (`sim.zoo`), so its compute times
are estimated the same way as the zoo's:

* ``bert`` (``transformers.BertModel`` with pooler) and ``gpt2``
  (``transformers.GPT2LMHeadModel``) use the zoo's own builders
  (`sim.zoo.transformers`).
* ``llama`` and ``mistral`` (``LlamaForCausalLM``, ``MistralForCausalLM``):
  ``model.embed_tokens``; per layer a ``self_attn`` row (input RMSNorm, the Q,
  K, V, O projections with grouped-query K/V of ``num_key_value_heads`` heads,
  rotary embedding, scores, softmax, context and the residual add) and an
  ``mlp`` row (post-attention RMSNorm, gate and up projections, SiLU, their
  product, the down projection and the residual add); ``model.norm``; and
  ``lm_head`` (0 parameters when ``tie_word_embeddings``). RMSNorm has one
  weight and counts as a norm (5 FLOPs per element, like layer-norm); the
  rotary embedding costs 3 FLOPs per element of Q and K; Mistral's sliding
  window is not used to skip work. Tensors follow execution order (the norm
  before the projections it feeds), which is the order gradients become ready.

Only the config is read: no weights, no network access. Sizes are checked
(whole numbers within `LIMITS`), and an unknown ``model_type`` or a missing
key is a one-line `SimInputError` naming the key.
"""

from __future__ import annotations

import json
from pathlib import Path
from stat import S_ISDIR, S_ISREG

import pandas as pd

from sim.checks import check_int
from sim.csv_table import read_text_file, stat_path
from sim.errors import SimInputError
from sim.zoo.layers import elementwise, embedding, layernorm, linear, merge, to_table
from sim.zoo.transformers import bert, gpt2

__all__ = ["HF_MODEL_TYPES", "LIMITS", "hf_table", "parse_hf_config", "read_hf_config"]

HF_MODEL_TYPES = ("bert", "gpt2", "llama", "mistral")
#: Upper bounds of the config's sizes: far above any published model, low enough
#: that a typo (an extra zero or three) is caught before any work starts.
LIMITS = {"hidden": 2**17, "layers": 10_000, "heads": 2**12, "intermediate": 2**20, "vocab": 10**7,
          "positions": 2**24, "seq_len": 2**20}
#: Default sequence length: BERT's zoo default; decoders use their context length up to this.
BERT_SEQ_LEN = 128
DECODER_SEQ_LEN = 4096
#: Bytes of a config file read at most (published configs are about 1 KB).
MAX_CONFIG_BYTES = 1_000_000


def read_hf_config(path: str | Path) -> tuple[dict, str]:
    """The config dict at ``path`` (a ``config.json`` or a folder holding one) and
    a model name (the folder's name for ``config.json``, else the file stem)."""
    path = Path(path)
    status = stat_path(path, "hf config")
    if status is not None and S_ISDIR(status.st_mode):
        path = path / "config.json"
        status = stat_path(path, "hf config")
    where = f"hf config {str(path)!r}"
    if status is None or not S_ISREG(status.st_mode):
        raise SimInputError(f"{where} does not exist")
    if status.st_size > MAX_CONFIG_BYTES:
        raise SimInputError(f"{where}: {status.st_size} bytes; a config.json is at most {MAX_CONFIG_BYTES}")
    config = parse_hf_config(read_text_file(path, where, MAX_CONFIG_BYTES, "config"), where)
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return config, name


def parse_hf_config(text: str, where: str) -> dict:
    """The config dict in ``text`` (a config.json's content); errors name ``where``."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SimInputError(f"{where}: not JSON ({str(exc).splitlines()[0]})") from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4,300 digits; arrays nested thousands deep
        raise SimInputError(f"{where}: not a usable JSON config ({str(exc).split(':')[0]})") from None
    if not isinstance(config, dict):
        raise SimInputError(f"{where}: not a JSON object of config keys")
    return config


class _Config:
    """Reads the config's keys with one-line errors naming the key."""

    def __init__(self, config: dict, where: str) -> None:
        self.config, self.where = config, where

    def key(self, keys: tuple[str, ...]) -> str:
        """The first of ``keys`` present (HF's names differ by model type), else the first."""
        return next((key for key in keys if self.config.get(key) is not None), keys[0])

    def size(self, keys: tuple[str, ...], limit: str, default=None) -> int:
        """The value of the first of ``keys`` present."""
        key = self.key(keys)
        if self.config.get(key) is not None:
            return check_int(f"{self.where}: {key}", self.config[key], 1, LIMITS[limit])
        if default is not None:
            return default
        raise SimInputError(f"{self.where}: missing key {keys[0]!r}")

    def width_and_heads(self, width: tuple[str, ...], heads: tuple[str, ...]) -> tuple[int, int]:
        """The hidden size and the attention heads, which must divide it (each head takes an equal share)."""
        d, n = self.size(width, "hidden"), self.size(heads, "heads")
        if d % n:
            raise SimInputError(f"{self.where}: {self.key(heads)} {n} must divide {self.key(width)} {d}")
        return d, n

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            raise SimInputError(f"{self.where}: {key} must be true or false, got {value!r}")
        return value


def hf_table(config: dict, *, where: str = "hf config", seq_len: int | None = None) -> pd.DataFrame:
    """The layer table of a Hugging Face config (`HF_MODEL_TYPES`); ``seq_len``
    defaults to `BERT_SEQ_LEN` for BERT and to the context length, at most
    `DECODER_SEQ_LEN`, for the decoders."""
    model_type = config.get("model_type")
    if model_type not in HF_MODEL_TYPES:
        got = "missing" if model_type is None else repr(model_type)
        raise SimInputError(f"{where}: model_type {got}; supported: {', '.join(HF_MODEL_TYPES)}")
    c = _Config(config, where)
    if seq_len is not None:
        check_int("seq_len", seq_len, 1, LIMITS["seq_len"])
    if model_type == "bert":
        d, heads = c.width_and_heads(("hidden_size",), ("num_attention_heads",))
        return bert(seq_len or BERT_SEQ_LEN, d_model=d, n_layers=c.size(("num_hidden_layers",), "layers"), n_heads=heads,
                    d_ff=c.size(("intermediate_size",), "intermediate"), vocab_size=c.size(("vocab_size",), "vocab"),
                    max_positions=c.size(("max_position_embeddings",), "positions"),
                    type_vocab_size=c.size(("type_vocab_size",), "vocab", default=2))
    if model_type == "gpt2":
        positions = c.size(("n_positions", "max_position_embeddings"), "positions")
        d, heads = c.width_and_heads(("n_embd", "hidden_size"), ("n_head", "num_attention_heads"))
        return gpt2(seq_len or min(positions, DECODER_SEQ_LEN), d_model=d, n_heads=heads,
                    n_layers=c.size(("n_layer", "num_hidden_layers"), "layers"),
                    vocab_size=c.size(("vocab_size",), "vocab"), max_positions=positions,
                    d_ff=c.size(("n_inner",), "intermediate", default=0) or None,
                    tie_word_embeddings=c.flag("tie_word_embeddings", True))
    return _llama(c, seq_len)


def _llama(c: _Config, seq_len: int | None) -> pd.DataFrame:
    d = c.size(("hidden_size",), "hidden")
    n_layers = c.size(("num_hidden_layers",), "layers")
    heads = c.size(("num_attention_heads",), "heads")
    kv_heads = c.size(("num_key_value_heads",), "heads", default=heads)
    if heads % kv_heads:
        raise SimInputError(f"{c.where}: num_key_value_heads {kv_heads} must divide num_attention_heads {heads}")
    if "head_dim" not in c.config and d % heads:
        raise SimInputError(f"{c.where}: num_attention_heads {heads} must divide hidden_size {d}")
    head_dim = c.size(("head_dim",), "hidden", default=d // heads)
    d_ff = c.size(("intermediate_size",), "intermediate")
    vocab = c.size(("vocab_size",), "vocab")
    positions = c.size(("max_position_embeddings",), "positions")
    s = seq_len or min(positions, DECODER_SEQ_LEN)
    check_int("seq_len", s, 1, positions)
    attn_bias, mlp_bias = c.flag("attention_bias", False), c.flag("mlp_bias", False)
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    rows = [embedding("model.embed_tokens", vocab, d, s)]
    for i in range(n_layers):
        p = f"model.layers.{i}"
        attn = [_rmsnorm("input_layernorm", d, s), linear("q", d, q_dim, s, attn_bias),
                linear("k", d, kv_dim, s, attn_bias), linear("v", d, kv_dim, s, attn_bias),
                elementwise("rotary", s * (q_dim + kv_dim), 3),
                # QK^T and the weighted sum of V (2 FLOPs per MAC), then scaling and softmax per score
                elementwise("scores", heads * s * s, 4 * head_dim + 6),
                linear("o", q_dim, d, s, attn_bias), elementwise("add", s * d)]
        rows.append(merge(f"{p}.self_attn", "attention", attn))
        mlp = [_rmsnorm("post_attention_layernorm", d, s), linear("gate", d, d_ff, s, mlp_bias),
               linear("up", d, d_ff, s, mlp_bias), elementwise("silu_mul", s * d_ff, 2),
               linear("down", d_ff, d, s, mlp_bias), elementwise("add", s * d)]
        rows.append(merge(f"{p}.mlp", "mlp", mlp))
    rows.append({**_rmsnorm("model.norm", d, s), "name": "model.norm"})
    head = linear("lm_head", d, vocab, s, bias=False)
    if c.flag("tie_word_embeddings", False):
        head = {**head, "params": 0, "tensors": ()}  # shares embed_tokens' weight
    rows.append(head)
    return to_table(rows)


def _rmsnorm(name: str, dim: int, tokens: int) -> dict:
    """RMSNorm: one weight of ``dim``; FLOPs as a layer-norm's."""
    return {**layernorm(name, dim, tokens), "params": dim, "tensors": (dim,)}
