"""The device table: what schedules, texture planning and the cost model know of each OpenCL device.

Limits are the values Adreno's OpenCL driver reports (CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_LOCAL_MEM_SIZE,
CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE); `schedule_threads` is the workgroup limit
schedules keep to (256, as TVM's `qcom/adreno-opencl` tag). Qualcomm does not publish a per-GPU limit sheet; where
a value is not public we keep the 6xx/7xx one, which is the conservative choice (newer generations only raise
limits), and say so next to the entry.

Parallelism facts (what an occupancy-aware default needs; `adreno.schedules.occupancy` applies them): compute units,
the wave width, the register file of a compute unit and how it is shared, resident waves and work-groups. Adreno's
come from Mesa's freedreno device tables (src/freedreno/common/{adreno_gpu,a6xx_gpu,a7xx_gpu}.py: `num_ccu` = SP
cores = OpenCL compute units, `threadsize_base` 64 fibers per wave (128 in double-threadsize mode), `max_waves` 16,
`wave_granularity` 2, `reg_size_vec4` 96 for a640 and a7xx, 64 for a650/a660) and from ir3's occupancy formula
(waves = reg_size_vec4 // vec4 registers per fiber x wave_granularity, at most max_waves). Values Qualcomm and Mesa
do not publish are documented estimates (`estimated` names them). Devices met in measurement that are not Adreno
(`nvidia-h200`, `pocl-cpu`, as `DeviceIdentity.rpc_key` names them) have entries of the same shape, so a
compile for them gets defaults for their parallelism; `from_opencl` overrides a table entry with what a live
pyopencl device reports, as a new value (the table never changes at run time).

This module imports no TVM: the farm, the offline tools and `adreno devices` read it; `adreno.targets.target` builds TVM
targets from its entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import UnknownTargetError

TEXTURE_CACHE_NOTE = ("read-only image2d/image2d_array reads go through the L1 texture cache (TP); "
                      "Qualcomm's OpenCL guide recommends images for weights and activations read many times")


MESA = "Mesa freedreno device tables (num_ccu, threadsize_base, max_waves, wave_granularity, reg_size_vec4)"


@dataclass(frozen=True)
class AdrenoDevice:
    """One OpenCL device target (an Adreno GPU, or a device met in measurement): the limits schedules and texture
    planning must respect, and the parallelism facts the default schedules fill it with."""
    name: str                         # table key, e.g. "adreno-740"
    gpu: str                          # marketing name, e.g. "Adreno 740"
    generation: int                   # 6, 7, 8 (the hundreds digit); 0 for other devices
    socs: tuple[str, ...]             # example Snapdragon SoCs carrying this GPU
    compute_units: int                # CL_DEVICE_MAX_COMPUTE_UNITS (Adreno: SP cores)
    max_workgroup_size: int = 1024    # CL_DEVICE_MAX_WORK_GROUP_SIZE (device limit)
    local_memory_bytes: int = 32768   # CL_DEVICE_LOCAL_MEM_SIZE
    image2d_max_width: int = 16384
    image2d_max_height: int = 16384
    image_array_max_layers: int = 2048
    fp16: bool = True                 # cl_khr_fp16
    schedule_threads: int = 256       # TVM's max_num_threads: the conservative schedule limit of TVM's adreno tag
    texture_cache: str = TEXTURE_CACHE_NOTE
    device_class: str = "gpu"         # "gpu" or "cpu" (a CPU OpenCL device keeps big register tiles)
    wave_size: int = 64               # work-items issued together: Adreno wave (fibers), NVIDIA warp, CPU SIMD lanes
    max_waves_per_cu: int = 16        # resident waves per compute unit when registers do not limit them
    latency_waves: int = 8            # waves per compute unit a default keeps in flight to hide memory latency
    wave_granularity: int = 2         # waves that get registers together (Adreno allocates wave pairs)
    registers_per_cu: int = 49152     # 32-bit registers of one compute unit's register file
    register_granule: int = 4         # a work-item's registers are allocated in multiples of this (Adreno: vec4)
    max_workgroups_per_cu: int = 16   # resident work-groups per compute unit
    facts_source: str = MESA
    estimated: tuple[str, ...] = ("latency_waves", "max_workgroups_per_cu")  # fields that are estimates

    @property
    def register_budget(self) -> int:
        """32-bit registers per work-item at which a compute unit still holds all `max_waves_per_cu` waves."""
        return self.registers_per_cu // (self.max_waves_per_cu * self.wave_size)

    def resident_waves(self, registers: int) -> int:
        """Waves one compute unit holds when each work-item uses `registers` 32-bit registers (ir3's formula;
        NVIDIA's with granule 8 and granularity 1); at least one."""
        granule = self.register_granule
        per_item = max(granule, -(-int(registers) // granule) * granule)
        groups = self.registers_per_cu // (self.wave_granularity * self.wave_size * per_item)
        return max(1, min(self.max_waves_per_cu, groups * self.wave_granularity))


_ADRENO_SOURCE = MESA + "; latency_waves (half the wave slots) and max_workgroups_per_cu (one per wave slot) estimated"
_A8XX_ESTIMATE = ("compute_units", "registers_per_cu", "latency_waves", "max_workgroups_per_cu")


def _adreno(name, gpu, generation, socs, compute_units, reg_size_vec4, estimated=("latency_waves",
                                                                                  "max_workgroups_per_cu")):
    # registers_per_cu: reg_size_vec4 vec4 registers x 4 lanes x a 64-fiber wave x wave_granularity 2
    return AdrenoDevice(name, gpu, generation, socs, compute_units, registers_per_cu=reg_size_vec4 * 4 * 64 * 2,
                        facts_source=_ADRENO_SOURCE, estimated=tuple(estimated))


# compute_units: CL_DEVICE_MAX_COMPUTE_UNITS of public clinfo listings (640: 2, 650: 3, 660: 3) = Mesa's num_ccu, which
# Mesa equates with the SP count (730: 4, 740: 6, 750: 6). 8xx is not in Mesa's tables yet: the 750's values are the
# estimate (a farm device reports its own).
DEVICES: dict[str, AdrenoDevice] = {d.name: d for d in [
    _adreno("adreno-640", "Adreno 640", 6, ("Snapdragon 855", "Snapdragon 855+", "Snapdragon 860"), 2, 96),
    _adreno("adreno-650", "Adreno 650", 6, ("Snapdragon 865", "Snapdragon 865+", "Snapdragon 870"), 3, 64),
    _adreno("adreno-660", "Adreno 660", 6, ("Snapdragon 888", "Snapdragon 888+"), 3, 64),
    _adreno("adreno-730", "Adreno 730", 7, ("Snapdragon 8 Gen 1", "Snapdragon 8+ Gen 1"), 4, 96),
    _adreno("adreno-740", "Adreno 740", 7, ("Snapdragon 8 Gen 2",), 6, 96),
    _adreno("adreno-750", "Adreno 750", 7, ("Snapdragon 8 Gen 3",), 6, 96),
    # 8xx: no public OpenCL limit listing yet; the 7xx limits above are kept as the conservative values.
    _adreno("adreno-830", "Adreno 830", 8, ("Snapdragon 8 Elite",), 6, 96, _A8XX_ESTIMATE),
]}

# OpenCL devices met in measurement that are not Adreno GPUs, keyed by `DeviceIdentity.rpc_key`.
OTHER_DEVICES: dict[str, AdrenoDevice] = {d.name: d for d in [
    # NVIDIA's H100/H200 whitepaper and the CUDA guide (compute capability 9.0): 132 SMs, warps of 32, 64K 32-bit
    # registers per SM allocated 256 per warp, at most 2048 threads (64 warps) and 32 blocks per SM, 228 KB shared
    # memory per SM; 32768-pixel images as its OpenCL reported (../shared/DESIGN.md); 48 KiB local memory per
    # work-group, what NVIDIA's OpenCL reports as CL_DEVICE_LOCAL_MEM_SIZE (not recorded there: from_opencl corrects
    # it).
    # latency_waves 4: one warp per SM sub-partition scheduler, what register-tiled kernels need (estimate).
    AdrenoDevice("nvidia-h200", "NVIDIA H200", 0, (), 132, local_memory_bytes=49152, image2d_max_width=32768,
                 image2d_max_height=32768, fp16=False, wave_size=32, max_waves_per_cu=64, latency_waves=4,
                 wave_granularity=1, registers_per_cu=65536, register_granule=8, max_workgroups_per_cu=32,
                 facts_source="NVIDIA Hopper whitepaper; CUDA programming guide, compute capability 9.0",
                 estimated=("latency_waves", "local_memory_bytes")),
    # PoCL on a CPU: a compute unit is a core running one work-group at a time, its work-items vectorised over the
    # SIMD lanes (PoCL's preferred work-group size multiple: 8 here); registers spill to L1 cheaply, so they never
    # limit; 4 cores is the estimate a live device replaces.
    AdrenoDevice("pocl-cpu", "PoCL CPU", 0, (), 4, max_workgroup_size=4096, local_memory_bytes=1 << 20,
                 image2d_max_width=8192, image2d_max_height=8192, fp16=False, device_class="cpu", wave_size=8,
                 max_waves_per_cu=1, latency_waves=1, wave_granularity=1, registers_per_cu=1 << 20,
                 register_granule=1, max_workgroups_per_cu=1, facts_source="PoCL as measured here (pyopencl)",
                 estimated=("compute_units",)),
]}


def get_device(name: str) -> AdrenoDevice:
    """Look up a device by "adreno-740", "740" or "Adreno 740" (case-insensitive), or a measured device's key
    ("nvidia-h200", "pocl-cpu"): the table's entry, never a live device's (that is `from_opencl`'s value, handed
    on explicitly, e.g. as `CompileOptions.facts`)."""
    key = "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())
    key = f"adreno-{key}" if key.isdigit() else key
    known = {**DEVICES, **OTHER_DEVICES}
    if key not in known:
        raise UnknownTargetError(f"unknown Adreno target {name!r}; known targets: {', '.join(known)}")
    return known[key]


def from_opencl(device) -> AdrenoDevice:
    """The entry for a live pyopencl `device`: its table entry (by `DeviceIdentity.rpc_key`; an unknown GPU gets
    adreno-740's facts, an unknown CPU pocl-cpu's) with what the device reports put over it: compute units,
    work-group and local-memory limits, image limits, fp16, and the wave width (a probe kernel's
    CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE). The table is not changed: a caller hands the value on (a compile
    as `CompileOptions.facts`, schedules in their `ScheduleContext`)."""
    import pyopencl as cl  # here only: the table is read without OpenCL (compile for a phone, --help)

    from ..opencl.device import DeviceIdentity  # inside: adreno --help does not need it

    key = DeviceIdentity.from_cl_device(device).rpc_key
    cpu = bool(device.type & cl.device_type.CPU)
    base = {**DEVICES, **OTHER_DEVICES}.get(key) or (OTHER_DEVICES["pocl-cpu"] if cpu else DEVICES["adreno-740"])
    probe = cl.Program(cl.Context([device]), "__kernel void probe(__global float *a) { a[get_global_id(0)] = 1; }")
    wave = probe.build().probe.get_work_group_info(cl.kernel_work_group_info.PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                                   device)
    images = bool(device.image_support)
    live = dataclasses.replace(
        base, name=key, compute_units=int(device.max_compute_units), wave_size=int(wave),
        max_workgroup_size=int(device.max_work_group_size), local_memory_bytes=int(device.local_mem_size),
        image2d_max_width=int(device.image2d_max_width) if images else base.image2d_max_width,
        image2d_max_height=int(device.image2d_max_height) if images else base.image2d_max_height,
        image_array_max_layers=int(device.image_max_array_size) if images else base.image_array_max_layers,
        fp16="cl_khr_fp16" in device.extensions,
        estimated=tuple(f for f in base.estimated if f not in ("compute_units", "wave_size")))
    return live


def describe(device: AdrenoDevice | str) -> dict:
    """A JSON-serialisable summary of `device` (for manifests and `adreno devices`)."""
    device = get_device(device) if isinstance(device, str) else device
    return {**dataclasses.asdict(device), "socs": list(device.socs), "estimated": list(device.estimated),
            "register_budget": device.register_budget}
