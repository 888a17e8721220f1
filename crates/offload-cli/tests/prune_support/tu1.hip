#include "hip_min.h"
__device__ int scale = 3;
__global__ void add_one(int *p) { p[0] += scale; }
extern "C" int tu1_value(void) { return 1; }
