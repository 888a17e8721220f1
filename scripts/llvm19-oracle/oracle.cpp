// Test-vector oracle for offload-format's triple/amdgpu/offload_arch tables.
//
// Links against the installed LLVM 19 shared libraries (libLLVM-19 and
// libclang-cpp 19, the very libraries /usr/lib/llvm-19/bin/clang-offload-bundler
// loads) and prints what they compute, one record per line, tab-separated.
// It is only used by scripts/gen-llvm19-fixtures.sh to regenerate the
// fixtures under crates/offload-format/tests/fixtures/llvm19/; nothing in the
// Rust crates runs or links it.
//
//   oracle triple   < strings   : text, arch, subarch, vendor, os, env, objfmt
//                                 (Triple(text), the one-string constructor)
//   oracle parts    < 4 fields  : the fields, text, arch, subarch, vendor, os,
//                                 env, objfmt (the 4-part constructor)
//   oracle compat   < pairs     : a, b, isCompatibleWith (both built as the
//                                 bundler builds them: 4-part constructor from
//                                 the one-string constructor's components)
//   oracle amdgcn   < names     : name, canonical ("" = unknown), xnack, sramecc
//   oracle r600     < names     : name, canonical ("" = unknown)
//   oracle amdgcn-list          : every name fillValidArchListAMDGCN gives
//   oracle r600-list            : every name fillValidArchListR600 gives
//   oracle offload-arch-list    : every name clang's OffloadArch table holds
//   oracle offload-arch < names : name, 1 if StringToOffloadArch knows it
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/TargetParser/TargetParser.h"
#include "llvm/TargetParser/Triple.h"
#include <cstdio>
#include <iostream>
#include <string>

namespace clang {
enum class OffloadArch;
const char *OffloadArchToString(OffloadArch);
OffloadArch StringToOffloadArch(llvm::StringRef);
} // namespace clang

using namespace llvm;

// Names for Triple::SubArchType in the order of LLVM 19's Triple.h.
static const char *const SubArchNames[] = {
    "none",
    "arm_v9_5a", "arm_v9_4a", "arm_v9_3a", "arm_v9_2a", "arm_v9_1a", "arm_v9",
    "arm_v8_9a", "arm_v8_8a", "arm_v8_7a", "arm_v8_6a", "arm_v8_5a",
    "arm_v8_4a", "arm_v8_3a", "arm_v8_2a", "arm_v8_1a", "arm_v8", "arm_v8r",
    "arm_v8m_baseline", "arm_v8m_mainline", "arm_v8_1m_mainline", "arm_v7",
    "arm_v7em", "arm_v7m", "arm_v7s", "arm_v7k", "arm_v7ve", "arm_v6",
    "arm_v6m", "arm_v6k", "arm_v6t2", "arm_v5", "arm_v5te", "arm_v4t",
    "arm64e", "arm64ec", "kalimba_v3", "kalimba_v4", "kalimba_v5", "mips_r6",
    "ppc_spe", "spirv_v10", "spirv_v11", "spirv_v12", "spirv_v13",
    "spirv_v14", "spirv_v15", "spirv_v16", "dxil_v1_0", "dxil_v1_1",
    "dxil_v1_2", "dxil_v1_3", "dxil_v1_4", "dxil_v1_5", "dxil_v1_6",
    "dxil_v1_7", "dxil_v1_8",
};

static const char *objfmt(Triple::ObjectFormatType F) {
  switch (F) {
  case Triple::UnknownObjectFormat: return "unknown";
  case Triple::COFF: return "coff";
  case Triple::DXContainer: return "dxcontainer";
  case Triple::ELF: return "elf";
  case Triple::GOFF: return "goff";
  case Triple::MachO: return "macho";
  case Triple::SPIRV: return "spirv";
  case Triple::Wasm: return "wasm";
  case Triple::XCOFF: return "xcoff";
  }
  return "?";
}

static Triple asBundler(const std::string &S) {
  Triple T(S);
  return Triple(T.getArchName(), T.getVendorName(), T.getOSName(),
                T.getEnvironmentName());
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  std::string Mode = argv[1];
  std::string Line;
  if (Mode == "triple") {
    while (std::getline(std::cin, Line)) {
      Triple T(Line);
      unsigned Sub = T.getSubArch();
      printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\n", Line.c_str(),
             Triple::getArchTypeName(T.getArch()).str().c_str(),
             Sub < sizeof(SubArchNames) / sizeof(*SubArchNames) ? SubArchNames[Sub] : "?",
             Triple::getVendorTypeName(T.getVendor()).str().c_str(),
             Triple::getOSTypeName(T.getOS()).str().c_str(),
             Triple::getEnvironmentTypeName(T.getEnvironment()).str().c_str(),
             objfmt(T.getObjectFormat()));
    }
  } else if (Mode == "parts") {
    while (std::getline(std::cin, Line)) {
      std::string F[4];
      size_t Pos = 0;
      for (int I = 0; I < 4; ++I) {
        size_t Tab = I < 3 ? Line.find('\t', Pos) : std::string::npos;
        F[I] = Line.substr(Pos, Tab == std::string::npos ? std::string::npos : Tab - Pos);
        Pos = Tab == std::string::npos ? Line.size() : Tab + 1;
      }
      Triple T(F[0], F[1], F[2], F[3]);
      unsigned Sub = T.getSubArch();
      printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", F[0].c_str(),
             F[1].c_str(), F[2].c_str(), F[3].c_str(), T.str().c_str(),
             Triple::getArchTypeName(T.getArch()).str().c_str(),
             Sub < sizeof(SubArchNames) / sizeof(*SubArchNames) ? SubArchNames[Sub] : "?",
             Triple::getVendorTypeName(T.getVendor()).str().c_str(),
             Triple::getOSTypeName(T.getOS()).str().c_str(),
             Triple::getEnvironmentTypeName(T.getEnvironment()).str().c_str(),
             objfmt(T.getObjectFormat()));
    }
  } else if (Mode == "compat") {
    while (std::getline(std::cin, Line)) {
      size_t Tab = Line.find('\t');
      if (Tab == std::string::npos)
        continue;
      std::string A = Line.substr(0, Tab), B = Line.substr(Tab + 1);
      printf("%s\t%s\t%d\n", A.c_str(), B.c_str(),
             (int)asBundler(A).isCompatibleWith(asBundler(B)));
    }
  } else if (Mode == "amdgcn") {
    while (std::getline(std::cin, Line)) {
      AMDGPU::GPUKind K = AMDGPU::parseArchAMDGCN(Line);
      unsigned Attr = AMDGPU::getArchAttrAMDGCN(K);
      printf("%s\t%s\t%d\t%d\n", Line.c_str(),
             AMDGPU::getArchNameAMDGCN(K).str().c_str(),
             !!(Attr & AMDGPU::FEATURE_XNACK), !!(Attr & AMDGPU::FEATURE_SRAMECC));
    }
  } else if (Mode == "r600") {
    while (std::getline(std::cin, Line)) {
      AMDGPU::GPUKind K = AMDGPU::parseArchR600(Line);
      printf("%s\t%s\n", Line.c_str(), AMDGPU::getArchNameR600(K).str().c_str());
    }
  } else if (Mode == "amdgcn-list" || Mode == "r600-list") {
    SmallVector<StringRef, 128> V;
    if (Mode == "amdgcn-list")
      AMDGPU::fillValidArchListAMDGCN(V);
    else
      AMDGPU::fillValidArchListR600(V);
    for (StringRef S : V)
      printf("%s\n", S.str().c_str());
  } else if (Mode == "offload-arch-list") {
    // Walk the enum's values; a name that maps back to its value is a table
    // entry. UNKNOWN is skipped: "unknown" is only the fallback text.
    int Unknown = (int)clang::StringToOffloadArch("this-is-not-an-arch");
    for (int I = 0; I < 1000; ++I) {
      if (I == Unknown)
        continue;
      const char *S = clang::OffloadArchToString(static_cast<clang::OffloadArch>(I));
      if ((int)clang::StringToOffloadArch(S) == I)
        printf("%s\n", S);
    }
  } else if (Mode == "offload-arch") {
    while (std::getline(std::cin, Line)) {
      clang::OffloadArch U = clang::StringToOffloadArch("this-is-not-an-arch");
      printf("%s\t%d\n", Line.c_str(), (int)(clang::StringToOffloadArch(Line) != U));
    }
  } else {
    return 2;
  }
  return 0;
}
