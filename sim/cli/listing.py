"""``python -m sim list``: show the catalogs."""

from __future__ import annotations

import pandas as pd

from sim.cli.args import write_json
from sim.listing import CATALOGS, catalog_listing

NAME = "list"
HELP = "show models, networks, collectives and schedulers"


def add_arguments(parser) -> None:
    parser.add_argument("what", nargs="?", default="all", choices=["all", *CATALOGS])
    parser.add_argument("--format", choices=["json", "table"], default="table")


def run(args, out) -> None:
    listing = catalog_listing()
    chosen = listing if args.what == "all" else {args.what: listing[args.what]}
    if args.format == "json":
        write_json(chosen if args.what == "all" else chosen[args.what], out)
        return
    for what, rows in chosen.items():
        out.write(f"{what}:\n")
        out.write(pd.DataFrame(rows).to_string(index=False) + "\n\n")
