#!/bin/sh
# Builds the small PE fixtures of crates/offload-cli/tests/fixtures/pe with
# clang 22 and lld-link 22 (docs/formats/pe.md): a HIP DLL (gfx90a and
# gfx1100), a CUDA DLL (sm_80 and sm_89), an EXE importing the HIP DLL, and
# stub runtime DLLs standing in for amdhip64_6.dll and cudart64_12.dll; the
# COFF objects (HIP, CUDA, CUDA -fgpu-rdc with the classic driver, a HIP
# -fgpu-rdc fat object, OpenMP) and a .lib archive of two of them; an
# OpenMP offload DLL (gfx90a and gfx1100) linked through clang's linker
# wrapper against a stub libomp; and
# the ELF twins of the two kernel DLLs (the same sources for x86_64 Linux,
# linked with ld.lld), which must hold the same code objects.
# -cuid fixes the compilation unit ID clang hashes from the host compile, so
# the DLL's and the ELF twin's HIP code objects are byte-identical.
# The sources have no headers, so no HIP or CUDA SDK is needed; the CUDA
# object needs ptxas (OFFLOAD_CLANG_CUDA_ROOT, see scripts/install-cuda-tools.sh).
set -eu
here=$(cd "$(dirname "$0")/../crates/offload-cli/tests/fixtures/pe" && pwd)
# Where the files go: the fixture folder, or the folder given (tests rebuild
# them there to compare).
out=$(cd "${1:-$here}" && pwd)
bin=${LLVM22_BIN:-/usr/lib/llvm-22/bin}
cuda_root=${OFFLOAD_CLANG_CUDA_ROOT:-/opt/cuda-wheels/clang-cuda-root}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cc="$bin/clang++ --target=x86_64-pc-windows-msvc -Wno-ignored-attributes"
link="$bin/lld-link /nodefaultlib /Brepro"
cd "$t"
cat > rt_hip.c <<'C'
__declspec(dllexport) void __hipPopCallConfiguration(void) {}
__declspec(dllexport) void __hipRegisterFatBinary(void) {}
__declspec(dllexport) void __hipRegisterFunction(void) {}
__declspec(dllexport) void __hipUnregisterFatBinary(void) {}
__declspec(dllexport) int hipLaunchKernel(void) { return 0; }
C
cat > rt_cuda.c <<'C'
__declspec(dllexport) void __cudaPopCallConfiguration(void) {}
__declspec(dllexport) void __cudaRegisterFatBinary(void) {}
__declspec(dllexport) void __cudaRegisterFatBinaryEnd(void) {}
__declspec(dllexport) void __cudaRegisterFunction(void) {}
__declspec(dllexport) void __cudaUnregisterFatBinary(void) {}
__declspec(dllexport) int cudaLaunchKernel(void) { return 0; }
C
cat > crt.c <<'C'
int _fltused = 0;
typedef void (*fn)(void);
int atexit(fn f) { (void)f; return 0; }
C
cat > main.c <<'C'
int host_answer(void);
int mainCRTStartup(void) { return host_answer(); }
void *__delayLoadHelper2(const void *descriptor, void **slot) { (void)descriptor; return *slot; }
C
$cc -x c -c rt_hip.c -o rt_hip.obj
$cc -x c -c rt_cuda.c -o rt_cuda.obj
$cc -x c -c crt.c -o crt.obj
$cc -x c -c main.c -o main.obj
$link /dll /noentry rt_hip.obj /out:amdhip64_6.dll /implib:amdhip64_6.lib
$link /dll /noentry rt_cuda.obj /out:cudart64_12.dll /implib:cudart64_12.lib
$cc -x hip -cuid=pe-fixture -nogpulib -nogpuinc --offload-arch=gfx90a --offload-arch=gfx1100 -c "$here/kernel.hip" -o hip.obj
$cc -x cuda -nocudainc -nocudalib --cuda-path="$cuda_root" --offload-arch=sm_80 --offload-arch=sm_89 -c "$here/kernel.cu" -o cuda.obj
$link /dll /noentry /release hip.obj crt.obj amdhip64_6.lib /out:hip_kernels.dll /implib:hip_kernels.lib
$link /dll /noentry cuda.obj crt.obj cudart64_12.lib /out:cuda_kernels.dll
# Objects and an archive for prune on COFF (docs/formats/pe.md §6).
$cc -x cuda --no-offload-new-driver -fgpu-rdc -nocudainc -nocudalib --cuda-path="$cuda_root" --offload-arch=sm_80 --offload-arch=sm_89 -c "$here/kernel.cu" -o cuda_rdc.obj
$cc -x hip -fgpu-rdc -cuid=pe-fixture -nogpulib -nogpuinc --offload-arch=gfx90a --offload-arch=gfx1100 -c "$here/kernel.hip" -o hip_rdc.obj
$bin/llvm-lib /out:kernels.lib hip.obj cuda.obj
# OpenMP: the device link has no device runtime here (-nogpulib), so its
# unresolved __kmpc_* calls are left for a loader that never runs them;
# the host side imports a stub libomp.dll.
cat > rt_omp.c <<'C'
__declspec(dllexport) void __kmpc_fork_call(void) {}
__declspec(dllexport) void __kmpc_fork_teams(void) {}
__declspec(dllexport) void __kmpc_for_static_init_4(void) {}
__declspec(dllexport) void __kmpc_for_static_fini(void) {}
__declspec(dllexport) int __tgt_target_kernel(void) { return 0; }
__declspec(dllexport) void __tgt_register_lib(void) {}
__declspec(dllexport) void __tgt_unregister_lib(void) {}
C
$cc -x c -c rt_omp.c -o rt_omp.obj
$link /dll /noentry rt_omp.obj /out:libomp.dll /implib:libomp.lib
omp="$bin/clang --target=x86_64-pc-windows-msvc -fopenmp --offload-arch=gfx90a --offload-arch=gfx1100 -nogpulib"
$omp -c "$here/omp_kernel.c" -o omp_kernel.obj
$omp -fuse-ld=lld -shared -nostdlib -Wl,/noentry -Wl,/Brepro -Wl,/libpath:. -Wl,/export:scale -Xoffload-linker --unresolved-symbols=ignore-all omp_kernel.obj crt.obj -o omp_kernel.dll
# app.exe loads hip_kernels.dll on first use (delay-load import table); the
# helper the linker's delay-load thunks call is a stub.
$link /subsystem:console /entry:mainCRTStartup main.obj hip_kernels.lib /delayload:hip_kernels.dll /out:app.exe
# --apply-dynamic-relocs: the registration records hold their addresses in
# place too (not only in .rela.dyn), as GNU ld writes them.
elf="$bin/clang++ --target=x86_64-linux-gnu -fPIC -Wno-ignored-attributes"
$elf -x hip -cuid=pe-fixture -nogpulib -nogpuinc --offload-arch=gfx90a --offload-arch=gfx1100 -c "$here/kernel.hip" -o hip.o
$elf -x cuda -nocudainc -nocudalib --cuda-path="$cuda_root" --offload-arch=sm_80 --offload-arch=sm_89 -c "$here/kernel.cu" -o cuda.o
$bin/ld.lld -shared --build-id=none --apply-dynamic-relocs hip.o -o hip_kernels.so
$bin/ld.lld -shared --build-id=none --apply-dynamic-relocs cuda.o -o cuda_kernels.so
cp hip_kernels.so cuda_kernels.so amdhip64_6.dll cudart64_12.dll hip_kernels.dll cuda_kernels.dll app.exe \
  hip.obj cuda.obj cuda_rdc.obj hip_rdc.obj kernels.lib omp_kernel.obj omp_kernel.dll libomp.dll "$out/"
ls -l "$out"
