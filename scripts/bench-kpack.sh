#!/usr/bin/env bash
# One run of `offload split --kpack` on a HIP library (default: Debian's
# rocRAND from the corpus, scripts/fetch-real-corpus.sh) against zstd
# compressing the library's device code alone (every code object that
# `offload extract --all` writes, at zstd's level 3 on every core, the
# level and parallelism the split uses). The issue's goal: the split takes
# at most 1.5x zstd's time. AMD's splitter (`rocm-kpack` on PyPI) is a
# placeholder package without the tool (0.0.1.dev0), so it is not timed.
#
#   scripts/bench-kpack.sh [LIBRARY]      # OFFLOAD=path/to/offload to skip the build
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${1:-$HOME/.cache/offload-binutils/corpus/files/debian-rocrand/librocrand.so.1.1}
[ -f "$lib" ] || { echo "no $lib (scripts/fetch-real-corpus.sh fetches it)" >&2; exit 2; }
bin=${OFFLOAD:-target/release/offload}
if [ -z "${OFFLOAD:-}" ]; then
    cargo build --release -q -p offload-cli --bin offload
fi
command -v zstd >/dev/null || { echo "zstd is not installed" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat "$lib" >/dev/null # page cache, for both runs

mkdir -p "$work/objects"
"$bin" extract --all --output-dir "$work/objects" "$lib" >/dev/null
rm -f "$work"/objects/*-host-*  # the host entries are empty
device=$(cat "$work"/objects/* | wc -c)

# Wall time and CPU time (user + system) of each, from bash's `time`.
TIMEFORMAT='%R %U %S'
zstd_t=$( { time cat "$work"/objects/* | zstd -3 -T0 -q -c >"$work/device.zst"; } 2>&1 )
split_t=$( { time "$bin" split --kpack "$lib" -o "$work/split" >/dev/null 2>&1; } 2>&1 )
read -r zstd_s zu zs <<<"$zstd_t"
read -r split_s su ss <<<"$split_t"
zstd_cpu=$(echo "$zu + $zs" | bc -l)
split_cpu=$(echo "$su + $ss" | bc -l)

archives=$(cat "$work"/split/.kpack/*.kpack | wc -c)
host=$(wc -c <"$work/split/$(basename "$lib")")
printf 'library           %s (%d bytes, %d bytes of device code in %d code objects)\n' \
    "$(basename "$lib")" "$(wc -c <"$lib")" "$device" "$(ls "$work/objects" | wc -l)"
printf 'zstd -3 -T0       %.3f s (cpu %.3f s)  -> %d bytes\n' "$zstd_s" "$zstd_cpu" "$(wc -c <"$work/device.zst")"
printf 'offload split     %.3f s (cpu %.3f s)  -> host %d bytes + %d archives, %d bytes\n' \
    "$split_s" "$split_cpu" "$host" "$(ls "$work"/split/.kpack | wc -l)" "$archives"
printf 'ratio             %.2fx zstd wall, %.2fx cpu (goal: at most 1.5x)\n' \
    "$(echo "$split_s / $zstd_s" | bc -l)" "$(echo "$split_cpu / $zstd_cpu" | bc -l)"
