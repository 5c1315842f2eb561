"""The zoo's registry: every named architecture, its reference implementation
and its user-facing keyword arguments, and `build_table` to build one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from sim.errors import SimInputError
from sim.zoo.cnn import alexnet, densenet, googlenet, resnet, vgg16
from sim.zoo.inception import inception_v3, inception_v4
from sim.zoo.transformers import bert, gpt2

__all__ = ["ARCHITECTURES", "Architecture", "build_table"]


@dataclass(frozen=True)
class Architecture:
    """One named model: how to build its table and where its shapes come from.

    Attributes
    ----------
    name : str
        Registry key, e.g. ``"resnet50"``.
    builder : callable
        Returns the model's table; takes the keyword arguments in
        ``default_kwargs`` (``image_size`` for CNNs, ``seq_len`` for
        transformers).
    source : str
        The reference implementation whose layer shapes the builder follows.
    default_kwargs : mapping
        The builder's user-facing keyword arguments and their defaults.
    """

    name: str
    builder: Callable[..., pd.DataFrame]
    source: str
    default_kwargs: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A read-only copy, so one architecture's defaults cannot leak into another's.
        object.__setattr__(self, "default_kwargs", MappingProxyType(dict(self.default_kwargs)))


def _fixed(builder: Callable[..., pd.DataFrame], **fixed: object) -> Callable[..., pd.DataFrame]:
    """``builder`` with some keyword arguments pinned (e.g. ``depth=50``)."""

    def build(**kwargs: object) -> pd.DataFrame:
        return builder(**fixed, **kwargs)

    build.__name__ = builder.__name__ + "".join(str(v) for v in fixed.values())
    build.__doc__ = builder.__doc__
    return build


_TV = "torchvision 0.19"
_IMAGE_224 = {"image_size": 224}
_IMAGE_299 = {"image_size": 299}


def _torchvision_family(prefix: str, builder, depths) -> list:
    """One architecture per depth of a torchvision family (resnet50, resnet101, ...)."""
    return [Architecture(f"{prefix}{d}", _fixed(builder, depth=d), f"torchvision.models.{prefix}{d} ({_TV})",
                         _IMAGE_224) for d in depths]

ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in [
        Architecture("alexnet", alexnet, f"torchvision.models.alexnet ({_TV})", _IMAGE_224),
        Architecture("vgg16", vgg16, f"torchvision.models.vgg16 ({_TV})", _IMAGE_224),
        Architecture(
            "googlenet",
            googlenet,
            f"torchvision.models.googlenet with aux_logits=False ({_TV})",
            _IMAGE_224,
        ),
        Architecture(
            "inception_v3",
            inception_v3,
            f"torchvision.models.inception_v3 with aux_logits=True ({_TV})",
            {"image_size": 299, "aux_logits": True},
        ),
        Architecture(
            "inception_v4",
            inception_v4,
            "timm inception_v4 (timm/models/inception_v4.py, from Cadene pretrainedmodels), "
            "1000 classes",
            _IMAGE_299,
        ),
        *_torchvision_family("resnet", resnet, (50, 101, 152)),
        *_torchvision_family("densenet", densenet, (121, 161, 201)),
        Architecture(
            "bert_base",
            bert,
            "transformers.BertModel with pooler, bert-base-uncased config",
            {"seq_len": 128},
        ),
        Architecture(
            "bert_large",
            _fixed(bert, d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
            "transformers.BertModel with pooler, bert-large-uncased config",
            {"seq_len": 128},
        ),
        Architecture(
            "gpt2",
            gpt2,
            "transformers.GPT2LMHeadModel, gpt2 config (lm_head tied to wte)",
            {"seq_len": 1024},
        ),
    ]
}


def build_table(name: str, **kwargs: object) -> pd.DataFrame:
    """Per-layer table of the named architecture.

    Parameters
    ----------
    name : str
        A key of `ARCHITECTURES`.
    **kwargs
        Overrides of the architecture's ``default_kwargs`` (e.g.
        ``seq_len=512`` or ``image_size=256``).

    Returns
    -------
    pandas.DataFrame
        Columns `COLUMNS`, one row per layer from input to output.

    Raises
    ------
    ValueError
        (`SimInputError`) for an unknown name or keyword, or a bad value.

    Examples
    --------
    >>> int(build_table("bert_base", seq_len=64)["params"].sum())
    109482240
    """
    if name not in ARCHITECTURES:
        raise SimInputError(f"unknown model {name!r}; valid names: {', '.join(ARCHITECTURES)}")
    arch = ARCHITECTURES[name]
    unknown = sorted(set(kwargs) - set(arch.default_kwargs))
    if unknown:
        raise SimInputError(
            f"{name} takes no argument {unknown[0]!r}; valid: {', '.join(arch.default_kwargs)}"
        )
    return arch.builder(**{**arch.default_kwargs, **kwargs})
