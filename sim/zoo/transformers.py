"""Transformers of the zoo: BERT (encoder with pooler) and GPT-2 (language
model), following Hugging Face ``transformers``' module layout."""

from __future__ import annotations

import pandas as pd

from sim.checks import check_int
from sim.zoo.layers import attention, elementwise, embedding, layernorm, linear, merge, mlp
from sim.zoo.layers import to_table as table_of

__all__ = ["bert", "gpt2"]


def bert(
    seq_len: int = 128,
    d_model: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    d_ff: int = 3072,
    vocab_size: int = 30522,
    max_positions: int = 512,
    type_vocab_size: int = 2,
) -> pd.DataFrame:
    """BERT encoder with pooler, as in Hugging Face ``transformers.BertModel``.

    Rows: three embedding tables (position and token-type rows include their
    addition into the sum), the embedding layer-norm, then per layer an
    ``attention`` row (self-attention, residual add, layer-norm) and an
    ``mlp`` row (intermediate dense, GELU, output dense, residual add,
    layer-norm), and finally the ``pooler`` (dense + tanh on the [CLS] token).
    No masked-LM head.

    References
    ----------
    Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding", NAACL 2019, Sec. 3.
    """
    check_int("seq_len", seq_len, 1, max_positions)
    s, d = seq_len, d_model
    rows = [
        embedding("embeddings.word_embeddings", vocab_size, d, s),
        merge(
            "embeddings.position_embeddings",
            "embedding",
            [embedding("pos", max_positions, d, s), elementwise("add", s * d)],
        ),
        merge(
            "embeddings.token_type_embeddings",
            "embedding",
            [embedding("type", type_vocab_size, d, s), elementwise("add", s * d)],
        ),
        layernorm("embeddings.LayerNorm", d, s),
    ]
    for i in range(n_layers):
        p = f"encoder.layer.{i}"
        add_norm = [elementwise("add", s * d), layernorm("norm", d, s)]
        rows.append(
            merge(f"{p}.attention", "attention", [attention("a", d, n_heads, s), *add_norm])
        )
        rows.append(merge(f"{p}.mlp", "mlp", [mlp("m", d, d_ff, s), *add_norm]))
    rows.append(merge("pooler", "linear", [linear("pooler", d, d), elementwise("tanh", d)]))
    return table_of(rows)


def gpt2(
    seq_len: int = 1024,
    d_model: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    vocab_size: int = 50257,
    max_positions: int = 1024,
    d_ff: int | None = None,
    tie_word_embeddings: bool = True,
) -> pd.DataFrame:
    """GPT-2 language model as in Hugging Face ``transformers.GPT2LMHeadModel``.

    Pre-layer-norm blocks: ``h.{i}.attn`` holds ``ln_1``, self-attention and the
    residual add; ``h.{i}.mlp`` holds ``ln_2``, the 4x MLP and the residual add.
    The ``lm_head`` shares its weight with ``wte``, so its row has 0 parameters
    (the weight, and its gradient, are counted once in ``wte``) but carries the
    logits' FLOPs. ``c_attn`` is one fused Q/K/V tensor; ``d_ff`` (HF's
    ``n_inner``) defaults to ``4 * d_model``; ``tie_word_embeddings=False``
    gives ``lm_head`` a weight of its own.

    References
    ----------
    Radford et al., "Language Models are Unsupervised Multitask Learners",
    OpenAI 2019, Sec. 2.3.
    """
    check_int("seq_len", seq_len, 1, max_positions)
    s, d = seq_len, d_model
    rows = [
        embedding("wte", vocab_size, d, s),
        merge(
            "wpe", "embedding", [embedding("wpe", max_positions, d, s), elementwise("add", s * d)]
        ),
    ]
    for i in range(n_layers):
        norm, add = layernorm("ln", d, s), elementwise("add", s * d)
        attn = attention("a", d, n_heads, s, fused_qkv=True)
        rows.append(merge(f"h.{i}.attn", "attention", [norm, attn, add]))
        rows.append(merge(f"h.{i}.mlp", "mlp", [norm, mlp("m", d, d_ff or 4 * d, s), add]))
    rows.append(layernorm("ln_f", d, s))
    head = linear("lm_head", d, vocab_size, s, bias=False)
    rows.append({**head, "params": 0, "tensors": ()} if tie_word_embeddings else head)  # tied: wte's weight
    return table_of(rows)
