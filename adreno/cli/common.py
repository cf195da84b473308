"""What every command group shares: progress lines and the error line after them, --json output, and the arguments
several commands take with one meaning (an artifact directory, a local OpenCL device). The check of numeric options
and argparse's one-line refusals are `adreno.support.command_line`'s, shared with the `python -m` entry points."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np



class Progress:
    """One line per step on stderr, with the time the previous step took; silent under --json/--quiet.

    A step's line stays open (no newline) until the step ends; `line_open` says whether one is, for the whole
    process (stderr is one stream), so that an error ending the step starts on a line of its own (`error_line`)."""

    line_open = False

    def __init__(self, enabled: bool = True):
        self.enabled, self.started, self.last = enabled, time.perf_counter(), None

    def __call__(self, message: str) -> None:
        self.finish_step()
        self.last = (message, time.perf_counter())
        if self.enabled:
            print(f"  {message} ...", end="", file=sys.stderr, flush=True)
            Progress.line_open = True

    def finish_step(self) -> None:
        if self.last and self.enabled:
            print(f" {time.perf_counter() - self.last[1]:.1f} s", file=sys.stderr, flush=True)
            Progress.line_open = False
        self.last = None


def error_line(message: str) -> None:
    """`message` on stderr, on a line of its own: after a step's open progress line, not at its end; and with no
    empty line before it where none is open (under --json or --quiet, or between steps)."""
    if Progress.line_open:
        message = "\n" + message
    print(message, file=sys.stderr, flush=True)
    Progress.line_open = False



def emit(args, data, text: str) -> None:
    """`data` as JSON under --json, else `text`."""
    print(json.dumps(data, indent=1, default=json_default) if args.json else text)


def json_default(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)



def megabytes(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 10_000 else f"{size} B"


def add_artifact_argument(parser) -> None:
    """The positional ARTIFACT of the commands that read a compiled artifact."""
    parser.add_argument("artifact", help="artifact directory written by `adreno compile`")


def add_device_argument(parser) -> None:
    """--device: the local OpenCL device, as `adreno.opencl.device.select_device` reads it."""
    parser.add_argument("--device", help="pocl (default), gpu, cpu, an index from `adreno devices --local`, or part "
                        "of a device name")
