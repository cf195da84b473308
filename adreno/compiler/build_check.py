"""The compile's build check: a compile never writes a kernel that cannot build.

TVM's OpenCL codegen can emit C that a driver rejects (an input named `gpu_0/data_0` once reached a kernel signature
as is); before this check `adreno compile` reported success and only `adreno run` found out. So, where a local
OpenCL device can stand for the target, the compile builds the finished artifact's programs there before the
artifact is moved into place (`compile_model`'s `build_check`): a program that does not build is the same one-line
`KernelBuildError` as `run`'s, naming the program and its kernels with the full build log in a file
(`adreno.opencl.programs.build_failure`, the one build path of both), and `-o` is left as it was.

The programs are built exactly as `adreno run` builds them (the same groups, sources and options) and through the
program-binary cache, so the check costs nothing for programs the cache already has. What it stores depends on the
driver (`DeviceIdentity.compiles_at_first_launch`):
- a driver that compiles at the build (a GPU's): the binary is stored at the build, and a later `run` on that device
  loads every program from the cache instead of building it (`build_from: {"hit": ...}`);
- PoCL, which only parses at the build: nothing is stored (`deferred`). Its binary is complete only after a first
  run has compiled every kernel's work-group function, so the next `run` builds from source and stores the binary
  after its first run, as any `run` does. Asking PoCL for the binary at the check instead generated code for every
  kernel, most of a compile's time, for a binary whose first run compiled the work-group functions all the same
  (docs/compile.md has the figures).

Which device stands for the target: a local one whose farm key is the target's name (`nvidia-h200` on that GPU,
`pocl-cpu`), else PoCL, the correctness oracle `run` uses by default; a texture artifact needs image support, and a
program computing in half (TVM enables `cl_khr_fp16` in it) a device with `cl_khr_fp16` where the target has it
(PoCL has not: such a kernel is valid on an Adreno GPU). Where none does, the check is skipped, in one line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..artifact.format import Artifact
from ..opencl.device import DeviceIdentity, compiler_works, opencl_devices
from ..opencl.programs import Grouping, build_programs, groups

FP16_PRAGMA = "cl_khr_fp16"  # TVM's preamble enables it in a program that computes in half (and only there)


@dataclass(frozen=True)
class BuildCheckResult:
    """What the check did: the device and how each driver program was obtained, or why it was skipped."""

    device: str = ""
    builds: tuple[str, ...] = ()  # ProgramBuild.how of each driver program
    seconds: float = 0.0
    skipped: str | None = None

    def line(self) -> str:
        if self.skipped:
            return f"build check skipped: {self.skipped}"
        if not self.builds:
            return f"build check: no kernels to build on {self.device}"
        counts = {how: self.builds.count(how) for how in dict.fromkeys(self.builds)}
        how = ", ".join(f"{n} {_HOW.get(h, h)}" for h, n in counts.items())
        return f"build check: {len(self.builds)} program(s) build on {self.device} ({how}; {self.seconds:.1f} s)"

    def to_json(self) -> dict:
        return {"device": self.device or None, "builds": list(self.builds), "seconds": round(self.seconds, 3),
                "skipped": self.skipped}


_HOW = {"miss": "built and cached", "hit": "already cached", "source": "built, no cache", "bundled": "bundled",
        "disabled": "built, cache entry quarantined", "deferred": "built; the first run caches it"}


class BuildCheck:
    """Builds an artifact's programs on the local device that stands for its target (see the module doc), through
    `cache` (a `ProgramCache`; None builds from source and caches nothing)."""

    def __init__(self, cache=None):
        self.cache = cache
        self.result: BuildCheckResult | None = None  # of the last check

    def __call__(self, directory: Path, target) -> BuildCheckResult:
        """Check the artifact in `directory` (complete, manifest included) compiled for `target` (an
        `adreno.targets.devices` device); raises the `KernelBuildError` of the first program that does not build."""
        import pyopencl as cl

        artifact = Artifact.load(directory, checked=False)  # just written by this process
        device, skipped = standing_device(target.name, textures=bool(artifact.plan.images))
        if device is not None and target.fp16 and "cl_khr_fp16" not in device.extensions:
            half = [name for name in artifact.plan.programs if FP16_PRAGMA in artifact.kernel_source(name)]
            if half:
                device, skipped = None, (f"{device.name.strip()} has no cl_khr_fp16, which {len(half)} program(s) "
                                         f"use ({half[0]}, ...) and {target.name} has")
        if device is None:
            self.result = BuildCheckResult(skipped=skipped)
            return self.result
        started = time.perf_counter()
        cache = self.cache.for_artifact(directory) if self.cache is not None else None
        deferred = DeviceIdentity.from_cl_device(device).compiles_at_first_launch
        built = build_programs(artifact, cl.Context([device]), groups(artifact, Grouping.MODEL), cache,
                               defer_store=deferred)  # what is deferred is never stored: there is no first run
        hows = tuple("deferred" if deferred and b.how == "miss" else b.how for b in built.builds)
        self.result = BuildCheckResult(device.name.strip(), hows, time.perf_counter() - started)
        return self.result


def standing_device(target: str, textures: bool):
    """(the local OpenCL device that stands for `target`, None) or (None, why there is none)."""
    devices = opencl_devices()
    if not devices:
        return None, "no local OpenCL device (install PoCL to check that the kernels build)"
    named = [d for d in devices if DeviceIdentity.from_cl_device(d).rpc_key == target]
    pocl = [d for d in devices if "portable computing language" in d.platform.name.lower()]
    device = next((d for d in named + pocl if compiler_works(d)), None)
    if device is None:
        return None, f"no local OpenCL device stands for {target} (neither one of that name nor a working PoCL)"
    if textures and not device.image_support:
        return None, f"{device.name.strip()} has no image support and this artifact uses textures"
    return device, None
