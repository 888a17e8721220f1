//! The architecture component of a target triple, recognised the way LLVM
//! 14's `Triple` class does. `clang-offload-wrapper` rejects a triple whose
//! architecture LLVM 14 does not know, and the module's global names depend
//! on whether the triple is NVPTX (LLVM's name uniquing adds no dot there).

/// The first `-`-separated component of a triple.
pub fn arch_component(triple: &str) -> &str {
    triple.split('-').next().unwrap_or("")
}

/// LLVM 14's architecture type for the triple's first component, by its
/// canonical name (`i386`, `x86_64`, `aarch64`, `nvptx64`, ...), or `None`
/// when LLVM 14 reports an unknown architecture.
pub fn llvm14_arch(triple: &str) -> Option<&'static str> {
    let name = arch_component(triple);
    let plain = match name {
        "i386" | "i486" | "i586" | "i686" | "i786" | "i886" | "i986" => "i386",
        "amd64" | "x86_64" | "x86_64h" => "x86_64",
        "powerpc" | "ppc" | "ppc32" => "powerpc",
        "powerpcle" | "ppcle" | "ppc32le" => "powerpcle",
        "powerpc64" | "ppu" | "ppc64" => "powerpc64",
        "powerpc64le" | "ppc64le" => "powerpc64le",
        "xscale" | "arm" => "arm",
        "xscaleeb" | "armeb" => "armeb",
        "aarch64" | "arm64" | "arm64e" => "aarch64",
        "aarch64_be" => "aarch64_be",
        "aarch64_32" | "arm64_32" => "aarch64_32",
        "arc" => "arc",
        "thumb" => "thumb",
        "thumbeb" => "thumbeb",
        "avr" => "avr",
        "m68k" => "m68k",
        "msp430" => "msp430",
        "mips" | "mipseb" | "mipsallegrex" | "mipsisa32r6" | "mipsr6" => "mips",
        "mipsel" | "mipsallegrexel" | "mipsisa32r6el" | "mipsr6el" => "mipsel",
        "mips64" | "mips64eb" | "mipsn32" | "mipsisa64r6" | "mips64r6" | "mipsn32r6" => "mips64",
        "mips64el" | "mipsn32el" | "mipsisa64r6el" | "mips64r6el" | "mipsn32r6el" => "mips64el",
        "r600" => "r600",
        "amdgcn" => "amdgcn",
        "riscv32" => "riscv32",
        "riscv64" => "riscv64",
        "hexagon" => "hexagon",
        "s390x" | "systemz" => "s390x",
        "sparc" => "sparc",
        "sparcel" => "sparcel",
        "sparcv9" | "sparc64" => "sparcv9",
        "tce" => "tce",
        "tcele" => "tcele",
        "xcore" => "xcore",
        "nvptx" => "nvptx",
        "nvptx64" => "nvptx64",
        "le32" => "le32",
        "le64" => "le64",
        "amdil" => "amdil",
        "amdil64" => "amdil64",
        "hsail" => "hsail",
        "hsail64" => "hsail64",
        "spir" => "spir",
        "spir64" => "spir64",
        "spirv32" => "spirv32",
        "spirv64" => "spirv64",
        "lanai" => "lanai",
        "renderscript32" => "renderscript32",
        "renderscript64" => "renderscript64",
        "shave" => "shave",
        "ve" => "ve",
        "wasm32" => "wasm32",
        "wasm64" => "wasm64",
        "csky" => "csky",
        "bpf" | "bpf_le" | "bpfel" => "bpfel",
        "bpf_be" | "bpfeb" => "bpfeb",
        _ if name.starts_with("kalimba") => "kalimba",
        _ if name.starts_with("arm") || name.starts_with("thumb") || name.starts_with("aarch64") => {
            return arm_family(name);
        }
        _ => return None,
    };
    Some(plain)
}

/// Whether LLVM 14 accepts the triple's architecture.
pub fn is_known(triple: &str) -> bool {
    llvm14_arch(triple).is_some()
}

/// NVPTX triples: LLVM uniquifies global names there without a dot
/// (`name1`, not `name.1`).
pub fn is_nvptx(triple: &str) -> bool {
    matches!(llvm14_arch(triple), Some("nvptx" | "nvptx64"))
}

/// AMDGPU triples (`amdgcn`, `r600`).
pub fn is_amdgpu(triple: &str) -> bool {
    matches!(llvm14_arch(triple), Some("amdgcn" | "r600"))
}

/// ARM, Thumb and AArch64 names with versions and endianness (`armv7a`,
/// `thumbebv7m`, `aarch64_be`, ...): LLVM 14 accepts the name when its
/// canonical form (see [`arm_canonical`]) is not empty, except Thumb before
/// v4; v6-M names are Thumb whatever their prefix.
fn arm_family(name: &str) -> Option<&'static str> {
    let big = name.starts_with("armeb")
        || name.starts_with("thumbeb")
        || name.starts_with("aarch64_be")
        || ((name.starts_with("arm") || name.starts_with("thumb")) && name.ends_with("eb"));
    let isa = if name.starts_with("aarch64") || name.starts_with("arm64") {
        "aarch64"
    } else if name.starts_with("thumb") {
        "thumb"
    } else {
        "arm"
    };
    let canonical = arm_canonical(name)?;
    if isa == "thumb" && (canonical.starts_with("v2") || canonical.starts_with("v3")) {
        return None;
    }
    if is_v6m(canonical) {
        return Some(if big { "thumbeb" } else { "thumb" });
    }
    Some(match (isa, big) {
        ("aarch64", false) => "aarch64",
        ("aarch64", true) => "aarch64_be",
        ("thumb", false) => "thumb",
        ("thumb", true) => "thumbeb",
        (_, false) => "arm",
        (_, true) => "armeb",
    })
}

/// The version part of an ARM-family name (`armebv7a` → `v7a`), the whole
/// name when nothing follows the prefix, or `None` when LLVM finds it
/// malformed.
fn arm_canonical(arch: &str) -> Option<&str> {
    let mut a = arch;
    let mut offset = if a.starts_with("arm64_32") {
        Some(8)
    } else if a.starts_with("arm64e") {
        Some(6)
    } else if a.starts_with("arm64") {
        Some(5)
    } else if a.starts_with("aarch64_32") {
        Some(10)
    } else if a.starts_with("arm") {
        Some(3)
    } else if a.starts_with("thumb") {
        Some(5)
    } else if a.starts_with("aarch64") {
        if a.contains("eb") {
            return None;
        }
        Some(if a.get(7..10) == Some("_be") { 10 } else { 7 })
    } else {
        None
    };
    match offset {
        Some(o) if a.get(o..o + 2) == Some("eb") => offset = Some(o + 2),
        _ => {
            if let Some(stripped) = a.strip_suffix("eb") {
                a = stripped;
            }
        }
    }
    if let Some(o) = offset {
        a = a.get(o..).unwrap_or("");
    }
    if a.is_empty() {
        return Some(arch);
    }
    if offset.is_some() {
        let b = a.as_bytes();
        if b.len() >= 2 && (b[0] != b'v' || !b[1].is_ascii_digit()) {
            return None;
        }
        if a.contains("eb") {
            return None;
        }
    }
    Some(a)
}

/// Whether a canonical ARM name is ARMv6-M (`v6m`, `v6-m`, `v6sm`, `v6s-m`).
fn is_v6m(canonical: &str) -> bool {
    matches!(canonical, "v6m" | "v6-m" | "v6sm" | "v6s-m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_host_and_device_triples() {
        for (t, a) in [
            ("x86_64-pc-linux-gnu", "x86_64"),
            ("i386-pc-linux-gnu", "i386"),
            ("i686", "i386"),
            ("aarch64-linux-gnu", "aarch64"),
            ("powerpc64le-unknown-linux-gnu", "powerpc64le"),
            ("amdgcn-amd-amdhsa", "amdgcn"),
            ("nvptx64-nvidia-cuda", "nvptx64"),
            ("armv7a-linux-gnueabihf", "arm"),
            ("thumbv6m-none-eabi", "thumb"),
            ("armv6m", "thumb"),
            ("armebv7", "armeb"),
            ("armv7eb", "armeb"),
            ("aarch64_be", "aarch64_be"),
            ("kalimba3", "kalimba"),
        ] {
            assert_eq!(llvm14_arch(t), Some(a), "{t}");
        }
    }

    #[test]
    fn unknown_architectures() {
        for t in ["", "bogus-triple", "x86", "armfoo", "thumbv3", "aarch64eb", "armv7ebx", "-x86_64", "X86_64"] {
            assert_eq!(llvm14_arch(t), None, "{t}");
        }
    }

    #[test]
    fn nvptx_and_amdgpu() {
        assert!(is_nvptx("nvptx-nvidia-cuda") && is_nvptx("nvptx64"));
        assert!(!is_nvptx("x86_64"));
        assert!(is_amdgpu("amdgcn-amd-amdhsa") && is_amdgpu("r600"));
    }
}
