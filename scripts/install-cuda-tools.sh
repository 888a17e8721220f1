#!/usr/bin/env bash
# Installs NVIDIA's CUDA 13.5 compiler and cuobjdump from PyPI (no NVIDIA
# repository, no GPU needed) into one folder, for the live CUDA tests
# (crates/offload-cli/tests/interop/cuda_live.rs). Idempotent: a second run with the
# tools present does nothing. Versions are pinned so that the corpus the tests
# build is the same on every machine (docs/formats/cuda-fatbin.md §0).
#
#   CUDA_WHEELS=/opt/cuda-wheels   where to install (default)
#
# Afterwards: nvcc is $CUDA_WHEELS/nvidia/cu13/bin/nvcc, cuobjdump next to it;
# the tests find them through OFFLOAD_CUDA_BIN or that default path.
#
# It also assembles $CUDA_WHEELS/clang-cuda-root, a CUDA-like folder that
# clang 19 accepts as --cuda-path (tests/interop/cuda_clang.rs), from CUDA 12.9's
# wheels (clang 19 does not know CUDA 13's layout; no cu12 wheel ships nvcc,
# so the root borrows fatbinary and nvlink from 13.5, see below).
set -euo pipefail
root="${CUDA_WHEELS:-/opt/cuda-wheels}"
bin="$root/nvidia/cu13/bin"
if [[ -x "$bin/nvcc" && -x "$bin/cuobjdump" && -x "$root/nvidia/cu13/nvvm/bin/cicc" ]]; then
    echo "CUDA tools already in $bin"
else
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
fi
"$bin/nvcc" --version | tail -n 1
"$bin/cuobjdump" --version | tail -n 1

# --- clang 19's CUDA root (about 47 MB of wheels) ---
cu12="$root/cu12/nvidia"
if [[ ! -x "$cu12/cuda_nvcc/bin/ptxas" ]]; then
    # A separate --target: pip would not merge into the existing nvidia/.
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$root/cu12" \
        nvidia-cuda-nvcc-cu12==12.9.86 \
        nvidia-cuda-runtime-cu12==12.9.79 \
        nvidia-cuda-cccl-cu12==12.9.27
fi
croot="$root/clang-cuda-root"
if [[ ! -x "$croot/bin/fatbinary" ]]; then
    staging="$croot.partial"
    rm -rf "$staging"
    mkdir -p "$staging/bin" "$staging/include" "$staging/nvvm" "$staging/lib64"
    # One include folder, as a CUDA toolkit has: runtime, CCCL and crt headers.
    for dir in "$cu12/cuda_runtime/include" "$cu12/cuda_cccl/include" "$cu12/cuda_nvcc/include"; do
        for entry in "$dir"/*; do
            [[ "$(basename "$entry")" == __* ]] || ln -sfn "$entry" "$staging/include/"
        done
    done
    # clang's CUDA wrapper header force-includes this cuRAND header for its
    # host-side blockDim/threadIdx declarations; the tests use no cuRAND, so
    # an empty header stands in for the 60 MB cuRAND wheel.
    echo '/* empty: stands in for cuRAND (scripts/install-cuda-tools.sh) */' > "$staging/include/curand_mtgp32_kernel.h"
    ln -sfn "$cu12/cuda_nvcc/nvvm/libdevice" "$staging/nvvm/libdevice"
    for lib in "$cu12/cuda_runtime/lib"/*; do ln -sfn "$lib" "$staging/lib64/"; done
    ln -sfn libcudart.so.12 "$staging/lib64/libcudart.so"
    ln -sfn "$cu12/cuda_nvcc/bin/ptxas" "$staging/bin/ptxas"
    # nvlink 12.9 is in no wheel; 13.5's links sm_75 and newer only.
    ln -sfn "$bin/nvlink" "$staging/bin/nvlink"
    # clang's version check reads this file (clang 19 knows up to CUDA 12.5,
    # hence -Wno-unknown-cuda-version in the tests).
    echo '{ "cuda" : { "name" : "CUDA SDK", "version" : "12.9.1" } }' > "$staging/version.json"
    # clang 19 still passes fatbinary --image=profile=sm_80,file=F (cubin)
    # and profile=compute_80 (PTX); CUDA 13's fatbinary only takes
    # --image3=kind=elf|ptx,sm=80,file=F. Rewrite those, pass the rest on.
    cat > "$staging/bin/fatbinary" <<SHIM
#!/usr/bin/env bash
args=()
for arg in "\$@"; do
    if [[ "\$arg" =~ ^--image=profile=(sm|compute)_([0-9]+[a-z]?),file=(.*)\$ ]]; then
        kind=elf; [[ "\${BASH_REMATCH[1]}" == compute ]] && kind=ptx
        arg="--image3=kind=\$kind,sm=\${BASH_REMATCH[2]},file=\${BASH_REMATCH[3]}"
    fi
    args+=("\$arg")
done
exec "$bin/fatbinary" "\${args[@]}"
SHIM
    chmod +x "$staging/bin/fatbinary"
    rm -rf "$croot" && mv "$staging" "$croot"
fi
echo "clang CUDA root in $croot"
