"""`compile --host android --cc` links an AArch64 `lib.so` for a phone (issue 22: every `--cc` compile raised an
ImportError). Debian's `gcc-aarch64-linux-gnu` stands in for the Android NDK's clang, which cannot be installed
here: the same `cross_compiler` path links the same aarch64 objects."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

CROSS_CC = "aarch64-linux-gnu-gcc"  # stand-in for aarch64-linux-android<API>-clang (tools/install_system_deps.sh)


def compile_tiny(out, *args, env=None):
    return subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "--host", "android", "-o", out,
                           "-q", *args], capture_output=True, text=True, timeout=300, env=env)


def elf_machine(path) -> str:
    header = subprocess.run(["readelf", "-h", str(path)], capture_output=True, text=True, check=True).stdout
    return next(line.split(":", 1)[1].strip() for line in header.splitlines() if "Machine:" in line)


def test_cc_links_an_aarch64_shared_library(tmp_path):
    assert shutil.which(CROSS_CC), f"{CROSS_CC} missing: run tools/install_system_deps.sh"
    proc = compile_tiny(tmp_path / "art", "--cc", CROSS_CC)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert manifest["host_library"] == "lib.so" and not (tmp_path / "art" / "lib.tar").exists()
    assert elf_machine(tmp_path / "art" / "lib.so") == "AArch64"
    elf_type = subprocess.run(["readelf", "-h", str(tmp_path / "art" / "lib.so")], capture_output=True,
                              text=True).stdout
    assert "DYN (Shared object file)" in elf_type


def test_tvm_ndk_cc_from_the_environment(tmp_path):
    proc = compile_tiny(tmp_path / "art", env={**os.environ, "TVM_NDK_CC": CROSS_CC})
    assert proc.returncode == 0, proc.stderr
    assert elf_machine(tmp_path / "art" / "lib.so") == "AArch64"


def test_a_missing_compiler_is_one_line(tmp_path):
    proc = compile_tiny(tmp_path / "art", "--cc", "/nonexistent/aarch64-linux-android30-clang")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "not found" in proc.stderr and not (tmp_path / "art").exists()


@pytest.mark.parametrize("host", ["android", "native"])
def test_a_compiler_that_is_not_one_is_one_line(tmp_path, host):
    """A --cc that is missing, a file that is not a program, or a program that writes no library: one line each,
    exit 2, no artifact (the sweep of session 22 found tracebacks for all three)."""
    text = tmp_path / "notes.txt"
    text.write_text("not a compiler")
    cases = (("/nonexistent/cc", "not found"), (text, "is not executable"), ("/bin/true", "wrote no lib.so"))
    for cc, message in cases:
        out = tmp_path / f"art-{host}"
        proc = compile_tiny(out, "--host", host, "--cc", cc)  # the last --host given is the one taken
        err = proc.stderr.strip()
        assert proc.returncode == 2 and len(err.splitlines()) == 1 and message in err, err
        assert f"--host {host}" in err and not out.exists()


def test_a_compiler_that_cannot_link_is_one_line(tmp_path):
    """A linker failure (here x86 gcc given the phone's aarch64 objects, and the aarch64 gcc given this machine's) is
    one line naming the compiler and its first error, exit 2, and no artifact; it was a traceback."""
    for host, cc in (("android", "gcc"), ("native", CROSS_CC)):
        out = tmp_path / f"art-{host}"
        proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "--host", host, "--cc", cc,
                               "-o", out, "-q"], capture_output=True, text=True, timeout=300)
        err = proc.stderr.strip()
        assert proc.returncode == 2 and len(err.splitlines()) == 1, err
        assert f"linking the host library with {cc} failed" in err and f"--host {host}" in err, err
        assert "Traceback" not in proc.stderr and not out.exists()


def test_tvm_ndk_cc_is_not_the_native_compiler(tmp_path):
    """$TVM_NDK_CC names the phone's compiler; `--host native` links for this machine whatever it says."""
    proc = subprocess.run([sys.executable, "-m", "adreno.cli", "compile", "tiny", "--host", "native", "-o",
                           tmp_path / "art", "-q"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TVM_NDK_CC": CROSS_CC})
    assert proc.returncode == 0, proc.stderr
    assert elf_machine(tmp_path / "art" / "lib.so") == "Advanced Micro Devices X86-64"
