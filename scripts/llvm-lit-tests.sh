#!/usr/bin/env bash
# Runs LLVM's own regression tests of clang-offload-bundler,
# clang-offload-packager / llvm-offload-binary and clang-offload-wrapper /
# llvm-offload-wrapper (LLVM 14, 19 and 22) twice, with LLVM's tool and with
# ours substituted, and prints a table per file (docs/llvm-tests.md).
#
#   scripts/llvm-lit-tests.sh [--release] [--json FILE] [-- lit helper options]
#
# The tests come from Debian's source packages (the .orig tarballs of
# llvm-toolchain-14/-19/-22, 130-200 MB each, downloaded once into
# ~/.cache/offload-binutils/llvm-tests; only the test files named below are
# extracted; nothing of LLVM's is copied into the repository). Needs the
# reference LLVMs of scripts/install-reference-llvm.sh (clang, FileCheck,
# not, llvm-objdump ... of each release) and lit (LLVM 22's, or pip's).
# Exit status: 0 when every file that passes with LLVM's tool passes with
# ours, 1 otherwise, 2 when something is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
profile=debug
json=
while [ $# -gt 0 ]; do
  case "$1" in
    --release) profile=release; shift ;;
    --json) json=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [--release] [--json FILE] [-- helper options]" >&2; exit 2 ;;
  esac
done

cache=${OFFLOAD_LLVM_TESTS_CACHE:-$HOME/.cache/offload-binutils/llvm-tests}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$cache"

# Debian source package version of each release's tests (the .orig tarball
# is the upstream release; bookworm-backports/-security carry 19 and 22).
declare -A upstream=([14]=14.0.6 [19]=19.1.7 [22]=22.1.8)
# What is extracted: the tests of the tools and their one input file.
patterns=(
  '*/clang/test/Driver/clang-offload-*'
  '*/clang/test/Driver/fat-archive-unbundle-ext.c'
  '*/clang/test/Driver/offload-packager*'
  '*/clang/test/Driver/linker-wrapper*'
  '*/clang/test/Driver/Inputs/empty-elf-template.yaml'
  '*/llvm/test/tools/llvm-offload-binary/*'
  '*/llvm/test/tools/llvm-offload-wrapper/*'
)

sets=()
for v in 14 19 22; do
  if [ ! -x "/usr/lib/llvm-$v/bin/clang" ] || [ ! -x "/usr/lib/llvm-$v/bin/FileCheck" ]; then
    echo "error: LLVM $v's clang and FileCheck are needed: run scripts/install-reference-llvm.sh" >&2
    exit 2
  fi
  name=llvm-toolchain-${v}_${upstream[$v]}
  tarball=$cache/$name.orig.tar.xz
  if [ ! -s "$tarball" ]; then
    echo "downloading $name.orig.tar.xz (once) ..." >&2
    curl -fsS --retry 3 -o "$tarball.part" "$mirror/pool/main/l/llvm-toolchain-$v/$name.orig.tar.xz"
    mv "$tarball.part" "$tarball"
  fi
  src=$cache/tests-$v
  if [ ! -e "$src/.done" ]; then
    rm -rf "$src" && mkdir -p "$src"
    # A pattern that matches nothing in an older release is not an error.
    tar -xJf "$tarball" -C "$src" --strip-components=1 --wildcards "${patterns[@]}" 2>/dev/null || true
    touch "$src/.done"
  fi
  # The files whose RUN lines run one of the tools (not the driver tests
  # that only print the command clang would run).
  case $v in
    14) tools='clang-offload-wrapper' ;;
    19) tools='clang-offload-bundler|clang-offload-packager' ;;
    22) tools='clang-offload-bundler|clang-offload-packager|llvm-offload-binary|llvm-offload-wrapper' ;;
  esac
  files=$(cd "$src" && grep -lE "RUN:.*($tools)" clang/test/Driver/*.c llvm/test/tools/llvm-offload-*/* 2>/dev/null | sort | paste -sd, - || true)
  sets+=("$v:$src:$files")
done

# lit: LLVM 19's runs the tests of 14 and 19 (LLVM 22's lit refuses their
# %T), LLVM 22's those of 22; pip's lit where one is missing.
pip_lit() {
  if [ ! -x "$cache/venv/bin/lit" ]; then
    python3 -m venv "$cache/venv" && "$cache/venv/bin/pip" install -q "lit$1"
  fi
  echo "$cache/venv/bin/lit"
}
lit19=/usr/lib/llvm-19/build/utils/lit/lit.py
[ -f "$lit19" ] || lit19=$(pip_lit '<22')
lit22=/usr/lib/llvm-22/bin/lit
[ -x "$lit22" ] || lit22=$(pip_lit '')
lits=(--lit "14=$lit19" --lit "19=$lit19" --lit "22=$lit22")

build=(cargo build -p offload-cli --bins)
[ "$profile" = release ] && build+=(--release)
"${build[@]}"

args=("${lits[@]}" --ours "$repo/target/$profile" --work "$cache/work")
[ -n "$json" ] && args+=(--json "$json")
exec python3 scripts/llvm_lit_tests.py "${args[@]}" "$@" "${sets[@]}"
