/* A stand-in for libamdhip64.so: registers fat binaries the way the HIP
 * runtime reads them (prune-spec §1.4) and prints a trace. An uncompressed
 * bundle is read through a 4096-byte window and sized by its last entry;
 * a compressed one by the u32 total size at offset 8, then decompressed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t ZSTD_decompress(void *dst, size_t cap, const void *src, size_t len);
unsigned ZSTD_isError(size_t code);

struct wrapper { uint32_t magic, version; const unsigned char *binary; void *unused; };

static uint64_t u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t fnv(const unsigned char *p, uint64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static int bundle(const unsigned char *b, uint64_t window, const char *how) {
  if (memcmp(b, "__CLANG_OFFLOAD_BUNDLE__", 24)) { printf("error: not a bundle\n"); return 1; }
  uint64_t n = u64(b + 24), pos = 32, end = 0, last = 0;
  for (uint64_t i = 0; i < n; i++) {
    if (pos + 24 > window) { printf("error: header past %llu bytes\n", (unsigned long long)window); return 1; }
    uint64_t off = u64(b + pos), size = u64(b + pos + 8), idlen = u64(b + pos + 16);
    pos += 24;
    if (pos + idlen > window) { printf("error: id past the window\n"); return 1; }
    if (off < last) { printf("error: offsets decrease\n"); return 1; }
    last = off;
    end = off + size;
    printf("  %s entry %.*s size %llu fnv %016llx\n", how, (int)idlen, (const char *)b + pos,
           (unsigned long long)size, (unsigned long long)fnv(b + off, size));
    pos += idlen;
  }
  printf("  fatbin size %llu\n", (unsigned long long)end);
  return 0;
}

void **__hipRegisterFatBinary(struct wrapper *w) {
  static void *handle;
  printf("register magic %08x version %u\n", w->magic, w->version);
  if (w->magic != 0x48495046 || w->version != 1) exit(3);
  const unsigned char *b = w->binary;
  if (!memcmp(b, "CCOB", 4)) {
    uint32_t total = u32(b + 8), hlen = u32(b + 4) >> 16 == 0 && (b[4] == 3) ? 32 : 24;
    uint64_t size = b[4] == 3 ? u64(b + 16) : u32(b + 12);
    unsigned char *out = malloc(size);
    size_t got = ZSTD_decompress(out, size, b + hlen, total - hlen);
    if (ZSTD_isError(got) || got != size) { printf("error: decompression\n"); exit(4); }
    printf(" compressed v%u total %u\n", b[4], total);
    if (bundle(out, size, "ccob")) exit(5);
    free(out);
  } else if (bundle(b, 4096, "plain")) {
    exit(5);
  }
  return &handle;
}
void __hipUnregisterFatBinary(void **h) { (void)h; }
void __hipRegisterFunction(void **h, const void *host, const char *dev, const char *name, int limit, void *a,
                           void *b, void *c, void *d, int *e) {
  printf(" function %s\n", name);
}
void __hipRegisterVar(void **h, void *var, const char *host_name, const char *dev_name, int ext, size_t size,
                      int constant, int global) {
  printf(" variable %s\n", dev_name);
}
void __hipRegisterManagedVar(void *h, void **p, void *init, const char *name, size_t size, unsigned align) {}
void __hipRegisterSurface(void) {}
void __hipRegisterTexture(void) {}
int __hipPushCallConfiguration(void) { return 0; }
int __hipPopCallConfiguration(void) { return 0; }
int hipLaunchKernel(void) { return 0; }
