#!/usr/bin/env bash
# offload prune and split on real ROCm packages made by others, with the
# checks of docs/guide/prune-trees.md ("Measured on real packages"):
#
#   1. wheels from PyPI (jax-rocm7-plugin, jax-rocm7-pjrt): prune each with
#      --keep-gpu, check the zip, install both outputs with pip into a fresh
#      venv and run pip check (the same answer as for the original wheels:
#      only the dependencies not installed), and compare the bytes each
#      kept GPU selects before and after (offload extract --gpu);
#   2. offload split --by target of the same wheel, each output installed;
#   3. a container root: Debian's ROCm library packages (librocrand1,
#      librocsparse0, libhiprand1, libhipsparse0, libamdhip64-5, ...)
#      unpacked with dpkg -x, the ROCm libraries moved to opt/rocm/lib, a
#      small base (libc6, libstdc++6, ...), ld.so.cache made with
#      ldconfig -r; tar --zstd; offload prune --keep gfx90a; unpacked again:
#      offload check --gpu says the same for each kept GPU before and after,
#      and every file the report does not list is byte-identical;
#   4. a virtual environment: NVIDIA's nvidia-curand-cu12 manylinux wheel and
#      JAX's ROCm 7 plug-in (from the real corpus of
#      scripts/fetch-real-corpus.sh) installed with pip into a fresh venv,
#      then offload prune --keep sm_90 --in-place venv/: what sm_90 selects
#      is byte-identical (offload extract --gpu), pip check and offload
#      check --gpu sm_90 say the same before and after, every file the
#      report does not list is byte-identical, and every installed RECORD
#      matches its files (the pruned library's line rewritten).
#
# Downloads are cached in ~/.cache/offload-binutils/real-env (about 260 MB:
# 140 MB of wheels, 125 MB of .debs); the run needs about 4 GB in $TMPDIR.
# Not run by CI (downloads); run it by hand after changing prune or split.
#
# Usage: scripts/real-env-prune.sh [offload binary]   (default: target/release/offload)
# Env: KEEP_GPUS (wheels, default gfx1100), ROOT_KEEP (rootfs, default gfx90a),
#      CHECK_GPUS (default ROOT_KEEP with xnack- and xnack+), SPLIT_GPUS (split
#      --gpu: only the wheels serving these; default every target),
#      VENV_KEEP (venv, default sm_90), SKIP_WHEELS=1 / SKIP_ROOT=1 / SKIP_VENV=1
#      leave out parts 1-2 / 3 / 4, KEEP_TMP=1 leaves the work folder.
set -euo pipefail
O=$(realpath "${1:-target/release/offload}")
[ -x "$O" ] || { echo "build it first: cargo build --release -p offload-cli ($O missing)" >&2; exit 2; }
for t in pip python3 apt-get dpkg-deb ldconfig tar zstd sha256sum; do
    command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 2; }
done
CACHE=${OFFLOAD_REAL_ENV_CACHE:-$HOME/.cache/offload-binutils/real-env}
KEEP_GPUS=${KEEP_GPUS:-gfx1100}
ROOT_KEEP=${ROOT_KEEP:-gfx90a}
T=$(mktemp -d)
if [ -z "${KEEP_TMP:-}" ]; then trap 'rm -rf "$T"' EXIT; else echo "work folder: $T"; fi
fail=0
problem() { echo "PROBLEM: $*"; fail=1; }
size() { stat -c %s "$1"; }
dsize() { du -sb --apparent-size "$1" | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }

# The SHA-256 of each code object GPU $2 selects from $1, in the order
# extract names them (member, then position; positions differ after a prune).
selected() {
    local d="$T/sel.$RANDOM"
    mkdir "$d"
    "$O" extract --gpu "$2" --output-dir "$d" "$1" >/dev/null 2>&1 || true
    (cd "$d" && ls -v | while read -r f; do
        printf '%s %s\n' "$(echo "$f" | sed -E 's/-[0-9]+-(hipv4|hip|cuda|openmp)/-\1/')" "$(sha256sum <"$f" | cut -c1-64)"
    done)
    rm -rf "$d"
}

# Every file of folder $2 that the prune report $1 does not name is
# byte-identical in folder $3; removed ones are gone, rewritten ones there.
untouched_identical() {
    python3 - "$@" <<'EOF'
import json, os, sys, filecmp
report, before, after = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
named = {f["path"].lstrip("./"): f["action"] for f in report["files"]}
# Installed RECORDs that got the new hashes (a note each, --in-place only)
named.update({n.split(": the new hashes")[0]: "rewritten" for n in report.get("notes", []) if ": the new hashes" in n})
same = bad = 0
for top, dirs, files in os.walk(before):
    for n in files:
        p = os.path.relpath(os.path.join(top, n), before)
        a, b = os.path.join(before, p), os.path.join(after, p)
        action = named.get(p)
        if action == "removed":
            bad += os.path.lexists(b)
        elif action == "rewritten":
            bad += not os.path.lexists(b)
        elif os.path.islink(a):
            bad += not os.path.islink(b) or os.readlink(a) != os.readlink(b)
        elif not (os.path.isfile(b) and filecmp.cmp(a, b, shallow=False)):
            print(f"PROBLEM: {p} changed but the report does not say so")
            bad += 1
        else:
            same += 1
print(f"   {same} files the report does not name: byte-identical" + ("" if not bad else f"; {bad} PROBLEMS"))
sys.exit(1 if bad else 0)
EOF
}

echo "# $($O --version | head -1), $(nproc) cores, $(date -u +%FT%TZ)"

mkdir -p "$CACHE/wheels" "$CACHE/debs"
if [ -z "${SKIP_WHEELS:-}" ]; then
## 1. Wheels
if ! ls "$CACHE"/wheels/jax_rocm7_pjrt-*.whl >/dev/null 2>&1; then
    (cd "$CACHE/wheels" && pip download -q --no-deps --only-binary=:all: \
        --platform manylinux_2_28_x86_64 --python-version 3.11 jax-rocm7-plugin jax-rocm7-pjrt)
fi
mapfile -t WHEELS < <(ls "$CACHE"/wheels/jax_rocm7_p*.whl)
mkdir -p "$T/pruned"
for w in "${WHEELS[@]}"; do
    b=$(basename "$w")
    start=$(date +%s.%N)
    "$O" prune --keep-gpu "$KEEP_GPUS" --json "$w" -o "$T/pruned/$b" >"$T/$b.json"
    secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    echo "## $b: $(mib "$(size "$w")") -> $(mib "$(size "$T/pruned/$b")") ($(pct "$(size "$T/pruned/$b")" "$(size "$w")")), --keep-gpu $KEEP_GPUS, ${secs} s"
    python3 - "$T/$b.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["files"]:
    print(f"   {f['path']}: {f['action']} {f['mode'] or '-'} {f['old_size']} -> {f['new_size']} bytes ({f['reason'][:100]})")
EOF
    python3 -m zipfile -t "$T/pruned/$b" >/dev/null || problem "$b: the pruned zip does not test clean"
    for g in ${KEEP_GPUS//,/ }; do
        before=$(selected "$w" "$g")
        if [ "$before" = "$(selected "$T/pruned/$b" "$g")" ]; then
            echo "   $g selects the same code objects, byte for byte ($(echo "$before" | grep -c .) of them)"
        else
            problem "$b: $g selects other bytes after the prune"
        fi
    done
done

# pip install of the originals and of the outputs, each into a fresh venv
pipcheck() {
    python3 -m venv "$T/venv.$1"
    "$T/venv.$1/bin/pip" install -q --no-deps --no-index "${@:2}" || { problem "pip install ($1) failed"; return; }
    "$T/venv.$1/bin/pip" check >"$T/pipcheck.$1" 2>&1 || true
    rm -rf "$T/venv.$1"
}
pipcheck original "${WHEELS[@]}"
pipcheck pruned "$T"/pruned/*.whl
echo "## pip install --no-deps of the pruned wheels into a fresh venv: ok; pip check says:"
sed 's/^/   /' "$T/pipcheck.pruned"
if cmp -s "$T/pipcheck.original" "$T/pipcheck.pruned"; then
    echo "   (the same as for the original wheels)"
else
    problem "pip check differs from the original wheels': $(cat "$T/pipcheck.original")"
fi

## 2. Split
PJRT=$(ls "$CACHE"/wheels/jax_rocm7_pjrt-*.whl)
"$O" split --by target ${SPLIT_GPUS:+--gpu "$SPLIT_GPUS"} "$PJRT" -o "$T/split" >"$T/split.txt"
echo "## offload split --by target ${SPLIT_GPUS:+--gpu $SPLIT_GPUS }$(basename "$PJRT") ($(mib "$(size "$PJRT")")):"
for s in "$T"/split/*.whl; do
    echo "   $(basename "$s"): $(mib "$(size "$s")")"
    python3 -m zipfile -t "$s" >/dev/null || problem "$(basename "$s"): does not test clean"
done
one=$(ls "$T"/split/*.whl | head -1)
python3 -m venv "$T/venv.split"
"$T/venv.split/bin/pip" install -q --no-deps --no-index "$one" && echo "   pip install --no-deps $(basename "$one"): ok" \
    || problem "pip install of $(basename "$one") failed"
rm -rf "$T/venv.split" "$T/split" "$T/pruned"
fi

## 3. A container root from Debian's ROCm packages
if [ -z "${SKIP_ROOT:-}" ]; then
ROCM_DEBS="librocrand1 libhiprand1 libhipsparse0 librocsparse0 libamdhip64-5 libhsa-runtime64-1 libamd-comgr2"
BASE_DEBS="libc6 libgcc-s1 libstdc++6 libnuma1 libelf1 libdrm2 libdrm-amdgpu1 zlib1g libzstd1 libtinfo6"
for p in $ROCM_DEBS $BASE_DEBS; do
    ls "$CACHE"/debs/"${p}"_*.deb >/dev/null 2>&1 || (cd "$CACHE/debs" && apt-get download -q "$p" 2>/dev/null)
done
R="$T/root"
mkdir -p "$R/opt/rocm/lib" "$R/etc/ld.so.conf.d"
for p in $BASE_DEBS; do dpkg-deb -x "$CACHE"/debs/"${p}"_*.deb "$R"; done
for p in $ROCM_DEBS; do
    rm -rf "$T/x" && dpkg-deb -x "$CACHE"/debs/"${p}"_*.deb "$T/x"
    cp -a "$T"/x/usr/lib/x86_64-linux-gnu/. "$R/opt/rocm/lib/"
done
rm -rf "$T/x"
echo /opt/rocm/lib >"$R/etc/ld.so.conf.d/rocm.conf"
echo "include /etc/ld.so.conf.d/*.conf" >"$R/etc/ld.so.conf"
ldconfig -r "$R" 2>/dev/null || true
tar --zstd -C "$R" -cf "$T/rootfs.tar.zst" .
start=$(date +%s.%N)
"$O" prune --keep "$ROOT_KEEP" --json "$T/rootfs.tar.zst" -o "$T/small.tar.zst" >"$T/root.json"
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
mkdir "$T/after"
tar --zstd -C "$T/after" -xf "$T/small.tar.zst"
echo "## rootfs.tar.zst ($(echo $ROCM_DEBS | wc -w) ROCm .debs + $(echo $BASE_DEBS | wc -w) base): $(mib "$(size "$T/rootfs.tar.zst")") -> $(mib "$(size "$T/small.tar.zst")") ($(pct "$(size "$T/small.tar.zst")" "$(size "$T/rootfs.tar.zst")")), --keep $ROOT_KEEP, ${secs} s"
echo "   unpacked: $(mib "$(dsize "$R")") -> $(mib "$(dsize "$T/after")")"
python3 - "$T/root.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["files"]:
    print(f"   {f['path']}: {f['action']} {f['mode'] or '-'} {f['old_size']} -> {f['new_size']} bytes")
EOF
# Files the report does not name are byte-identical; removed ones are gone.
untouched_identical "$T/root.json" "$R" "$T/after" || fail=1
CHECK_GPUS=${CHECK_GPUS:-$ROOT_KEEP:xnack-,$ROOT_KEEP:xnack+}
for g in ${CHECK_GPUS//,/ }; do
    b=$("$O" check --gpu "$g" --root "$R" "$R/opt/rocm/lib" 2>&1 | sed "s#$R#ROOT#g") || true
    a=$("$O" check --gpu "$g" --root "$T/after" "$T/after/opt/rocm/lib" 2>&1 | sed "s#$T/after#ROOT#g") || true
    if [ "$a" = "$b" ]; then
        echo "   offload check --gpu $g: the same before and after: $(echo "$a" | grep -m1 'fat binaries' || echo "$a" | head -1)"
    else
        problem "check --gpu $g differs: before: $b; after: $a"
    fi
done
rm -rf "$R" "$T/after" "$T/rootfs.tar.zst" "$T/small.tar.zst"
fi

## 4. A virtual environment, pruned in place
if [ -z "${SKIP_VENV:-}" ]; then
CORPUS=${OFFLOAD_CORPUS_DIR:-$HOME/.cache/offload-binutils/corpus}
VENV_KEEP=${VENV_KEEP:-sm_90}
VENV_WHEELS=("$CORPUS"/packages/curand-linux/*.whl "$CORPUS"/packages/rocm7-jax-plugin/*.whl)
for w in "${VENV_WHEELS[@]}"; do
    [ -f "$w" ] || { problem "$w missing: run scripts/fetch-real-corpus.sh"; exit 1; }
done
V="$T/venv"
python3 -m venv "$V"
"$V/bin/pip" install -q --no-deps --no-index "${VENV_WHEELS[@]}" || { problem "pip install into the venv failed"; exit 1; }
cp -a "$V" "$T/venv.before"
sel_before=$(selected "$V" "$VENV_KEEP")
check_before=$("$O" check --gpu "$VENV_KEEP" "$V" 2>&1 | sed "s#$V#VENV#g") || true
"$V/bin/pip" check >"$T/pipcheck.before" 2>&1 || true
start=$(date +%s.%N)
"$O" prune --keep "$VENV_KEEP" --in-place --json "$V" >"$T/venv.json"
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "## venv ($(for w in "${VENV_WHEELS[@]}"; do basename "$w"; done | tr '\n' ' ')): $(mib "$(dsize "$T/venv.before")") -> $(mib "$(dsize "$V")") ($(pct "$(dsize "$V")" "$(dsize "$T/venv.before")")), --keep $VENV_KEEP --in-place, ${secs} s"
python3 - "$T/venv.json" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["files"]:
    print(f"   {f['path']}: {f['action']} {f['mode'] or '-'} {f['old_size']} -> {f['new_size']} bytes ({f['reason'][:100]})")
EOF2
untouched_identical "$T/venv.json" "$T/venv.before" "$V" || fail=1
# Every installed RECORD still matches its files (hashes by Python's hashlib).
read -r rec_lines rec_bad rec_names < <(python3 "$(dirname "$0")/check_installed_records.py" "$V")
echo "   installed RECORDs: $rec_lines lines, $rec_bad not matching their files $rec_names"
[ "$rec_bad" = 0 ] || problem "venv: an installed RECORD does not match its files"
if [ "$sel_before" = "$(selected "$V" "$VENV_KEEP")" ]; then
    echo "   $VENV_KEEP selects the same code objects, byte for byte ($(echo "$sel_before" | grep -c .) of them)"
else
    problem "venv: $VENV_KEEP selects other bytes after the prune"
fi
check_after=$("$O" check --gpu "$VENV_KEEP" "$V" 2>&1 | sed "s#$V#VENV#g") || true
if [ "$check_before" = "$check_after" ]; then
    echo "   offload check --gpu $VENV_KEEP: the same before and after: $(echo "$check_after" | tail -1)"
else
    problem "venv: check --gpu $VENV_KEEP differs: before: $check_before; after: $check_after"
fi
"$V/bin/pip" check >"$T/pipcheck.after" 2>&1 || true
if cmp -s "$T/pipcheck.before" "$T/pipcheck.after"; then
    echo "   pip check: the same before and after: $(tr '\n' ' ' <"$T/pipcheck.after")"
else
    problem "venv: pip check differs: $(cat "$T/pipcheck.after")"
fi
rm -rf "$V" "$T/venv.before"
fi
exit $fail
