/* Drives the C API for tests/c_api.rs:
 *
 *   capi_check select FILE GPU hip|openmp OUTDIR
 *       selects for GPU, copies each chosen code object out (size query,
 *       then copy) to OUTDIR/<index>.bin and prints "<index>\t<id>" lines
 *   capi_check decompress FILE OUT
 *       decompresses a compressed bundle with offload_decompress
 *   capi_check errors MISSING-FILE
 *       checks the error paths; prints "status<tab>message" per check
 *
 * Exit status 0 on success, 1 when an API call failed unexpectedly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offload.h"

static int fail(const char *what) {
  fprintf(stderr, "capi_check: %s: %s\n", what, offload_last_error());
  return 1;
}

static int write_file(const char *path, const uint8_t *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return 1;
  size_t n = len ? fwrite(data, 1, len, f) : 0;
  return (fclose(f) != 0 || n != len) ? 1 : 0;
}

static int read_file(const char *path, uint8_t **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return 1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *data = malloc(n > 0 ? (size_t)n : 1);
  *len = n > 0 ? fread(*data, 1, (size_t)n, f) : 0;
  fclose(f);
  return 0;
}

static int select_cmd(const char *file, const char *gpu, const char *kind, const char *outdir) {
  int runtime = strcmp(kind, "openmp") == 0 ? OFFLOAD_RUNTIME_OPENMP : OFFLOAD_RUNTIME_HIP;
  offload_inventory *inv = NULL;
  if (offload_scan_file(file, 0, &inv) != OFFLOAD_OK) return fail("scan");
  size_t count = 0;
  offload_status st = offload_select(inv, gpu, runtime, NULL, 0, &count);
  if (st != OFFLOAD_OK && st != OFFLOAD_ERROR_BUFFER_TOO_SMALL && st != OFFLOAD_ERROR_NOT_FOUND) {
    fprintf(stderr, "capi_check: select: %s\n", offload_last_error());
    offload_inventory_free(inv);
    return 2;
  }
  size_t *chosen = malloc((count ? count : 1) * sizeof *chosen);
  int rc = 0;
  st = offload_select(inv, gpu, runtime, chosen, count, &count);
  if (st == OFFLOAD_ERROR_NOT_FOUND) {
    /* Some fat binary has nothing for the GPU: say so, like offload select. */
    fprintf(stderr, "capi_check: select: %s (%zu chosen elsewhere)\n", offload_last_error(), count);
    rc = 2;
  } else if (st != OFFLOAD_OK) {
    rc = fail("select");
  }
  for (size_t i = 0; rc == 0 && i < count; i++) {
    size_t size = 0;
    if (offload_code_object_copy(inv, chosen[i], NULL, 0, &size) != OFFLOAD_OK) {
      rc = fail("size query");
      break;
    }
    uint8_t *bytes = malloc(size ? size : 1);
    if (size > 0 && offload_code_object_copy(inv, chosen[i], bytes, size - 1, &size) !=
                        OFFLOAD_ERROR_BUFFER_TOO_SMALL) {
      fprintf(stderr, "capi_check: a short buffer was accepted\n");
      rc = 1;
    } else if (offload_code_object_copy(inv, chosen[i], bytes, size, &size) != OFFLOAD_OK) {
      rc = fail("copy");
    } else {
      char path[4096];
      snprintf(path, sizeof path, "%s/%zu.bin", outdir, chosen[i]);
      offload_code_object co;
      if (write_file(path, bytes, size) || offload_inventory_get(inv, chosen[i], &co) != OFFLOAD_OK)
        rc = 1;
      else
        printf("%zu\t%s\n", chosen[i], co.id);
    }
    free(bytes);
  }
  free(chosen);
  offload_inventory_free(inv);
  return rc;
}

static int decompress_cmd(const char *file, const char *out) {
  uint8_t *data = NULL;
  size_t len = 0;
  if (read_file(file, &data, &len)) return 1;
  offload_buffer *buf = NULL;
  int rc = 0;
  if (offload_decompress(data, len, &buf) != OFFLOAD_OK)
    rc = fail("decompress");
  else
    rc = write_file(out, offload_buffer_data(buf), offload_buffer_size(buf));
  offload_buffer_free(buf);
  /* The same bytes scanned from memory: offsets are buffer-relative. */
  offload_inventory *inv = NULL;
  if (rc == 0 && offload_scan_buffer(data, len, OFFLOAD_SCAN_VERIFY, &inv) != OFFLOAD_OK) rc = fail("scan_buffer");
  if (rc == 0) printf("%zu code objects, %zu diagnostics\n", offload_inventory_count(inv),
                      offload_inventory_diagnostic_count(inv));
  offload_inventory_free(inv);
  free(data);
  return rc;
}

static void report(offload_status st) { printf("%d\t%s\n", (int)st, offload_last_error()); }

static int errors_cmd(const char *missing) {
  offload_inventory *inv = (offload_inventory *)1;
  report(offload_scan_file(missing, 0, &inv));
  if (inv != NULL) return 1; /* *out is cleared on failure */
  report(offload_scan_file(NULL, 0, &inv));
  report(offload_scan_file(missing, 0, NULL));
  report(offload_scan_buffer(NULL, 0, 42, &inv));
  const uint8_t junk[] = "not an offload file";
  if (offload_scan_buffer(junk, sizeof junk, 0, &inv) != OFFLOAD_OK) return 1;
  printf("junk: %zu code objects\n", offload_inventory_count(inv));
  offload_code_object co;
  report(offload_inventory_get(inv, 0, &co));
  size_t count = 0;
  report(offload_select(inv, "gfx90a:xnack+", OFFLOAD_RUNTIME_HIP, NULL, 0, &count));
  report(offload_select(inv, "gfx90a:xnack", OFFLOAD_RUNTIME_HIP, NULL, 0, &count));
  report(offload_select(inv, "gfx90a", 7, NULL, 0, &count));
  report(offload_code_object_copy(inv, 3, NULL, 0, &count));
  offload_inventory_free(inv);
  offload_buffer *buf = NULL;
  report(offload_decompress(junk, sizeof junk, &buf));
  const uint8_t bad[24] = "CCOB\x02\x00\x01\x00";
  report(offload_decompress(bad, sizeof bad, &buf));
  offload_inventory_free(NULL);
  offload_buffer_free(NULL);
  return buf == NULL && offload_inventory_count(NULL) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "select") == 0) return select_cmd(argv[2], argv[3], argv[4], argv[5]);
  if (argc == 4 && strcmp(argv[1], "decompress") == 0) return decompress_cmd(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "errors") == 0) return errors_cmd(argv[2]);
  fprintf(stderr, "usage: capi_check select FILE GPU KIND OUTDIR | decompress FILE OUT | errors MISSING\n");
  return 1;
}
