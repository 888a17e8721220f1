#!/usr/bin/env bash
# Installs the reference tools the interoperability tests compare against:
# LLVM 19 (clang, clang-offload-bundler, clang-offload-packager, llvm-* tools),
# LLVM 22 (clang, clang-offload-bundler, llvm-offload-binary,
# llvm-offload-wrapper, lld), LLVM 14 (clang, clang-offload-wrapper, llvm-dis,
# opt) and both OpenMP
# offloading runtimes. LLVM 19's OpenMP runtime packages conflict with LLVM
# 14's, so 14's are installed and 19's files are unpacked into /opt/omp19/lib.
# Debian 12 packages; needs root and the Debian package registry.
set -euo pipefail
need_apt=0
for f in /usr/lib/llvm-19/bin/clang-offload-bundler /usr/lib/llvm-19/bin/clang-offload-packager \
         /usr/lib/llvm-14/bin/clang-offload-wrapper /usr/lib/llvm-14/lib/libomptarget.so /usr/bin/zstd \
         /usr/lib/llvm-22/bin/clang-offload-bundler /usr/lib/llvm-22/bin/llvm-offload-binary \
         /usr/lib/llvm-22/bin/ld.lld /usr/bin/g++ /usr/bin/ld; do
  [ -e "$f" ] || need_apt=1
done
if [ "$need_apt" = 1 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-14 clang-tools-14 clang-19 clang-tools-19 \
    llvm-14 llvm-19 lld-19 clang-22 clang-tools-22 llvm-22 lld-22 libomp-14-dev zstd gcc g++ binutils >/dev/null
  # 32-bit host objects for the -type=o tests; optional.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-multilib >/dev/null || true
fi
if [ ! -f /opt/omp19/lib/libomptarget.devicertl.a ]; then
  d=$(mktemp -d); chmod 777 "$d"
  (cd "$d" && apt-get download -qq libomp-19-dev libomp5-19 && for f in *.deb; do dpkg -x "$f" x; done)
  mkdir -p /opt/omp19/lib
  cp -a "$d"/x/usr/lib/llvm-19/lib/. /opt/omp19/lib/
  rm -rf "$d"
  ln -sf libomp.so.5 /opt/omp19/lib/libomp.so
  ln -sf libomptarget.so.19.1 /opt/omp19/lib/libomptarget.so
fi
for f in /usr/lib/llvm-19/bin/clang-offload-bundler /usr/lib/llvm-19/bin/clang-offload-packager \
         /usr/lib/llvm-22/bin/clang-offload-bundler /usr/lib/llvm-22/bin/llvm-offload-binary \
         /usr/lib/llvm-14/bin/clang-offload-wrapper /usr/lib/llvm-14/bin/llvm-dis; do
  [ -x "$f" ] || { echo "install-reference-llvm: $f is missing after installation" >&2; exit 1; }
done
echo "reference LLVM tools installed"
