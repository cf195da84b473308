"""Runs an artifact on an OpenCL device through pyopencl, driven by its launch plan.

Everything that can be done once is done in the constructor: programs are built (one OpenCL program for the whole
model where the kernel names allow, `adreno.opencl.programs`; through the program-binary cache when one is given),
storage is allocated per the plan's storage plan, params are uploaded, and every kernel gets its arguments bound.
A run is then: copy inputs in, enqueue the kernels in order, copy outputs out.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..artifact.format import Artifact
from ..artifact.check import check_launches
from ..errors import AdrenoError, ArtifactError
from ..targets.layout import ImageSpec, from_image, to_image
from .device import DeviceIdentity, device_of, opencl_devices
from .evict import Evictor
from .first_launches import Helpers, launch_order, worker_count
from .programs import FROM_SOURCE, Grouping, build_programs, group_source, groups
from .signature import argument_mismatch, kernel_params, program_options


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


class CacheWrite(enum.Enum):
    """When the program cache is written after the first run. INLINE: before `run` returns (the default: PoCL
    generates every kernel's code then, and a process that goes on compiling with TVM, a conformance worker or a
    test, would run TVM's LLVM beside it, which nothing has tested). BACKGROUND: in a thread, `run` returning at
    once, for a process that compiles nothing meanwhile (`adreno run`, an app's start)."""

    INLINE = "inline"
    BACKGROUND = "background"


class Executor:
    """An artifact loaded on one OpenCL device, ready to run."""

    def __init__(self, artifact: Artifact | str, device=None, cache=None, build_options: str = "",
                 grouping: Grouping = Grouping.MODEL, context=None, with_weights: bool = True,
                 compile_workers: int | None = None, cache_write: CacheWrite = CacheWrite.INLINE):
        """`context`: the pyopencl Context to work in (a runner measuring many artifacts passes its `Evictor`'s, so
        the eviction buffer is made once); `device` is then its device. Default: a context of its own.
        `with_weights=False` leaves the weights' storage unwritten (for a run whose values do not matter).
        `compile_workers`: processes that compile a lazy driver's first launches beside this one
        (`adreno.opencl.first_launches`); default: as many as help, none with a `context` given. `cache_write`:
        when the program cache is written after the first run (`CacheWrite`)."""
        import pyopencl as cl

        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact.load(artifact)
        if context is not None:
            device = context.devices[0]
        self.device = device_of(device)
        check_launches(self.artifact.plan, self.device)
        self.context = context if context is not None else cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.cache = cache.for_artifact(self.artifact.path) if cache is not None else None
        plan = self.artifact.plan
        if self.cache is not None and self.cache.has_bundle(self.device):
            grouping = Grouping.EACH  # bundled binaries are one per program
        self.build_options = build_options
        self.program_groups = groups(self.artifact, grouping)
        self.store_seconds = 0.0
        self.cache_write = cache_write
        self.store_failure: str | None = None  # why the program cache write after the first run failed, if it did
        self._store_thread: threading.Thread | None = None
        started = time.perf_counter()
        built = build_programs(self.artifact, self.context, self.program_groups, self.cache, build_options,
                               defer_store=True)
        self.build_seconds = time.perf_counter() - started
        self.programs, self.builds = built.programs, built.builds
        self._unstored = built.unstored  # (program, source) built from source: cached after the first run
        if compile_workers is None:
            from_source = any(b.how in FROM_SOURCE for b in self.builds)
            compile_workers = 0 if context is not None else worker_count(
                DeviceIdentity.from_cl_device(self.device), len(launch_order(self.artifact)), from_source)
        helpers = Helpers(self.artifact, opencl_devices().index(self.device), compile_workers) \
            if compile_workers else None
        try:
            self._set_up(plan, with_weights)
            self.first_launches = helpers.finish() if helpers is not None else None
        except BaseException:  # a failed set-up, Ctrl-C or a deadline: no helper outlives this executor
            if helpers is not None:
                helpers.stop()
            raise

    def _set_up(self, plan, with_weights: bool) -> None:
        """Allocate the plan's storage, upload the weights (unless told not to) and bind every kernel."""
        import pyopencl as cl

        mf = cl.mem_flags
        images = getattr(plan, "images", {}) or {}
        if images and not self.device.image_support:
            raise AdrenoError(f"{self.device.name.strip()} has no image support; this artifact uses textures "
                              "(recompile with --memory buffer)")
        self.storage = {sid: (self._image(sid, images[sid]) if sid in images
                              else cl.Buffer(self.context, mf.READ_WRITE, max(nbytes, 4)))
                        for sid, nbytes in plan.storage.items()}
        self.buffers = {name: self.storage[spec.storage] for name, spec in plan.tensors.items() if spec.storage}
        if with_weights:
            self.write_params(self.artifact.params())
        self.unchecked_kernels = 0  # kernels whose driver reports no argument info (adreno.opencl.signature)
        workspace_sizes = [max(sizes) for sizes in _zip_longest_max(s.workspaces for s in plan.steps)]
        self.workspaces = [cl.Buffer(self.context, mf.READ_WRITE, max(n, 4)) for n in workspace_sizes]
        self.launches = [self._bind(step_index, step, launch)
                         for step_index, step in enumerate(plan.steps) for launch in step.kernels]
        self.queue.finish()

    def write_params(self, params: dict[str, np.ndarray]) -> None:
        """Upload constant tensors (the artifact's at construction; others of the same shapes to run the same
        kernels on other weights, as `runners.offline.travel_light` does for artifacts that travel without theirs)."""
        for name, array in params.items():
            spec = self.artifact.plan.tensors.get(name)
            if spec is None or spec.kind != "param" or array.dtype.kind not in "biuf":
                raise ArtifactError(f"params.npz holds {name!r} of dtype {array.dtype}, which is no param of the plan: "
                                    "recompile the model")
            if list(array.shape) != spec.shape:
                raise AdrenoError(f"param {name} has shape {array.shape}, the plan says {spec.shape}: recompile")
            self._write(spec, array)

    def _image(self, sid: str, image: dict):
        """An OpenCL image2d_array for an image storage block of the plan."""
        import pyopencl as cl

        channel = {"float32": cl.channel_type.FLOAT, "float16": cl.channel_type.HALF_FLOAT}[image["channel_type"]]
        width, height, layers = image["width"], image["height"], image["layers"]
        limits = (self.device.image2d_max_width, self.device.image2d_max_height, self.device.image_max_array_size)
        problem = image_beyond(sid, (width, height, layers), limits, self.device.name.strip())
        if problem:
            raise AdrenoError(problem)
        fmt = cl.ImageFormat(cl.channel_order.RGBA, channel)
        return cl.create_image(self.context, cl.mem_flags.READ_WRITE, fmt, shape=(width, height, layers), is_array=True)

    def _write(self, spec, array) -> None:
        """Copy a host array into a tensor's storage (buffer, or image pixels per its ImageSpec)."""
        import pyopencl as cl

        if spec.image is None:
            cl.enqueue_copy(self.queue, self.buffers[spec.name], np.ascontiguousarray(array, dtype=spec.dtype))
            return
        image = ImageSpec(**spec.image)
        pixels = to_image(np.asarray(array, dtype=spec.dtype), image)
        cl.enqueue_copy(self.queue, self.buffers[spec.name], pixels, origin=(0, 0, 0),
                        region=(image.width, image.height, image.layers))

    def _read(self, spec) -> np.ndarray:
        import pyopencl as cl

        if not spec.storage:  # an empty output (adreno.frontend.empty)
            return np.zeros(spec.shape, dtype=spec.dtype)
        if spec.image is None:
            host = np.empty(spec.shape, dtype=spec.dtype)
            cl.enqueue_copy(self.queue, host, self.buffers[spec.name])
            return host
        image = ImageSpec(**spec.image)
        pixels = np.empty((image.layers, image.height, image.width, 4), dtype=image.channel_type)
        cl.enqueue_copy(self.queue, pixels, self.buffers[spec.name], origin=(0, 0, 0),
                        region=(image.width, image.height, image.layers))
        return from_image(pixels, spec.shape, spec.dtype)

    def _store_after_first_run(self) -> None:
        """Put the programs built from source into the program cache, once, after the first run: a driver's binary
        then holds what that run compiled (PoCL: the work-group functions of each launch's sizes, 5 s of ResNet-18's
        first run), so the next start's first run is as fast as a second one (docs/compile.md). Asking PoCL for a
        binary generates every kernel's code again (5-6 s for ResNet-18): with `CacheWrite.BACKGROUND` the write runs
        in a thread (the fetch releases the GIL, `adreno.opencl.binaries`) and the first run returns its outputs at
        once; `wait_stored` joins it, and a process exits only once it is done."""
        if not self._unstored or self._store_thread is not None:
            return
        unstored, self._unstored = self._unstored, []
        if self.cache_write is CacheWrite.INLINE:
            self._store(unstored)
            return
        self._store_thread = threading.Thread(target=self._store, args=(unstored,), name="adreno-program-store")
        self._store_thread.start()

    def _store(self, unstored: list) -> None:
        started = time.perf_counter()
        options = program_options(self.build_options)
        try:
            for program, source in unstored:
                self.cache.store(program, source, options)
        except Exception as err:  # noqa: BLE001 - a cache write is best effort, and a thread's has no caller
            self.store_failure = f"{type(err).__name__}: {err}"
            logging.getLogger("adreno.cache").warning("the program cache write failed (%s); the next start builds "
                                                      "from source", self.store_failure)
        self.store_seconds = time.perf_counter() - started

    @property
    def storing(self) -> bool:
        """Whether the program cache write the first run started is still running."""
        return self._store_thread is not None and self._store_thread.is_alive()

    def wait_stored(self) -> float:
        """Wait for the program cache write the first run started, if any; its seconds (0.0 when none ran). Another
        executor of the same artifact built before it is done builds from source."""
        if self._store_thread is not None:
            self._store_thread.join()
        return self.store_seconds

    def warm_build_seconds(self) -> float | None:
        """Seconds to build this artifact's programs again through the program cache, now that this executor's build
        filled it (what the next start pays); None without a cache. The programs in use are not replaced."""
        if self.cache is None:
            return None
        self.wait_stored()
        import pyopencl as cl

        context, options = cl.Context([self.device]), program_options(self.build_options)
        started = time.perf_counter()
        for members in self.program_groups:
            self.cache.build(context, group_source(self.artifact, members), options)
        return time.perf_counter() - started

    def _bind(self, step_index, step, launch) -> _BoundKernel:
        import pyopencl as cl

        program = self.programs[step.program]
        if launch.name not in program.get_info(cl.program_info.KERNEL_NAMES).split(";"):
            raise ArtifactError(f"{self.artifact.path}: program {step.program} has no kernel {launch.name}; "
                                "recompile the model")
        kernel = cl.Kernel(program, launch.name)
        if kernel.num_args != len(launch.args) + bool(launch.local_mem_bytes):
            raise ArtifactError(f"{self.artifact.path}: kernel {launch.name} takes {kernel.num_args} arguments, the "
                                f"plan gives {len(launch.args) + bool(launch.local_mem_bytes)}; recompile the model")
        params = kernel_params(kernel)
        if params is None:
            self.unchecked_kernels += 1
        else:
            mismatch = argument_mismatch(params, launch, step, self.artifact.plan.tensors)
            if mismatch:
                raise ArtifactError(f"{self.artifact.path}: kernel {launch.name} {mismatch}; recompile the model")
        try:
            for position, arg in enumerate(launch.args):
                if arg.arg is not None:
                    kernel.set_arg(position, self.buffers[step.args[arg.arg]])
                elif arg.workspace is not None:
                    kernel.set_arg(position, self.workspaces[arg.workspace])
                else:
                    kernel.set_arg(position, np.array(arg.scalar, dtype=arg.dtype))
            if launch.local_mem_bytes:
                kernel.set_arg(len(launch.args), cl.LocalMemory(launch.local_mem_bytes))
        except cl.Error as err:
            raise ArtifactError(f"{self.artifact.path}: kernel {launch.name} refuses the plan's arguments "
                                f"({str(err).splitlines()[0][:100]}); recompile the model") from None
        return _BoundKernel(kernel, tuple(launch.global_size), tuple(launch.local_size), launch.name, step.op,
                            step_index)

    def set_inputs(self, inputs) -> None:
        """Upload the inputs (by name, or in order) without running: `run` and `profile` do it first."""
        plan = self.artifact.plan
        names = self.artifact.input_names()
        if isinstance(inputs, dict):
            arrays = self.artifact.ordered_inputs(inputs)
        else:
            arrays = list(inputs)
            if len(arrays) != len(plan.inputs):
                raise AdrenoError(f"the model takes {len(plan.inputs)} inputs {names}, got {len(arrays)}")
        for label, name, array in zip(names, plan.inputs, arrays):
            spec = plan.tensors[name]
            array = np.asarray(array)
            if list(array.shape) != spec.shape:
                sets = self.artifact.manifest.get("shape_set")
                raise AdrenoError(f"input {label} must have shape {spec.shape}, got {list(array.shape)}" + (
                    "" if sets is None else f" (this executor runs shape set {sets['index']} of {sets['of']}: an "
                    "executor of `artifact.for_inputs(shapes)` runs the set an input matches)"))
            if spec.storage:  # else no kernel reads it (adreno.frontend.empty)
                self._write(spec, array)

    def _get_outputs(self) -> list[np.ndarray]:
        outputs = [self._read(self.artifact.plan.tensors[name]) for name in self.artifact.plan.outputs]
        self.queue.finish()
        return outputs

    def _enqueue_all(self) -> list:
        import pyopencl as cl

        try:
            return [cl.enqueue_nd_range_kernel(self.queue, b.kernel, b.global_size, b.local_size)
                    for b in self.launches]
        except cl.Error as err:
            raise ArtifactError(f"{self.artifact.path}: the device refuses a launch of the plan "
                                f"({str(err).splitlines()[0][:100]}); recompile the model") from None

    def run(self, inputs) -> list[np.ndarray]:
        """Run the model once; inputs by name (dict) or in order (list); returns the outputs in order, or raises
        `IndexRangeError` when an index of the inputs was out of range (`adreno.artifact.index_checks`)."""
        self.set_inputs(inputs)
        self._enqueue_all()
        outputs = self._get_outputs()
        self._store_after_first_run()
        return self.artifact.index_checks.checked(outputs)

    def profile(self, inputs, repeat: int = 10, warmup: int = 1, evictor: Evictor | None = None) -> Profile:
        """Run `warmup` + `repeat` times; per-kernel device times from profiling events, per-run wall time. With an
        `evictor` (`adreno.opencl.evict`, of this executor's context) the device's caches are evicted before each
        timed run (not timed)."""
        self.set_inputs(inputs)
        for _ in range(warmup):
            self._enqueue_all()
        self.queue.finish()
        self._store_after_first_run()
        self.wait_stored()  # no timed run shares the device with the cache write
        if evictor is not None and evictor.context != self.context:
            raise ValueError("the evictor's context is not this executor's: build the executor in evictor.context")
        per_kernel: dict[tuple[str, str], list[float]] = {}
        latencies, device_ms = [], []
        for index in range(repeat):
            if evictor is not None:
                evictor.evict(self.queue, index)
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
        return Profile(kernel_timings(per_kernel, repeat), device_ms, latencies, repeat, self.build_seconds)


def kernel_timings(per_kernel: dict[tuple[str, str], list[float]], repeat: int) -> list[KernelTiming]:
    """Per-kernel rows from every launch's device time (ms) keyed by (kernel, op) over `repeat` runs, slowest first:
    a kernel launched several times per run gets the median of its per-run sums."""
    kernels = []
    for (name, op), times in per_kernel.items():
        calls = len(times) // repeat
        per_call = np.array(times[:calls * repeat]).reshape(repeat, calls).sum(axis=1) if calls else np.zeros(1)
        kernels.append(KernelTiming(name, op, calls, float(np.median(per_call)), float(np.sum(times))))
    kernels.sort(key=lambda k: k.median_ms, reverse=True)
    return kernels


def _zip_longest_max(lists):
    """Transpose ragged lists: element i of the result holds the i-th entries of every list that has one."""
    lists = list(lists)
    width = max((len(x) for x in lists), default=0)
    return [[x[i] for x in lists if len(x) > i] for i in range(width)]


def image_beyond(sid: str, dims: tuple[int, int, int], limits: tuple[int, int, int], device: str) -> str | None:
    """The error for an image of `dims` (width, height, layers) beyond a device's `limits`, naming every way out;
    None when it fits."""
    if all(d <= limit for d, limit in zip(dims, limits)):
        return None
    return (f"image {sid} is {'x'.join(map(str, dims))}, beyond {device}'s limits {'x'.join(map(str, limits))}; "
            f"recompile with --winograd off (Winograd's tile images are the widest), with --memory buffer, or with "
            f"--image-max {min(limits[:2])} (wider tensors then take another image scope or stay buffers)")
