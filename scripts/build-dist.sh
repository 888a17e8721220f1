#!/usr/bin/env bash
# Builds what a release ships into dist/:
#
#   dist/offload-VERSION-x86_64-linux-musl     a static `offload` (musl), runs on any x86_64 Linux
#   dist/offload-VERSION-aarch64-linux-musl    the same for aarch64 (cross-compiled)
#   dist/offload_binutils-VERSION-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#   dist/offload_binutils-VERSION-cp39-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl
#                                              the Python module plus the `offload` command;
#                                              aarch64 cross-compiled
#
#   scripts/build-dist.sh                 # everything
#   scripts/build-dist.sh x86_64          # only the x86_64 pieces
#   scripts/test-dist.sh                  # then: install and check them
#
# Needs rustup with the targets x86_64-unknown-linux-musl,
# x86_64-unknown-linux-gnu, aarch64-unknown-linux-musl and
# aarch64-unknown-linux-gnu (added on demand)
# and python3 with venv. The rest comes from PyPI into target/dist-venv:
# maturin (builds the wheels), and zig (`ziglang`) with cargo-zigbuild as
# the C compiler and linker of every piece: zig links against glibc 2.17's
# symbols whatever the build machine's glibc (so the wheels are
# manylinux2014), ships musl for the static binary, and cross-compiles
# to aarch64 without a cross toolchain from the system.
#
# The builds are release builds without debug information, stripped (the
# workspace's release profile keeps line tables for profiling; a shipped
# binary does not need them). See docs/guide/install.md for why the wheel
# carries the binary as a data script, and for sizes and times.
set -euo pipefail
cd "$(dirname "$0")/.."
arches=("${@:-x86_64 aarch64}")
read -r -a arches <<<"${arches[*]}"
for arch in "${arches[@]}"; do
    case "$arch" in
    x86_64 | aarch64) ;;
    *)
        echo "build-dist: unknown architecture '$arch' (x86_64 or aarch64)" >&2
        exit 2
        ;;
    esac
done
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
python=${PYTHON:-python3}
venv=target/dist-venv
if [ ! -x "$venv/bin/maturin" ] || [ ! -x "$venv/bin/cargo-zigbuild" ] || ! "$venv/bin/python" -m ziglang version >/dev/null 2>&1; then
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet 'maturin>=1.9,<2' 'ziglang>=0.15,<0.18' 'cargo-zigbuild>=0.20,<0.25'
fi
# maturin --zig and cargo-zigbuild run `python -m ziglang` from PATH.
export PATH="$PWD/$venv/bin:$PATH"
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols
mkdir -p dist

# The wheel puts <module>.data/scripts/* into the environment's bin/ folder
# (maturin's default data folder, beside pyproject.toml), so `pip install`
# gives an `offload`.
data=crates/offload-py/offload_binutils.data
trap 'rm -rf "$data"' EXIT
times=()
timed() {
    local what=$1 start=$SECONDS
    shift
    "$@"
    times+=("$what: $((SECONDS - start)) s")
}

for arch in "${arches[@]}"; do
    rustup target add "$arch-unknown-linux-gnu" >/dev/null
    # The static musl binary serves both dist/ and the wheel. Not glibc
    # 2.17: Rust's standard library refers to copy_file_range, which glibc
    # has only since 2.27, and linking an aarch64 program against 2.17's
    # symbols fails on it ("undefined symbol: copy_file_range"); musl has
    # it, and a static binary runs on any Linux of its architecture.
    target=$arch-unknown-linux-musl
    rustup target add "$target" >/dev/null
    timed "offload, $target" cargo zigbuild --release --locked -p offload-cli --bin offload --target "$target"
    bin=target/$target/release/offload
    cp "$bin" "dist/offload-$version-$arch-linux-musl"
    rm -rf "$data"
    mkdir -p "$data/scripts"
    cp "$bin" "$data/scripts/offload"
    # abi3: one wheel per architecture serves CPython 3.9 and later.
    # maturin checks the module's symbols against manylinux2014 and fails
    # the build if it needs a newer glibc.
    timed "wheel, $arch" maturin build --release --locked --zig --compatibility manylinux2014 \
        --target "$arch-unknown-linux-gnu" --manifest-path crates/offload-py/Cargo.toml --out dist
done
ls -l dist
printf 'build-dist: %s\n' "${times[@]}"
