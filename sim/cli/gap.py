"""``python -m sim gap``: how far mgwfbp falls short of optimal on seeded random models."""

from __future__ import annotations

from sim.cli.args import positive_int, seed, table, write_json

NAME = "gap"
HELP = "how far mgwfbp falls short of optimal on seeded random models"


def add_arguments(parser) -> None:
    parser.add_argument("--trials", type=positive_int, default=1000, help="random models to draw")
    parser.add_argument("--seed", type=seed, default=0, help="random seed")
    parser.add_argument("--gpus", type=positive_int, default=16, help="workers P")
    parser.add_argument("--format", choices=["json", "table", "csv"], default="table")


def run(args, out) -> None:
    from sim.gap import gap_study, gap_summary

    cases = gap_study(args.trials, seed=args.seed, gpus=args.gpus)
    if args.format == "csv":
        # ``gap`` is a fraction; the summary's figures are per cent: gap_pct says its unit in its name
        cases.assign(gap_pct=100 * cases["gap"]).to_csv(out, index=False)
        return
    summary = gap_summary(cases, args.seed)
    if args.format == "json":
        write_json(summary, out)
    else:
        out.write(table(summary) + "\n")
