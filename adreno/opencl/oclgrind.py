"""Running artifacts on Oclgrind (Debian `oclgrind`, an OpenCL device simulator) and reading its reports.

Oclgrind checks every memory access of a kernel (out-of-bounds accesses, with `data_races` local-memory races) and,
with `inst_counts`, prints per kernel a histogram of the instructions it executed: `N - load global (B bytes)`
gives the loads from global memory and their bytes. Vector loads compiled to `vloadn` builtins are calls in that
histogram (`call _Z6vload4mPU3AS1Kf`: a vload4 from address space 1, global), and so are image reads
(`call _Z11read_imagef...`: one pixel), so `global_load_bytes` adds them: the bytes a kernel read from global
memory (buffers and images), whatever the width of its loads. Oclgrind runs as an OpenCL ICD named
by OCL_ICD_VENDORS, so pyopencl in a child process with `environment(...)` sees it as a platform ("oclgrind" for
`select_device`). `run_artifacts` runs compiled artifacts there (`python -m adreno.opencl.oclgrind CASES`), each
checked against a reference output and followed by its own section of Oclgrind's counts (`sections`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..support.processes import popen_child_setup
from .device import select_device

ICD = Path("/usr/lib/oclgrind/liboclgrind-rt-icd.so")
FLOAT_BYTES = 4

_KERNEL = re.compile(r"Instructions executed for kernel '([^']+)':")
_LOAD = re.compile(r"^\s*([\d,]+) - load global \(([\d,]+) bytes\)")
_VLOAD = re.compile(r"^\s*([\d,]+) - call _Z6vload(\d+)mPU3AS1K?f")
_IMAGE = re.compile(r"^\s*([\d,]+) - call _Z11read_image([fh])")
IMAGE_PIXEL_BYTES = {"f": 16, "h": 8}  # read_imagef: a float4 pixel; read_imageh: a half4 one


def available() -> bool:
    return ICD.is_file()


def environment(workdir: Path, **flags: bool) -> dict:
    """The environment of a child process whose OpenCL platforms include Oclgrind's (an ICD file written under
    `workdir`), with Oclgrind's switches `flags` (data_races=True: OCLGRIND_DATA_RACES=1, inst_counts, ...)."""
    vendors = Path(workdir) / "oclgrind-icd"
    vendors.mkdir(parents=True, exist_ok=True)
    (vendors / "oclgrind.icd").write_text(f"{ICD}\n")
    return {**os.environ, "OCL_ICD_VENDORS": str(vendors),
            **{f"OCLGRIND_{name.upper()}": "1" for name, on in flags.items() if on}}


def _per_kernel(report: str, count) -> dict[str, int]:
    """Sum `count(line)` (a number, 0 for a line it does not count) over each kernel's section of an `inst_counts`
    report (a kernel's launches add up), every kernel named in it listed."""
    totals: dict[str, int] = {}
    kernel = None
    for line in report.splitlines():
        found = _KERNEL.search(line)
        if found:
            kernel = found.group(1)
            totals.setdefault(kernel, 0)
        elif kernel is not None:
            totals[kernel] += count(line)
    return totals


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _load_bytes(line: str) -> int:
    load, vload, image = _LOAD.match(line), _VLOAD.match(line), _IMAGE.match(line)
    if load:
        return _number(load.group(2))
    if vload:
        return _number(vload.group(1)) * int(vload.group(2)) * FLOAT_BYTES
    if image:
        return _number(image.group(1)) * IMAGE_PIXEL_BYTES[image.group(2)]
    return 0


def global_load_bytes(report: str) -> dict[str, int]:
    """Bytes each kernel loaded from global memory, buffers and images (summed over its launches), from an
    `inst_counts` report."""
    return _per_kernel(report, _load_bytes)


def image_reads(report: str) -> dict[str, int]:
    """Pixels each kernel read from images (`read_imagef`/`read_imageh` calls, summed over its launches), from an
    `inst_counts` report."""
    return _per_kernel(report, lambda line: _number(image.group(1)) if (image := _IMAGE.match(line)) else 0)


def run(args: list[str], workdir: Path, timeout: float = 600, **flags: bool) -> subprocess.CompletedProcess:
    """`python ARGS` on Oclgrind's platform (`environment`), its output captured."""
    return subprocess.run([sys.executable, *args], env=environment(workdir, **flags), capture_output=True, text=True,
                          timeout=timeout, preexec_fn=popen_child_setup())


def run_artifacts(cases: list[dict], workdir: Path, **flags: bool) -> subprocess.CompletedProcess:
    """Run each case ({"artifact": dir, "data": .npz with the inputs by name and "reference"}) once on Oclgrind in
    one process: stdout gets, per case, a `=== artifact` line, Oclgrind's counts for its kernels, and a JSON line
    with its relative max error."""
    return run(["-m", __name__, json.dumps(cases)], workdir, **flags)


def sections(stdout: str) -> dict[str, str]:
    """The output of `run_artifacts` per artifact."""
    return dict(part.split("\n", 1) for part in stdout.split("=== ")[1:])


def errors(stdout: str) -> list[dict]:
    """The JSON lines of `run_artifacts`: artifact and relative max error."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def _main(cases_json: str) -> None:
    import numpy as np

    from .executor import Executor  # inside: loads numpy at import

    device = select_device("oclgrind")
    for case in json.loads(cases_json):
        data = np.load(case["data"])
        print(f"=== {case['artifact']}", flush=True)
        ex = Executor(case["artifact"], device=device)
        out = ex.run([data[n] for n in ex.artifact.plan.inputs])[0]
        ref = data["reference"]
        err = float(np.abs(out - ref).max() / max(1.0, float(np.abs(ref).max())))
        print(json.dumps({"artifact": case["artifact"], "error": err}), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1])
