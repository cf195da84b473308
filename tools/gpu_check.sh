#!/usr/bin/env bash
# Every speed goal measured on a machine with an NVIDIA GPU (the `device` tool's H200) that has Python 3.12, numpy and
# PyTorch but no TVM, no onnx and no network: tools/gpu_bundle.py does the work, this wraps it.
#
#   here:   tools/gpu_check.sh prepare [DIR] [--quick] [--trials K]
#       writes DIR (default out/gpu_bundle, git-ignored): payload.tar.xz + bundle.json (tools/gpu_bundle.py prepare)
#       and wheels/ (cp312 pyopencl, pytools, platformdirs, siphash24, typing_extensions); refuses more than 60 MiB
#   there:  run(command="bash tools/gpu_check.sh", carry=["out/gpu_bundle"], timeout_s=420)
#       installs the carried wheels, points the OpenCL ICD loader at NVIDIA's libnvidia-opencl (DESIGN.md), runs
#       tools/gpu_bundle.py run on the first GPU device, capped at 350 s; tables, JSON, records.jsonl and summary in $OUT
#   dry run here:  tools/gpu_check.sh run [DIR] --device pocl
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-run}
[[ $# -gt 0 ]] && shift
DIR=out/gpu_bundle
if [[ $# -gt 0 && "$1" != --* ]]; then DIR=$1; shift; fi
LIMIT_BYTES=$((60 * 1024 * 1024))

if [[ "$MODE" == "prepare" ]]; then
    PY=${PYTHON:-.venv/bin/python}
    [[ -x "$PY" ]] || PY=python3
    started=$(date +%s)
    "$PY" tools/gpu_bundle.py prepare "$DIR" "$@"
    # --no-deps: numpy is there already (15 MiB saved); these five are everything else pyopencl imports
    "$PY" -m pip download --quiet --no-deps --dest "$DIR/wheels" --only-binary=:all: --python-version 3.12 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        pyopencl pytools platformdirs siphash24 typing_extensions
    size=$(du -sb "$DIR" | cut -f1)
    echo "bundle $DIR: $((size / 1024)) KiB ($(ls "$DIR/wheels" | wc -l) wheels), prepared in $(( $(date +%s) - started )) s"
    if (( size > LIMIT_BYTES )); then echo "bundle $DIR is larger than 60 MiB" >&2; exit 2; fi
    exit 0
fi
[[ "$MODE" == "run" ]] || { echo "usage: tools/gpu_check.sh prepare|run [DIR] [options]" >&2; exit 2; }

PY=${PYTHON:-python3}
OUT=${OUT:-out/gpu_check}
mkdir -p "$OUT"
[[ -f "$DIR/bundle.json" ]] || { echo "no $DIR/bundle.json: run 'tools/gpu_check.sh prepare' first and carry $DIR" >&2; exit 2; }
if ! "$PY" -c "import pyopencl" 2>/dev/null; then
    "$PY" -m pip install --quiet --no-index --find-links "$DIR/wheels" pyopencl pytools platformdirs siphash24
fi
DEVICE=gpu
for arg in "$@"; do [[ "$arg" == pocl ]] && DEVICE=pocl; done
if [[ "$DEVICE" == gpu && -e /usr/local/nvidia/lib64/libnvidia-opencl.so.1 ]]; then
    mkdir -p /tmp/icd
    echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
    export OCL_ICD_VENDORS=/tmp/icd
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
fi
# cold program builds really start cold: no CUDA JIT cache, no pyopencl binary cache
export CUDA_CACHE_DISABLE=1 PYOPENCL_NO_CACHE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import pyopencl as cl; print([(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])"
timeout 350 "$PY" tools/gpu_bundle.py run "$DIR" --out "$OUT" --device "$DEVICE" "$@" 2>&1 | tee "$OUT/run.log"
