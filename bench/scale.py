"""Scale benchmarks of issue 17: every figure in a child process, as a ratio to a reference measured in the same run.

    python bench/scale.py                    # every figure (several minutes of CPU)
    python bench/scale.py --quick            # smaller sweep, fewer repeats, no 100k-layer general-engine runs
    python bench/scale.py --output bench/scale-last-run.md

The machine is shared: every time is CPU time (``time.process_time`` in the
child, or the children's ``getrusage``), and every figure is given next to a
reference timed in the same child: the bare pure-Python WFBP recurrence over
the same layers (`bare_recurrence_s`), or a bare interpreter for the import.
Growth exponents are log(t2 / t1) / log(n2 / n1) between consecutive sizes.
Memory is the child's peak resident set (``VmHWM``). Each child has a time
cap; a run the simulator refuses (its task budget) is reported as refused.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sim.schedulers.names import BUCKET, DDP, HOROVOD, MGWFBP, OPTIMAL, SEQUENTIAL, SYNCEASGD, WFBP  # noqa: E402

#: Code every child starts with: the reference recurrence, a CPU timer, synthetic models.
PRELUDE = r'''
import json, os, re, sys, time
sys.path.insert(0, ROOT)
import numpy as np

def cpu(fn, min_s=0.2, max_n=100000):
    """CPU seconds per call of fn (repeated until min_s of CPU, median of 3 batches)."""
    fn()
    n, t = 1, 0.0
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        t = time.process_time() - t0
        if t >= min_s / 3 or n >= max_n:
            break
        n *= 4
    runs = [t / n]
    for _ in range(2):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        runs.append((time.process_time() - t0) / n)
    return sorted(runs)[1]

def bare_recurrence(fwd, bwd, t_c):
    """The bare WFBP recurrence in pure Python: forward, backward in reverse, one message per layer."""
    e = 0.0
    for f in fwd:
        e += f
    c = float("-inf")
    for b, t in zip(reversed(bwd), reversed(t_c)):
        e += b
        s = e if e > c else c
        c = s + t
    return c if c > e else e

def synthetic(n, seed=0):
    """n layers with parameters: forward 0.02-0.5 ms, backward twice that, 0.1-10 M parameters."""
    import sim
    rng = np.random.default_rng(seed)
    fwd = rng.uniform(2e-5, 5e-4, n)
    return sim.Model(f"synthetic{n}", tuple(f"l{i}" for i in range(n)), rng.integers(100_000, 10_000_000, n),
                     fwd, 2 * fwd)

def peak_mib():
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) / 1024

def tree_pss_sampler(every_s=0.1):
    """Start sampling the proportional set size (PSS: a page shared by n processes counts 1/n in each)
    of this process and its descendants, summed, from a separate process (a thread here would make
    the sweep start its workers from a fork server, not by fork); returns a function that stops it
    and gives the peak in MiB. Forked workers share the caller's pages until written: their own
    peaks (VmHWM, ru_maxrss) count those pages again, the summed PSS once."""
    import subprocess
    watcher = subprocess.Popen([sys.executable, "-c", PSS_WATCHER, str(os.getpid()), str(every_s)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    def finish():
        out, _ = watcher.communicate("")
        return float(out) / 1024
    return finish

PSS_WATCHER = r"""
import os, re, select, sys
root, every = int(sys.argv[1]), float(sys.argv[2])
def pss(pid):
    try:
        return int(re.search(r"Pss:\s+(\d+)", open(f"/proc/{pid}/smaps_rollup").read()).group(1))
    except (OSError, AttributeError):
        return 0
def tree(pid):
    try:
        kids = [int(k) for t in os.listdir(f"/proc/{pid}/task") for k in open(f"/proc/{pid}/task/{t}/children").read().split()]
    except OSError:
        kids = []
    return [pid] + [d for k in kids if k != os.getpid() for d in tree(k)]
peak = 0
while True:
    peak = max(peak, sum(pss(p) for p in tree(root)))  # (a sample at the start and one at the end, at least)
    if select.select([sys.stdin], [], [], every)[0]:
        break
print(peak)
"""

def done(**figures):
    figures["peak_mib"] = peak_mib()
    print("RESULT " + json.dumps(figures))
'''


def child(body: str, timeout_s: float) -> dict:
    """Run ``body`` after `PRELUDE` in a fresh interpreter; its ``done(...)`` figures, or why it has none."""
    code = f"ROOT = {str(ROOT)!r}\n{PRELUDE}\n{body}"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"over the {timeout_s:.0f} s cap"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    if proc.returncode == -signal.SIGXCPU:
        return {"error": "over its CPU-time cap"}
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    budget = re.search(r"about ([\d,]+) tasks", last)
    if budget:
        return {"error": f"refused: about {budget.group(1)} tasks > MAX_TASKS"}
    return {"error": ("refused: " if "SimInputError" in last else "failed: ") + last[-120:]}


def size_row(sizes, run, cell) -> tuple[list[str], list[float | None]]:
    """One table row over ``sizes``: ``run(n)`` gives a child's figures, ``cell(figures)``
    its text; a child with an ``error`` shows it and has no time."""
    cells, times = [], []
    for n in sizes:
        got = run(n)
        cells.append(got["error"] if "error" in got else cell(got))
        times.append(None if "error" in got else got["t"])
    return cells, times


def growth(sizes, times) -> list[str]:
    out = []
    pairs = list(zip(sizes, times, strict=True))
    for (n1, t1), (n2, t2) in zip(pairs, pairs[1:], strict=False):
        out.append(f"n^{math.log(t2 / t1) / math.log(n2 / n1):.2f}" if t1 and t2 else "")
    return out


def fmt(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


# ----------------------------------------------------------------------------- figures
def bench_import(out, repeat: int) -> dict:
    """1. import sim over a bare interpreter (children's CPU time); also its first use, which
    imports the engine (`sim` loads its names lazily)."""
    def cpu_of(args):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, *args], check=True, cwd=ROOT, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def median(code):
        return sorted(cpu_of(["-c", code]) for _ in range(repeat))[repeat // 2]

    bare, full = median("pass"), median("import sim")
    first_use = median("import sim; sim.simulate; sim.Cluster; sim.load_model")
    heavy = subprocess.run([sys.executable, "-c", "import sys, sim; sim.simulate, sim.Cluster, sim.load_model; "
                            "print(','.join(m for m in ('pandas', 'networkx', 'dask', 'plotly', 'pyarrow') "
                            "if m in sys.modules) or 'none')"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out("## 1. `import sim`\n")
    out("| bare interpreter | with `import sim` | over bare | first use (`sim.simulate`, `sim.Cluster`, "
        "`sim.load_model`: the engine and numpy) over bare | heavy modules loaded by then | target |")
    out("|---|---|---|---|---|---|")
    over, used = full - bare, first_use - bare
    out(f"| {fmt(bare)} | {fmt(full)} | {fmt(over)} | {fmt(used)} | {heavy} | ≤ 0.3 s: "
        f"{'met' if over <= 0.3 else '**not met**'} (first use: {'met' if used <= 0.3 else '**not met**'}) |\n")
    return {"import_over_s": over, "first_use_over_s": used}


def bench_simulate(out) -> dict:
    """2. simulate's metrics and timeline against the bare recurrence over the same layers: repeated
    (what `simulate` keeps between runs reused) and cold (the first run on a fresh model object,
    with `sim.api.clear_caches` just before: every kept cost, one-GPU time and timeline column
    worked out again)."""
    body = r'''
import sim
from sim.api import clear_caches
from sim.schedulers.names import WFBP, MGWFBP, OPTIMAL, BUCKET, HOROVOD, SEQUENTIAL
m = sim.load_model("resnet50")
c = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe")
timed = m.timed(gpu=c.gpu, batch_size=32).with_gradients()  # the gradients simulate plans over (its tensors)
t_c = c.comm_cost().time_s(timed.gradient_bytes("fp32")).tolist()
fwd, bwd = timed.fwd_s.tolist(), timed.bwd_s.tolist()
ref = cpu(lambda: bare_recurrence(fwd, bwd, t_c))

def cold(s, timeline, runs=31):
    """Median CPU time of a first run: a fresh model object, nothing kept."""
    times = []
    for _ in range(runs):
        fresh = sim.load_model("resnet50")
        clear_caches()
        t0 = time.process_time()
        res = sim.simulate(fresh, c, s, batch_size=32)
        if timeline:
            res.timeline
        times.append(time.process_time() - t0)
    return sorted(times)[runs // 2]

rows = {}
for s in (WFBP, MGWFBP, OPTIMAL, BUCKET, HOROVOD, SEQUENTIAL):
    rows[s] = [cpu(lambda: sim.simulate(m, c, s, batch_size=32)),
               cpu(lambda: sim.simulate(m, c, s, batch_size=32).timeline), cold(s, False), cold(s, True)]
done(ref=ref, rows=rows, layers=timed.num_layers)
'''
    got = child(body, 600)
    out("## 2. One `simulate` of resnet50 (16 GPUs, 4 per node, 10GbE), against the bare recurrence\n")
    if "error" in got:
        out(f"{got['error']}\n")
        return {}
    ref = got["ref"]
    out(f"Reference: the bare pure-Python WFBP recurrence over the same {got['layers']} gradients (resnet50's "
        f"parameter tensors, as `simulate` plans them), {fmt(ref)}. Repeated: the same model and cluster again "
        "(the costs, one-GPU time and timeline columns `simulate` keeps are reused); cold: the first run on a "
        "fresh model object after `sim.api.clear_caches()` (median of 31).\n")
    out("| scheduler | metrics | ratio (target ≤ 10×) | with the timeline | ratio (target ≤ 60×) "
        "| cold: metrics | ratio | cold: with the timeline | ratio |")
    out("|---|---|---|---|---|---|---|---|---|")
    worst = [0.0] * 4
    for s, times in got["rows"].items():
        out(f"| {s} | " + " | ".join(f"{fmt(t)} | {t / ref:.0f}×" for t in times) + " |")
        worst = [max(w, t / ref) for w, t in zip(worst, times, strict=True)]
    out("")
    return {"simulate_ratio": worst[0], "timeline_ratio": worst[1], "simulate_cold_ratio": worst[2],
            "timeline_cold_ratio": worst[3]}


def bench_optimal(out, sizes) -> dict:
    """4. optimal on 1k / 10k / 100k layers: affine costs from keeping up to backlogged, piecewise
    costs (rising and falling at a regime start) and measured per-layer times, against the bare
    recurrence over n layers."""
    body = r'''
from sim.comm import CommCost
from sim.core.cost import Regime, measured_cost
from sim.core.plan import GradientLayers
from sim.schedulers import optimal
n, make_cost = ARGS
rng = np.random.default_rng(n)
bwd = rng.uniform(5e-5, 1e-3, n)
grads = GradientLayers(np.arange(n), np.cumsum(bwd[::-1])[::-1].copy(), rng.integers(100_000, 10_000_000, n) * 4)
cost = eval(make_cost)
t_c = cost.time_s(grads.nbytes).tolist()
fwd, b = (bwd / 2).tolist(), bwd.tolist()
ref = cpu(lambda: bare_recurrence(fwd, b, t_c), min_s=0.05)
t0 = time.process_time(); plan = optimal(grads, cost); t = time.process_time() - t0
done(ref=ref, t=t, messages=len(plan.groups))
'''
    jitter = "grads.nbytes * rng.uniform(0.8, 1.2, n)"
    regimes = {
        "keeps up (10 µs + 0.01 ns/B)": "CommCost(1e-5, 1e-11)",
        "moderate (50 µs + 0.1 ns/B)": "CommCost(5e-5, 1e-10)",
        "backlogged (1 ms + 1 ns/B)": "CommCost(1e-3, 1e-9)",
        "piecewise, rising at each start (3 regimes)":
            "CommCost.piecewise([Regime(0, 1e-5, 1e-9), Regime(1e6, 5e-4, 6e-10), Regime(2e7, 2e-3, 5.5e-10)])",
        "piecewise, falling at each start (3 regimes)":
            "CommCost.piecewise([Regime(0, 1e-5, 1e-9), Regime(1e6, 5e-5, 4e-10), Regime(2e7, 1e-3, 1e-10)])",
        "measured per layer, keeps up (10 µs + 0.01 ns/B ± 20 %)": f"measured_cost(1e-5 + 1e-11 * {jitter}, grads.nbytes)",
        "measured per layer, backlogged (1 ms + 1 ns/B ± 20 %)": f"measured_cost(1e-3 + 1e-9 * {jitter}, grads.nbytes)",
    }
    out("## 4. `optimal` on synthetic models (gradients 0.4-40 MB, backward 0.05-1 ms per layer)\n")
    out("Reference: the bare recurrence over the same n layers. Growth: between consecutive sizes. "
        "Complexity: O(n) for affine costs and piecewise ones rising at each regime start, O(n log n) "
        "for piecewise ones falling at one and for measured per-layer times (`sim.schedulers.optimal`).\n")
    out("| cost | " + " | ".join(f"{n:,} layers (ratio)" for n in sizes) + " | growth |")
    out("|---|" + "---|" * (len(sizes) + 1))
    result = {}
    for label, make_cost in regimes.items():
        cells, times = size_row(
            sizes, lambda n, c=make_cost: child(body.replace("ARGS", repr((n, c))), 300),
            lambda got: f"{fmt(got['t'])} ({got['t'] / got['ref']:.0f}×, {got['messages']:,} msgs)")
        out(f"| {label} | " + " | ".join(cells) + f" | {', '.join(growth(sizes, times))} |")
        result[label] = times[-1]
    out("")
    return {"optimal_100k_s": result}


def bench_schedulers(out, sizes, quick: bool) -> dict:
    """5. every scheduler and method at 1k / 10k / 100k layers: CPU time and peak memory."""
    body = r'''
import resource
import sim
from sim.schedulers.names import *
n, what = ARGS
resource.setrlimit(resource.RLIMIT_CPU, (CPU_CAP_S, CPU_CAP_S + 5))  # a CPU cap: the machine may be shared
m = synthetic(n)
c = sim.Cluster(gpus=16, gpus_per_node=4, network="100gbe")
t_c = c.comm_cost().time_s(m.gradient_bytes("fp32")).tolist()
ref = cpu(lambda: bare_recurrence(m.fwd_s.tolist(), m.bwd_s.tolist(), t_c), min_s=0.05)
kwargs = {"method": what} if what[0].isupper() else {}
sim.simulate  # (sim loads its names on first use: the engine's import is not the run's time)
run = lambda: sim.simulate(m, c, globals().get(what.upper(), what) if not kwargs else WFBP, batch_size=32, **kwargs)
t0 = time.process_time()
res = run()
t = time.process_time() - t0
if t < 0.05:  # under a few ticks of the CPU clock: the median of repeated calls instead of one
    t = cpu(run, min_s=0.2)
done(ref=ref, t=t)
'''
    import sim
    from sim.methods import METHODS

    # the schedulers, and the methods that are not a scheduler on all-reduce already in the list
    names = list(sim.SCHEDULERS) + [m for m, cfg in METHODS.items()
                                    if cfg.architecture == "ps" or cfg.scheduler not in _FAST_SCHEDULERS]
    out("## 5. Every scheduler and method on synthetic models (16 GPUs, 100GbE): CPU time, peak memory\n")
    out("Ratio: to the bare recurrence over the same layers, timed in the same child. Each child has 120 s of CPU.\n")
    out("| scheduler / method | " + " | ".join(f"{n:,} layers" for n in sizes) + " | growth |")
    out("|---|" + "---|" * (len(sizes) + 1))
    worst = {}
    for name in names:
        slow = name in METHODS or name not in _FAST_SCHEDULERS

        def run(n, name=name, slow=slow):
            if quick and n >= 100_000 and slow:
                return {"error": "skipped (--quick)"}
            return child(body.replace("ARGS", repr((n, name))).replace("CPU_CAP_S", "120"), 1800)

        cells, times = size_row(
            sizes, run, lambda got: f"{fmt(got['t'])} ({got['t'] / got['ref']:.0f}×), {got['peak_mib']:.0f} MiB")
        out(f"| {name} | " + " | ".join(cells) + f" | {', '.join(growth(sizes, times))} |")
        worst[name] = times[-1]
    out("")
    return {"schedulers_100k_s": worst}


#: Schedulers timed by the fast path (the rest and every parameter-server method lower a task graph: one
#: worker's plain pipeline is timed lane by lane, `sim.core.pipeline`, DeAR and sharded plans by the event loop).
_FAST_SCHEDULERS = (SEQUENTIAL, WFBP, SYNCEASGD, MGWFBP, OPTIMAL, BUCKET, HOROVOD, DDP)


def bench_workers(out) -> dict:
    """5b. the per-worker engine at 8,192 GPUs with stragglers."""
    body = r'''
import sim
from sim.workers import simulate_workers
from sim.workers.stragglers import StragglerSpec
m = sim.load_model("resnet50")
c = sim.Cluster(gpus=8192, gpus_per_node=8, network="100gbe")
timed = m.timed(gpu=c.gpu, batch_size=32)
t_c = c.comm_cost().time_s(timed.gradient_bytes("fp32")).tolist()
ref = cpu(lambda: bare_recurrence(timed.fwd_s.tolist(), timed.bwd_s.tolist(), t_c))
iterations, kept = ARGS
t0 = time.process_time()
simulate_workers(m, c, batch_size=32, straggler=StragglerSpec(dist="normal", cv=0.1, stragglers=8, factor=2.0),
                 iterations=iterations, timeline_iterations=kept)
t = time.process_time() - t0
done(ref=ref, t=t)
'''
    got = child(body.replace("ARGS", repr((20, None))), 300)
    out("## 5b. Per-worker engine: resnet50 on 8,192 GPUs, 20 iterations, normal cv 0.1 and 8 stragglers\n")
    if "error" in got:
        out(f"{got['error']}\n")
        return {}
    out(f"{fmt(got['t'])} of CPU ({got['t'] / got['ref']:,.0f}× the bare recurrence over its layers), peak "
        f"{got['peak_mib']:.0f} MiB: target ≤ 5 s {'met' if got['t'] <= 5 else '**not met**'}.\n")
    more = child(body.replace("ARGS", repr((100, 1))), 300)  # as `python -m sim run --stragglers` runs it: metrics only
    if "error" not in more:
        out(f"100 iterations keeping one iteration's task times (`timeline_iterations=1`, as `python -m sim run "
            f"--stragglers` does): {fmt(more['t'])} of CPU, peak {more['peak_mib']:.0f} MiB.\n")
    return {"workers_s": got["t"]}


def bench_sweep(out, batches: int, jobs: int) -> dict:
    """3. the design sweep: 10 zoo models x 11 GPU counts x 8 networks x 6 schedulers x batch sizes."""
    body = r'''
import resource
import sim
from sim import parallel
from sim.schedulers.names import BUCKET, MGWFBP, OPTIMAL, SEQUENTIAL, SYNCEASGD, WFBP
MODELS = ["alexnet", "vgg16", "googlenet", "inception_v3", "resnet50", "resnet101", "resnet152", "densenet121",
          "bert_base", "gpt2"]
NETS = ["10gbe", "10gbe-k80-osu", "25gbe", "100gbe", "ib-fdr-56", "ib-edr-100", "ib-hdr-200", "ib-ndr-400"]
batches, jobs = ARGS
grid = parallel.ConfigProduct(model=[sim.load_model(x) for x in MODELS], gpus=[2**k for k in range(11)],
                              gpus_per_node=4, network=NETS,
                              scheduler=[SEQUENTIAL, WFBP, SYNCEASGD, MGWFBP, OPTIMAL, BUCKET],
                              batch_size=list(range(8, 8 + batches)))
together = tree_pss_sampler()
c0, w0 = time.process_time(), time.perf_counter()
frame = parallel.run_grid(grid, jobs=jobs)
main_s, wall_s = time.process_time() - c0, time.perf_counter() - w0
kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # (before the watcher ends: its own CPU is not the workers')
together_mib = together()
t_c = sim.Cluster(gpus=16, gpus_per_node=4).comm_cost().time_s(np.full(160, 4e6)).tolist()
ref = cpu(lambda: bare_recurrence([1e-4] * 160, [2e-4] * 160, t_c))
done(configs=len(grid), rows=len(frame), main_s=main_s, workers_s=kids.ru_utime + kids.ru_stime, wall_s=wall_s,
     workers_peak_mib=kids.ru_maxrss / 1024, together_pss_mib=together_mib, ref=ref)
'''
    got = child(body.replace("ARGS", repr((batches, jobs))), 3600)
    out(f"## 3. Design sweep: 10 zoo models × 11 GPU counts × 8 networks × 6 schedulers × {batches} batch sizes, "
        f"`jobs={jobs}`\n")
    if "error" in got:
        out(f"{got['error']}\n")
        return {}
    busy = got["main_s"] + got["workers_s"]
    per_core = got["main_s"] + got["workers_s"] / jobs  # the caller's serial part, then the workers sharing the cores
    out("| configurations | caller CPU | workers CPU | on 2 quiet cores (caller + workers / 2) | wall (shared machine) "
        "| per configuration (ratio to a 160-layer bare recurrence) | peak memory, caller / a worker "
        "| peak memory together (summed PSS: shared pages once) |")
    out("|---|---|---|---|---|---|---|---|")
    out(f"| {got['configs']:,} | {fmt(got['main_s'])} | {fmt(got['workers_s'])} | {fmt(per_core)} | "
        f"{fmt(got['wall_s'])} | {fmt(busy / got['configs'])} ({busy / got['configs'] / got['ref']:.0f}×) | "
        f"{got['peak_mib']:.0f} / {got['workers_peak_mib']:.0f} MiB | {got['together_pss_mib']:.0f} MiB |\n")
    return {"sweep_configs": got["configs"], "sweep_2core_s": per_core,
            "sweep_peak_mib": got["peak_mib"] + jobs * got["workers_peak_mib"],
            "sweep_together_pss_mib": got["together_pss_mib"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 batch sizes, fewer repeats, no 100k general-engine runs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--only", default=None, help="comma-separated: import,simulate,sweep,dp (the optimal scheduler),schedulers,workers")
    args = parser.parse_args(argv)
    lines: list[str] = []

    def out(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    only = set(args.only.split(",")) if args.only else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    out(f"# Scale run ({time.strftime('%Y-%m-%d %H:%M')}, commit {commit.strip()}, "
        f"`python bench/scale.py{' --quick' if args.quick else ''}`)\n")
    out(f"Load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores "
        "(times are CPU times, ratios measured in the same child).\n")
    steps = {
        "import": lambda: bench_import(out, 5 if args.quick else 9),
        "simulate": lambda: bench_simulate(out),
        "sweep": lambda: bench_sweep(out, 10 if args.quick else 190, args.jobs),
        "dp": lambda: bench_optimal(out, [1000, 10000, 100000]),
        "schedulers": lambda: bench_schedulers(out, [1000, 10000, 100000], args.quick),
        "workers": lambda: bench_workers(out),
    }
    for name, step in steps.items():
        if only is None or name in only:
            step()
    if args.output:
        args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
