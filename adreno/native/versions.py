"""What the native plugin is tied to: the apache-tvm and apache-tvm-ffi distributions' versions.

The plugin subclasses TVM's C++ classes (DeviceAPI, Allocator, ModuleObj), so it only works with the wheel it was
built against. `make native` records this line beside the plugin (BUILD_INFO) and `adreno.native.plugin` compares
it with the installed wheels before loading. `python -m adreno.native.versions` prints it (no TVM import)."""

from __future__ import annotations

from importlib import metadata


def wheel_versions() -> str:
    """"apache-tvm=X apache-tvm-ffi=Y" of the installed distributions ("missing" for one that is not installed)."""
    parts = []
    for name in ("apache-tvm", "apache-tvm-ffi"):
        try:
            parts.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name}=missing")
    return " ".join(parts)


if __name__ == "__main__":
    print(wheel_versions())
