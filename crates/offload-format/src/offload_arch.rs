//! The offload-architecture name table of clang 19.1.7 (`clang::OffloadArch`,
//! formerly `CudaArch`, in `clang/Basic/Cuda.cpp`).
//!
//! LLVM 19's bundler uses this table, not the AMDGPU processor table, to
//! decide whether the last `-`-separated piece of a bundle entry ID is a GPU
//! name and so starts a target ID (`StringToOffloadArch(x) != UNKNOWN`).
//! The table has surprising members that change how IDs split:
//!
//! * the empty string (the `UNUSED` entry), so any ID ending in `-` "has" a
//!   GPU, and its target ID becomes the whole ID;
//! * `generic`, so `...--gfx9-generic` splits as `...--gfx9` + `generic`;
//! * `amdgcnspirv`.
//!
//! And it lacks names an AMDGPU user might expect: the AMDGPU aliases
//! (`fiji`), and names added after 19.1.7 (`gfx950`, `sm_100`, `sm_120`).
//! `unknown` is not a member either (it is only the fallback text for an
//! unrecognised value).

/// Every name clang 19.1.7's `StringToOffloadArch` recognises, in the
/// table's order (by enum value; `""` is `UNUSED`).
pub const LLVM19_OFFLOAD_ARCH_NAMES: &[&str] = &[
    "",
    // NVIDIA
    "sm_20",
    "sm_21",
    "sm_30",
    "sm_32",
    "sm_35",
    "sm_37",
    "sm_50",
    "sm_52",
    "sm_53",
    "sm_60",
    "sm_61",
    "sm_62",
    "sm_70",
    "sm_72",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_89",
    "sm_90",
    "sm_90a",
    // AMD
    "gfx600",
    "gfx601",
    "gfx602",
    "gfx700",
    "gfx701",
    "gfx702",
    "gfx703",
    "gfx704",
    "gfx705",
    "gfx801",
    "gfx802",
    "gfx803",
    "gfx805",
    "gfx810",
    "gfx9-generic",
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx908",
    "gfx909",
    "gfx90a",
    "gfx90c",
    "gfx940",
    "gfx941",
    "gfx942",
    "gfx10-1-generic",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx10-3-generic",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx11-generic",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx12-generic",
    "gfx1200",
    "gfx1201",
    "amdgcnspirv",
    // Neither vendor
    "generic",
];

/// Whether clang 19.1.7's `StringToOffloadArch` knows this name (exact,
/// case-sensitive match). True for `""` and `"generic"`; false for `fiji`,
/// `gfx950`, `sm_100` and `unknown`.
pub fn is_llvm19_offload_arch(name: &str) -> bool {
    LLVM19_OFFLOAD_ARCH_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quirky_members() {
        assert!(is_llvm19_offload_arch(""));
        assert!(is_llvm19_offload_arch("generic"));
        assert!(is_llvm19_offload_arch("gfx9-generic"));
        assert!(is_llvm19_offload_arch("sm_90a"));
        assert!(is_llvm19_offload_arch("amdgcnspirv"));
    }

    #[test]
    fn non_members() {
        for name in ["fiji", "gfx950", "sm_100", "sm_120", "unknown", "GFX906", "gfx906:xnack+"] {
            assert!(!is_llvm19_offload_arch(name), "{name}");
        }
    }

    #[test]
    fn names_are_unique() {
        let mut v = LLVM19_OFFLOAD_ARCH_NAMES.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), LLVM19_OFFLOAD_ARCH_NAMES.len());
        assert_eq!(v.len(), 74);
    }
}
