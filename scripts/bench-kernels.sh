#!/usr/bin/env bash
# Times `offload kernels` on the whole real corpus (scripts/fetch-real-corpus.sh)
# against what one would do without it: extract every code object (with
# `offload extract --all`, the fastest extractor at hand) and run
# `llvm-readelf-19 --notes` on each AMDGPU code object and
# `cuobjdump -res-usage` on each cubin. One run of each; prints both times,
# the kernel counts and the ratio (docs/development.md records it).
#
#   scripts/bench-kernels.sh            # target/release/offload, built if missing
#   OFFLOAD=target/debug/offload CORPUS=/path/to/corpus scripts/bench-kernels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${CORPUS:-${OFFLOAD_CORPUS_DIR:-$HOME/.cache/offload-binutils/corpus}}
offload=${OFFLOAD:-target/release/offload}
readelf=${READELF:-/usr/lib/llvm-19/bin/llvm-readelf}
cuobjdump=${CUOBJDUMP:-/opt/cuda-wheels/nvidia/cu13/bin/cuobjdump}
[ -x "$offload" ] || cargo build --release -p offload-cli --bin offload
for t in "$readelf" "$cuobjdump"; do
    [ -x "$t" ] || { echo "bench-kernels: $t is missing" >&2; exit 2; }
done
inputs=("$corpus/files" "$corpus/packages")
now() { date +%s.%N; }

t0=$(now)
"$offload" kernels --json "${inputs[@]}" >/tmp/bench-kernels.json 2>/dev/null || true
t1=$(now)
ours=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["kernels"]))' /tmp/bench-kernels.json)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t2=$(now)
for input in "${inputs[@]}"; do
    find "$input" -type f | while read -r f; do
        "$offload" extract --all --output-dir "$(mktemp -d -p "$work")" "$f" >/dev/null 2>&1 || true
    done
done
theirs=0
while read -r co; do
    case "$(head -c 20 "$co" | od -An -tx1 | tr -d ' \n')" in
        7f454c46*e000) # ELF, e_machine 224: AMDGPU
            c=$("$readelf" --notes "$co" 2>/dev/null | grep -c '\.name:' || true) ;;
        7f454c46*be00) # ELF, e_machine 190: CUDA
            c=$("$cuobjdump" -res-usage "$co" 2>/dev/null | grep -c '^ *Function' || true) ;;
        *) c=0 ;;
    esac
    theirs=$((theirs + c))
done < <(find "$work" -type f)
t3=$(now)
python3 - "$t0" "$t1" "$t2" "$t3" "$ours" "$theirs" <<'PY'
import sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
ours, theirs = sys.argv[5], sys.argv[6]
a, b = t1 - t0, t3 - t2
print(f"offload kernels:            {a:8.2f} s  {ours} kernel rows")
print(f"extract + readelf/cuobjdump: {b:8.2f} s  {theirs} kernels")
print(f"ratio: {a / b:.3f}x")
PY
