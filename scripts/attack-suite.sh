#!/usr/bin/env bash
# The attack suite of issue 25 (docs/reliability.md): hostile inputs and a
# hostile environment thrown at the built binaries, each outcome counted as
# held (the promise of docs/reliability.md kept), broke (not kept) or not
# run (with the reason), and a summary table at the end.
#
#   scripts/attack-suite.sh [--quick]
#   ATTACK_SCENARIOS="signals shrinking-input" scripts/attack-suite.sh
#
# The binaries are taken from target/debug (OFFLOAD_BIN_DIR overrides; build
# them first: cargo build -p offload-cli). --quick leaves out the slow
# scenarios: the multi-GiB package and bundle bombs and the 5-fold repeats.
# Bombs are generated once and kept in ~/.cache/offload-binutils/attack.
#
# Scenarios: symbolic links planted (before and during the run) by an
# unprivileged user in a sticky folder; bombs of every container and codec;
# FIFOs, sockets and devices in folders and dependency lists; /dev/full as
# every command's standard output; inputs truncated while read; address
# space limits (ulimit -v); SIGINT and SIGTERM during every writer; output
# name collisions.
#
# Exit status: 0 when nothing broke, 1 when something broke, 2 when the
# suite itself could not run.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${OFFLOAD_BIN_DIR:-$root/target/debug}
OFFLOAD=$bin/offload
quick=0
[ "${1:-}" = --quick ] && quick=1
[ -x "$OFFLOAD" ] || { echo "attack-suite: $OFFLOAD missing (cargo build -p offload-cli)" >&2; exit 2; }
cache=${XDG_CACHE_HOME:-$HOME/.cache}/offload-binutils/attack
mkdir -p "$cache"
work=$(mktemp -d "${TMPDIR:-/tmp}/attack.XXXXXX")
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
sample=$root/samples/hip-gfx906-gfx90a.bc
start_all=$(date +%s)

corpus=$HOME/.cache/offload-binutils/corpus/files
# ATTACK_SCENARIOS="signals bombs" runs only those scenarios (names as in
# the summary); unset, every scenario runs.
want() { [ -z "${ATTACK_SCENARIOS:-}" ] || [[ " $ATTACK_SCENARIOS " == *" $1 "* ]]; }

declare -A HELD BROKE NOTRUN
ORDER=()
note() { # scenario outcome detail
    local s=$1 o=$2
    [[ " ${ORDER[*]} " == *" $s "* ]] || ORDER+=("$s")
    case $o in
    held) HELD[$s]=$((${HELD[$s]:-0} + 1)) ;;
    broke) BROKE[$s]=$((${BROKE[$s]:-0} + 1)); echo "BROKE  [$s] $3" ;;
    notrun) NOTRUN[$s]=$((${NOTRUN[$s]:-0} + 1)); echo "NOT RUN [$s] $3" ;;
    esac
}

# Runs a command with a time limit, stdout/stderr in $work/out and $work/err;
# sets RC. A hang is status 124 (timeout), a signal 128+N.
run() { # limit cmd...
    local limit=$1; shift
    timeout -s KILL "$limit" "$@" >"$work/out" 2>"$work/err" </dev/null
    RC=$?
    [ $RC -eq 137 ] && RC=124
    return 0
}

# The common promise: ends in time with 0, 1 or 2, no panic, no abort.
ordinary() { # scenario label
    if [ $RC -eq 124 ]; then note "$1" broke "$2: did not end in time"
    elif [ $RC -gt 2 ]; then note "$1" broke "$2: status $RC $(head -c 300 "$work/err")"
    elif grep -q "panicked\|memory allocation" "$work/err"; then note "$1" broke "$2: $(head -c 300 "$work/err")"
    else note "$1" held; fi
}

staging_in() { find "$1" -maxdepth 1 -name '.*.ofl*.tmp' 2>/dev/null | head -1; }

# A bundle of two code objects of $1 MiB each (sparse zeros after a magic).
big_bundle() { # path MiB
    python3 - "$1" "$2" <<'EOF'
import struct, sys
path, mib = sys.argv[1], int(sys.argv[2])
ids = [b"hipv4-amdgcn-amd-amdhsa--gfx906", b"hipv4-amdgcn-amd-amdhsa--gfx90a"]
size = mib << 20
head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
at = len(head) + sum(24 + len(i) for i in ids)
for i in ids:
    head += struct.pack("<QQQ", at, size, len(i)) + i
    at += size
with open(path, "wb") as f:
    f.write(head)
    for n, _ in enumerate(ids):
        f.write(b"\x7fELF\x02\x01\x01" + bytes([n]) * 57)
        f.seek(size - 64, 1)
    f.truncate()
EOF
}

echo "attack suite: $OFFLOAD$( [ $quick = 1 ] && echo ' (quick)')"

# --- 1. Symbolic links planted by another user in a sticky folder --------
s=symlinks
if want $s; then
if [ "$(id -u)" != 0 ]; then
    note $s notrun "needs root (to plant links as another user); run as root"
elif ! command -v setpriv >/dev/null; then
    note $s notrun "setpriv missing"
else
    sticky=$work/sticky; mkdir -m 1777 "$sticky"
    victim=$work/victim; echo precious >"$victim"
    as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
    # Names the writers will use: learnt from a run into a scratch folder.
    mkdir "$work/names"; "$OFFLOAD" extract --all --output-dir "$work/names" "$sample" >/dev/null 2>&1
    for n in $(ls "$work/names") pruned.bc replaced.bc; do as_nobody ln -s "$victim" "$sticky/$n"; done
    co=$(ls "$work/names" | grep -e '--gfx906' | head -1)
    for cmd in "extract --all --output-dir $sticky $sample" \
        "prune --keep gfx906 $sample -o $sticky/pruned.bc" \
        "replace --entry gfx906 --with $work/names/$co $sample -o $sticky/replaced.bc"; do
        # shellcheck disable=SC2086
        run 60 "$OFFLOAD" $cmd
        if [ "$(cat "$victim")" != precious ]; then note $s broke "planted link followed: $cmd"; echo precious >"$victim"
        elif [ $RC = 0 ]; then note $s broke "status 0 through a planted link: $cmd"
        elif ! grep -q "Permission denied" "$work/err"; then note $s broke "no 'Permission denied': $cmd: $(cat "$work/err")"
        else note $s held; fi
    done
    # The race: links planted again and again while root extracts.
    rm -f "$sticky"/*
    ( for _ in $(seq 2000); do for n in $(ls "$work/names"); do as_nobody ln -sf "$victim" "$sticky/$n" 2>/dev/null; done; done ) &
    racer=$!
    for _ in $(seq $([ $quick = 1 ] && echo 5 || echo 20)); do
        run 60 "$OFFLOAD" extract --all --output-dir "$sticky" "$sample"
        if [ "$(cat "$victim")" != precious ]; then note $s broke "raced link followed"; echo precious >"$victim"; else note $s held; fi
    done
    kill "$racer" 2>/dev/null; wait "$racer" 2>/dev/null
fi
fi

# --- 2. Bombs of every container and codec ---------------------------------
s=bombs
if want $s; then
gen() { # name command... (output on stdout, cached)
    local name=$1; shift
    [ -s "$cache/$name" ] || { "$@" >"$cache/$name.part" && mv "$cache/$name.part" "$cache/$name"; }
    [ -s "$cache/$name" ]
}
# A tar stream with one member of $1 GiB of zeros that holds no code.
zeros_tar() {
    python3 - "$1" <<'EOF'
import sys, tarfile, io
gib = int(sys.argv[1])
info = tarfile.TarInfo("data/zeros.bin"); info.size = gib << 30
sys.stdout.buffer.write(info.tobuf(format=tarfile.GNU_FORMAT))
chunk = bytes(1 << 20)
for _ in range(gib << 10):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.write(bytes(1024))
EOF
}
# A compressed bundle (CCOB version 3, codec $1) of $2 GiB of zeros,
# declared as such (hash 0: decoding is what costs).
ccob() {
    python3 - "$1" "$2" <<'EOF'
import sys, struct, zlib, subprocess
codec, gib = sys.argv[1], int(sys.argv[2])
size = gib << 30
if codec == "zlib":
    c = zlib.compressobj(1); parts = []
    chunk = bytes(1 << 24)
    for _ in range(size >> 24): parts.append(c.compress(chunk))
    parts.append(c.flush()); data = b"".join(parts)
else:
    p = subprocess.run(f"head -c {size} /dev/zero | zstd -1 -q --no-progress", shell=True, capture_output=True, check=True)
    data = p.stdout
method = 0 if codec == "zlib" else 1
sys.stdout.buffer.write(b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(data), size, 0) + data)
EOF
}
# An OffloadBinary version 3 whose zlib body inflates to $1 MiB of zeros.
ob3() {
    python3 - "$1" <<'EOF'
import sys, struct, zlib
size = int(sys.argv[1]) << 20
c = zlib.compressobj(1); chunk = bytes(1 << 20)
body = b"".join(c.compress(chunk) for _ in range(size >> 20)) + c.flush()
total = 40 + len(body)
sys.stdout.buffer.write(b"\x10\xff\x10\xad" + struct.pack("<IQQQQ", 3, total, 40, 1, size) + body)
EOF
}
bomb_gib=$([ $quick = 1 ] && echo 0 || echo 6)
if [ "$bomb_gib" = 0 ]; then
    note $s notrun "multi-GiB package bombs left out by --quick (cargo test covers them with small budgets)"
else
    for c in gz:gzip bz2:bzip2 xz:xz zst:zstd; do
        ext=${c%%:*}; tool=${c#*:}
        if gen "zeros-$bomb_gib.tar.$ext" bash -c "$(declare -f zeros_tar); zeros_tar $bomb_gib | $tool -1 -c"; then
            run 300 bash -c "ulimit -v 4194304; exec '$OFFLOAD' verify '$cache/zeros-$bomb_gib.tar.$ext'"
            ordinary $s "tar.$ext bomb"
        else note $s notrun "could not make the tar.$ext bomb"; fi
    done
    if gen "zeros-$bomb_gib.zip" python3 -c "
import zipfile, sys, io
z = zipfile.ZipFile(sys.stdout.buffer if False else open('/dev/stdout','wb'), 'w', zipfile.ZIP_DEFLATED, compresslevel=1)
with z.open('lib/zeros.so', 'w', force_zip64=True) as f:
    chunk = bytes(1 << 24)
    for _ in range(($bomb_gib << 30) >> 24): f.write(b'\x7fELF' + chunk[4:] if _ == 0 else chunk)
z.close()"; then
        run 300 bash -c "ulimit -v 4194304; exec '$OFFLOAD' verify '$cache/zeros-$bomb_gib.zip'"
        ordinary $s "zip bomb"
    else note $s notrun "could not make the zip bomb"; fi
    for codec in zlib zstd; do
        if gen "ccob-$codec-$bomb_gib" bash -c "$(declare -f ccob); ccob $codec $bomb_gib"; then
            for cmd in list verify "extract --all --output-dir $work/x"; do
                mkdir -p "$work/x"
                run 300 bash -c "ulimit -v 4194304; exec '$OFFLOAD' $cmd '$cache/ccob-$codec-$bomb_gib'"
                ordinary $s "CCOB $codec bomb: $cmd"
            done
        else note $s notrun "could not make the CCOB $codec bomb"; fi
    done
fi
# Small ones, always: the overlapping zip (2000 entries, one 256 MiB bundle),
# an OffloadBinary v3 of 512 MiB, a CUDA LZ4 entry declaring 510 MiB.
if gen overlap.zip python3 - <<'EOF'
import struct, subprocess, sys, zlib
size = 256 << 20
ids = [b"hipv4-amdgcn-amd-amdhsa--gfx906"]
head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 1)
at = len(head) + 24 + len(ids[0])
head += struct.pack("<QQQ", at, size, len(ids[0])) + ids[0]
raw = subprocess.run("zstd -3 -q", shell=True, input=head + b"\x7fELF" + bytes(size - 4), capture_output=True, check=True).stdout
ccob = b"CCOB" + struct.pack("<HHIIQ", 2, 1, 24 + len(raw), len(head) + size, 0) + raw
comp = zlib.compressobj(9, zlib.DEFLATED, -15); data = comp.compress(ccob) + comp.flush()
crc = zlib.crc32(ccob)
name = b"lib/k.bc"
local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 8, 0, 0, crc, len(data), len(ccob), len(name), 0) + name
out = local + data
cd = b""
n = 2000
for i in range(n):
    nm = b"lib/k%04d.bc" % i
    cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 8, 0, 0, crc, len(data), len(ccob), len(nm), 0, 0, 0, 0, 0, 0) + nm
end = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, n, n, len(cd), len(out), 0)
sys.stdout.buffer.write(out + cd + end)
EOF
then
    for cmd in verify "extract --gpu gfx906 --output-dir $work/ov"; do
        mkdir -p "$work/ov"
        run 300 bash -c "ulimit -v 4194304; exec '$OFFLOAD' $cmd '$cache/overlap.zip'"
        ordinary $s "overlapping zip: $cmd"
        [ -n "$(staging_in "$work/ov")" ] && note $s broke "overlapping zip: staging file left"
    done
else note $s notrun "could not make the overlapping zip"; fi
if gen ob3-512 bash -c "$(declare -f ob3); ob3 512"; then
    for cmd in list verify; do
        run 120 bash -c "ulimit -v 4194304; exec '$OFFLOAD' $cmd '$cache/ob3-512'"
        ordinary $s "OffloadBinary v3 zlib bomb: $cmd"
    done
else note $s notrun "could not make the OffloadBinary v3 bomb"; fi
python3 - "$work/lz4.fatbin" <<'EOF'
import struct, sys
stream = bytes(2 << 20)  # not valid LZ4: the declared size is the attack
declared = 510 << 20
padded = (len(stream) + 7) // 8 * 8
e = struct.pack("<HHIQII", 2, 0x0101, 64, padded, len(stream), 0) + bytes([8, 0, 1, 0]) + struct.pack("<I", 80) + bytes(8)
e += struct.pack("<QQQ", 0x11 | 0x2000, 0, declared) + stream
e += bytes(64 + padded - len(e))
open(sys.argv[1], "wb").write(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(e)) + e)
EOF
for cmd in list verify "extract --all --output-dir $work/lz"; do
    mkdir -p "$work/lz"
    run 120 bash -c "ulimit -v 393216; exec '$OFFLOAD' $cmd '$work/lz4.fatbin'"
    ordinary $s "CUDA LZ4 entry declaring 510 MiB under 384 MiB: $cmd"
done
# kpack (docs/formats/kpack.md): one zstd frame of $1 MiB of zeros whose
# TOC entry says original_size $2 (honest when equal, a lie when smaller).
kpack_bomb() {
    python3 - "$1" "$2" <<'EOF2'
import struct, subprocess, sys
mib, said = int(sys.argv[1]), int(sys.argv[2])
size = mib << 20
frame = subprocess.run(f"head -c {size} /dev/zero | zstd -1 -q --stream-size={size}", shell=True, capture_output=True, check=True).stdout
def mp(v):
    if isinstance(v, bool): return b"\xc3" if v else b"\xc2"
    if isinstance(v, int): return b"\xcf" + struct.pack(">Q", v)
    if isinstance(v, str):
        b = v.encode(); return bytes([0xd9, len(b)]) + b
    if isinstance(v, list): return bytes([0xdc]) + struct.pack(">H", len(v)) + b"".join(mp(x) for x in v)
    if isinstance(v, dict): return bytes([0xde]) + struct.pack(">H", len(v)) + b"".join(mp(k) + mp(x) for k, x in v.items())
blob = struct.pack("<II", 1, len(frame)) + frame
toc_at = 64 + len(blob)
toc = {"format_version": 1, "group_name": "bomb", "gfx_arch_family": "gfx90a", "gfx_arches": ["gfx90a"],
       "compression_scheme": "zstd-per-kernel", "zstd_offset": 64, "zstd_size": len(blob),
       "toc": {"libbomb.so#0": {"gfx90a": {"type": "hsaco", "ordinal": 0, "original_size": said << 20}}}}
sys.stdout.buffer.write(b"KPAK" + struct.pack("<IQ", 1, toc_at) + bytes(48) + blob + mp(toc))
EOF2
}
kp_mib=$([ $quick = 1 ] && echo 1024 || echo 4096)
for said in "$kp_mib" 1; do
    if gen "kpack-$kp_mib-$said.kpack" bash -c "$(declare -f kpack_bomb); kpack_bomb $kp_mib $said"; then
        for cmd in list verify "extract --all --output-dir $work/kp"; do
            rm -rf "$work/kp"; mkdir -p "$work/kp"
            run 300 bash -c "ulimit -v 4194304; exec '$OFFLOAD' $cmd '$cache/kpack-$kp_mib-$said.kpack'"
            ordinary $s "kpack zstd frame of $kp_mib MiB, original_size $said MiB: $cmd"
        done
    else note $s notrun "could not make the kpack bomb"; fi
done
fi

# --- 3. FIFOs, sockets and devices in folders and dependency lists ---------
s=special-files
if want $s; then
mkdir "$work/dir"; cp "$sample" "$work/dir/"; mkfifo "$work/dir/fifo.so"
python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$work/dir/sock.so"
ln -s /dev/zero "$work/dir/zero.so"
for cmd in list verify size "check --gpu gfx90a"; do
    run 30 "$OFFLOAD" $cmd "$work/dir"
    ordinary $s "$cmd of a folder holding a FIFO, a socket and /dev/zero"
done
if command -v clang-22 >/dev/null || command -v clang >/dev/null; then
    cc=$(command -v clang-22 || command -v clang)
    mkdir "$work/deps"
    echo 'int f(void){return 1;}' >"$work/deps/f.c"
    echo 'int f(void); int main(void){return f();}' >"$work/deps/m.c"
    if "$cc" -shared -fPIC -o "$work/deps/libf.so" "$work/deps/f.c" 2>/dev/null &&
        "$cc" -o "$work/deps/prog" "$work/deps/m.c" -L"$work/deps" -lf -Wl,-rpath,'$ORIGIN' 2>/dev/null; then
        rm "$work/deps/libf.so"; mkfifo "$work/deps/libf.so"
        run 30 "$OFFLOAD" check --gpu gfx90a "$work/deps/prog"
        ordinary $s "check of a program whose DT_NEEDED (\$ORIGIN) is a FIFO"
    else note $s notrun "could not link the dependency test program"; fi
else note $s notrun "no clang to link a program with a FIFO dependency"; fi
fi

# --- 4. /dev/full as standard output ----------------------------------------
s=dev-full
if want $s; then
for cmd in "list $sample" "list --json $sample" "verify $sample" "size $sample" "diff $sample $sample" \
    "select --gpu gfx90a $sample" "gpus" "check --gpu gfx90a $sample" "completions bash" "man" "extract --target-id gfx906 -o - $sample"; do
    # shellcheck disable=SC2086
    timeout -s KILL 30 "$OFFLOAD" $cmd >/dev/full 2>"$work/err" </dev/null
    RC=$?
    if [ $RC = 2 ] && grep -q "standard output" "$work/err"; then note $s held
    # No GPU here: gpus writes nothing to standard output.
    elif [ "$cmd" = gpus ] && [ $RC = 1 ] && ! grep -q panicked "$work/err"; then note $s held
    else note $s broke "$cmd > /dev/full: status $RC $(head -c 200 "$work/err")"; fi
done
fi

# --- 5. Inputs truncated while read -----------------------------------------
s=shrinking-input
if want $s; then
python3 - "$work/rand.bc" <<'EOF'
import os, struct, sys
size = 160 << 20
ids = [b"hipv4-amdgcn-amd-amdhsa--gfx906", b"hipv4-amdgcn-amd-amdhsa--gfx90a"]
objs = [b"\x7fELF\x02\x01\x01" + os.urandom(size - 7), b"\x7fELF\x02\x01\x01" + bytes(57)]
head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 2)
at = len(head) + sum(24 + len(i) for i in ids)
for i, o in zip(ids, objs):
    head += struct.pack("<QQQ", at, len(o), len(i)) + i
    at += len(o)
open(sys.argv[1], "wb").write(head + b"".join(objs))
EOF
zstd -1 -q -f -o "$work/rand.zst" "$work/rand.bc"
python3 - "$work/rand.zst" "$work/rand.bc" "$work/big.ccob" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read(); size = __import__("os").path.getsize(sys.argv[2])
open(sys.argv[3], "wb").write(b"CCOB" + struct.pack("<HHQQQ", 3, 1, 32 + len(data), size, 0) + data)
EOF
cp "$work/big.ccob" "$work/big.orig"; rm -f "$work/rand.bc" "$work/rand.zst"
mkdir -p "$work/sh"
tries=$([ $quick = 1 ] && echo 2 || echo 5)
for cmd in verify "extract --all --output-dir $work/sh" "prune --keep gfx90a -o $work/sh/p.ccob" "list"; do
    caught=0
    for _ in $(seq "$tries"); do
        rm -rf "$work/sh"; mkdir "$work/sh"; echo precious >"$work/sh/keep"
        cp "$work/big.orig" "$work/big.ccob"
        # shellcheck disable=SC2086
        "$OFFLOAD" $cmd "$work/big.ccob" >/dev/null 2>"$work/err" &
        pid=$!
        for _ in $(seq 200000); do grep -q big.ccob "/proc/$pid/maps" 2>/dev/null && break; kill -0 $pid 2>/dev/null || break; done
        kill -STOP $pid 2>/dev/null; truncate -s 4096 "$work/big.ccob"; kill -CONT $pid 2>/dev/null
        wait $pid; RC=$?
        if [ $RC -gt 128 ]; then caught=$((caught + 1)); note $s broke "$cmd: killed by signal $((RC - 128))"; continue; fi
        if [ -n "$(staging_in "$work/sh")" ]; then note $s broke "$cmd: staging file left"; continue; fi
        if grep -q "changed size while being read" "$work/err"; then
            caught=$((caught + 1))
            if [ $RC = 2 ] && [ "$(ls "$work/sh")" = keep ]; then note $s held
            else note $s broke "$cmd: status $RC, left: $(ls "$work/sh" | tr '\n' ' ')"; fi
        elif [ $RC -le 2 ]; then note $s held
        else note $s broke "$cmd: status $RC"; fi
    done
    if [ $caught = 0 ] && [ "$cmd" = list ]; then
        echo "note [$s] list reads only the bundle's header: no run faulted (counted as held)"
    elif [ $caught = 0 ]; then note $s notrun "$cmd: no run was caught reading (it read everything before the truncation)"; fi
done
fi

# --- 6. Address-space limits --------------------------------------------------
s=ulimit-v
if want $s; then
big=$(find "$corpus" -type f -size +50M 2>/dev/null | head -1)
for f in "$sample" ${big:+"$big"}; do
    for cmd in list verify size "extract --all --output-dir $work/ul"; do
        rm -rf "$work/ul"; mkdir "$work/ul"
        run 300 bash -c "ulimit -v 393216; exec '$OFFLOAD' $cmd '$f'"
        ordinary $s "$cmd $(basename "$f") under 384 MiB"
        [ -n "$(staging_in "$work/ul")" ] && note $s broke "$cmd: staging file left"
    done
done
[ -z "$big" ] && note $s notrun "no corpus file over 50 MB (scripts/fetch-real-corpus.sh)"
fi

# --- 7. SIGINT and SIGTERM during every writer -------------------------------
s=signals
if want $s; then
# Starts a writer, stops it (SIGSTOP) as soon as one of its staging files
# shows anywhere under the watched folder, sends the signal, continues it
# and prints its exit status; prints "missed" when the run committed before
# a staging file was seen. A tight Python loop, not find in a shell loop:
# a fast writer (replace, join) stages for a few milliseconds only.
catch() { # watched-folder signal command...
    python3 - "$@" <<'EOF2'
import os, re, signal, subprocess, sys, time
watch, sig, cmd = sys.argv[1], getattr(signal, "SIG" + sys.argv[2]), sys.argv[3:]
staging = re.compile(r"^\..*\.ofl\d+-[A-Za-z0-9]{6}\.tmp$")
def staged():
    for d, _, names in os.walk(watch):
        for n in names:
            if staging.match(n):
                return os.path.join(d, n)
    return None
# Default SIGINT in the child: a background job of a script starts with it
# ignored, and an ignored signal stays ignored.
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
caught = False
while p.poll() is None:
    if staged():
        os.kill(p.pid, signal.SIGSTOP)
        if staged():
            caught = True
            break
        os.kill(p.pid, signal.SIGCONT)
if not caught:
    p.wait(); print("missed"); sys.exit(0)
os.kill(p.pid, sig); os.kill(p.pid, signal.SIGCONT)
rc = p.wait()
print(128 - rc if rc < 0 else rc)
EOF2
}
# Whether any staging file is left under a folder.
staging_under() { find "$1" -name '.*.ofl*.tmp' 2>/dev/null | head -1; }
big_bundle "$work/sig.bc" 96
mkdir "$work/names2"; "$OFFLOAD" extract --all --output-dir "$work/names2" "$sample" >/dev/null 2>&1
co=$work/names2/$(ls "$work/names2" | grep -e 'xnack+' | head -1)
# replace needs a real code object in the replaced entry (it compares
# kernels): the sample's gfx90a:xnack+ one, behind 192 MiB of other entry
# so that the write takes long enough to be caught.
python3 - "$co" "$work/rep.bc" <<'EOF2'
import struct, sys
real = open(sys.argv[1], "rb").read()
ids = [b"hipv4-amdgcn-amd-amdhsa--gfx906", b"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"]
sizes = [192 << 20, len(real)]
head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
at = len(head) + sum(24 + len(i) for i in ids)
for i, n in zip(ids, sizes):
    head += struct.pack("<QQQ", at, n, len(i)) + i
    at += n
with open(sys.argv[2], "wb") as f:
    f.write(head + b"\x7fELF\x02\x01\x01" + bytes(57))
    f.seek(sizes[0] - 64, 1)
    f.write(real)
EOF2
# The multi-output writers on real inputs of the corpus: split --by of the
# CUDA wheel, split --kpack of a ROCm library, join of what that wrote.
pk=$HOME/.cache/offload-binutils/corpus/packages
wheel=$(find "$pk/curand-linux" -name '*.whl' 2>/dev/null | head -1)
hiplib=$(find "$corpus/debian-rocrand" -type f 2>/dev/null | head -1)
writers=("prune --keep gfx906 $work/sig.bc -o $work/so/out.bc"
    "extract --all --output-dir $work/so $work/sig.bc"
    "replace --entry gfx90a:xnack+ --with $co $work/rep.bc -o $work/so/out.bc")
[ -n "$wheel" ] && writers+=("split --by family $wheel -o $work/so/wheels")
if [ -n "$hiplib" ]; then
    writers+=("split --kpack $hiplib -o $work/so/split")
    rm -rf "$work/kp-split"
    if "$OFFLOAD" split --kpack "$hiplib" -o "$work/kp-split" >/dev/null 2>&1; then
        writers+=("join --archives $work/kp-split/.kpack $work/kp-split/$(basename "$hiplib") -o $work/so/out.bc")
    else note $s notrun "join: split --kpack of $(basename "$hiplib") failed, nothing to join"; fi
else note $s notrun "split --kpack, join: no ROCm library in the corpus (scripts/fetch-real-corpus.sh)"; fi
[ -z "$wheel" ] && note $s notrun "split --by: no CUDA wheel in the corpus (scripts/fetch-real-corpus.sh)"
for sig in TERM INT; do
    for cmd in "${writers[@]}"; do
        caught=0
        for _ in $(seq 20); do
            rm -rf "$work/so"; mkdir "$work/so"; echo precious >"$work/so/out.bc"
            # shellcheck disable=SC2086
            RC=$(catch "$work/so" $sig "$OFFLOAD" $cmd)
            [ "$RC" = missed ] && continue
            caught=1
            want=$([ $sig = TERM ] && echo 143 || echo 130)
            if [ "$RC" != "$want" ]; then note $s broke "SIG$sig during $cmd: status $RC"
            elif [ -n "$(staging_under "$work/so")" ]; then note $s broke "SIG$sig during $cmd: staging file left"
            elif [ "$(cat "$work/so/out.bc")" != precious ]; then note $s broke "SIG$sig during $cmd: old output changed"
            elif [ -n "$(find "$work/so" -type f ! -name out.bc | head -1)" ]; then
                note $s broke "SIG$sig during $cmd: new outputs written: $(find "$work/so" -type f ! -name out.bc | head -3 | tr '\n' ' ')"
            else note $s held; fi
            break
        done
        [ $caught = 0 ] && note $s notrun "SIG$sig: $cmd was never caught before its commit in 20 tries"
    done
done
rm -rf "$work/so" "$work/kp-split" "$work/sig.bc" "$work/rep.bc"
fi

# --- 8. Output name collisions -----------------------------------------------
s=name-collisions
if want $s; then
mkdir -p "$work/c/a" "$work/c/b" "$work/c/out"
cp "$sample" "$work/c/a/x.bc"; cp "$sample" "$work/c/b/x.bc"
run 60 "$OFFLOAD" extract --gpu gfx906 --output-dir "$work/c/out" "$work/c/a/x.bc" "$work/c/b/x.bc"
if [ $RC = 0 ]; then note $s broke "two inputs named x.bc: status 0"
elif [ -n "$(ls -A "$work/c/out")" ]; then note $s broke "two inputs named x.bc: something was written"
else note $s held; fi
fi

# --- Summary --------------------------------------------------------------------
echo
printf '%-18s %6s %6s %8s\n' scenario held broke "not run"
total_broke=0
for sc in "${ORDER[@]}"; do
    printf '%-18s %6s %6s %8s\n' "$sc" "${HELD[$sc]:-0}" "${BROKE[$sc]:-0}" "${NOTRUN[$sc]:-0}"
    total_broke=$((total_broke + ${BROKE[$sc]:-0}))
done
echo "took $(($(date +%s) - start_all)) s"
[ $total_broke = 0 ]
