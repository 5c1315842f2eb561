"""``python -m sim import-bcaffe``: a B-Caffe per-blob log as a layer CSV with comm_ms."""

from __future__ import annotations

from pathlib import Path

from sim.cli.args import read_text
from sim.cli.streams import check_output_path, refuse_same_file, write_file

NAME = "import-bcaffe"
HELP = "turn a B-Caffe per-blob log into a layer CSV with comm_ms"


def add_arguments(parser) -> None:
    parser.add_argument("log", help="a B-Caffe tmp*comm.log")
    parser.add_argument("-o", "--output", required=True, help="layer CSV to write")
    parser.add_argument("--dump", type=int, default=0, help="which dump of the log (0 = first, -1 = last)")


def run(args, out) -> None:
    from sim.importers import bcaffe_layers

    path = Path(args.log)
    check_output_path(args.output, "-o")
    refuse_same_file(args.log, {"-o": args.output})
    table = bcaffe_layers(read_text(path), where=path.name, dump=args.dump)
    write_file(args.output, "-o", lambda fh: table.to_csv(fh, index=False))
    out.write(
        f"wrote {len(table)} layers ({int(table['params'].sum()):,} params, backward {table['bwd_ms'].sum():.1f} ms, "
        f"all-reduce {table['comm_ms'].sum():.1f} ms) to {args.output}\n"
    )
