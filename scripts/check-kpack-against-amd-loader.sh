#!/usr/bin/env bash
# AMD's kpack runtime loader as an oracle for `offload split --kpack`: each
# fat library is split by us, AMD's loader (built here from a checkout of
# AMD's public sources, which stay outside this repository) is asked what it
# loads for every record of the split library and every GPU of a list (the
# library's own targets and common GPUs, generic, sramecc and xnack variants
# included), and the bytes must equal what `offload extract --gpu` gives for
# the fat original (or both must serve nothing). One line per library and
# GPU that differs, a summary per library; exit 1 if anything differs.
#
#   AMD_KPACK_RUNTIME=/path/to/rocm-systems/shared/kpack/runtime \
#       scripts/check-kpack-against-amd-loader.sh [FAT_LIBRARY...]
#
# Default inputs: the fat fixtures (crates/offload-format/tests/fixtures/kpack/fat)
# and Debian's rocRAND from the real corpus when it is there. The loader is
# compiled from $AMD_KPACK_RUNTIME/src/*.cpp with $AMD_KPACK_RUNTIME/include,
# with scripts/kpack-loader-driver.cpp (ours: it calls the loader the way the
# HIP runtime does); it needs a C++17 compiler, msgpack-cxx and libzstd
# headers (Debian: libmsgpack-cxx-dev libzstd-dev).
# OFFLOAD=path/to/offload skips the build of ours. With SPLITTER=amd the
# libraries are split by AMD's splitter instead (scripts/amd-kpack-split.py,
# needing AMD_KPACK_SRC and AMD_KPACK_PYTHON as scripts/bench-kpack.sh does):
# AMD's loader on AMD's own split output, against the same fat originals.
# Generic targets are not asked as GPUs (no device reports one); the
# processors that fall back to them are in the list.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${AMD_KPACK_RUNTIME:-}" ]; then
    echo "not run: set AMD_KPACK_RUNTIME to AMD's shared/kpack/runtime folder (ROCm/rocm-systems)" >&2
    exit 2
fi
rt=$AMD_KPACK_RUNTIME
[ -d "$rt/src" ] && [ -d "$rt/include" ] || { echo "$rt has no src/ and include/" >&2; exit 2; }
if [ $# -eq 0 ]; then
    set -- crates/offload-format/tests/fixtures/kpack/fat/*.so
    rocrand=$HOME/.cache/offload-binutils/corpus/files/debian-rocrand/librocrand.so.1.1
    [ -f "$rocrand" ] && set -- "$@" "$rocrand"
fi
bin=${OFFLOAD:-target/release/offload}
if [ -z "${OFFLOAD:-}" ]; then
    cargo build --release -q -p offload-cli --bin offload
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
${CXX:-c++} -std=c++17 -O1 -DMSGPACK_NO_BOOST -I"$rt/include" -I"$rt/src" \
    "$rt"/src/*.cpp scripts/kpack-loader-driver.cpp -lzstd -o "$work/loader"

gpus="gfx803 gfx900 gfx906 gfx906:xnack- gfx908 gfx90a gfx90a:xnack+ gfx90a:xnack- gfx90a:sramecc+:xnack-
gfx942 gfx942:sramecc+:xnack- gfx942:sramecc+:xnack+ gfx950 gfx1010 gfx1030 gfx1031 gfx1100 gfx1101
gfx1102 gfx1151 gfx1200 gfx1201"
status=0
n=0
for lib in "$@"; do
    name=$(basename "$lib")
    n=$((n + 1))
    out=$work/split/$n
    if [ "${SPLITTER:-ours}" = amd ]; then
        AMD_KPACK_SRC="$AMD_KPACK_SRC" "${AMD_KPACK_PYTHON:-python3}" scripts/amd-kpack-split.py "$lib" "$out" >/dev/null
        split_lib=$out/stage/lib/$name
    else
        "$bin" split --kpack "$lib" -o "$out" >/dev/null
        split_lib=$out/$name
    fi
    targets=$("$bin" list --json "$lib" | python3 -c '
import json, sys
print(" ".join(sorted({r["target_id"] for r in json.load(sys.stdin)
                      if r["target_id"] and "generic" not in r["target_id"]})))')
    same=0 none=0 diff=0
    for g in $targets $gpus; do
        d=$work/x
        rm -rf "$d" && mkdir -p "$d/fat" "$d/amd"
        "$bin" extract --gpu "$g" --output-dir "$d/fat" "$lib" >/dev/null 2>&1 || true
        answer=$("$work/loader" "$split_lib" "$g" "$d/amd")
        want=$(cd "$d/fat" && find . -type f -exec md5sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
        got=$(cd "$d/amd" && find . -type f -exec md5sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
        if [ "$want" != "$got" ]; then
            diff=$((diff + 1))
            echo "  $name $g: different: offload extract on the fat file [${want:-nothing}], AMD's loader on the split [${got:-nothing}] ($(echo "$answer" | tr '\n' ';'))"
        elif [ -z "$want" ]; then
            none=$((none + 1))
        else
            same=$((same + 1))
        fi
    done
    printf '%-22s %2d GPUs loaded the same bytes, %2d served by neither, %d different\n' \
        "$name" "$same" "$none" "$diff"
    [ "$diff" -eq 0 ] || status=1
done
exit "$status"
