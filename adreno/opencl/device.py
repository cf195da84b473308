"""Finding OpenCL devices through pyopencl.

A device is chosen by a spec: None or "pocl" (PoCL on the CPU, the default here), "gpu" (the first GPU
device of any platform), "cpu", an index into `list_devices()`, or a substring of a device name."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import DeviceError

INSTALL_HINT = ("install an OpenCL platform: `pip install pocl-binary-distribution` gives PoCL on the CPU (on CPUs its "
                "LLVM does not know, also `apt-get install pocl-opencl-icd`); a GPU needs its vendor's OpenCL driver "
                "(an ICD file under /etc/OpenCL/vendors)")
_PROBE_SOURCE = "__kernel void probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"
_compiler_works: dict = {}  # DeviceIdentity -> whether it builds


def compiler_works(device) -> bool:
    """Whether the device's OpenCL compiler builds a trivial kernel (PyPI's PoCL 3.0 cannot on CPUs newer than
    its LLVM 14: 'unknown target CPU generic'). Probed once per device per process."""
    import pyopencl as cl

    key = DeviceIdentity.from_cl_device(device)
    if key not in _compiler_works:
        try:
            cl.Program(cl.Context([device]), _PROBE_SOURCE).build()
            _compiler_works[key] = True
        except (cl.RuntimeError, cl.LogicError):
            _compiler_works[key] = False
    return _compiler_works[key]


@dataclass
class DeviceInfo:
    """What `adreno devices --local` shows for one device."""

    index: int
    platform: str
    platform_version: str
    name: str
    kind: str
    version: str
    driver_version: str
    compute_units: int
    max_workgroup_size: int
    local_memory_bytes: int
    global_memory_bytes: int
    image_support: bool
    image2d_max: tuple[int, int]
    fp16: bool
    compiler_ok: bool


def _platforms():
    import pyopencl as cl

    try:
        return cl.get_platforms()
    except cl.LogicError:  # clGetPlatformIDs: PLATFORM_NOT_FOUND_KHR when no ICD is installed
        return []


def opencl_devices() -> list:
    """Every OpenCL device of every platform, in a stable order (platform order, then device order)."""
    return [d for p in _platforms() for d in p.get_devices()]


def list_devices() -> list[DeviceInfo]:
    """Describe every OpenCL device pyopencl can see."""
    import pyopencl as cl

    infos = []
    for index, dev in enumerate(opencl_devices()):
        infos.append(DeviceInfo(
            index, dev.platform.name.strip(), dev.platform.version.strip(), dev.name.strip(),
            cl.device_type.to_string(dev.type).replace("ALL | ", ""), dev.version.strip(), dev.driver_version.strip(),
            dev.max_compute_units, dev.max_work_group_size, dev.local_mem_size, dev.global_mem_size,
            bool(dev.image_support), (dev.image2d_max_width, dev.image2d_max_height) if dev.image_support else (0, 0),
            "cl_khr_fp16" in dev.extensions, compiler_works(dev)))
    return infos


def device_of(device):
    """`device` itself when it is a pyopencl Device, else the one `select_device` finds for it (a spec)."""
    import pyopencl as cl

    return device if isinstance(device, cl.Device) else select_device(device)


def select_device(spec: str | int | None = None):
    """Return the pyopencl Device for a spec (see the module doc); a clear `DeviceError` when there is none."""
    import pyopencl as cl

    devices = opencl_devices()
    if not devices:
        raise DeviceError(f"no OpenCL platform found; {INSTALL_HINT}")
    listing = "; ".join(f"{i}: {d.name.strip()} ({d.platform.name.strip()})" for i, d in enumerate(devices))
    spec = "pocl" if spec is None else str(spec).strip()
    if not spec:
        raise DeviceError(f"an empty device name; give pocl, gpu, cpu, an index or part of a name; devices: {listing}")
    if spec.isdigit():
        if int(spec) < len(devices):
            return devices[int(spec)]
        raise DeviceError(f"no OpenCL device {spec}; devices: {listing}")
    lowered = spec.lower()
    if lowered == "pocl":
        found = [d for d in devices if "portable computing language" in d.platform.name.lower()]
        if not found:
            raise DeviceError(f"PoCL is not installed ({INSTALL_HINT}); devices: {listing}")
        if len(found) == 1:  # nothing to choose: a compiler that cannot build fails the model's build, in one line
            return found[0]
        working = next((d for d in found if compiler_works(d)), None)  # probe lazily: each probe is a build
        if working is None:
            raise DeviceError(f"no PoCL installation here can compile a kernel for this CPU; {INSTALL_HINT}")
        return working
    if lowered in ("gpu", "cpu"):
        kind = cl.device_type.GPU if lowered == "gpu" else cl.device_type.CPU
        found = [d for d in devices if d.type & kind]
        if not found:
            raise DeviceError(f"no OpenCL {lowered.upper()} device; devices: {listing}")
        return found[0]
    found = [d for d in devices if lowered in d.name.lower()]
    if not found:
        raise DeviceError(f"no OpenCL device matches {spec!r}; devices: {listing}")
    return found[0]


@dataclass(frozen=True)
class DeviceIdentity:
    """Who a device is, in the one form every part of the product keys on: the program cache (`cache_fields`:
    platform, device, driver and OpenCL C versions, the compiler a binary came from), the farm (`rpc_key`: a
    normalised name such as adreno-740, nvidia-h200, pocl-cpu) and the tuning records (`fingerprint`: the key, the
    device name and its driver version). `vendor` only helps name the key; it is not part of the identity."""

    platform_name: str
    platform_version: str
    device_name: str
    driver_version: str
    opencl_c_version: str
    vendor: str = field(default="", compare=False)

    @classmethod
    def from_cl_device(cls, device) -> DeviceIdentity:
        """Read the identity of a pyopencl device."""
        platform = device.platform
        return cls(platform.name.strip(), platform.version.strip(), device.name.strip(),
                   device.driver_version.strip(), device.opencl_c_version.strip(), device.vendor.strip())

    @property
    def cache_fields(self) -> dict:
        """The fields a program binary is keyed on (see `adreno.cache`)."""
        return {"platform_name": self.platform_name, "platform_version": self.platform_version,
                "device_name": self.device_name, "driver_version": self.driver_version,
                "opencl_c_version": self.opencl_c_version}

    @property
    def rpc_key(self) -> str:
        """The normalised name devices register under in the farm: adreno-740, nvidia-h200, pocl-cpu, ..."""
        name = self.device_name.lower()
        if "portable computing language" in self.platform_name.lower():
            return "pocl-cpu"
        match = re.search(r"adreno[^0-9]*(\d+)", name)
        if match:
            return f"adreno-{match.group(1)}"
        vendor = self.vendor.lower().split()[0] if self.vendor else "opencl"
        vendor = {"advanced": "amd", "intel(r)": "intel"}.get(vendor, vendor)
        model = re.sub(r"[^a-z0-9]+", "-", name.replace(vendor, "")).strip("-")
        model = re.sub(r"^(geforce|nvidia|tesla|radeon)-", "", model)
        return f"{vendor}-{model.split('-')[0] if vendor == 'nvidia' else model}" if model else vendor

    @property
    def compiles_at_first_launch(self) -> bool:
        """Whether the driver generates a kernel's code only when it is needed: PoCL's clBuildProgram parses the
        source, asking for the binary then generates code for every kernel (seconds for a model), and each kernel's
        work-group function is compiled at its first launch, so a binary taken right after the build costs all
        that code generation and still lacks what the first run compiles (docs/compile.md)."""
        return self.rpc_key == "pocl-cpu"

    @property
    def fingerprint(self) -> str:
        """What tuning records are keyed by (`adreno.records`): the RPC key, the device name and its driver."""
        return f"{self.rpc_key}|{self.device_name}|{self.driver_version}"


def eviction_bytes(device) -> int:
    """Bytes a scratch fill must cover to push a run's data out of the device's caches: twice its global memory
    cache (CL_DEVICE_GLOBAL_MEM_CACHE_SIZE), at least 8 MiB (a driver may report 0) and at most 256 MiB."""
    return min(256 << 20, max(8 << 20, 2 * int(device.global_mem_cache_size)))
