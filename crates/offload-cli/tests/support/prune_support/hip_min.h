// The few declarations clang needs to compile HIP without ROCm headers
// (-nogpuinc): kernel launch goes through hipLaunchKernel. Builds with
// Debian's hipcc define OFFLOAD_TEST_ROCM_HEADERS and use ROCm's own header,
// as hipcc programs do.
#pragma once
#ifdef OFFLOAD_TEST_ROCM_HEADERS
#include <hip/hip_runtime.h>
#else
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **a, unsigned long s, hipStream_t st);
extern "C" int __hipPushCallConfiguration(dim3 g, dim3 b, unsigned long s, hipStream_t st);
#endif
