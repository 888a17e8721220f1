#!/usr/bin/env bash
# Builds what a release ships into dist/:
#
#   dist/offload-VERSION-x86_64-linux-musl       a static `offload` (musl), runs on any x86_64 Linux
#   dist/offload_binutils-VERSION-*.whl          the Python module plus the `offload` command, for
#                                                manylinux x86_64 and aarch64 (cross-compiled)
#
#   scripts/build-dist.sh                 # everything
#   scripts/build-dist.sh x86_64          # only the x86_64 pieces
#
# Needs rustup (targets are added on demand), python3 with venv, and for
# the pieces other than the native wheel: musl-tools (musl-gcc, for zstd's
# C code) and gcc-aarch64-linux-gnu (the aarch64 linker). On Debian:
#   apt-get install musl-tools gcc-aarch64-linux-gnu
# A piece whose tools are missing is skipped with a message, and the script
# exits 1 at the end, so a partial dist/ is never mistaken for a full one.
# See docs/guide/install.md.
set -euo pipefail
cd "$(dirname "$0")/.."
arches=("${@:-x86_64 aarch64}")
read -r -a arches <<<"${arches[*]}"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
mkdir -p dist
venv=target/dist-venv
if [ ! -x "$venv/bin/maturin" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'maturin>=1.5,<2'
fi
missing=0
skip() { echo "build-dist: skipped $1: $2" >&2; missing=1; }

# The wheel puts <module>.data/scripts/* into the environment's bin/ folder
# (maturin's default data folder), so `pip install` gives an `offload`.
data=crates/offload-py/offload_binutils.data
trap 'rm -rf "$data"' EXIT

for arch in "${arches[@]}"; do
    case "$arch" in
    x86_64)
        # The static musl binary serves both dist/ and the x86_64 wheel.
        target=x86_64-unknown-linux-musl
        if ! command -v musl-gcc >/dev/null; then
            skip "the x86_64 musl binary and wheel" "musl-gcc not found (apt-get install musl-tools)"
            continue
        fi
        rustup target add "$target" >/dev/null
        CC_x86_64_unknown_linux_musl=musl-gcc \
            cargo build --release --locked -p offload-cli --bin offload --target "$target"
        bin=target/$target/release/offload
        cp "$bin" "dist/offload-$version-x86_64-linux-musl"
        wheel_target=x86_64-unknown-linux-gnu
        ;;
    aarch64)
        target=aarch64-unknown-linux-gnu
        if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
            skip "the aarch64 wheel" "aarch64-linux-gnu-gcc not found (apt-get install gcc-aarch64-linux-gnu)"
            continue
        fi
        rustup target add "$target" >/dev/null
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
        export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
        cargo build --release --locked -p offload-cli --bin offload --target "$target"
        bin=target/$target/release/offload
        wheel_target=$target
        ;;
    *)
        echo "build-dist: unknown architecture '$arch' (x86_64 or aarch64)" >&2
        exit 2
        ;;
    esac
    rm -rf "$data"
    mkdir -p "$data/scripts"
    cp "$bin" "$data/scripts/offload"
    rustup target add "$wheel_target" >/dev/null
    # abi3: one wheel per architecture serves CPython 3.9 and later. The
    # platform tag is the lowest manylinux the symbols allow.
    "$venv/bin/maturin" build --release --locked --target "$wheel_target" \
        --manifest-path crates/offload-py/Cargo.toml --out dist
done
ls -l dist
exit "$missing"
