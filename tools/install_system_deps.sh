#!/usr/bin/env bash
# System packages the product and its tests use, from Debian's registry (best effort: needs root and apt-get).
#  - pocl-opencl-icd: PyPI's PoCL (LLVM 14) cannot compile for CPUs newer than its LLVM ("unknown target CPU
#    'generic'"); Debian's PoCL is the fallback the device selection picks when the PyPI one fails.
#  - openssh-server: the real sshd the SSH-host tests start on 127.0.0.1.
#  - oclgrind: the OpenCL simulator tests/schedules/test_oclgrind.py runs every family's kernels on (out-of-bounds
#    accesses, local-memory races); its ICD library is named to pyopencl by OCL_ICD_VENDORS, not installed as one.
#  - opencl-headers, ocl-icd-opencl-dev: the OpenCL headers and loader that native/ (TVM's OpenCL runtime plugin
#    and the app harness) is built and linked with; zlib1g-dev: the zlib the plugin inflates kernel sources with.
#  - clang-15: libFuzzer (in libclang-common-15-dev) for the native readers' fuzz target (tests/native/test_fuzz.py);
#    without it the target builds with g++ and a seeded mutation loop.
#  - gcc-aarch64-linux-gnu: an AArch64 cross compiler that stands in for the Android NDK's clang in the tests of
#    `adreno compile --host android --cc` (the NDK itself is not in any registry reachable here).
#  - g++-aarch64-linux-gnu: `make native-aarch64` (the plugin and the harness for AArch64 Linux); mmdebstrap: the
#    phone box's arm64 userland (tools/phonebox.sh, which unpacks qemu-user-static itself: installing it could
#    register it with the host's binfmt_misc).
#  - openjdk-17-jdk-headless: javac, java and jni.h for the app library's Java API (native/java, native/jni: `make
#    native` builds libadreno_rt_jni.so when jni.h is there) and its tests on the desktop JVM.
set -u
packages="pocl-opencl-icd openssh-server oclgrind gcc-aarch64-linux-gnu g++-aarch64-linux-gnu mmdebstrap opencl-headers \
  ocl-icd-opencl-dev zlib1g-dev clang-15 openjdk-17-jdk-headless"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "note: please install$missing (Debian/Ubuntu packages) for full local OpenCL and SSH test support" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq $missing >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq $missing >/dev/null; } \
  || echo "note: apt-get could not install$missing" >&2
exit 0
