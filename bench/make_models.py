"""Write the synthetic 150-layer model the benchmarks use: ``python bench/make_models.py``.

A CNN-like table, seeded so it is the same on every machine: 50 blocks of
conv (with weights), batch norm (few weights) and ReLU (none), with channel
widths doubling every 10 blocks up to 512, as in a ResNet. Forward times grow with the
work of a conv layer; backward is twice the forward for layers with weights
and equal to it for the others. The absolute times are plausible for a V100
at batch 32, not measured; the benchmarks only need a realistic shape.
"""

from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).parent / "data" / "cnn150.csv"


def cnn150(seed: int = 150) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for block in range(50):
        width = 64 * 2 ** min(block // 10, 3)
        conv_params = 9 * width * width
        conv_ms = round(float(rng.uniform(0.8, 1.2) * 0.6 * (block // 10 + 1) ** 0.5), 4)
        rows.append((f"conv{block}", conv_params, conv_ms, 2 * conv_ms))
        bn_ms = round(float(rng.uniform(0.05, 0.15)), 4)
        rows.append((f"bn{block}", 2 * width, bn_ms, bn_ms))
        relu_ms = round(float(rng.uniform(0.02, 0.08)), 4)
        rows.append((f"relu{block}", 0, relu_ms, relu_ms))
    return pd.DataFrame(rows, columns=["name", "params", "fwd_ms", "bwd_ms"])


if __name__ == "__main__":
    OUT.parent.mkdir(exist_ok=True)
    frame = cnn150()
    with OUT.open("w", encoding="utf-8") as fh:
        fh.write("# synthetic 150-layer CNN for the benchmarks; written by bench/make_models.py (seed 150)\n")
        frame.to_csv(fh, index=False)
    print(f"wrote {OUT} ({len(frame)} layers, {int(frame.params.sum()):,} parameters)")
