#!/usr/bin/env bash
# Package and folder pruning against the floors of the same work
# (docs/development.md, "Pruning packages and folders"), one run each, on
# the real corpus (scripts/fetch-real-corpus.sh):
#   wheel:  offload prune W -o out.whl   vs  unzip W + zip -r of the same files (goal <= 1.5x)
#   folder: offload prune --in-place D   vs  cp -r D                             (goal <= 2x)
#   tar:    offload prune T.tar.zst -o   (no goal; shown for scale)
# Peak RSS and CPU use (percent of one core: 200% is two cores busy) from
# /usr/bin/time -v. Usage: scripts/bench-prune-env.sh [offload binary]
set -euo pipefail
O=${1:-target/release/offload}
C=${OFFLOAD_CORPUS:-$HOME/.cache/offload-binutils/corpus}
[ -x "$O" ] || { echo "build it first: cargo build --release -p offload-cli ($O missing)" >&2; exit 2; }
for t in unzip zip /usr/bin/time dpkg-deb zstd; do command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }; done
W=$(ls "$C"/packages/curand-linux/*.whl)
R=$(ls "$C"/packages/rocm7-jax-plugin/*.whl)
DEB=$(ls "$C"/packages/debian-rocrand/*.deb)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

# seconds, peak RSS (KiB) and CPU percent of a command, as "S RSS CPU"
measure() {
    /usr/bin/time -v -o "$T/time" "$@" >"$T/out" 2>"$T/err" || { cat "$T/err" >&2; return 1; }
    local wall rss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$T/time" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$T/time")
    cpu=$(awk -F': ' '/Percent of CPU/ {print $2}' "$T/time")
    echo "$wall $rss $cpu"
}
size() { stat -c %s "$1"; }
dsize() { du -sb "$1" | cut -f1; }
row() { printf '%-44s %8s s %8s MiB RSS %5s CPU  %s\n' "$1" "$2" "$(( $3 / 1024 ))" "$4" "${5:-}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }

echo "# cores: $(nproc), load before: $(cut -d' ' -f1 /proc/loadavg), $($O --version 2>/dev/null | head -1)"
for wheel in "$W:sm_90" "$R:gfx942"; do
    w=${wheel%:*}; keep=${wheel##*:}
    echo "## $(basename "$w") ($(size "$w") bytes), --keep $keep"
    read -r zs zr zc < <(measure bash -c "unzip -q '$w' -d '$T/unz' && cd '$T/unz' && zip -qr '$T/re.whl' . ")
    row "floor: unzip + zip -r" "$zs" "$zr" "$zc"
    read -r ps pr pc < <(measure "$O" prune --keep "$keep" "$w" -o "$T/pruned.whl")
    row "offload prune -o pruned.whl" "$ps" "$pr" "$pc" "$(ratio "$ps" "$zs") of the floor (goal <= 1.5x)"
    echo "   sizes: $(size "$w") -> $(size "$T/pruned.whl") bytes"
    python3 -m zipfile -t "$T/pruned.whl" >/dev/null && echo "   the output tests clean (python3 -m zipfile -t)"
    rm -rf "$T/unz" "$T/re.whl" "$T/pruned.whl"
done

echo "## folder: $(basename "$DEB") unpacked + $(basename "$W") unpacked"
mkdir -p "$T/tree"
dpkg-deb -x "$DEB" "$T/tree/rocm"
unzip -q "$W" -d "$T/tree/venv"
read -r cs cr cc < <(measure cp -r "$T/tree" "$T/copy")
row "floor: cp -r" "$cs" "$cr" "$cc"
before=$(dsize "$T/copy")
read -r is ir ic < <(measure "$O" prune --keep gfx942 --keep sm_90 --in-place "$T/copy")
row "offload prune --in-place" "$is" "$ir" "$ic" "$(ratio "$is" "$cs") of the floor (goal <= 2x)"
echo "   sizes: $before -> $(dsize "$T/copy") bytes"

echo "## tarball: the folder as .tar.zst"
tar -C "$T/tree" -cf - . | zstd -q -3 -o "$T/tree.tar.zst"
read -r ts tr tc < <(measure "$O" prune --keep gfx942 --keep sm_90 "$T/tree.tar.zst" -o "$T/small.tar.zst")
row "offload prune tree.tar.zst -o small.tar.zst" "$ts" "$tr" "$tc"
echo "   sizes: $(size "$T/tree.tar.zst") -> $(size "$T/small.tar.zst") bytes"
