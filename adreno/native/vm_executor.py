"""Runs an artifact's host library (`lib.so`, a Relax VM executable) through TVM's own runtime and our OpenCL
plugin: the program a phone app or TVM's `tvm_rpc` loads, on a local OpenCL device (`adreno run --runtime tvm`).

It has the launch-plan `Executor`'s interface (`run`, `profile`, `build_seconds`, `device`), so the CLI prints
the same table and `--check`s the same way. Per-kernel times come from the plugin's launch events
(`adreno.opencl.profile_kernels`). The weights are read from the artifact's weight file and uploaded once, in their
plan scopes, as an app does (`adreno.compiler.host_library`'s calling convention). Programs are built from the library's
OpenCL source when the executor is made (`opencl.GetPreCompiledPrograms` builds every kernel), so `build_seconds`
is the cold-start build.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import numpy as np

from ..artifact.format import Artifact
from ..artifact.check import confined
from ..errors import TVM_ERRORS, ArtifactError, DeviceError
from ..targets.layout import ImageSpec, to_image
from ..opencl.device import DeviceIdentity, device_of
from ..opencl.executor import Profile, kernel_timings
from . import plugin
from .elf_file import read_layout

# ELF e_machine of the hosts a library can be built for, by what platform.machine() says here.
_ELF_MACHINE = {"x86_64": 0x3E, "aarch64": 0xB7, "arm64": 0xB7}


def check_host_library(artifact: Artifact) -> str:
    """The path of the artifact's host library when this machine can load it; otherwise an `ArtifactError` that
    says how to get one."""
    library = artifact.manifest.get("host_library")
    if not library:
        raise ArtifactError(f"{artifact.path} has no host library (every output is empty); --runtime tvm has "
                            "nothing to run")
    if Path(library).name != "lib.so":  # an artifact of several shape sets has one per set (adreno.artifact.shape_sets)
        raise ArtifactError(f"{artifact.path} holds {library}, objects to link for a phone, not a library this "
                            "machine loads; compile with --host native for --runtime tvm")
    path = confined(artifact.path, library)
    layout = read_layout(path)
    here = _ELF_MACHINE.get(platform.machine())
    if layout.machine is not None and here is not None and layout.machine != here:
        raise ArtifactError(f"{path} is built for another host (ELF machine {layout.machine}, this is "
                            f"{platform.machine()}); compile with --host native on this machine")
    if layout.problem:
        raise ArtifactError(f"{path} {layout.problem}: compile the artifact again")
    return str(path)


def _tvm_device_index(device) -> int:
    """The plugin's index of a pyopencl device (the two ICD loaders may list platforms in different orders)."""
    import tvm_ffi

    identity = DeviceIdentity.from_cl_device(device)
    wanted = f"{identity.platform_name}|{identity.device_name}|{identity.driver_version}"
    names = list(tvm_ffi.get_global_func("adreno.opencl.device_names")())
    if wanted not in names:
        raise DeviceError(f"TVM's OpenCL plugin does not see {identity.device_name} ({identity.platform_name}); it "
                          f"sees: {'; '.join(names) or 'no device'}")
    return names.index(wanted)


def _modules_of_kind(module, kind: str) -> list:
    found = [module] if module.kind == kind else []
    for child in module.imports:
        found += _modules_of_kind(child, kind)
    return found


class VmExecutor:
    """An artifact's host library loaded on one OpenCL device through TVM's Relax VM."""

    def __init__(self, artifact: Artifact | str, device=None):
        plugin.require()
        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
        library = check_host_library(self.artifact)
        self.device = device_of(device)
        import tvm
        import tvm_ffi
        from tvm import relax

        self._tvm_device = tvm.opencl(_tvm_device_index(self.device))
        self._take_times = tvm_ffi.get_global_func("adreno.opencl.take_kernel_times")
        self._profile_kernels = tvm_ffi.get_global_func("adreno.opencl.profile_kernels")
        self._empty_image = tvm_ffi.get_global_func("adreno.opencl.empty_image")
        self._write_pixels = tvm_ffi.get_global_func("adreno.opencl.write_pixels")
        try:
            module = tvm.runtime.load_module(library)
            self.vm = relax.VirtualMachine(module, self._tvm_device)
        except TVM_ERRORS as err:
            raise ArtifactError(f"{library} does not load in TVM's runtime: {str(err).splitlines()[0]}") from None
        self._main = self.vm["main"]
        started = time.perf_counter()
        for kernels in _modules_of_kind(module, "opencl"):
            self._call(lambda k=kernels: k["opencl.GetPreCompiledPrograms"](), "building its OpenCL programs")
        self.build_seconds = time.perf_counter() - started
        self._names = [spec.name for spec in self.artifact.input_specs()]
        self._params = self._upload_params()

    def _upload_params(self) -> list:
        """The weights `main` takes after the inputs (manifest `host_params`,
        `adreno.compiler.host_library.param_order`), uploaded once, each in its plan scope (an image for a texture
        scope)."""
        import tvm

        plan, arrays = self.artifact.plan, self.artifact.params()
        if "host_params" not in self.artifact.manifest:
            raise ArtifactError(f"{self.artifact.path} was compiled by an adreno whose host library embeds its "
                                "weights; recompile it")
        tensors = []
        for name in self.artifact.manifest["host_params"]:
            spec = plan.tensors[name]
            if spec.image is not None and spec.image["channel_type"] == "float16":  # half pixels, float32 tensor
                tensor = self._call(lambda s=spec: self._empty_image(s.shape, s.dtype, self._tvm_device.index,
                                                                     s.scope, 16), f"allocating weight {name}")
                pixels = to_image(arrays[name], ImageSpec(**spec.image)).tobytes()
                self._call(lambda t=tensor, p=pixels: self._write_pixels(t, p), f"uploading weight {name}")
            else:
                scope = None if spec.scope == "global" else spec.scope
                tensor = tvm.runtime.empty(tuple(spec.shape), spec.dtype, self._tvm_device, mem_scope=scope)
                self._call(lambda t=tensor, a=arrays[name], s=spec: t.copyfrom(np.require(a, s.dtype, "C")),
                           f"uploading weight {name}")
            tensors.append(tensor)
        return tensors

    def _call(self, fn, what: str):
        try:
            return fn()
        except TVM_ERRORS as err:
            raise DeviceError(f"TVM's runtime failed {what}: {str(err).splitlines()[0]}") from None

    def _arguments(self, inputs) -> list:
        import tvm

        arrays = [inputs[name] for name in self._names] if isinstance(inputs, dict) else list(inputs)
        return [tvm.runtime.tensor(np.require(a, requirements="C"), self._tvm_device) for a in arrays] + self._params

    def _outputs(self, result) -> list[np.ndarray]:
        items = [result] if hasattr(result, "numpy") else list(result)
        return [item.numpy() for item in items]

    def run(self, inputs) -> list[np.ndarray]:
        """Run the model once; inputs by name (dict) or in order (list); returns the outputs in order, or raises
        `IndexRangeError` when an index of the inputs was out of range (`adreno.artifact.index_checks`)."""
        args = self._arguments(inputs)
        return self.artifact.index_checks.checked(self._call(lambda: self._outputs(self._main(*args)),
                                                             "running the model"))

    def profile(self, inputs, repeat: int = 10, warmup: int = 1) -> Profile:
        """Run `warmup` + `repeat` times; per-kernel device times from the plugin's launch events."""
        args = self._arguments(inputs)
        for _ in range(warmup):
            self._call(lambda: self._main(*args), "running the model")
        self._tvm_device.sync()
        per_kernel: dict[tuple[str, str], list[float]] = {}
        latencies, device_ms = [], []
        self._take_times()  # drop anything recorded before
        self._profile_kernels(True)
        try:
            for _ in range(repeat):
                started = time.perf_counter()
                self._call(lambda: self._main(*args), "running the model")
                self._tvm_device.sync()
                latencies.append((time.perf_counter() - started) * 1e3)
                times = [(str(name), int(ns) * 1e-6) for name, ns in self._take_times()]
                for name, ms in times:
                    per_kernel.setdefault((name, "tvm"), []).append(ms)
                device_ms.append(sum(ms for _, ms in times))
        finally:
            self._profile_kernels(False)
        return Profile(kernel_timings(per_kernel, repeat), device_ms, latencies, repeat, self.build_seconds)
