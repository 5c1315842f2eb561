"""Benchmarks of the simulator, against the targets and the reference evaluation.

    python bench/run.py            # full run, a few minutes on 2 cores
    python bench/run.py --quick    # fewer repeats, for a smoke test
    python bench/run.py --output bench/last-run.md

Prints a Markdown report: the machine, then per benchmark the median and the
spread (first to third quartile, and the number of repeats) of wall-clock
times, the same measured for the reference where there is one, the ratio, and
whether the target is met. The reference is the plain per-task evaluation of
the same DAG: `sim.api.simulate_dag` (every task built by `sim.dag.build_dag`
and timed by the discrete-event engine, metrics read from the timeline) and,
for the makespan alone, `networkx.dag_longest_path_length` over the DAG with
each resource's order added as edges.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sim  # noqa: E402
from sim import fast, parallel  # noqa: E402
from sim.api import simulate_dag  # noqa: E402
from sim.comm import CommCost  # noqa: E402
from sim.dag import build_dag, gradient_layers  # noqa: E402
from sim.schedulers import GradientLayers, make_plan, optimal  # noqa: E402
from sim.schedulers.names import BUCKET, MGWFBP, OPTIMAL, SEQUENTIAL, SYNCEASGD, WFBP  # noqa: E402
from sim.schedulers.optimal import optimal_every_j  # noqa: E402

CNN150 = ROOT / "bench" / "data" / "cnn150.csv"
GPU_COUNTS = [2**k for k in range(11)]  # 1 .. 1024
DESIGN_MODELS = ["alexnet", "vgg16", "googlenet", "inception_v3", "resnet50", "resnet101", "resnet152",
                 "densenet121", "bert_base", "gpt2"]
DESIGN_NETWORKS = ["10gbe", "10gbe-k80-osu", "25gbe", "100gbe", "ib-fdr-56", "ib-edr-100", "ib-hdr-200", "ib-ndr-400"]
DESIGN_BUCKETS_MB = [1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256]
#: The six schedulers the sweep targets are stated for (sim.SCHEDULERS may hold more).
SWEEP_SCHEDULERS = [SEQUENTIAL, WFBP, SYNCEASGD, MGWFBP, OPTIMAL, BUCKET]
TARGETS_S = {"simulate": 2e-3, "optimal_1000": 50e-3, "dashboard": 50e-3, "design": 10.0, "import": 0.5}


# ---------------------------------------------------------------- measuring
def measure(fn, repeat: int, warmup: int = 1) -> np.ndarray:
    """Wall-clock seconds of ``repeat`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = np.empty(repeat)
    for i in range(repeat):
        t0 = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t0
    return times


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} µs"


def stat(times) -> str:
    """``median (q1–q3, n=...)``."""
    times = np.asarray(times)
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return f"{fmt(med)} ({fmt(q1)}–{fmt(q3)}, n={len(times)})"


def med(times) -> float:
    return float(np.median(times))


def verdict(value_s: float, target_s: float) -> str:
    return f"{'met' if value_s <= target_s else '**not met**'} (≤ {fmt(target_s)})"


# ---------------------------------------------------------------- references
def longest_path_s(model: sim.Model, cluster: sim.Cluster, scheduler: str, iterations: int = 2) -> float:
    """Makespan of the iteration DAG by networkx: node durations on out-edges,
    each resource's order (plan order on the channel) added as edges. ``model`` is timed,
    in the gradients simulate plans over; the cost has the framework's per-message costs."""
    cost = cluster.framework_cost(cluster.comm_cost(), scheduler)
    plan = make_plan(scheduler, gradient_layers(model, "fp32"), cost)
    g = build_dag(model, plan, cost, iterations=iterations)
    h = nx.DiGraph()
    for u, d in g.nodes(data=True):
        h.add_edge(u, "sink", weight=d["duration_s"])
    for u, v in g.edges:
        h.add_edge(u, v, weight=g.nodes[u]["duration_s"])
    for kind in ("io", "h2d"):
        h.add_edges_from(((k, kind, 0), (k + 1, kind, 0)) for k in range(iterations - 1))
    n_msg = len(plan.groups)
    for k in range(iterations):
        h.add_edges_from(((k, "comm", gi), (k, "comm", gi + 1)) for gi in range(n_msg - 1))
    for u, v in h.edges:
        if v != "sink":
            h.edges[u, v]["weight"] = g.nodes[u]["duration_s"] + g.edges[u, v].get("lag_s", 0.0) if g.has_edge(u, v) \
                else g.nodes[u]["duration_s"]
    return nx.dag_longest_path_length(h, weight="weight")


def synthetic_grads(n: int, seed: int = 0) -> GradientLayers:
    """n layers with parameters: backward 0.05-1 ms, gradients 0.4-40 MB."""
    rng = np.random.default_rng(seed)
    bwd = rng.uniform(5e-5, 1e-3, n)
    return GradientLayers(np.arange(n), np.cumsum(bwd[::-1])[::-1].copy(), rng.integers(100_000, 10_000_000, n) * 4)


# ---------------------------------------------------------------- benchmarks
def bench_simulate(out, repeat: int) -> dict:
    cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", intra="pcie3")
    plain = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", intra="pcie3", interference=False)
    out("## 1. One `simulate` on 16 GPUs (4 per node, 10GbE, ring), batch 32\n")
    out("Fast path: `sim.simulate` (metrics only; the timeline is built on first access). Reference: "
        "`simulate_dag`, and the makespan alone by networkx longest path over the same DAG.\n")
    out("| model | scheduler | `simulate` | reference `simulate_dag` | ratio | networkx longest path | ratio |")
    out("|---|---|---|---|---|---|---|")
    worst_non_optimal = {}
    for label, model in (("cnn150 (150 layers, CSV)", sim.load_model(CNN150)),
                         ("resnet50 (zoo, 56 layers)", sim.load_model("resnet50"))):
        for name in sim.SCHEDULERS:
            t_fast = measure(lambda m=model, s=name: sim.simulate(m, cluster, s, batch_size=32), repeat, warmup=50)
            t_ref = measure(lambda m=model, s=name: simulate_dag(m, cluster, s, batch_size=32), max(5, repeat // 20))
            timed = model.timed(gpu=cluster.gpu, batch_size=32).with_gradients()
            plan = make_plan(name, gradient_layers(timed, "fp32"), cluster.framework_cost(cluster.comm_cost(), name))
            if not fast.supports(plan, timed.num_layers):  # simulate falls back to the DAG for such plans
                out(f"| {label} | {name} (no fast path: evaluated on the DAG) | {stat(t_fast)} | {stat(t_ref)} | "
                    f"{med(t_ref) / med(t_fast):.1f}× | | |")
                continue
            t_lp = measure(lambda m=timed, s=name: longest_path_s(m, plain, s), max(5, repeat // 20))
            # the check: the networkx DAG has no interference, so neither has this run
            res = sim.simulate(model, plain, name, batch_size=32, iterations=2)
            run_end = float(res.timeline["end_s"].max())
            assert abs(longest_path_s(timed, plain, name) - run_end) <= 1e-12 * run_end, "longest path disagrees"
            out(f"| {label} | {name} | {stat(t_fast)} | {stat(t_ref)} | {med(t_ref) / med(t_fast):.0f}× | "
                f"{stat(t_lp)} | {med(t_lp) / med(t_fast):.0f}× |")
            if label.startswith("cnn150") and name in SWEEP_SCHEDULERS and name != OPTIMAL:
                worst_non_optimal[name] = med(t_fast)
    worst = max(worst_non_optimal, key=worst_non_optimal.get)
    out(f"\nTarget, one simulate of 150 layers, any scheduler but optimal: slowest is {worst} at "
        f"{fmt(worst_non_optimal[worst])}: {verdict(worst_non_optimal[worst], TARGETS_S['simulate'])}.\n")
    model = sim.load_model(CNN150)
    t_line = measure(lambda: sim.simulate(model, cluster, MGWFBP, batch_size=32).timeline, max(10, repeat // 5))
    t_ref = measure(lambda: simulate_dag(model, cluster, MGWFBP, batch_size=32).timeline, max(5, repeat // 20))
    out(f"With the timeline read (cnn150, mgwfbp, what a Gantt chart needs): fast {stat(t_line)}, "
        f"reference {stat(t_ref)}, {med(t_ref) / med(t_line):.0f}×.\n")
    return {"simulate_s": worst_non_optimal[worst]}


def bench_optimal(out, repeat: int, quick: bool) -> dict:
    out("## 2. `optimal` on synthetic models\n")
    out("Gradients of 0.4-40 MB, backward 0.05-1 ms per layer. *Backlogged*: 1 ms + 1 ns/byte per message, the "
        "channel falls far behind backward and many groupings tie (the DP compares ends exactly). *Hidden*: "
        "10 µs + 0.01 ns/byte, messages keep up with backward. Reference: the definition's search over every j "
        "(`sim.schedulers.optimal.optimal_every_j`, exact ties; the same plans).\n")
    out("| layers | cost | `optimal` | reference (every j) | ratio |")
    out("|---|---|---|---|---|")
    result = {}
    for n in (100, 1000, 10000):
        for regime, cost in (("backlogged", CommCost(1e-3, 1e-9)), ("hidden", CommCost(1e-5, 1e-11))):
            grads = synthetic_grads(n, seed=n)
            reps = max(3, repeat // (10 if n < 10000 else 60))
            t = measure(lambda g=grads, c=cost: optimal(g, c), reps)
            if quick and n == 10000:
                ref_cell, ratio = "skipped (--quick)", ""
            else:
                t_ref = measure(lambda g=grads, c=cost: optimal_every_j(g, c), 1 if n >= 10000 else max(3, reps // 3))
                assert optimal(grads, cost) == optimal_every_j(grads, cost)
                ref_cell, ratio = stat(t_ref), f"{med(t_ref) / med(t):.1f}×"
            out(f"| {n:,} | {regime} | {stat(t)} | {ref_cell} | {ratio} |")
            result[(n, regime)] = med(t)
    worst_1000 = max(result[(1000, r)] for r in ("backlogged", "hidden"))
    growth = {r: np.log10(result[(10000, r)] / result[(1000, r)]) for r in ("backlogged", "hidden")}
    out(f"\nTarget, optimal on 1,000 layers: {fmt(worst_1000)}: {verdict(worst_1000, TARGETS_S['optimal_1000'])}. "
        f"Growth from 1,000 to 10,000 layers: time × n^{growth['backlogged']:.2f} (backlogged), "
        f"n^{growth['hidden']:.2f} (hidden): {'met' if max(growth.values()) <= 2.05 else '**not met**'} "
        "(no worse than quadratic).\n")
    return {"optimal_1000_s": worst_1000, "growth": growth}


def bench_dashboard(out, repeat: int) -> dict:
    out("## 3. Dashboard sweep: resnet50, 6 schedulers × 11 GPU counts (1..1024), 4 GPUs per node, 10GbE\n")
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=1, gpus_per_node=4, network="10gbe")
    kwargs = {"gpus": GPU_COUNTS, "schedulers": SWEEP_SCHEDULERS, "batch_size": 32}
    t = measure(lambda: sim.sweep(model, cluster, **kwargs), repeat, warmup=2)
    t_pool = measure(lambda: sim.sweep(model, cluster, jobs=2, **kwargs), max(3, repeat // 4))

    def reference():
        timed = model.timed(gpu=cluster.gpu, batch_size=32)
        t1 = simulate_dag(timed, cluster, WFBP, batch_size=32).iteration_time_s
        return [simulate_dag(timed, cluster.with_gpus(p), s, batch_size=32, single_gpu_iteration_s=t1).metrics
                for p in GPU_COUNTS for s in SWEEP_SCHEDULERS]

    t_ref = measure(reference, 3, warmup=0)
    out("| how | time | ratio to reference |")
    out("|---|---|---|")
    out(f"| `sim.sweep` (decides: serial here) | {stat(t)} | {med(t_ref) / med(t):.0f}× |")
    out(f"| `sim.sweep(jobs=2)` (forced process pool) | {stat(t_pool)} | {med(t_ref) / med(t_pool):.0f}× |")
    out(f"| reference: 66 × `simulate_dag` | {stat(t_ref)} | 1× |")
    out(f"\nTarget, dashboard sweep: {fmt(med(t))}: {verdict(med(t), TARGETS_S['dashboard'])}.\n")
    return {"dashboard_s": med(t)}


def design_configs() -> list[dict]:
    models = {name: sim.load_model(name) for name in DESIGN_MODELS}
    return [
        {"model": models[m], "gpus": p, "gpus_per_node": 4, "network": net, "scheduler": s,
         "bucket_mb": float(b), "batch_size": 32}
        for m in DESIGN_MODELS for p in GPU_COUNTS for net in DESIGN_NETWORKS for s in SWEEP_SCHEDULERS
        for b in DESIGN_BUCKETS_MB
    ]


def bench_design(out, repeat: int, jobs: int) -> dict:
    configs = design_configs()
    grid = parallel.Grid(configs)
    out(f"## 4. Design-space sweep: {len(configs):,} configurations\n")
    out(f"{len(DESIGN_MODELS)} zoo models × {len(GPU_COUNTS)} GPU counts (1..1024, 4 per node) × "
        f"{len(DESIGN_NETWORKS)} networks × {len(SWEEP_SCHEDULERS)} schedulers × {len(DESIGN_BUCKETS_MB)} bucket "
        f"sizes, batch 32, through `sim.parallel.run_grid`. They reduce to {len(grid.units):,} distinct "
        "evaluations (the bucket size changes only the bucket scheduler; one GPU needs no plan; some networks "
        "give the same cost at one node); evaluations of one workload that share a plan are timed in one "
        "vectorised pass.\n")
    reps = max(3, repeat // 40)
    t_serial, t_pool = [], []
    for _ in range(reps):  # alternate, so that both see the same load from other processes
        t_serial.extend(measure(lambda: parallel.run_grid(configs, jobs=1), 1, warmup=0))
        t_pool.extend(measure(lambda: parallel.run_grid(configs, jobs=jobs), 1, warmup=0))
    rng = np.random.default_rng(0)
    sample = [configs[i] for i in rng.choice(len(configs), 40, replace=False)]

    def reference_one(c):
        c = dict(c)
        model, name, bucket_mb, batch = c.pop("model"), c.pop("scheduler"), c.pop("bucket_mb"), c.pop("batch_size")
        return simulate_dag(model, sim.Cluster(**c), name, batch_size=batch, bucket_mb=bucket_mb)

    per_config = measure(lambda: [reference_one(c) for c in sample], 1, warmup=0)[0] / len(sample)
    ref_total = per_config * len(configs)
    out("| how | time | configurations / s | ratio to reference |")
    out("|---|---|---|---|")
    out(f"| `run_grid(jobs=1)`, one core | {stat(t_serial)} | {len(configs) / med(t_serial):,.0f} | "
        f"{ref_total / med(t_serial):,.0f}× |")
    out(f"| `run_grid(jobs={jobs})`, {jobs} cores | {stat(t_pool)} | {len(configs) / med(t_pool):,.0f} | "
        f"{ref_total / med(t_pool):,.0f}× |")
    out(f"| reference: `simulate_dag` per configuration (estimated from 40 random ones, {fmt(per_config)} each) | "
        f"≈ {fmt(ref_total)} | {1 / per_config:,.0f} | 1× |")
    out(f"\nTarget, 100,000-configuration sweep on both cores: {fmt(med(t_pool))}: "
        f"{verdict(med(t_pool), TARGETS_S['design'])}.\n")
    return {"design_s": med(t_pool), "configs": configs}


def bench_crossover(out, quick: bool) -> None:
    out("## 6. When a process pool pays: serial against `jobs=2`\n")
    out("Grids of resnet152 (158 layers) × 11 GPU counts × 6 schedulers × more networks and bucket sizes. "
        "Work is the estimate `run_grid` decides by (layers summed over distinct evaluations); "
        f"below `SERIAL_WORK_LIMIT` = {parallel.SERIAL_WORK_LIMIT:,} it runs serially.\n")
    out("| configurations | work | serial | `jobs=2` |")
    out("|---|---|---|---|")
    model = sim.load_model("resnet152")
    sizes = [(1, 1), (2, 4), (4, 4), (8, 4), (8, 16)] if not quick else [(1, 1), (8, 16)]
    for n_nets, n_buckets in sizes:
        configs = [{"model": model, "gpus": p, "gpus_per_node": 4, "network": net, "scheduler": s,
                    "bucket_mb": float(b), "batch_size": 32}
                   for p in GPU_COUNTS for net in DESIGN_NETWORKS[:n_nets] for s in SWEEP_SCHEDULERS
                   for b in range(1, n_buckets + 1)]
        grid = parallel.Grid(configs)
        work = grid.work(range(len(grid.units)))
        t1 = measure(lambda c=configs: parallel.run_grid(c, jobs=1), 5)
        t2 = measure(lambda c=configs: parallel.run_grid(c, jobs=2), 5)
        out(f"| {len(configs):,} | {work:,.0f} | {stat(t1)} | {stat(t2)} |")
    out("")


def _fresh(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return proc.stdout.strip()


def bench_import_and_memory(out, repeat: int, configs: list[dict]) -> dict:
    out("## 5. `import sim` and memory\n")
    code = "import time; t = time.perf_counter(); import sim; print(time.perf_counter() - t)"
    t_bare = [float(_fresh(code)) for _ in range(max(7, repeat // 10))]
    # `sim` loads its names on first use: the first `sim.simulate` imports numpy and the engine
    code = "import time; t = time.perf_counter(); import sim; sim.simulate; print(time.perf_counter() - t)"
    t_import = [float(_fresh(code)) for _ in range(max(7, repeat // 10))]
    out(f"`import sim` in a fresh interpreter: {stat(t_bare)}; with its first use (`sim.simulate`, which imports "
        f"numpy and the engine): {stat(t_import)}: {verdict(med(t_import), TARGETS_S['import'])}. "
        "Most of it is numpy and the engine's own modules; pandas, networkx and plotly load where used.\n")
    # VmHWM: the peak resident set of this process image (ru_maxrss would carry the parent's over exec)
    rss = ("import re; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))")
    scenarios = {
        "`import sim` and its first use (`sim.simulate`)": "import sim; sim.simulate",
        "one `simulate` (cnn150, 16 GPUs) + its timeline": (
            "import sim; r = sim.simulate(sim.load_model('bench/data/cnn150.csv'), "
            f"sim.Cluster(gpus=16, gpus_per_node=4), {MGWFBP!r}, batch_size=32); r.timeline"),
        "dashboard sweep": (
            "import sim; sim.sweep(sim.load_model('resnet50'), sim.Cluster(gpus_per_node=4), "
            f"gpus=[2**k for k in range(11)], schedulers={SWEEP_SCHEDULERS}, batch_size=32)"),
        "design-space sweep, one core": (
            "import sys; sys.path.insert(0, 'bench'); from run import design_configs; "
            "from sim.parallel import run_grid; run_grid(design_configs(), jobs=1)"),
    }
    out("| peak resident memory of a fresh process doing | max RSS |")
    out("|---|---|")
    for label, body in scenarios.items():
        kib = int(_fresh(f"{body}; {rss}"))
        out(f"| {label} | {kib / 1024:.0f} MiB |")
    tracemalloc.start()
    parallel.run_grid(configs, jobs=1)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out(f"\nPython allocations during the {len(configs):,}-configuration sweep (tracemalloc peak, one core, "
        f"configurations already built): {peak / 2**20:.0f} MiB.\n")
    return {"import_s": med(t_import)}


def machine(out) -> None:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    import pandas

    out("## Machine\n")
    out("| nproc | CPU | Python | numpy | pandas | networkx | load average at start |")
    out("|---|---|---|---|---|---|---|")
    out(f"| {nproc} | {cpu} | {platform.python_version()} | {np.__version__} | {pandas.__version__} | "
        f"{nx.__version__} | {' '.join(f'{x:.2f}' for x in os.getloadavg())} |\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test, noisier figures)")
    parser.add_argument("--jobs", type=int, default=parallel.default_jobs(), help="cores for the design-space sweep")
    parser.add_argument("--output", type=Path, default=None, help="also write the report to this file")
    args = parser.parse_args(argv)
    repeat = 40 if args.quick else 200
    lines: list[str] = []

    def out(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    started = time.perf_counter()
    out(f"# Benchmark run ({time.strftime('%Y-%m-%d %H:%M')}, `python bench/run.py{' --quick' if args.quick else ''}`)\n")
    machine(out)
    got = {}
    got.update(bench_simulate(out, repeat))
    got.update(bench_optimal(out, repeat, args.quick))
    got.update(bench_dashboard(out, repeat))
    got.update(bench_design(out, repeat, args.jobs))
    got.update(bench_import_and_memory(out, repeat, got.pop("configs")))
    bench_crossover(out, args.quick)
    out("## Targets\n")
    out("| target | measured (median) | |")
    out("|---|---|---|")
    out(f"| one simulate, 150 layers, any scheduler but optimal ≤ 2 ms | {fmt(got['simulate_s'])} | "
        f"{verdict(got['simulate_s'], TARGETS_S['simulate'])} |")
    out(f"| optimal, 1,000 layers ≤ 50 ms | {fmt(got['optimal_1000_s'])} | "
        f"{verdict(got['optimal_1000_s'], TARGETS_S['optimal_1000'])} |")
    out(f"| optimal grows no worse than quadratically | n^{max(got['growth'].values()):.2f} from 1,000 to 10,000 | "
        f"{'met' if max(got['growth'].values()) <= 2.05 else '**not met**'} |")
    out(f"| dashboard sweep ≤ 50 ms | {fmt(got['dashboard_s'])} | {verdict(got['dashboard_s'], TARGETS_S['dashboard'])} |")
    out(f"| 100,000-configuration sweep on both cores ≤ 10 s | {fmt(got['design_s'])} | "
        f"{verdict(got['design_s'], TARGETS_S['design'])} |")
    out(f"| `import sim` and its first use ≤ 0.5 s | {fmt(got['import_s'])} | {verdict(got['import_s'], TARGETS_S['import'])} |")
    out(f"\nLoad average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"the run took {time.perf_counter() - started:.0f} s.")
    if args.output:
        args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
