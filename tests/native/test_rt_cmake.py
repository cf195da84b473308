"""native/CMakeLists.txt builds the app library for a toolchain: for the host, a library the docs' C example runs
on (with the plugin beside it); for AArch64 Linux (native/cmake/aarch64-linux-gnu.cmake), AArch64 objects, linked
with TVM's symbols left to the phone's loader (no AArch64 TVM runtime here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from adreno.native.plugin import PLUGIN_PATH

from .rt_programs import HEADER_DIR
from .test_app_docs import first_block

NATIVE = HEADER_DIR.parent
SITE = Path(sysconfig.get_paths()["purelib"])


def cmake_build(build: Path, *defines: str) -> None:
    subprocess.run(["cmake", "-S", str(NATIVE), "-B", str(build), f"-DTVM_INCLUDE={SITE / 'tvm' / 'include'}",
                    f"-DTVM_FFI_INCLUDE={SITE / 'tvm_ffi' / 'include'}", *defines], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2"], check=True, capture_output=True,
                   env={**os.environ, "MAKEFLAGS": ""})


def test_cmake_builds_a_host_library_the_c_example_runs_on(native_tiny, tmp_path):
    build = tmp_path / "build"
    cmake_build(build, f"-DTVM_LIB_DIR={SITE / 'tvm' / 'lib'};{SITE / 'tvm_ffi' / 'lib'}")
    assert (build / "libadreno_rt_jni.so").is_file()
    os.symlink(PLUGIN_PATH, build / PLUGIN_PATH.name)  # the library looks for the plugin beside itself
    (tmp_path / "example.c").write_text(first_block("c"))
    subprocess.run(["gcc", "-std=c11", f"-I{HEADER_DIR}", str(tmp_path / "example.c"), f"-L{build}", "-ladreno_rt",
                    f"-Wl,-rpath,{build}", "-o", str(tmp_path / "example")], check=True)
    proc = subprocess.run([str(tmp_path / "example"), str(native_tiny["texture"])], capture_output=True, text=True,
                          timeout=300)
    assert (proc.returncode, proc.stdout) == (0, "probs: [1, 10]\n"), proc.stderr


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None,
                    reason="g++-aarch64-linux-gnu is not installed (the phone box's cross compiler)")
def test_cmake_builds_an_aarch64_library(tmp_path):
    build = tmp_path / "build"
    cmake_build(build, f"-DCMAKE_TOOLCHAIN_FILE={NATIVE / 'cmake' / 'aarch64-linux-gnu.cmake'}")
    for name in ("libadreno_rt.so", "libadreno_rt_jni.so"):
        assert (build / name).read_bytes()[18:20] == (183).to_bytes(2, "little")  # e_machine AArch64
