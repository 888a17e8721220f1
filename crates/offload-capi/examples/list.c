/* Lists the offload code objects in a file, one line per code object:
 *
 *   ID <tab> TARGET-ID <tab> SIZE <tab> OFFSET <tab> LOCATION
 *
 * TARGET-ID is "-" when there is none; OFFSET is hexadecimal, or "-" when
 * the code object exists only compressed. A package (wheel, .deb, conda,
 * tarball) lists the code objects of its members, as `offload list` does:
 * LOCATION starts with `member PATH`. Problems (a damaged member, a
 * truncated bundle) are printed to standard error, as `offload list`
 * prints them. Exit status: 0 when the file was scanned without errors
 * (even with no code objects), 1 when it could not be read or an error
 * was found.
 *
 * Build (from the repository root):
 *   cargo build --release -p offload-capi
 *   cc -o list crates/offload-capi/examples/list.c -Icrates/offload-capi/include \
 *      -Ltarget/release -loffload -Wl,-rpath,"$PWD/target/release"
 *   ./list samples/hip-gfx906-gfx90a.bc
 */
#include <inttypes.h>
#include <stdio.h>

#include "offload.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 1;
  }
  offload_inventory *inv = NULL;
  if (offload_scan_file(argv[1], 0, &inv) != OFFLOAD_OK) {
    fprintf(stderr, "%s: error: %s\n", argv[0], offload_last_error());
    return 1;
  }
  size_t count = offload_inventory_count(inv);
  for (size_t i = 0; i < count; i++) {
    offload_code_object co;
    if (offload_inventory_get(inv, i, &co) != OFFLOAD_OK) {
      fprintf(stderr, "%s: error: %s\n", argv[0], offload_last_error());
      offload_inventory_free(inv);
      return 1;
    }
    printf("%s\t%s\t%" PRIu64 "\t", co.id, co.target_id[0] ? co.target_id : "-", co.size);
    if (co.has_offset)
      printf("0x%" PRIx64, co.offset);
    else
      printf("-");
    printf("\t%s\n", co.location);
  }
  int status = 0;
  size_t problems = offload_inventory_diagnostic_count(inv);
  for (size_t i = 0; i < problems; i++) {
    offload_diagnostic d;
    if (offload_inventory_diagnostic(inv, i, &d) != OFFLOAD_OK) {
      fprintf(stderr, "%s: error: %s\n", argv[0], offload_last_error());
      status = 1;
      break;
    }
    fprintf(stderr, "%s: %s: %s: %s: %s\n", argv[0], d.is_error ? "error" : "warning", argv[1], d.location,
            d.message);
    if (d.is_error)
      status = 1;
  }
  offload_inventory_free(inv);
  return status;
}
