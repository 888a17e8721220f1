#include "hip_min.h"
// 32 KiB of incompressible data per GPU target (seeded by the target ID),
// so that dropping targets frees enough pages for `prune --mode cut` to
// cut, compressed bundles included.
#ifdef __amdgcn_target_id__
#define NOISE_SEED __amdgcn_target_id__
#else
#define NOISE_SEED "host"
#endif
struct Noise {
  unsigned v[8192];
  constexpr Noise(const char *seed) : v() {
    unsigned x = 2166136261u;
    for (const char *c = seed; *c; ++c) x = (x ^ (unsigned char)*c) * 16777619u;
    for (int i = 0; i < 8192; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; v[i] = x; }
  }
};
__device__ Noise noise(NOISE_SEED);
__device__ int scale = 3;
__global__ void add_one(int *p) { p[0] += scale + (int)noise.v[p[1] & 8191]; }
extern "C" int tu1_value(void) { return 1; }
