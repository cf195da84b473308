"""The phone box (tools/phonebox.sh): made once for the session by the worker that runs its tests, then each test
runs commands in it. Made in CI from nothing (mmdebstrap, pip --platform, `make native-aarch64`, qemu unpacked):
a box that cannot be made fails the tests; only a non-root run skips them (its namespaces and mmdebstrap need
root here)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = CHECKOUT / "tools" / "phonebox.sh"
CROSS_CC = "aarch64-linux-gnu-gcc"  # stand-in for the NDK's clang (tools/install_system_deps.sh)


@dataclass(frozen=True)
class Box:
    """A made box: `native` holds the AArch64 plugin and harness (what `make native-aarch64` builds)."""

    native: Path

    def run(self, *command, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        """`tools/phonebox.sh run COMMAND` (the box sees /tmp and the checkout at their host paths)."""
        return subprocess.run(["bash", str(SCRIPT), "run", *map(str, command)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **(env or {})})


@pytest.fixture(scope="session")
def box() -> Box:
    if os.geteuid() != 0:
        pytest.skip("the phone box needs root here (mmdebstrap, a user namespace with binfmt_misc); CI runs as root")
    proc = subprocess.run(["bash", str(SCRIPT), "setup"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 0, f"tools/phonebox.sh setup failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    native = Path(os.environ.get("NATIVE_AARCH64", CHECKOUT / "build" / "native-aarch64"))
    assert (native / "libtvm_runtime_opencl.so").is_file() and (native / "adreno-harness").is_file()
    return Box(native)
