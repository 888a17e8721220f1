#!/usr/bin/env bash
# Installs NVIDIA's CUDA 13.5 compiler and cuobjdump from PyPI (no NVIDIA
# repository, no GPU needed) into one folder, for the live CUDA tests
# (crates/offload-cli/tests/cuda_live.rs). Idempotent: a second run with the
# tools present does nothing. Versions are pinned so that the corpus the tests
# build is the same on every machine (shared/reference/cuda-fatbin-spec.md §0).
#
#   CUDA_WHEELS=/opt/cuda-wheels   where to install (default)
#
# Afterwards: nvcc is $CUDA_WHEELS/nvidia/cu13/bin/nvcc, cuobjdump next to it;
# the tests find them through OFFLOAD_CUDA_BIN or that default path.
set -euo pipefail
root="${CUDA_WHEELS:-/opt/cuda-wheels}"
bin="$root/nvidia/cu13/bin"
if [[ -x "$bin/nvcc" && -x "$bin/cuobjdump" && -x "$root/nvidia/cu13/nvvm/bin/cicc" ]]; then
    echo "CUDA tools already in $bin"
    exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$root" \
    nvidia-cuda-nvcc==13.5.37 \
    nvidia-nvvm==13.5.37 \
    nvidia-cuda-crt==13.5.37 \
    nvidia-cuda-runtime==13.5.37 \
    nvidia-cuda-cccl==13.3.5.0.6 \
    nvidia-cuda-cuobjdump==13.5.37
# nvcc needs a host C++ compiler (gcc 12 on Debian 12).
if ! command -v g++ >/dev/null; then
    apt-get update -qq && apt-get install -y -qq g++
fi
"$bin/nvcc" --version | tail -n 1
"$bin/cuobjdump" --version | tail -n 1
