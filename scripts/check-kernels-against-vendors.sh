#!/usr/bin/env bash
# Compares every kernel and resource value `offload kernels` reads with the
# vendors' tools on the whole real corpus (scripts/fetch-real-corpus.sh):
# `llvm-readelf --notes` of LLVM 19 and 22 on every AMDGPU code object, and
# `cuobjdump -res-usage` on every cubin (docs/formats/kernels.md, "Checks").
# The code objects are written out with `offload extract --all`; the
# comparisons are offload-format's unit tests
# `equal_to_llvm_readelf_notes` and `equal_to_cuobjdump_res_usage`, given
# the extracted files. Run by .ci/run; exit status 1 when a value differs.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${OFFLOAD_CORPUS_DIR:-$HOME/.cache/offload-binutils/corpus}
offload=${OFFLOAD:-target/debug/offload}
[ -x "$offload" ] || cargo build -p offload-cli --bin offload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
find "$corpus/files" "$corpus/packages" -type f | while read -r f; do
    "$offload" extract --all --output-dir "$(mktemp -d -p "$work")" "$f" >/dev/null 2>&1 || true
done
# ELF e_machine 224 (AMDGPU) and 190 (NVIDIA CUDA).
lists=$(python3 - "$work" <<'PY'
import os, sys
amd, nv = [], []
for root, _, names in os.walk(sys.argv[1]):
    for n in names:
        p = os.path.join(root, n)
        with open(p, 'rb') as f:
            h = f.read(20)
        if h[:4] == b'\x7fELF':
            m = int.from_bytes(h[18:20], 'little')
            (amd if m == 224 else nv if m == 190 else []).append(p)
print(':'.join(amd))
print(':'.join(nv))
PY
)
amd=$(echo "$lists" | sed -n 1p)
nv=$(echo "$lists" | sed -n 2p)
echo "check-kernels-against-vendors: $(echo "$amd" | tr ':' '\n' | grep -c .) AMDGPU code objects, $(echo "$nv" | tr ':' '\n' | grep -c .) cubins"
OFFLOAD_KERNELS_ORACLE_FILES=$amd OFFLOAD_CUBIN_ORACLE_FILES=$nv \
    cargo test -q -p offload-format --lib -- equal_to_llvm_readelf_notes equal_to_cuobjdump_res_usage --nocapture 2>&1 \
    | grep -E "values equal|test result|panicked|FAILED"
