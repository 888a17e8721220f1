/* Decompresses one compressed offload bundle (CCOB v1/v2/v3) with ROCm's own
 * LLVM, `librocmllvm.so` from PyPI's rocm-llvm-python wheel, as a reference
 * for CCOB v3, which LLVM 19's clang-offload-bundler cannot read.
 *
 *   rocmllvm_decompress LIBROCMLLVM INPUT OUTPUT
 *
 * The library exports LLVM's C++ API only, so this calls two C++ functions by
 * their mangled names (loaded with dlopen) under the Itanium x86-64 ABI:
 *
 *   std::unique_ptr<MemoryBuffer> MemoryBuffer::getMemBuffer(StringRef Data,
 *                                     StringRef Name, bool RequiresNullTerminator)
 *   Expected<std::unique_ptr<MemoryBuffer>>
 *       object::CompressedOffloadBundle::decompress(const MemoryBuffer &, bool Verbose)
 *
 * A non-trivial class returned by value comes back through a hidden first
 * pointer argument; a StringRef {const char *, size_t} travels in two
 * registers, i.e. as two arguments. The library exports
 * llvm::DisableABIBreakingChecks, so Expected<T> is the payload pointer
 * followed by a HasError bit. A MemoryBuffer is a vtable pointer followed by
 * its BufferStart and BufferEnd pointers.
 *
 * Exit status 0 on success, 2 on bad usage or I/O, 3 when LLVM reports an
 * error. Memory is left to the process exit. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    void *value; /* std::unique_ptr<MemoryBuffer>, or the error payload */
    unsigned char has_error;
} expected_buffer;

typedef void (*get_mem_buffer_fn)(void **result, const char *data, size_t size, const char *name,
                                  size_t name_size, bool requires_null_terminator);
typedef void (*decompress_fn)(expected_buffer *result, const void *input, bool verbose);

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: rocmllvm_decompress LIBROCMLLVM INPUT OUTPUT\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "rocmllvm_decompress: %s\n", dlerror());
        return 2;
    }
    get_mem_buffer_fn get_mem_buffer =
        (get_mem_buffer_fn)dlsym(lib, "_ZN4llvm12MemoryBuffer12getMemBufferENS_9StringRefES1_b");
    decompress_fn decompress = (decompress_fn)dlsym(
        lib, "_ZN4llvm6object23CompressedOffloadBundle10decompressERKNS_12MemoryBufferEb");
    if (!get_mem_buffer || !decompress) {
        fprintf(stderr, "rocmllvm_decompress: %s lacks the expected LLVM symbols\n", argv[1]);
        return 2;
    }

    FILE *in = fopen(argv[2], "rb");
    if (!in || fseek(in, 0, SEEK_END) != 0) {
        fprintf(stderr, "rocmllvm_decompress: cannot read %s\n", argv[2]);
        return 2;
    }
    long size = ftell(in);
    char *bytes = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (!bytes || fseek(in, 0, SEEK_SET) != 0 || fread(bytes, 1, (size_t)size, in) != (size_t)size) {
        fprintf(stderr, "rocmllvm_decompress: cannot read %s\n", argv[2]);
        return 2;
    }
    fclose(in);

    void *input = NULL;
    get_mem_buffer(&input, bytes, (size_t)size, "input", 5, false);
    expected_buffer result = {NULL, 0};
    decompress(&result, input, false);
    if (result.has_error & 1) {
        fprintf(stderr, "rocmllvm_decompress: LLVM could not decompress %s\n", argv[2]);
        return 3;
    }
    void **buffer = (void **)result.value;
    const char *start = (const char *)buffer[1];
    const char *end = (const char *)buffer[2];

    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(start, 1, (size_t)(end - start), out) != (size_t)(end - start) || fclose(out) != 0) {
        fprintf(stderr, "rocmllvm_decompress: cannot write %s\n", argv[3]);
        return 2;
    }
    return 0;
}
