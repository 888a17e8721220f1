#!/usr/bin/env bash
# Installs LLVM 22's OpenMP offloading runtime beside the system, into
# /opt/omp22/lib (OMP22_PREFIX), so that programs built by clang 22 with
# OpenMP offloading run here (the host device, x86_64).
#
# Why a build: Debian 12's liboffload-22 (libomptarget.so.22.1 with its
# plugins linked in, libLLVMOffload.so.22.1) and libomp-22-dev depend on
# libomp5-19, i.e. LLVM 19's libomp.so.5, which lacks entry points that
# libomptarget 22 calls (__kmpc_omp_get_target_async_handle_ptr, ...), so
# nothing offloads with the packaged files alone. This script builds LLVM
# 22.1.8's libomp (the host runtime only, from the openmp/ folder of
# Debian's .orig tarball, with clang 22) and puts it beside the unpacked
# (dpkg -x) liboffload-22 and libomp-22-dev. Nothing is installed through
# dpkg: those packages conflict with libomp-14-dev, which the LLVM 14 tests
# need. docs/development.md (section Tests) describes the result.
#
# A second run is instant (stamp file). Needs root for /opt and for apt
# (cmake, ninja-build, clang-22 when missing); the first run downloads the
# 190 MB tarball unless ~/.cache/offload-binutils/llvm-tests has it (the
# cache scripts/llvm-lit-tests.sh shares) and takes a few minutes on 2 cores.
set -euo pipefail
version=22.1.8
prefix=${OMP22_PREFIX:-/opt/omp22}
lib=$prefix/lib
stamp=$prefix/.omp22-$version
if [ -e "$stamp" ] && [ -e "$lib/libomp.so.5" ] && [ -e "$lib/libomptarget.so" ]; then
  echo "LLVM $version OpenMP runtime already in $lib"
  exit 0
fi

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
[ -x /usr/lib/llvm-22/bin/clang ] || need+=(clang-22)
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cache=${OFFLOAD_LLVM_TESTS_CACHE:-$HOME/.cache/offload-binutils/llvm-tests}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
name=llvm-toolchain-22_$version
tarball=$cache/$name.orig.tar.xz
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  echo "downloading $name.orig.tar.xz (once) ..." >&2
  curl -fsS --retry 3 -o "$tarball.part" "$mirror/pool/main/l/llvm-toolchain-22/$name.orig.tar.xz"
  mv "$tarball.part" "$tarball"
fi

work=$(mktemp -d /tmp/omp22-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 777 "$work" # apt-get download runs as the _apt user

# 1. The packaged libomptarget 22 and its headers (unpacked, not installed).
(cd "$work" && apt-get download -qq libomp-22-dev liboffload-22 && for f in ./*.deb; do
  v=$(dpkg-deb -f "$f" Version)
  case $v in *:$version-*) ;; *) echo "note: $f is $v, the libomp built here is $version" >&2 ;; esac
  dpkg-deb -x "$f" pkg
done)

# 2. libomp 22 from source: openmp/ needs the shared cmake/ modules beside it.
echo "building libomp $version (a few minutes) ..." >&2
tar -xJf "$tarball" -C "$work" --strip-components=1 "$name/openmp" "$name/cmake"
cmake -S "$work/openmp" -B "$work/build" -G Ninja -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=/usr/lib/llvm-22/bin/clang \
  -DCMAKE_CXX_COMPILER=/usr/lib/llvm-22/bin/clang++ \
  -DCMAKE_INSTALL_PREFIX="$work/install" \
  -DOPENMP_STANDALONE_BUILD=ON \
  -DOPENMP_ENABLE_OMPT_TOOLS=OFF \
  -DLIBOMP_OMPD_SUPPORT=OFF \
  -DLIBOMP_INSTALL_ALIASES=OFF \
  -DLIBOMP_ENABLE_ASSERTIONS=OFF >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
nice ninja -C "$work/build" install >"$work/ninja.log" 2>&1 || { tail -50 "$work/ninja.log" >&2; exit 1; }

# 3. One folder: the packaged files, then the built libomp over Debian's
# link to LLVM 19's. libomptarget's RUNPATH is $ORIGIN, so it finds
# libomp.so.5 and libLLVMOffload beside it; libLLVM.so.22.1 comes from
# the system's libllvm22.
rm -rf "$prefix.new"
mkdir -p "$prefix.new/lib"
cp -a "$work/pkg/usr/lib/llvm-22/lib/." "$prefix.new/lib/"
rm -f "$prefix.new/lib"/libomp.so* "$prefix.new/lib"/libgomp.so* "$prefix.new/lib"/libiomp5.so "$prefix.new/lib"/libomp5.so
cp -a "$work/install/lib/libomp.so" "$prefix.new/lib/libomp.so.5"
ln -s libomp.so.5 "$prefix.new/lib/libomp.so"
ln -s libomptarget.so.22.1 "$prefix.new/lib/libomptarget.so"
cp -a "$work/install/include" "$prefix.new/include"
rm -rf "$prefix"
mv "$prefix.new" "$prefix"
touch "$stamp"
echo "LLVM $version OpenMP runtime installed in $lib"
