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
# A wheel (.whl) is split by ours into a host wheel and device wheels, and
# by AMD's wheel splitter (overlay root: the wheel's name up to its first
# '-'); the check then reads the host wheel `--with` its device wheels.
#
#   scripts/bench-kpack.sh [LIBRARY|WHEEL...]    # default: Debian's librocrand
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

# The sorted md5s of what `offload extract --gpu GPU FILE [ARGS]` writes, and its exit status.
served() {
    local d rc=0 g=$1
    shift
    d=$(mktemp -d -p "$work")
    "$bin" extract --gpu "$g" --output-dir "$d" "$@" >/dev/null 2>&1 || rc=$?
    (cd "$d" && find . -type f -exec md5sum {} + | awk '{print $1}' | sort | tr '\n' ' ')
    echo "exit $rc"
    rm -rf "$d"
}

# Compares what each GPU is served from the fat input and from its split form
# (a library in a split tree, or a host wheel with its device wheels).
check_split() { # LABEL FAT SPLIT TARGETS...
    local label=$1 fat=$2 split=$3 g same=0 diff=0 none=0 a b w
    local -a with=()
    shift 3
    if [[ $split == *.whl ]]; then
        for w in "$(dirname "$split")"/*.whl; do
            [ "$w" = "$split" ] || with+=(--with "$w")
        done
    fi
    for g in "$@"; do
        a=$(served "$g" "$fat")
        b=$(served "$g" "$split" "${with[@]}")
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
    if [ ! -e "$work/ours/$name" ]; then
        echo
        echo "$name: offload split --kpack failed: $("$bin" split --kpack "$lib" -o "$work/ours" 2>&1 | tail -1)"
        status=1
        continue
    fi
    if [[ $name == *.whl ]]; then
        our_split=$work/ours/$name            # the host wheel keeps the input's name
        our_out="$(ls "$work/ours" | wc -l) wheels, $(cat "$work"/ours/*.whl | wc -c) bytes"
    else
        our_split=$work/ours/$name
        our_out="$(ls "$work/ours/.kpack" | wc -l) archives, $(cat "$work"/ours/.kpack/*.kpack | wc -c) bytes"
    fi

    echo
    printf '%s: %d bytes, %d bytes of device code in %d code objects\n' \
        "$name" "$(wc -c <"$lib")" "$device" "${#objects[@]}"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d bytes\n' "zstd stream" "$zw" "$zwm" "$zc" "$zcm" \
        "$(wc -c <"$work/device.zst")"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %d bytes\n' "zstd frames" "$fw" "$fwm" "$fc" "$fcm" \
        "$(cat "$work"/frames/* | wc -c)"
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %s\n' "offload split" "$ow" "$owm" "$oc" "$ocm" "$our_out"
    printf '  split / zstd stream  %sx wall, %sx cpu (min); %sx, %sx (median)  goal <= 1.5x\n' \
        "$(ratio "$ow" "$zw")" "$(ratio "$oc" "$zc")" "$(ratio "$owm" "$zwm")" "$(ratio "$ocm" "$zcm")"
    printf '  split / zstd frames  %sx wall, %sx cpu (min); %sx, %sx (median)\n' \
        "$(ratio "$ow" "$fw")" "$(ratio "$oc" "$fc")" "$(ratio "$owm" "$fwm")" "$(ratio "$ocm" "$fcm")"

    targets=$("$bin" list --json "$lib" | python3 -c '
import json, sys
print(" ".join(sorted({r["target_id"] for r in json.load(sys.stdin) if r["target_id"]})))')
    check_split "ours" "$lib" "$our_split" $targets $gpus

    if [ -z "${AMD_KPACK_SRC:-}" ]; then
        echo "  AMD splitter     not run (set AMD_KPACK_SRC to a checkout of ROCm/rocm-systems shared/kpack/python)"
        continue
    fi
    amd_args=("$lib" "$work/amd")
    if [[ $name == *.whl ]]; then
        # AMD's wheel splitter: the overlay root is the wheel's top-level package
        amd_args=(--wheel "${name%%-*}" "${amd_args[@]}")
    fi
    amd_times=$(AMD_KPACK_SRC="$AMD_KPACK_SRC" "$py" "$root/scripts/amd-kpack-split.py" --runs "$runs" \
        "${amd_args[@]}") || { echo "  AMD splitter failed on $name" >&2; status=1; continue; }
    read -r aw awm <<<"$(awk '{print $1}' <<<"$amd_times" | stats)"
    read -r ac acm <<<"$(awk '{print $2}' <<<"$amd_times" | stats)"
    if [[ $name == *.whl ]]; then
        amd_split=$(ls "$work"/amd/"${name%%-*}"-*.whl)
        amd_out="$(ls "$work/amd" | wc -l) wheels, $(cat "$work"/amd/*.whl | wc -c) bytes"
    else
        amd_split=$work/amd/stage/lib/$name
        amd_out="$(ls "$work/amd/stage/.kpack" | wc -l) archives, $(cat "$work"/amd/stage/.kpack/*.kpack | wc -c) bytes"
    fi
    printf '  %-15s wall %s / %s  cpu %s / %s  -> %s\n' "AMD splitter" "$aw" "$awm" "$ac" "$acm" "$amd_out"
    printf '  split / AMD          %sx wall, %sx cpu (min); %sx, %sx (median)  goal <= 0.1x\n' \
        "$(ratio "$ow" "$aw")" "$(ratio "$oc" "$ac")" "$(ratio "$owm" "$awm")" "$(ratio "$ocm" "$acm")"
    check_split "AMD's split" "$lib" "$amd_split" $targets $gpus
done
exit "$status"
