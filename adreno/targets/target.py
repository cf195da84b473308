"""TVM targets for the entries of the device table (`adreno.targets.devices`).

TVM's `qcom/adreno-opencl` tag encodes the same texture limits as the table but schedules at most 256 threads per
workgroup (kept as `schedule_threads`) and declares only 16 KiB of shared memory, where we pass the device's 32 KiB
of local memory. TVM 0.27 refuses CLI strings such as "opencl -device=adreno", so targets are built from dicts.
"""

from __future__ import annotations

import tvm

from .devices import AdrenoDevice, get_device
from ..errors import UnknownTargetError
from ..options import Host

HOSTS = {Host.ANDROID: {"kind": "llvm", "mtriple": "aarch64-linux-android"}, Host.NATIVE: {"kind": "llvm"}}


def tvm_target(device: AdrenoDevice | str, host: Host = Host.ANDROID) -> tvm.target.Target:
    """The TVM OpenCL target for `device`, with an LLVM host: android (aarch64-linux-android) or native."""
    device = get_device(device) if isinstance(device, str) else device
    if host not in HOSTS:
        raise UnknownTargetError(f"unknown host {host!r}; known hosts: {', '.join(HOSTS)}")
    return tvm.target.Target({
        "kind": "opencl", "device": "adreno", "keys": ["adreno", "opencl", "gpu"],
        "max_num_threads": device.schedule_threads, "max_threads_per_block": device.schedule_threads,
        "max_shared_memory_per_block": device.local_memory_bytes,
        "texture_spatial_limit": device.image2d_max_width, "texture_depth_limit": device.image_array_max_layers,
        "image_base_address_alignment": 64, "thread_warp_size": 1, "model": device.name,
    }, host=HOSTS[host])
