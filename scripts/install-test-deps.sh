#!/usr/bin/env bash
# Installs what the real-corpus tests need besides the reference LLVM tools
# (scripts/install-reference-llvm.sh): Debian's comgr (the HIP runtime's
# code-object lookup, compared with `offload select`), a C compiler and
# valgrind (the C API tests), a C compiler for the
# helpers under crates/offload-cli/tests/support/real_corpus_helpers, unzip/pip
# for scripts/fetch-real-corpus.sh, and Debian's hipcc 5.2.3 (with clang 15,
# ROCm's headers and device libraries and the real libamdhip64.so.5; about
# 16 s and 550 MB installed here) for the hipcc-built programs of
# prune_live.rs and replace_live.rs. Debian 12; needs root and the Debian
# package registry. Idempotent.
set -euo pipefail
need_apt=0
for f in /usr/include/amd_comgr.h /usr/lib/x86_64-linux-gnu/libamd_comgr.so /usr/bin/cc /usr/bin/valgrind /usr/bin/unzip /usr/bin/hipcc /usr/lib/x86_64-linux-gnu/libamdhip64.so.5; do
  [ -e "$f" ] || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libamd-comgr2 libamd-comgr-dev gcc valgrind unzip hipcc >/dev/null
fi
python3 -m pip --version >/dev/null 2>&1 || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null; }
for f in /usr/include/amd_comgr.h /usr/lib/x86_64-linux-gnu/libamd_comgr.so /usr/bin/cc /usr/bin/valgrind /usr/bin/unzip /usr/bin/hipcc /usr/lib/x86_64-linux-gnu/libamdhip64.so.5; do
  [ -e "$f" ] || { echo "install-test-deps: $f is missing after installation" >&2; exit 1; }
done
echo "test dependencies installed (comgr $(dpkg-query -W -f='${Version}' libamd-comgr2), hipcc $(dpkg-query -W -f='${Version}' hipcc))"
