"""A worker of `adreno.opencl.first_launches`: `python -m adreno.opencl.first_launch_worker ARTIFACT --device I
--claims DIR` builds the artifact's programs, binds its kernels to storage without the weights, and launches once
each kernel it claims first in DIR, so that the driver's disk cache holds their code for the executor that started
it. A failure is one line on stderr and exit status 2 (the executor keeps the line)."""

from __future__ import annotations

import argparse
import sys

import pyopencl as cl

from ..errors import AdrenoError
from .device import opencl_devices
from .executor import Executor
from .first_launches import compile_order, launch_claimed


def main(argv=None) -> int:
    """Build the artifact's programs on device `--device` (an index into `opencl_devices()`), bind its kernels to
    storage without the weights, and launch the kernels it claims in `--claims`."""
    ap = argparse.ArgumentParser(prog="python -m adreno.opencl.first_launch_worker", description=main.__doc__)
    ap.add_argument("artifact")
    ap.add_argument("--device", type=int, required=True)
    ap.add_argument("--claims", required=True, help="the directory of claims its executor made")
    args = ap.parse_args(argv)
    try:
        executor = Executor(args.artifact, opencl_devices()[args.device], with_weights=False, compile_workers=0)
        launch_claimed(executor.queue, executor.launches, compile_order(executor.artifact), args.claims)
    except (AdrenoError, IndexError, OSError, cl.Error) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
