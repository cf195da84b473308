"""A worker of `adreno.opencl.first_launches`: `python -m adreno.opencl.first_launch_worker ARTIFACT --device I
--claims-fd FD --deadline S` builds the artifact's programs, binds its kernels to storage without the weights, and
launches once each kernel it reads from the claims pipe FD, so that the driver's disk cache holds their code for the
executor that started it. It ends after S seconds whatever it is doing, and with its executor (which set that up
when it started it). A failure is one line on stderr and exit status 2 (the executor keeps the line)."""

from __future__ import annotations

import argparse
import sys

import pyopencl as cl

from ..errors import AdrenoError
from ..artifact.format import Artifact
from .device import opencl_devices
from .executor import Executor
from .first_launches import launch_claimed, launch_order, read_claims, start_worker_deadline


def main(argv=None) -> int:
    """Build the artifact's programs on device `--device` (an index into `opencl_devices()`), bind its kernels to
    storage without the weights, and launch the kernels it claims from the pipe `--claims-fd`."""
    ap = argparse.ArgumentParser(prog="python -m adreno.opencl.first_launch_worker", description=main.__doc__)
    ap.add_argument("artifact")
    ap.add_argument("--device", type=int, required=True)
    ap.add_argument("--claims-fd", type=int, required=True, help="the read end of its executor's claims pipe")
    ap.add_argument("--deadline", type=float, required=True, help="seconds after which it ends, done or not")
    ap.add_argument("--shape-set", type=int, default=0, help="the executor's shape set (adreno.artifact.shape_sets)")
    args = ap.parse_args(argv)
    start_worker_deadline(args.deadline)
    try:
        artifact = Artifact.load(args.artifact, shape_set=args.shape_set)
        executor = Executor(artifact, opencl_devices()[args.device], with_weights=False, compile_workers=0)
        launch_claimed(executor.queue, executor.launches,
                       read_claims(args.claims_fd, launch_order(executor.artifact)))
    except (AdrenoError, IndexError, OSError, cl.Error) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
