"""What every command group shares: progress lines, --json output, the check of numeric options, and the arguments
several commands take with one meaning (an artifact directory, a local OpenCL device)."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import AdrenoError


class Progress:
    """One line per step on stderr, with the time the previous step took; silent under --json/--quiet."""

    def __init__(self, enabled: bool = True):
        self.enabled, self.started, self.last = enabled, time.perf_counter(), None

    def __call__(self, message: str) -> None:
        self.finish_step()
        self.last = (message, time.perf_counter())
        if self.enabled:
            print(f"  {message} ...", end="", file=sys.stderr, flush=True)

    def finish_step(self) -> None:
        if self.last and self.enabled:
            print(f" {time.perf_counter() - self.last[1]:.1f} s", file=sys.stderr, flush=True)
        self.last = None



def emit(args, data, text: str) -> None:
    """`data` as JSON under --json, else `text`."""
    print(json.dumps(data, indent=1, default=json_default) if args.json else text)


def json_default(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return repr(value)



# The largest value a numeric option takes: counts past it would never finish (and overflow a C int), and seconds
# past it (68 years) overflow the clock a deadline is computed on.
OPTION_MAX = 2 ** 31 - 1


def require_positive(args, *names: str, allow_zero: tuple[str, ...] = ()) -> None:
    """A one-line error (exit status 2) for a numeric option that is not a positive finite number (or, for those in
    `allow_zero`, not a non-negative one) up to `OPTION_MAX`: `--repeat 0` must not "succeed" measuring nothing."""
    for name in names:
        value = getattr(args, name)
        if value is None:  # not given: the command's default applies
            continue
        flag = "--" + name.replace("_", "-")
        low_ok = value >= 0 if name in allow_zero else value > 0
        if not ((isinstance(value, int) or math.isfinite(value)) and low_ok):
            raise AdrenoError(f"{flag} must be {'>= 0' if name in allow_zero else 'positive'}, not {value}")
        if value > OPTION_MAX:
            raise AdrenoError(f"{flag} must be at most {OPTION_MAX}, not {value}")


def megabytes(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 10_000 else f"{size} B"


def add_artifact_argument(parser) -> None:
    """The positional ARTIFACT of the commands that read a compiled artifact."""
    parser.add_argument("artifact", help="artifact directory written by `adreno compile`")


def add_device_argument(parser) -> None:
    """--device: the local OpenCL device, as `adreno.opencl.device.select_device` reads it."""
    parser.add_argument("--device", help="pocl (default), gpu, cpu, an index from `adreno devices --local`, or part "
                        "of a device name")
