"""The Adreno device table and its mapping to TVM targets.

Limits are the values Adreno's OpenCL driver reports (CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_LOCAL_MEM_SIZE,
CL_DEVICE_IMAGE2D_MAX_WIDTH/HEIGHT, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE); TVM's `qcom/adreno-opencl` tag encodes the
same texture limits but schedules at most 256 threads per workgroup (kept as `schedule_threads`) and declares only
16 KiB of shared memory, where we pass the device's 32 KiB of local memory. Qualcomm does not publish a per-GPU
limit sheet; where a value is not public we keep the 6xx/7xx one, which is the conservative choice (newer
generations only raise limits), and say so next to the entry.
TVM 0.27 refuses CLI strings such as "opencl -device=adreno", so targets are built from dicts.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import tvm

from adreno.errors import UnknownTargetError

TEXTURE_CACHE_NOTE = ("read-only image2d/image2d_array reads go through the L1 texture cache (TP); "
                      "Qualcomm's OpenCL guide recommends images for weights and activations read many times")


@dataclass(frozen=True)
class AdrenoDevice:
    """One Adreno GPU: the limits schedules and texture planning must respect."""
    name: str                         # table key, e.g. "adreno-740"
    gpu: str                          # marketing name, e.g. "Adreno 740"
    generation: int                   # 6, 7, 8 (the hundreds digit)
    socs: tuple[str, ...]             # example Snapdragon SoCs carrying this GPU
    compute_units: int | None         # CL_DEVICE_MAX_COMPUTE_UNITS; None where not public
    max_workgroup_size: int = 1024    # CL_DEVICE_MAX_WORK_GROUP_SIZE (device limit)
    local_memory_bytes: int = 32768   # CL_DEVICE_LOCAL_MEM_SIZE
    image2d_max_width: int = 16384
    image2d_max_height: int = 16384
    image_array_max_layers: int = 2048
    fp16: bool = True                 # cl_khr_fp16
    schedule_threads: int = 256       # TVM's max_num_threads: the conservative schedule limit of TVM's adreno tag
    texture_cache: str = TEXTURE_CACHE_NOTE


# compute_units: CL_DEVICE_MAX_COMPUTE_UNITS from public clinfo/benchmark listings of 6xx parts; None where no listing
# could be confirmed (a farm device reports its own value).
DEVICES: dict[str, AdrenoDevice] = {d.name: d for d in [
    AdrenoDevice("adreno-640", "Adreno 640", 6, ("Snapdragon 855", "Snapdragon 855+", "Snapdragon 860"), 2),
    AdrenoDevice("adreno-650", "Adreno 650", 6, ("Snapdragon 865", "Snapdragon 865+", "Snapdragon 870"), 3),
    AdrenoDevice("adreno-660", "Adreno 660", 6, ("Snapdragon 888", "Snapdragon 888+"), 3),
    AdrenoDevice("adreno-730", "Adreno 730", 7, ("Snapdragon 8 Gen 1", "Snapdragon 8+ Gen 1"), None),
    AdrenoDevice("adreno-740", "Adreno 740", 7, ("Snapdragon 8 Gen 2",), None),
    AdrenoDevice("adreno-750", "Adreno 750", 7, ("Snapdragon 8 Gen 3",), None),
    # 8xx: no public OpenCL limit listing yet; the 7xx limits above are kept as the conservative values.
    AdrenoDevice("adreno-830", "Adreno 830", 8, ("Snapdragon 8 Elite",), None),
]}

HOSTS = {"android": {"kind": "llvm", "mtriple": "aarch64-linux-android"}, "native": {"kind": "llvm"}}


def get_device(name: str) -> AdrenoDevice:
    """Look up a device by "adreno-740", "740" or "Adreno 740" (case-insensitive)."""
    key = "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())
    key = f"adreno-{key}" if key.isdigit() else key
    if key not in DEVICES:
        raise UnknownTargetError(f"unknown Adreno target {name!r}; known targets: {', '.join(DEVICES)}")
    return DEVICES[key]


def tvm_target(device: AdrenoDevice | str, host: str = "android") -> tvm.target.Target:
    """The TVM OpenCL target for `device`, with an LLVM host: "android" (aarch64-linux-android) or "native"."""
    device = get_device(device) if isinstance(device, str) else device
    if host not in HOSTS:
        raise UnknownTargetError(f"unknown host {host!r}; known hosts: {', '.join(HOSTS)}")
    return tvm.target.Target({
        "kind": "opencl", "device": "adreno", "keys": ["adreno", "opencl", "gpu"],
        "max_num_threads": device.schedule_threads, "max_threads_per_block": device.schedule_threads,
        "max_shared_memory_per_block": device.local_memory_bytes,
        "texture_spatial_limit": device.image2d_max_width, "texture_depth_limit": device.image_array_max_layers,
        "image_base_address_alignment": 64, "thread_warp_size": 1,
    }, host=HOSTS[host])


def describe(device: AdrenoDevice | str) -> dict:
    """A JSON-serialisable summary of `device` (for manifests and `adreno devices`)."""
    device = get_device(device) if isinstance(device, str) else device
    return {**dataclasses.asdict(device), "socs": list(device.socs)}
