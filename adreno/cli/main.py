"""`adreno`: compile models for Adreno GPUs, run and check them on OpenCL devices, manage the farm and caches.

Every command prints human-readable output by default and JSON with --json. A user error (bad model, unknown
target, missing device, broken artifact) is one line on stderr and exit status 2; a failed --check is status 1.
Each command group is one module of this package with a `register(sub, command)`; this module only assembles them.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..support.command_line import OneLineParser
from ..errors import AdrenoError

EPILOG = """examples:
  adreno models
  adreno compile resnet18 --target adreno-740 -o build/resnet18
  adreno run build/resnet18 --check --repeat 20
  adreno devices --local
"""


def build_parser() -> argparse.ArgumentParser:
    from . import cache, compile, farm, listing, orchestrate, run, tune  # inside: loads numpy at import

    parser = OneLineParser(
        prog="adreno", description="Compile neural networks for Qualcomm Adreno GPUs (OpenCL, on Apache TVM), run and "
        "check them on OpenCL devices, tune them on phones.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"adreno {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name, func, help_text, description=None):
        p = sub.add_parser(name, help=help_text, description=description or help_text)
        p.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
        p.set_defaults(func=func)
        return p

    for group in (listing, compile, run, tune, cache, farm, orchestrate):
        group.register(sub, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except AdrenoError as err:
        return _ended(f"error: {err}", 2)
    except KeyboardInterrupt:
        return _ended("interrupted", 130)


def _ended(line: str, status: int) -> int:
    """A command ended by a user error or Ctrl-C: `line` on stderr, on a line of its own after an open progress
    line (and with no empty line before it under --json or -q); returns the exit status."""
    from .common import error_line  # inside: loads numpy at import

    error_line(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
