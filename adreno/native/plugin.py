"""Loading TVM's OpenCL runtime plugin: `libtvm_runtime_opencl.so`, built from `native/plugin/` by `make install`.

The apache-tvm wheel's runtime has no OpenCL. The plugin registers what TVM's runtime looks up by name:
`device_api.opencl`, `DeviceAllocator.opencl` (the Relax VM's storage, images for texture scopes) and
`ffi.Module.load_from_bytes.opencl` (the OpenCL module inside every host library), plus
`adreno.opencl.device_names`. `import adreno` loads it (`load`), so every process of the product, the farm's
TVM RPC servers included, runs host libraries on OpenCL.

Loading is refused, as a `PluginStatus` value and never an exception, when the plugin is not built, when it was
built against other apache-tvm / apache-tvm-ffi wheels (it subclasses their C++ classes, so that would crash),
or when another copy of an OpenCL runtime is already registered in this process (a second copy from another path
aborts the process: one path only). ADRENO_NO_PLUGIN=1 skips loading (for checks of that refusal);
ADRENO_PLUGIN_DIR loads the plugin from another directory.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import DeviceError
from .versions import wheel_versions

# Where `make native` puts the plugin and the harness; ADRENO_PLUGIN_DIR points elsewhere (another build of them).
LIB_DIR = Path(os.environ.get("ADRENO_PLUGIN_DIR") or Path(__file__).resolve().parent / "lib")
PLUGIN_PATH = LIB_DIR / "libtvm_runtime_opencl.so"
HARNESS_PATH = LIB_DIR / "adreno-harness"
BUILD_INFO = LIB_DIR / "BUILD_INFO"
BUILD_HINT = ("build it with `make install` (or `make native`; needs g++ and the Debian packages opencl-headers and "
              "ocl-icd-opencl-dev)")


@dataclass(frozen=True)
class PluginStatus:
    """Whether TVM's runtime in this process has OpenCL through our plugin, and if not, why (one line)."""

    loaded: bool
    problem: str = ""
    path: str = str(PLUGIN_PATH)


_status: PluginStatus | None = None


def _other_copy_loaded() -> str | None:
    """The path of an OpenCL runtime library for TVM already mapped into this process from elsewhere, if any
    (read from /proc/self/maps: asking TVM's registry would import tvm_ffi, most of a second)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(None, 5)[-1] if line.count(" ") >= 5 else ""
        if path.endswith(PLUGIN_PATH.name) and Path(path) != PLUGIN_PATH:
            return path
    return None


def load() -> PluginStatus:
    """Load the plugin once per process (later calls return the first outcome)."""
    global _status
    if _status is None:
        _status = _load()
    return _status


def _load() -> PluginStatus:
    if os.environ.get("ADRENO_NO_PLUGIN") == "1":
        return PluginStatus(False, "ADRENO_NO_PLUGIN=1: the OpenCL plugin was not loaded")
    if not PLUGIN_PATH.is_file():
        return PluginStatus(False, f"TVM's OpenCL plugin is not built ({PLUGIN_PATH} is missing): {BUILD_HINT}")
    built_for = BUILD_INFO.read_text().strip() if BUILD_INFO.is_file() else "unknown wheels"
    installed = wheel_versions()
    if built_for != installed:
        return PluginStatus(False, f"TVM's OpenCL plugin was built for {built_for}, this environment has "
                                   f"{installed}: rebuild it with `make native`")
    try:
        other = _other_copy_loaded()
        if other:
            return PluginStatus(False, f"another OpenCL runtime for TVM is already loaded in this process ({other}); "
                                       "adreno's plugin was not loaded beside it (two copies abort the process)")
        ctypes.CDLL(str(PLUGIN_PATH), mode=ctypes.RTLD_GLOBAL)
    except (OSError, ImportError) as err:
        return PluginStatus(False, f"TVM's OpenCL plugin {PLUGIN_PATH} does not load: {err}; {BUILD_HINT}")
    return PluginStatus(True)


def require() -> None:
    """Raise `adreno.errors.DeviceError` with the reason when the plugin is not loaded."""
    status = load()
    if not status.loaded:
        raise DeviceError(status.problem)
