#include "hip_min.h"
#include <stdexcept>
__global__ void twice(float *p) { p[0] *= 2.0f; }
__global__ void thrice(float *p) { p[0] *= 3.0f; }
// Throwing through the host code checks that unwinding data is intact.
extern "C" int tu2_value(void) {
  try { throw std::runtime_error("unwind"); } catch (const std::exception &) { return 2; }
}
