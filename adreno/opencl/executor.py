"""Runs an artifact on an OpenCL device through pyopencl, driven by its launch plan.

Everything that can be done once is done in the constructor: programs are built (through the program-binary
cache when one is given), storage is allocated per the plan's storage plan, params are uploaded, and every
kernel gets its arguments bound. A run is then: copy inputs in, enqueue the kernels in order, copy outputs out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..artifact import Artifact
from ..errors import AdrenoError, KernelBuildError
from .device import select_device


@dataclass
class KernelTiming:
    """Device time of one kernel name over a profiled run set."""

    name: str
    op: str
    calls: int
    median_ms: float
    total_ms: float = 0.0


@dataclass
class Profile:
    """Per-kernel timings (sorted by total time), the device time of each run (sum of its kernels' event
    times) and the wall-clock latency of each run (enqueue to finish)."""

    kernels: list[KernelTiming]
    run_device_ms: list[float]
    latencies_ms: list[float]
    repeat: int
    build_seconds: float = 0.0

    @property
    def median_ms(self) -> float:
        return float(np.median(self.latencies_ms))

    @property
    def device_median_ms(self) -> float:
        return float(np.median(self.run_device_ms))


class _BoundKernel:
    __slots__ = ("kernel", "global_size", "local_size", "name", "op", "step")

    def __init__(self, kernel, global_size, local_size, name, op, step):
        self.kernel, self.global_size, self.local_size = kernel, global_size, local_size
        self.name, self.op, self.step = name, op, step


class Executor:
    """An artifact loaded on one OpenCL device, ready to run."""

    def __init__(self, artifact: Artifact | str, device=None, cache=None, build_options: str = ""):
        import pyopencl as cl

        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
        self.device = device if isinstance(device, cl.Device) else select_device(device)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache = cache.for_artifact(self.artifact.path) if cache is not None else None
        plan = self.artifact.plan
        started = time.perf_counter()
        self.programs = {name: self._build(name, build_options) for name in plan.programs}
        self.build_seconds = time.perf_counter() - started
        mf = cl.mem_flags
        images = getattr(plan, "images", {}) or {}
        if images and not self.device.image_support:
            raise AdrenoError(f"{self.device.name.strip()} has no image support; this artifact uses textures "
                              "(recompile with --memory buffer)")
        self.storage = {sid: (self._image(sid, images[sid]) if sid in images
                              else cl.Buffer(self.context, mf.READ_WRITE, max(nbytes, 4)))
                        for sid, nbytes in plan.storage.items()}
        self.buffers = {name: self.storage[spec.storage] for name, spec in plan.tensors.items()}
        self.write_params(self.artifact.params())
        workspace_sizes = [max(sizes) for sizes in _zip_longest_max(s.workspaces for s in plan.steps)]
        self.workspaces = [cl.Buffer(self.context, mf.READ_WRITE, max(n, 4)) for n in workspace_sizes]
        self.launches = [self._bind(step_index, step, launch)
                         for step_index, step in enumerate(plan.steps) for launch in step.kernels]
        self.queue.finish()

    def write_params(self, params: dict[str, np.ndarray]) -> None:
        """Upload constant tensors (the artifact's at construction; others of the same shapes to run the same
        kernels on other weights, as `adreno.measure.travel_light` does for artifacts that travel without theirs)."""
        for name, array in params.items():
            spec = self.artifact.plan.tensors[name]
            if list(array.shape) != spec.shape:
                raise AdrenoError(f"param {name} has shape {array.shape}, the plan says {spec.shape}: recompile")
            self._write(spec, array)

    def _image(self, sid: str, image: dict):
        """An OpenCL image2d_array for an image storage block of the plan."""
        import pyopencl as cl

        channel = {"float32": cl.channel_type.FLOAT, "float16": cl.channel_type.HALF_FLOAT}[image["channel_type"]]
        width, height, layers = image["width"], image["height"], image["layers"]
        limits = (self.device.image2d_max_width, self.device.image2d_max_height, self.device.image_max_array_size)
        if width > limits[0] or height > limits[1] or layers > limits[2]:
            raise AdrenoError(f"image {sid} is {width}x{height}x{layers}, beyond {self.device.name.strip()}'s limits "
                              f"{limits[0]}x{limits[1]}x{limits[2]}; recompile for this device or with --memory buffer")
        fmt = cl.ImageFormat(cl.channel_order.RGBA, channel)
        return cl.create_image(self.context, cl.mem_flags.READ_WRITE, fmt, shape=(width, height, layers), is_array=True)

    def _write(self, spec, array) -> None:
        """Copy a host array into a tensor's storage (buffer, or image pixels per its ImageSpec)."""
        import pyopencl as cl

        if spec.image is None:
            cl.enqueue_copy(self.queue, self.buffers[spec.name], np.ascontiguousarray(array, dtype=spec.dtype))
            return
        from ..texture import to_image
        from ..artifact import ImageSpec

        image = ImageSpec(**spec.image)
        pixels = to_image(np.asarray(array, dtype=spec.dtype), image)
        cl.enqueue_copy(self.queue, self.buffers[spec.name], pixels, origin=(0, 0, 0),
                        region=(image.width, image.height, image.layers))

    def _read(self, spec) -> np.ndarray:
        import pyopencl as cl

        if spec.image is None:
            host = np.empty(spec.shape, dtype=spec.dtype)
            cl.enqueue_copy(self.queue, host, self.buffers[spec.name])
            return host
        from ..artifact import ImageSpec
        from ..texture import from_image

        image = ImageSpec(**spec.image)
        pixels = np.empty((image.layers, image.height, image.width, 4), dtype=image.channel_type)
        cl.enqueue_copy(self.queue, pixels, self.buffers[spec.name], origin=(0, 0, 0),
                        region=(image.width, image.height, image.layers))
        return from_image(pixels, spec.shape, spec.dtype)

    def read_tensor(self, name: str) -> np.ndarray:
        """The current contents of any tensor of the plan (for debugging and tests)."""
        out = self._read(self.artifact.plan.tensors[name])
        self.queue.finish()
        return out

    def _build(self, program: str, options: str):
        import pyopencl as cl

        source = self.artifact.kernel_source(program)
        if self.cache is not None:
            built, _how = self.cache.build(self.context, source, options)
            return built
        try:
            return cl.Program(self.context, source).build(options=options)
        except cl.RuntimeError as err:
            raise KernelBuildError(f"OpenCL build of {program} failed on {self.device.name.strip()}:\n{err}") from None

    def _bind(self, step_index, step, launch) -> _BoundKernel:
        import pyopencl as cl

        kernel = cl.Kernel(self.programs[step.program], launch.name)
        for position, arg in enumerate(launch.args):
            if arg.arg is not None:
                kernel.set_arg(position, self.buffers[step.args[arg.arg]])
            elif arg.workspace is not None:
                kernel.set_arg(position, self.workspaces[arg.workspace])
            else:
                kernel.set_arg(position, np.array(arg.scalar, dtype=arg.dtype))
        if launch.local_mem_bytes:
            kernel.set_arg(len(launch.args), cl.LocalMemory(launch.local_mem_bytes))
        return _BoundKernel(kernel, tuple(launch.global_size), tuple(launch.local_size), launch.name, step.op,
                            step_index)

    def _set_inputs(self, inputs) -> None:
        plan = self.artifact.plan
        if isinstance(inputs, dict):
            missing = [n for n in plan.inputs if n not in inputs]
            if missing:
                raise AdrenoError(f"missing inputs {missing}; the model takes {plan.inputs}")
            arrays = [inputs[n] for n in plan.inputs]
        else:
            arrays = list(inputs)
            if len(arrays) != len(plan.inputs):
                raise AdrenoError(f"the model takes {len(plan.inputs)} inputs {plan.inputs}, got {len(arrays)}")
        for name, array in zip(plan.inputs, arrays):
            spec = plan.tensors[name]
            array = np.asarray(array)
            if list(array.shape) != spec.shape:
                raise AdrenoError(f"input {name} must have shape {spec.shape}, got {list(array.shape)}")
            self._write(spec, array)

    def _get_outputs(self) -> list[np.ndarray]:
        outputs = [self._read(self.artifact.plan.tensors[name]) for name in self.artifact.plan.outputs]
        self.queue.finish()
        return outputs

    def _enqueue_all(self) -> list:
        import pyopencl as cl

        return [cl.enqueue_nd_range_kernel(self.queue, b.kernel, b.global_size, b.local_size) for b in self.launches]

    def run(self, inputs) -> list[np.ndarray]:
        """Run the model once; inputs by name (dict) or in order (list); returns the outputs in order."""
        self._set_inputs(inputs)
        self._enqueue_all()
        return self._get_outputs()

    def profile(self, inputs, repeat: int = 10, warmup: int = 1) -> Profile:
        """Run `warmup` + `repeat` times; per-kernel device times from profiling events, per-run wall time."""
        self._set_inputs(inputs)
        for _ in range(warmup):
            self._enqueue_all()
        self.queue.finish()
        per_kernel: dict[tuple[str, str], list[float]] = {}
        latencies, device_ms = [], []
        for _ in range(repeat):
            started = time.perf_counter()
            events = self._enqueue_all()
            self.queue.finish()
            latencies.append((time.perf_counter() - started) * 1e3)
            run_ms = 0.0
            for bound, event in zip(self.launches, events):
                kernel_ms = (event.profile.end - event.profile.start) * 1e-6
                per_kernel.setdefault((bound.name, bound.op), []).append(kernel_ms)
                run_ms += kernel_ms
            device_ms.append(run_ms)
        kernels = []
        for (name, op), times in per_kernel.items():
            calls = len(times) // repeat
            per_call = np.array(times).reshape(repeat, calls).sum(axis=1) if calls else np.zeros(1)
            kernels.append(KernelTiming(name, op, calls, float(np.median(per_call)), float(np.sum(times))))
        kernels.sort(key=lambda k: k.median_ms, reverse=True)
        return Profile(kernels, device_ms, latencies, repeat, self.build_seconds)


def _zip_longest_max(lists):
    """Transpose ragged lists: element i of the result holds the i-th entries of every list that has one."""
    lists = list(lists)
    width = max((len(x) for x in lists), default=0)
    return [[x[i] for x in lists if len(x) > i] for i in range(width)]
