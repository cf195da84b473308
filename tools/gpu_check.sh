#!/usr/bin/env bash
# Conv benchmark on a machine with an NVIDIA GPU (the `device` tool's H200): our schedules vs TVM 0.27's defaults
# vs a naive OpenCL kernel vs PyTorch/cuDNN fp32 (TF32 off), all through NVIDIA's OpenCL, every timing checked
# against the onnxruntime reference first. That machine has no TVM and no network, so it runs in two steps:
#
#   here (with .venv):    tools/gpu_check.sh prepare [resnet18|mobilenetv2]
#       compiles every distinct conv layer's artifacts (for nvidia-h200, or $TARGET) + references into
#       out/gpu_bench/ and downloads the cp312 pyopencl wheels (pyopencl, pytools, platformdirs, siphash24) into
#       .whl/ (both paths are git-ignored)
#   there (device tool):  run(command="bash tools/gpu_check.sh", carry=["out/gpu_bench", ".whl"], timeout_s=420)
#       installs the carried wheels, points the OpenCL ICD loader at NVIDIA's libnvidia-opencl, runs
#       tools/bench_conv.py --artifacts out/gpu_bench --device gpu, and leaves the table + JSON in $OUT.
# The run itself needs ~1-3 minutes on an H200 (build of ~30 OpenCL programs, 15 layers x 4 columns); it is
# capped at 300 s by `timeout` so the whole call fits a 5-minute slot.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-out/gpu_bench}

if [[ "${1:-run}" == "prepare" ]]; then
    MODEL=${2:-resnet18}
    PY=${PYTHON:-.venv/bin/python}
    rm -rf "$BENCH_DIR"
    "$PY" tools/bench_conv.py --model "$MODEL" --prepare "$BENCH_DIR" --target "${TARGET:-nvidia-h200}"
    mkdir -p .whl
    "$PY" -m pip download --quiet --dest .whl --only-binary=:all: --python-version 3.12 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        pyopencl pytools platformdirs siphash24 typing_extensions
    du -sh "$BENCH_DIR" .whl
    exit 0
fi

PY=${PYTHON:-python3}
OUT=${OUT:-out/gpu_check}
mkdir -p "$OUT"
[[ -f "$BENCH_DIR/layers.json" ]] || { echo "no $BENCH_DIR/layers.json: run 'tools/gpu_check.sh prepare' first and carry it"; exit 2; }
if ! "$PY" -c "import pyopencl" 2>/dev/null; then
    "$PY" -m pip install --quiet --no-index --find-links .whl pyopencl pytools platformdirs siphash24
fi
mkdir -p /tmp/icd
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd CUDA_CACHE_DISABLE=1 PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
"$PY" -c "import pyopencl as cl; print([(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()])"
# --device gpu: the first GPU device of any platform (NVIDIA's; a Debian PoCL there is a CPU device)
set -o pipefail
timeout 300 "$PY" tools/bench_conv.py --artifacts "$BENCH_DIR" --device gpu --repeat 20 --json "$OUT/bench_conv_gpu.json" \
    2>&1 | tee "$OUT/bench_conv_gpu.txt"
