#!/usr/bin/env bash
# Checks what scripts/build-dist.sh put into dist/, as a user would get it:
#
#   - the x86_64 wheel installs with pip into a fresh venv, and gives a
#     working `offload` (--version, `offload list` of a sample) and
#     `import offload_binutils` (scan of the same sample, type stubs);
#   - the aarch64 wheel holds an aarch64 `offload` and module (ELF machine
#     183), and pip accepts it for its manylinux tag; where qemu-aarch64
#     is installed (qemu-user-static), its `offload --version` and `offload
#     list` of a sample run under it (skipped, and said, without qemu);
#   - `auditwheel show` reads both wheels as manylinux, no newer than the
#     tag in their names (auditwheel is pip-installed into target/dist-venv);
#   - the musl binaries are static (no program interpreter, no needed
#     libraries); the x86_64 one runs.
#
#   scripts/test-dist.sh             # every piece; a missing one fails
#   scripts/test-dist.sh x86_64      # only the x86_64 pieces
#
# Exit status: 0 all checks passed, 1 a check failed or a piece is missing.
# See docs/guide/install.md.
set -euo pipefail
cd "$(dirname "$0")/.."
arches=("${@:-x86_64 aarch64}")
read -r -a arches <<<"${arches[*]}"
python=${PYTHON:-python3}
tools=target/dist-venv
if [ ! -x "$tools/bin/auditwheel" ]; then
    [ -x "$tools/bin/python" ] || "$python" -m venv "$tools"
    "$tools/bin/pip" install --quiet 'auditwheel>=6,<7'
fi
failed=0
fail() { echo "test-dist: FAIL: $*" >&2; failed=1; }
ok() { echo "test-dist: ok: $*"; }

# The one file matching a pattern; otherwise a message and status 1 (run
# in a subshell, so the caller records the failure).
one() {
    local matches=()
    shopt -s nullglob
    # shellcheck disable=SC2206 # the pattern is meant to expand
    matches=($1)
    shopt -u nullglob
    if [ "${#matches[@]}" -ne 1 ]; then
        echo "test-dist: FAIL: expected one file matching $1, found ${#matches[@]}: ${matches[*]:-none}" >&2
        return 1
    fi
    echo "${matches[0]}"
}

# ELF facts of a file, as "machine=N interp=yes|no needed=N" (read with
# Python so that no binutils for the foreign architecture are needed).
elf_facts() {
    "$python" - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    print("not-elf64-le"); sys.exit()
machine = struct.unpack_from("<H", data, 18)[0]
phoff, = struct.unpack_from("<Q", data, 32)
phentsize, phnum = struct.unpack_from("<HH", data, 54)
interp, needed, dynamic = False, 0, None
for i in range(phnum):
    p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if p_type == 3:
        interp = True
    elif p_type == 2:
        dynamic = (p_offset, p_filesz)
if dynamic:
    off, size = dynamic
    for j in range(0, size - 15, 16):
        tag, _ = struct.unpack_from("<qQ", data, off + j)
        if tag == 0:
            break
        needed += tag == 1
print(f"machine={machine} interp={'yes' if interp else 'no'} needed={needed}")
PY
}

# auditwheel agrees that the wheel is manylinux, with a tag no newer than
# the one in its file name (a wheel claiming glibc 2.17 must not use 2.34).
audit() {
    local wheel=$1 report claimed consistent
    report=$("$tools/bin/auditwheel" show "$wheel" 2>&1) || {
        fail "auditwheel show $wheel: $report"
        return
    }
    claimed=$(basename "$wheel" | grep -o 'manylinux_[0-9]*_[0-9]*' | head -n1 || true)
    consistent=$(printf '%s\n' "$report" | tr -s ' \n' ' ' | sed -n 's/.*consistent with the following platform tag: "\(manylinux_[0-9]*_[0-9]*\)_[a-z0-9_]*".*/\1/p')
    if [ -z "$claimed" ] || [ -z "$consistent" ]; then
        fail "auditwheel does not read $wheel as manylinux (claimed '$claimed'):"$'\n'"$report"
        return
    fi
    # manylinux_X_Y: compare X.Y numerically.
    if [ "$(printf '%s\n%s\n' "${consistent#manylinux_}" "${claimed#manylinux_}" | tr _ . | sort -V | tail -n1)" \
        != "$(echo "${claimed#manylinux_}" | tr _ .)" ]; then
        fail "$wheel is named $claimed but auditwheel finds it needs $consistent"
        return
    fi
    ok "auditwheel: $(basename "$wheel") is consistent with $consistent (named $claimed)"
}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
sample=samples/hip-gfx906-gfx90a.bc
for arch in "${arches[@]}"; do
    case "$arch" in
    x86_64)
        if musl=$(one "dist/offload-$version-x86_64-linux-musl"); then
            facts=$(elf_facts "$musl")
            [ "$facts" = "machine=62 interp=no needed=0" ] && ok "$musl is static x86_64 ($facts)" \
                || fail "$musl is not a static x86_64 executable: $facts"
            "$musl" --version | grep -q "$version" && ok "$musl --version" || fail "$musl --version"
        else
            failed=1
        fi
        wheel=$(one "dist/offload_binutils-$version-*manylinux*_x86_64.whl") || {
            failed=1
            continue
        }
        audit "$wheel"
        venv=target/dist-test-venv
        rm -rf "$venv"
        "$python" -m venv "$venv"
        "$venv/bin/pip" install --quiet --no-index "$wheel"
        if [ ! -x "$venv/bin/offload" ]; then
            fail "pip install $wheel gave no executable $venv/bin/offload"
            continue
        fi
        out=$("$venv/bin/offload" --version) && [[ "$out" == *"$version"* ]] \
            && ok "offload --version: $out" || fail "offload --version printed '$out'"
        # The listing names both GPU entries of the sample.
        out=$("$venv/bin/offload" list "$sample") && [[ "$out" == *gfx906* && "$out" == *"gfx90a:xnack+"* ]] \
            && ok "offload list $sample" || fail "offload list $sample printed:"$'\n'"$out"
        out=$("$venv/bin/python" - "$sample" "$version" <<'PY'
import pathlib, sys
import offload_binutils as ob
sample, version = sys.argv[1:]
assert ob.__version__ == version, (ob.__version__, version)
ids = [co.target_id for co in ob.scan(sample)]
assert ids == ["", "gfx906", "gfx90a:xnack+"], ids
package = pathlib.Path(ob.__file__).parent
assert (package / "py.typed").is_file() and list(package.glob("*.pyi")), "no type stubs"
print(ob.__version__, ids)
PY
) && ok "import offload_binutils: $out" || fail "import offload_binutils: $out"
        ;;
    aarch64)
        if musl=$(one "dist/offload-$version-aarch64-linux-musl"); then
            facts=$(elf_facts "$musl")
            [ "$facts" = "machine=183 interp=no needed=0" ] && ok "$musl is static aarch64 ($facts)" \
                || fail "$musl is not a static aarch64 executable: $facts"
        else
            failed=1
        fi
        wheel=$(one "dist/offload_binutils-$version-*manylinux*_aarch64.whl") || {
            failed=1
            continue
        }
        audit "$wheel"
        tmp=$(mktemp -d)
        "$python" -m zipfile -e "$wheel" "$tmp"
        for f in "$tmp"/*.data/scripts/offload "$tmp"/offload_binutils/*.so; do
            [ -f "$f" ] || {
                fail "$wheel lacks $(basename "$f")"
                continue
            }
            facts=$(elf_facts "$f")
            [[ "$facts" == machine=183\ * ]] && ok "$(basename "$f") in the aarch64 wheel is aarch64 ($facts)" \
                || fail "$(basename "$f") in $wheel is not aarch64: $facts"
        done
        # Run the wheel's aarch64 `offload` where qemu's user-mode emulator
        # is installed (apt install qemu-user-static); skipped, and said,
        # where it is not.
        qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
        bin=$(echo "$tmp"/*.data/scripts/offload)
        if [ -z "$qemu" ]; then
            echo "test-dist: skipped: running the aarch64 offload (no qemu-aarch64; apt install qemu-user-static)"
        elif [ -f "$bin" ]; then
            # zipfile -e drops the mode bits (pip sets them on install).
            chmod +x "$bin"
            out=$("$qemu" "$bin" --version) && [[ "$out" == *"$version"* ]] \
                && ok "aarch64 offload --version under $(basename "$qemu"): $out" \
                || fail "aarch64 offload --version printed '$out'"
            out=$("$qemu" "$bin" list "$sample") && [[ "$out" == *gfx906* && "$out" == *"gfx90a:xnack+"* ]] \
                && ok "aarch64 offload list $sample under $(basename "$qemu")" \
                || fail "aarch64 offload list $sample printed:"$'\n'"$out"
        fi
        rm -rf "$tmp"
        # pip's own tag check: the wheel installs for an aarch64 manylinux2014 host.
        tag=$(basename "$wheel" | grep -o 'manylinux_[0-9]*_[0-9]*_aarch64' | head -n1 || true)
        dry=$("$tools/bin/pip" install --dry-run --quiet --no-index --only-binary=:all: --platform "$tag" \
            --python-version 3.9 --target "$(mktemp -d)" "$wheel" 2>&1) \
            && ok "pip accepts $(basename "$wheel") for $tag" || fail "pip refuses $wheel for $tag: $dry"
        ;;
    *)
        echo "test-dist: unknown architecture '$arch' (x86_64 or aarch64)" >&2
        exit 2
        ;;
    esac
done
exit "$failed"
