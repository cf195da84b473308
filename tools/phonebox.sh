#!/usr/bin/env bash
# A phone in a box: an AArch64 Debian userland run by qemu-user, with the checkout and /tmp at the same paths as on
# the host, so that what a phone runs (lib.so compiled with --cc, TVM's arm64 runtime, our plugin and harness built
# for AArch64, an arm64 RPC server) runs here with no phone. docs/native.md says what it proves and what it does not.
#
#   tools/phonebox.sh setup        make the box (idempotent: a second setup reuses what exists)
#   tools/phonebox.sh native       only what `make native-aarch64` needs: the arm64 libraries and wheels, then
#                                  native/Makefile's `all` built with aarch64-linux-gnu-g++ into build/native-aarch64
#   tools/phonebox.sh run CMD...   run CMD in the box (cwd kept when the box sees it); its exit status is CMD's
#   tools/phonebox.sh serve TRACKER [KEY]
#                                  the box as a farm device: TVM's RPC server (arm64, our plugin loaded) registered
#                                  at TRACKER (HOST:PORT, `adreno farm tracker`) under KEY (default qemu-aarch64),
#                                  bound to 127.0.0.1 (TVM RPC has no authentication)
#
# Everything lives in PHONEBOX_DIR (default build/phonebox of the checkout): rootfs/ (mmdebstrap's extract of the
# arm64 packages below), site/ (the aarch64 wheels, the host venv's versions), qemu/ (Debian's qemu-aarch64-static,
# unpacked, not installed), link/ (the arm64 libraries the cross linker takes). NATIVE_AARCH64 (default
# build/native-aarch64) holds the AArch64 plugin and harness. PYTHON (default .venv/bin/python) is the host venv
# whose wheel versions the box gets.
#
# Nothing is registered on the host: `run` enters a new user and mount namespace (unshare), mounts a binfmt_misc
# instance of its own there (Linux >= 6.7) with qemu's aarch64 entry, binds /proc /sys /dev, the checkout, /tmp and
# PHONEBOX_DIR into rootfs/, and chroots. A chroot, not `qemu-aarch64 -L`: PoCL execs its linker and TVM starts
# worker processes, arm64 programs that the kernel must hand to qemu again.
set -euo pipefail

CHECKOUT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BOX=${PHONEBOX_DIR:-$CHECKOUT/build/phonebox}
BOX=$(mkdir -p "$BOX" && cd "$BOX" && pwd)
NATIVE=${NATIVE_AARCH64:-$CHECKOUT/build/native-aarch64}
NATIVE=$(mkdir -p "$NATIVE" && cd "$NATIVE" && pwd)
PYTHON=${PYTHON:-$CHECKOUT/.venv/bin/python}
SUITE=bookworm
MIRROR=${PHONEBOX_MIRROR:-http://deb.debian.org/debian}
# python3-minimal: `python3`; dash, coreutils: /bin/sh and env for `run`; ocl-icd-libopencl1 + pocl-opencl-icd:
# OpenCL on the (emulated) CPU (with their dependencies: LLVM 15, clang, and the binutils whose `ld` PoCL runs on
# every kernel it compiles).
DEBS="libc6,libstdc++6,zlib1g,dash,coreutils,python3-minimal,python3.11,ocl-icd-libopencl1,pocl-opencl-icd"
# The wheels the run side imports (no onnx, no onnxruntime: --check stays on the host).
WHEELS="apache-tvm apache-tvm-ffi numpy ml_dtypes typing_extensions psutil cloudpickle tornado pyopencl"
# Debian's qemu-aarch64 binfmt entry (qemu-user-static's /usr/lib/binfmt.d/qemu-aarch64.conf), with our path.
MAGIC='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
MASK='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'

say() { echo "phonebox: $*" >&2; }
fail() { say "$*"; exit 2; }

need() {
  command -v "$1" >/dev/null || fail "$1 is missing: run tools/install_system_deps.sh as root (Debian package $2)"
}

# rootfs/: the arm64 packages and their dependencies, extracted (no maintainer scripts run, nothing emulated).
make_rootfs() {
  [ -f "$BOX/rootfs/.done" ] && [ "$(cat "$BOX/rootfs/.done")" = "$DEBS" ] && return
  need mmdebstrap mmdebstrap
  say "extracting the arm64 userland ($DEBS) into $BOX/rootfs"
  rm -rf "$BOX/rootfs"
  mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$DEBS" "$SUITE" "$BOX/rootfs" "$MIRROR"
  echo "$DEBS" > "$BOX/rootfs/.done"
}

# site/: the aarch64 wheels at the host venv's versions (pip --platform: downloaded and unpacked on the host).
make_site() {
  [ -x "$PYTHON" ] || fail "no host venv at $PYTHON: run \`make install\` first, or set PYTHON"
  local pins
  pins=$("$PYTHON" - $WHEELS <<'EOF'
import sys
from importlib import metadata
pins = []
for name in sys.argv[1:]:
    try:
        pins.append(f"{name}=={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        pins.append(name)
print(" ".join(pins))
EOF
)
  [ -f "$BOX/site/.done" ] && [ "$(cat "$BOX/site/.done")" = "$pins" ] && return
  say "installing the aarch64 wheels ($pins) into $BOX/site"
  rm -rf "$BOX/site"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-warn-script-location --only-binary=:all: \
    --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 \
    --python-version 3.11 --implementation cp --abi cp311 --target "$BOX/site" $pins
  echo "$pins" > "$BOX/site/.done"
}

# link/: the arm64 libOpenCL and zlib under the names the cross linker looks for (-lOpenCL, -lz).
make_link() {
  mkdir -p "$BOX/link"
  ln -sfn "$BOX/rootfs/usr/lib/aarch64-linux-gnu/libOpenCL.so.1" "$BOX/link/libOpenCL.so"
  ln -sfn "$BOX/rootfs/lib/aarch64-linux-gnu/libz.so.1" "$BOX/link/libz.so"
}

# The wheel versions the AArch64 build is for, read from site/'s metadata (the line BUILD_INFO holds).
site_versions() {
  PYTHONPATH="$BOX/site:$CHECKOUT" ADRENO_NO_PLUGIN=1 "$PYTHON" -c \
    "from adreno.native.versions import wheel_versions; print(wheel_versions())"
}

# native/Makefile's `all` (whatever it builds) with the cross compiler, against site/'s wheels, into NATIVE.
build_native() {
  need aarch64-linux-gnu-g++ g++-aarch64-linux-gnu
  make_rootfs
  make_site
  make_link
  # -L in CXX: a cross gcc ignores LIBRARY_PATH, and every rule of the Makefile links with $(CXX); -rpath-link: the
  # libraries that libadreno_rt.so needs (libz.so.1, libOpenCL.so.1) found in the box when the harness links it
  local arm_libs="$BOX/rootfs/lib/aarch64-linux-gnu:$BOX/rootfs/usr/lib/aarch64-linux-gnu"
  make -C "$CHECKOUT/native" -j2 --no-print-directory \
    CXX="aarch64-linux-gnu-g++ -L$BOX/link -Wl,-rpath-link,$arm_libs" \
    SITE="$BOX/site" OUT="$NATIVE" VERSIONS="$(site_versions)"
}

# qemu/: qemu-aarch64-static out of Debian's package, unpacked here (installing it could register it on the host).
make_qemu() {
  [ -x "$BOX/qemu/qemu-aarch64-static" ] && return
  need apt-get apt
  say "unpacking Debian's qemu-user-static into $BOX/qemu"
  local tmp
  tmp=$(mktemp -d "$BOX/.qemu.XXXXXX")
  (cd "$tmp" && apt-get download -qq qemu-user-static 2>/dev/null) \
    || { apt-get update -qq >/dev/null && (cd "$tmp" && apt-get download -qq qemu-user-static); }
  dpkg-deb --fsys-tarfile "$tmp"/qemu-user-static_*.deb | tar -x -C "$tmp" ./usr/bin/qemu-aarch64-static
  mkdir -p "$BOX/qemu"
  mv "$tmp/usr/bin/qemu-aarch64-static" "$BOX/qemu/"
  # the binfmt entry's P flag (argv[0] kept) is understood by qemu when it is called by this name
  ln -sfn qemu-aarch64-static "$BOX/qemu/aarch64-binfmt-P"
  rm -rf "$tmp"
}

setup() {
  # the Debian download and unpacking beside pip's: the two are mostly waiting on the network
  make_rootfs &
  local rootfs=$!
  make_site
  wait "$rootfs"
  build_native
  make_qemu
  mkdir -p "$BOX/home"
  say "ready: tools/phonebox.sh run python3 -m adreno run ART --runtime tvm --output O.npz"
}

# Inside the namespaces: binfmt, mounts, chroot, exec (called by `run` through unshare).
enter() {
  local cwd=$1; shift
  local root="$BOX/rootfs"
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  echo ":phonebox-aarch64:M::$MAGIC:$MASK:$BOX/qemu/aarch64-binfmt-P:OPF" > /proc/sys/fs/binfmt_misc/register
  # Recursive binds: a mount under one of these (a tmpfs under /tmp) is locked in a new user namespace, and a plain
  # bind of its parent is refused (EINVAL). The host's folders first, so their copies do not hold /proc again.
  local d
  for d in /tmp "$CHECKOUT" "$BOX" "$NATIVE" /proc /sys /dev; do mkdir -p "$root$d"; mount --rbind "$d" "$root$d"; done
  local pass=()
  while IFS='=' read -r name _; do
    case $name in POCL_*|ADRENO_*|TVM_*) pass+=("$name=${!name}") ;; esac
  done < <(env)
  # The host's POCL_*, ADRENO_* and TVM_* variables come in after the box's defaults, so they override them.
  # PoCL's default work-group method crashes LLVM under qemu on depthwise kernels; `loops` does not (docs/native.md)
  exec chroot "$root" /usr/bin/env -i HOME="$BOX/home" LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
    POCL_WORK_GROUP_METHOD=loops ADRENO_PLUGIN_DIR="$NATIVE" "${pass[@]}" PYTHONPATH="$CHECKOUT:$BOX/site" \
    /bin/sh -c 'cd "$0" && exec "$@"' "$cwd" "$@"
}

run() {
  [ $# -gt 0 ] || fail "usage: tools/phonebox.sh run CMD..."
  [ -f "$BOX/rootfs/.done" ] && [ -x "$BOX/qemu/qemu-aarch64-static" ] && [ -f "$NATIVE/BUILD_INFO" ] \
    || fail "the box is not set up in $BOX: run tools/phonebox.sh setup"
  local cwd
  cwd=$(pwd)
  case $cwd/ in "$CHECKOUT"/*|/tmp/*|"$BOX"/*) ;; *) cwd=$CHECKOUT ;; esac
  exec unshare --user --map-root-user --mount "$0" __enter "$cwd" "$@"
}

serve() {
  [ $# -ge 1 ] || fail "usage: tools/phonebox.sh serve TRACKER_HOST:PORT [KEY]"
  run python3 -m tvm.exec.rpc_server --host 127.0.0.1 --tracker "$1" --key "${2:-qemu-aarch64}" \
    --load-library "$NATIVE/libtvm_runtime_opencl.so"
}

main() {
  case ${1:-} in
    setup) setup ;;
    native) build_native ;;
    run) shift; run "$@" ;;
    serve) shift; serve "$@" ;;
    __enter) shift; enter "$@" ;;
    *) fail "usage: tools/phonebox.sh setup | native | run CMD... | serve TRACKER [KEY]" ;;
  esac
}

# One line, read whole before it runs: a script edited while a `run` is under way is not read again.
main "$@"; exit
