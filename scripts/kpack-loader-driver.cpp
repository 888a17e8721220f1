// Asks AMD's kpack runtime loader (ROCm/rocm-systems shared/kpack/runtime,
// built outside this repository by scripts/check-kpack-against-amd-loader.sh)
// what it loads for one kpack-split host library and one GPU, the way the HIP
// runtime (CLR) calls it: for every HIPK record of `.hipFatBinSegment`, the
// metadata the record points at, the library's path, `co_index` from the
// record's `reserved1`, and CLR's architecture list (the agent's ISA name,
// then its generic target with the agent's features put back, where CLR's
// table has one). The calling convention is described in
// docs/formats/kpack.md; this file holds no AMD code.
//
//   kpack-loader-driver LIBRARY GPU OUTDIR
//
// Writes OUTDIR/<record>.co for every record the loader serves and prints one
// line per record: `<record> ok <size>` or `<record> error <kpack error code>`.
// Exit 0 when the file was read (whatever the loader answered), 2 otherwise.
#include <rocm_kpack/kpack.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace {

std::vector<uint8_t> file;

template <typename T>
std::optional<T> at(uint64_t off) {
  if (off > file.size() || file.size() - off < sizeof(T)) return std::nullopt;
  T v;
  std::memcpy(&v, file.data() + off, sizeof(T));
  return v;
}

struct Section {
  std::string name;
  uint32_t type;
  uint64_t addr, offset, size, entsize;
};
struct Load {
  uint64_t offset, vaddr, filesz;
};

std::vector<Section> sections;
std::vector<Load> loads;

bool parse_elf() {
  if (file.size() < 64 || std::memcmp(file.data(), "\x7f" "ELF", 4) != 0 || file[4] != 2 ||
      file[5] != 1)
    return false;
  auto phoff = at<uint64_t>(32), shoff = at<uint64_t>(40);
  auto phnum = at<uint16_t>(56), shnum = at<uint16_t>(60), shstrndx = at<uint16_t>(62);
  if (!phoff || !shoff || !phnum || !shnum || !shstrndx) return false;
  for (uint64_t i = 0; i < *phnum; ++i) {
    uint64_t p = *phoff + i * 56;
    auto type = at<uint32_t>(p);
    auto off = at<uint64_t>(p + 8), va = at<uint64_t>(p + 16), fsz = at<uint64_t>(p + 32);
    if (!type || !off || !va || !fsz) return false;
    if (*type == 1) loads.push_back({*off, *va, *fsz});
  }
  std::vector<std::pair<uint32_t, Section>> raw;
  for (uint64_t i = 0; i < *shnum; ++i) {
    uint64_t s = *shoff + i * 64;
    auto name = at<uint32_t>(s), type = at<uint32_t>(s + 4);
    auto addr = at<uint64_t>(s + 16), off = at<uint64_t>(s + 24), size = at<uint64_t>(s + 32),
         ent = at<uint64_t>(s + 56);
    if (!name || !type || !addr || !off || !size || !ent) return false;
    raw.push_back({*name, {"", *type, *addr, *off, *size, *ent}});
  }
  if (*shstrndx >= raw.size()) return false;
  uint64_t strtab = raw[*shstrndx].second.offset;
  for (auto& [name, sec] : raw) {
    uint64_t o = strtab + name;
    while (o < file.size() && file[o] != 0) sec.name.push_back(static_cast<char>(file[o++]));
    sections.push_back(sec);
  }
  return true;
}

const Section* find(const char* name) {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::optional<uint64_t> vaddr_to_offset(uint64_t va) {
  for (const auto& l : loads)
    if (va >= l.vaddr && va - l.vaddr < l.filesz) return l.offset + (va - l.vaddr);
  return std::nullopt;
}

// The value the dynamic linker puts at `va`: an R_X86_64_RELATIVE addend when
// there is one, else the bytes in the file.
std::optional<uint64_t> pointer_at(uint64_t va) {
  for (const auto& s : sections) {
    if (s.type != 4) continue;  // SHT_RELA
    uint64_t ent = s.entsize ? s.entsize : 24;
    for (uint64_t o = s.offset; o + 24 <= s.offset + s.size; o += ent) {
      auto r_off = at<uint64_t>(o), info = at<uint64_t>(o + 8);
      auto addend = at<int64_t>(o + 16);
      if (!r_off || !info || !addend) return std::nullopt;
      if (*r_off == va && (*info & 0xffffffff) == 8) return static_cast<uint64_t>(*addend);
    }
  }
  auto off = vaddr_to_offset(va);
  if (!off) return std::nullopt;
  return at<uint64_t>(*off);
}

// CLR's generic target for a processor (its TargetToGeneric table).
const char* generic_of(const std::string& proc) {
  static const struct {
    const char* procs[8];
    const char* generic;
  } table[] = {
      {{"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}, "gfx9-generic"},
      {{"gfx942", "gfx950"}, "gfx9-4-generic"},
      {{"gfx1010", "gfx1011", "gfx1012", "gfx1013"}, "gfx10-1-generic"},
      {{"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"},
       "gfx10-3-generic"},
      {{"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"},
       "gfx11-generic"},
      {{"gfx1200", "gfx1201"}, "gfx12-generic"},
  };
  for (const auto& row : table)
    for (const char* p : row.procs)
      if (p && proc == p) return row.generic;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s LIBRARY GPU OUTDIR\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) return 2;
  file.assign(std::istreambuf_iterator<char>(in), {});
  if (!parse_elf()) {
    std::fprintf(stderr, "%s: not a 64-bit little-endian ELF file\n", argv[1]);
    return 2;
  }
  char* real = realpath(argv[1], nullptr);  // what /proc/self/maps would name
  std::string path = real ? real : argv[1];
  std::free(real);

  std::string gpu = argv[2];
  std::string proc = gpu.substr(0, gpu.find(':'));
  std::string features = gpu.size() > proc.size() ? gpu.substr(proc.size()) : "";
  std::vector<std::string> arch_list = {"amdgcn-amd-amdhsa--" + gpu};
  if (const char* g = generic_of(proc)) {
    std::string generic = std::string("amdgcn-amd-amdhsa--") + g;
    // sramecc first, then xnack, as the agent has them
    for (const char* f : {"sramecc", "xnack"}) {
      auto p = features.find(std::string(":") + f);
      if (p != std::string::npos) generic += features.substr(p, std::strlen(f) + 2);
    }
    arch_list.push_back(generic);
  }
  std::vector<const char*> arch_ptrs;
  for (const auto& a : arch_list) arch_ptrs.push_back(a.c_str());

  const Section* seg = find(".hipFatBinSegment");
  if (!seg) {
    std::printf("no .hipFatBinSegment\n");
    return 0;
  }
  kpack_cache_t cache = nullptr;
  if (kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  for (uint64_t i = 0; i * 24 + 24 <= seg->size; ++i) {
    uint64_t wrapper = seg->addr + i * 24;
    auto woff = vaddr_to_offset(wrapper);
    if (!woff) return 2;
    auto magic = at<uint32_t>(*woff), version = at<uint32_t>(*woff + 4);
    auto reserved1 = at<uint64_t>(*woff + 16);
    auto binary = pointer_at(wrapper + 8);
    if (!magic || !version || !reserved1 || !binary) return 2;
    if (*magic != 0x4b504948 /* HIPK */) {
      std::printf("%llu not-hipk\n", static_cast<unsigned long long>(i));
      continue;
    }
    auto moff = vaddr_to_offset(*binary);
    if (!moff) {
      std::printf("%llu metadata-unmapped\n", static_cast<unsigned long long>(i));
      continue;
    }
    // The loader reads up to 64 KiB of metadata; give it a zero-padded copy.
    std::vector<uint8_t> meta(file.begin() + static_cast<long>(*moff),
                              file.begin() + static_cast<long>(std::min<uint64_t>(file.size(), *moff + 65536)));
    meta.resize(65536, 0);
    void* co = nullptr;
    size_t size = 0;
    kpack_error_t err = kpack_load_code_object(cache, meta.data(), path.c_str(),
                                               static_cast<uint32_t>(*reserved1), arch_ptrs.data(),
                                               arch_ptrs.size(), &co, &size);
    if (err != KPACK_SUCCESS) {
      std::printf("%llu error %d\n", static_cast<unsigned long long>(i), static_cast<int>(err));
      continue;
    }
    std::string out = std::string(argv[3]) + "/" + std::to_string(i) + ".co";
    std::FILE* f = std::fopen(out.c_str(), "wb");
    if (!f || std::fwrite(co, 1, size, f) != size || std::fclose(f) != 0) return 2;
    kpack_free_code_object(co);
    std::printf("%llu ok %zu\n", static_cast<unsigned long long>(i), size);
  }
  kpack_cache_destroy(cache);
  return 0;
}
