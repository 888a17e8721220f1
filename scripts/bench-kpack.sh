#!/usr/bin/env bash
# `offload split --kpack` of HIP libraries against three references, each
# run RUNS times (default 5) in one loop on the same inputs, page cache warm:
#
#   zstd stream  `zstd -3 -T0` over all the library's code objects as one
#                stream: today's floor, but not what the format allows (the
#                loader decompresses one code object at a time, so every
#                code object is its own frame, and one stream finds the
#                near-identical xnack+/xnack- builds of a target only once);
#   zstd frames  `zstd -3` of each code object as its own frame, one zstd
#                process for all of them: the compression the format needs;
#   AMD          AMD's splitter (`rocm_kpack.artifact_splitter`, the one
#                TheRock's build runs), when AMD_KPACK_SRC names a checkout
#                of AMD's public sources (ROCm/rocm-systems
#                shared/kpack/python); it needs a Python with `msgpack` and
#                `zstandard` (AMD_KPACK_PYTHON, default python3). Timed
#                in-process by scripts/amd-kpack-split.py, so Python's start
#                and imports are not counted (in AMD's favour).
#
# Level 3 everywhere, as AMD's splitters. Printed per row: wall and CPU
# (user + system) time, min and median over the runs, and the ratios of the
# split to each reference. Without AMD_KPACK_SRC the AMD row says it was not
# run. With it, AMD's split output is also checked: for every target of the
# library and a list of GPUs, `offload extract --gpu` on AMD's split tree
# must give the same bytes (or the same refusal) as on the fat original;
# the same check runs on our own split output. Exit 1 if any differs.
#
#   scripts/bench-kpack.sh [LIBRARY...]    # default: Debian's librocrand
#   RUNS=9 OFFLOAD=path/to/offload AMD_KPACK_SRC=... scripts/bench-kpack.sh LIB
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
runs=${RUNS:-5}
if [ $# -eq 0 ]; then
    set -- "$HOME/.cache/offload-binutils/corpus/files/debian-rocrand/librocrand.so.1.1"
fi
for lib in "$@"; do
    [ -f "$lib" ] || { echo "no $lib (scripts/fetch-real-corpus.sh fetches the corpus)" >&2; exit 2; }
done
bin=${OFFLOAD:-target/release/offload}
if [ -z "${OFFLOAD:-}" ]; then
    cargo build --release -q -p offload-cli --bin offload
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
command -v zstd >/dev/null || { echo "zstd is not installed" >&2; exit 2; }
py=${AMD_KPACK_PYTHON:-python3}
gpus="gfx803 gfx900 gfx906 gfx908 gfx90a gfx90a:xnack+ gfx90a:xnack- gfx942 gfx942:sramecc+:xnack- gfx1010 gfx1030 gfx1100 gfx1101 gfx1102 gfx1151 gfx1200 gfx1201"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

# "min median" of the numbers on standard input.
stats() { sort -g | awk '{v[NR]=$1} END {printf "%.4f %.4f", v[1], v[int((NR+1)/2)]}'; }

# Runs "$@" RUNS times (output discarded); prints "wall_min wall_med cpu_min cpu_med".
timeit() {
    local i t r u s walls="" cpus=""
    for ((i = 0; i < runs; i++)); do
        t=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null 2>&1; } 2>&1 )
        read -r r u s <<<"$t"
        walls+="$r"$'\n'
        cpus+="$(echo "$u + $s" | bc -l)"$'\n'
    done
    echo "$(printf '%s' "$walls" | stats) $(printf '%s' "$cpus" | stats)"
}

ratio() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }

# The sorted md5s of what `offload extract --gpu GPU` writes for FILE, and its exit status.
served() {
    local d rc=0
    d=$(mktemp -d -p "$work")
    "$bin" extract --gpu "$1" --output-dir "$d" "$2" >/dev/null 2>&1 || rc=$?
    (cd "$d" && find . -type f -exec md5sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
    echo "exit $rc"
    rm -rf "$d"
}

# Compares what each GPU is served from the fat LIBRARY and from a split tree's copy of it.
check_split() { # LABEL FAT SPLIT_LIBRARY TARGETS...
    local label=$1 fat=$2 split=$3 g same=0 diff=0 none=0 a b
    shift 3
    for g in "$@"; do
        a=$(served "$g" "$fat")
        b=$(served "$g" "$split")
        if [ "$a" != "$b" ]; then
            diff=$((diff + 1))
            echo "  $label: $g differs: fat [$a] split [$b]"
        elif [ "${a#exit }" != "$a" ]; then
            none=$((none + 1))   # nothing served from either (same refusal)
        else
            same=$((same + 1))
        fi
    done
    printf '%-17s %d GPUs served the same bytes, %d refused by both, %d different\n' \
        "$label" "$same" "$none" "$diff"
    [ "$diff" -eq 0 ] || status=1
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $runs runs of each; times in s, min / median"
for lib in "$@"; do
    name=$(basename "$lib")
    cat "$lib" >/dev/null # page cache
    rm -rf "$work/objects" "$work/frames"
    mkdir -p "$work/objects" "$work/frames"
    "$bin" extract --all --output-dir "$work/objects" "$lib" >/dev/null
    rm -f "$work"/objects/*-host-* # the host entries are empty
    objects=("$work"/objects/*)
    device=$(cat "${objects[@]}" | wc -c)

    zstd_stream() { cat "${objects[@]}" | zstd -3 -T0 -q -c >"$work/device.zst"; }
    zstd_frames() { zstd -3 -q -f --output-dir-flat "$work/frames" "${objects[@]}"; }
    ours() { rm -rf "$work/ours"; "$bin" split --kpack "$lib" -o "$work/ours"; }

    read -r zw zwm zc zcm <<<"$(timeit zstd_stream)"
    read -r fw fwm fc fcm <<<"$(timeit zstd_frames)"
    read -r ow owm oc ocm <<<"$(timeit ours)"
    archives=$(cat "$work"/ours/.kpack/*.kpack | wc -c)

    echo
    printf '%s: %d bytes, %d bytes of device code in %d code objects\n' \
        "$name" "$(wc -c <"$lib")" "$device" "${#objects[@]}"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d bytes\n' "zstd stream" "$zw" "$zwm" "$zc" "$zcm" \
        "$(wc -c <"$work/device.zst")"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d bytes\n' "zstd frames" "$fw" "$fwm" "$fc" "$fcm" \
        "$(cat "$work"/frames/* | wc -c)"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d archives, %d bytes\n' "offload split" "$ow" "$owm" "$oc" "$ocm" \
        "$(ls "$work/ours/.kpack" | wc -l)" "$archives"
    printf '  split / zstd stream  %sx wall, %sx cpu (min); %sx, %sx (median)  goal <= 1.5x\n' \
        "$(ratio "$ow" "$zw")" "$(ratio "$oc" "$zc")" "$(ratio "$owm" "$zwm")" "$(ratio "$ocm" "$zcm")"
    printf '  split / zstd frames  %sx wall, %sx cpu (min); %sx, %sx (median)\n' \
        "$(ratio "$ow" "$fw")" "$(ratio "$oc" "$fc")" "$(ratio "$owm" "$fwm")" "$(ratio "$ocm" "$fcm")"

    targets=$("$bin" list --json "$lib" | python3 -c '
import json, sys
print(" ".join(sorted({r["target_id"] for r in json.load(sys.stdin) if r["target_id"]})))')
    check_split "ours" "$lib" "$work/ours/$name" $targets $gpus

    if [ -z "${AMD_KPACK_SRC:-}" ]; then
        echo "  AMD splitter     not run (set AMD_KPACK_SRC to a checkout of ROCm/rocm-systems shared/kpack/python)"
        continue
    fi
    amd_times=$(AMD_KPACK_SRC="$AMD_KPACK_SRC" "$py" "$root/scripts/amd-kpack-split.py" --runs "$runs" \
        "$lib" "$work/amd") || { echo "  AMD splitter failed on $name" >&2; status=1; continue; }
    read -r aw awm <<<"$(awk '{print $1}' <<<"$amd_times" | stats)"
    read -r ac acm <<<"$(awk '{print $2}' <<<"$amd_times" | stats)"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d archives, %d bytes\n' "AMD splitter" "$aw" "$awm" "$ac" "$acm" \
        "$(ls "$work/amd/stage/.kpack" | wc -l)" "$(cat "$work"/amd/stage/.kpack/*.kpack | wc -c)"
    printf '  split / AMD          %sx wall, %sx cpu (min); %sx, %sx (median)  goal <= 0.1x\n' \
        "$(ratio "$ow" "$aw")" "$(ratio "$oc" "$ac")" "$(ratio "$owm" "$awm")" "$(ratio "$ocm" "$acm")"
    check_split "AMD's split" "$lib" "$work/amd/stage/lib/$name" $targets $gpus
done
exit "$status"
