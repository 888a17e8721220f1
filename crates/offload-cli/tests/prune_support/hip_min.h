// The few declarations clang needs to compile HIP without ROCm headers
// (-nogpuinc): kernel launch goes through hipLaunchKernel.
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **a, unsigned long s, hipStream_t st);
extern "C" int __hipPushCallConfiguration(dim3 g, dim3 b, unsigned long s, hipStream_t st);
