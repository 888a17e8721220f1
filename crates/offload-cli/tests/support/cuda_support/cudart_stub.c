/* A stand-in for libcudart.so for tests of pruned CUDA host binaries: no GPU,
   no driver. __cudaRegisterFatBinary reads the __fatBinC_Wrapper_t it is
   given (magic 0x466243b1, version, pointer), follows the pointer to the fat
   binary, checks its header (0xBA55ED50) and prints one line per entry
   (kind, sm, stored bytes), the way the runtime walks it; the launch calls
   succeed without doing anything. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wrapper { uint32_t magic, version; const uint8_t *data; const void *rest; };

static uint64_t u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t u16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static void *handles[64];
static int registered;

void **__cudaRegisterFatBinary(void *fat) {
  const struct wrapper *w = fat;
  if (w->magic != 0x466243b1u || (w->version != 1 && w->version != 2)) {
    printf("register: bad wrapper magic %#x version %u\n", w->magic, w->version);
    exit(3);
  }
  const uint8_t *h = w->data;
  if (u32(h) != 0xBA55ED50u) {
    printf("register: the pointer leads to %08x, not a fat binary\n", u32(h));
    exit(4);
  }
  uint16_t header = u16(h + 6);
  uint64_t size = u64(h + 8);
  printf("register: fatbin version %u, %llu bytes of entries\n", u16(h + 4), (unsigned long long)size);
  const uint8_t *e = h + header, *end = h + header + size;
  while (e + 64 <= end) {
    uint16_t kind = u16(e);
    uint32_t entry_header = u32(e + 4);
    uint64_t payload = u64(e + 8);
    uint32_t sm = u32(e + 0x1c);
    printf("register: entry %s sm_%u %llu bytes\n", kind == 1 ? "ptx" : kind == 2 ? "elf" : "other", sm,
           (unsigned long long)payload);
    if (entry_header < 64 || payload > (uint64_t)(end - e)) {
      printf("register: damaged entry\n");
      exit(5);
    }
    e += entry_header + payload;
  }
  handles[registered & 63] = fat;
  registered++;
  return &handles[(registered - 1) & 63];
}
void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }
void __cudaRegisterFunction(void **handle, const char *host, char *device, const char *name, int limit, void *tid,
                            void *bid, void *block, void *grid, int *wsize) {
  (void)handle; (void)host; (void)device; (void)limit; (void)tid; (void)bid; (void)block; (void)grid; (void)wsize;
  printf("function: %s\n", name);
}
void __cudaRegisterVar(void **handle, char *host, char *device, const char *name, int ext, size_t size, int constant,
                       int global) {
  (void)handle; (void)host; (void)device; (void)ext; (void)size; (void)constant; (void)global;
  printf("variable: %s\n", name);
}
unsigned __cudaPushCallConfiguration(uint64_t g0, uint32_t g1, uint64_t b0, uint32_t b1, size_t shared, void *stream) {
  (void)g0; (void)g1; (void)b0; (void)b1; (void)shared; (void)stream;
  return 0;
}
int __cudaPopCallConfiguration(void *grid, void *block, size_t *shared, void **stream) {
  (void)grid; (void)block; *shared = 0; *stream = 0;
  return 0;
}
int cudaLaunchKernel(const void *func, uint64_t g0, uint32_t g1, uint64_t b0, uint32_t b1, void **args, size_t shared,
                     void *stream) {
  (void)func; (void)g0; (void)g1; (void)b0; (void)b1; (void)args; (void)shared; (void)stream;
  printf("launch\n");
  return 0;
}
/* CUDA 13's launch path: a kernel handle from the host stub, then the launch. */
void *__cudaGetKernel(void **kernel, const void *func) { *kernel = (void *)func; return 0; }
int __cudaLaunchKernel(const void *kernel, uint64_t g0, uint32_t g1, uint64_t b0, uint32_t b1, void **args, size_t shared,
                       void *stream) {
  return cudaLaunchKernel(kernel, g0, g1, b0, b1, args, shared, stream);
}
