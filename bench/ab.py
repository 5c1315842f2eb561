"""CPU time of a few figures of the code in the current directory, to compare two versions.

Run it in each checkout, alternating, on the same machine (CPU time, so a
loaded machine disturbs it less than wall time), and compare the numbers:

    cd /path/to/old && python /path/to/bench/ab.py
    cd /path/to/new && python /path/to/bench/ab.py

Prints, in ms (the best of three batches): one `simulate` of resnet152
(wfbp, 16 GPUs), the dashboard's sweep (resnet50, 6 schedulers x 11 GPU
counts, in this process), a timeline read (resnet50, mgwfbp) and one
`simulate` of resnet50 under bytescheduler (no fast path).
"""

import os
import sys
import time

sys.path.insert(0, os.getcwd())
import sim  # noqa: E402

# by their place in the registry, the same in every version
WFBP, MGWFBP, BYTESCHEDULER = (list(sim.SCHEDULERS)[i] for i in (1, 3, 8))
m152 = sim.load_model("resnet152")
m50 = sim.load_model("resnet50")
c = sim.Cluster(gpus=16, gpus_per_node=4)
scheds = list(sim.SCHEDULERS)[:6]
FIGURES = {
    "simulate152": (lambda: sim.simulate(m152, c, WFBP, batch_size=32), 100),
    "dash_sweep": (lambda: sim.sweep(m50, c, gpus=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], schedulers=scheds,
                                     batch_size=32, jobs=1), 10),
    "timeline": (lambda: sim.simulate(m50, c, MGWFBP, batch_size=32).timeline, 50),
    "no_fast_path": (lambda: sim.simulate(m50, c, BYTESCHEDULER, batch_size=32), 5),
}
out = []
for name, (f, n) in FIGURES.items():
    f()
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for _ in range(n):
            f()
        best = min(best, (time.process_time() - t) / n)
    out.append(f"{name}={best * 1e3:.3f}")
print(" ".join(out))
