/* Asks AMD's Code Object Manager (comgr) which code object of a clang
 * offload bundle it would load for an ISA, the question the HIP runtime asks
 * it. The real-corpus tests compare its answers with `offload select`.
 *
 *   lookup isas                  every ISA name this comgr knows, one a line
 *   lookup BUNDLE ISA...         "ISA OFFSET SIZE" per ISA (0 0: none fits)
 *
 * Built by the tests with `cc lookup.c -lamd_comgr` (Debian: libamd-comgr-dev).
 * Exit status 0 on success, 2 on bad usage or unreadable input, 3 when comgr
 * reports an error (the status is printed). */
#include <amd_comgr.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, amd_comgr_status_t status) {
    fprintf(stderr, "lookup: %s failed with comgr status %d\n", what, (int)status);
    return 3;
}

static int print_isas(void) {
    size_t count = 0;
    amd_comgr_status_t st = amd_comgr_get_isa_count(&count);
    if (st != AMD_COMGR_STATUS_SUCCESS) return fail("amd_comgr_get_isa_count", st);
    for (size_t i = 0; i < count; i++) {
        const char *name = NULL;
        st = amd_comgr_get_isa_name(i, &name);
        if (st != AMD_COMGR_STATUS_SUCCESS) return fail("amd_comgr_get_isa_name", st);
        printf("%s\n", name);
    }
    return 0;
}

/* Reads a whole file; NULL on failure. */
static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)len + 1);
            if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
                free(buf);
                buf = NULL;
            }
            *size = (size_t)len;
        }
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    if (argc == 2 && argv[1][0] == 'i' && argv[1][1] == 's') return print_isas();
    if (argc < 3) {
        fprintf(stderr, "usage: lookup isas | lookup BUNDLE ISA...\n");
        return 2;
    }
    size_t size = 0;
    char *bytes = read_file(argv[1], &size);
    if (!bytes) {
        fprintf(stderr, "lookup: cannot read %s\n", argv[1]);
        return 2;
    }
    amd_comgr_data_t data;
    amd_comgr_status_t st = amd_comgr_create_data(AMD_COMGR_DATA_KIND_FATBIN, &data);
    if (st != AMD_COMGR_STATUS_SUCCESS) return fail("amd_comgr_create_data", st);
    st = amd_comgr_set_data(data, size, bytes);
    if (st != AMD_COMGR_STATUS_SUCCESS) return fail("amd_comgr_set_data", st);
    /* One lookup per ISA, as the HIP runtime asks for one device: given
     * several ISAs in one list, comgr 5.2 fills in only the first that
     * matches and leaves the others at 0 0. */
    for (int i = 2; i < argc; i++) {
        amd_comgr_code_object_info_t info = {argv[i], 0, 0};
        st = amd_comgr_lookup_code_object(data, &info, 1);
        if (st != AMD_COMGR_STATUS_SUCCESS) return fail("amd_comgr_lookup_code_object", st);
        printf("%s %llu %llu\n", info.isa, (unsigned long long)info.offset, (unsigned long long)info.size);
    }
    amd_comgr_release_data(data);
    free(bytes);
    return 0;
}
