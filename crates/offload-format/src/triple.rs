//! TEMPORARY stand-in until the `triples` branch lands with LLVM 19's tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Triple {
    text: String,
}
impl Triple {
    pub fn from_parts(arch: &str, vendor: &str, os: &str, env: &str) -> Triple {
        Triple { text: format!("{arch}-{vendor}-{os}-{env}") }
    }
    pub fn parse(text: &str) -> Triple {
        Triple { text: text.to_string() }
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    fn parts(&self) -> (&str, &str, &str, &str) {
        let mut it = self.text.splitn(4, '-');
        (it.next().unwrap_or(""), it.next().unwrap_or(""), it.next().unwrap_or(""), it.next().unwrap_or(""))
    }
    pub fn arch_name(&self) -> &str {
        self.parts().0
    }
    pub fn vendor_name(&self) -> &str {
        self.parts().1
    }
    pub fn os_name(&self) -> &str {
        self.parts().2
    }
    pub fn environment_name(&self) -> &str {
        self.parts().3
    }
    pub fn is_known_arch(&self) -> bool {
        matches!(
            self.arch_name(),
            "x86_64" | "i386" | "i686" | "amdgcn" | "nvptx64" | "nvptx" | "aarch64" | "powerpc64le" | "r600"
        )
    }
    pub fn is_compatible_with(&self, other: &Triple) -> bool {
        let e = |t: &Triple| {
            if t.environment_name() == "unknown" { String::new() } else { t.environment_name().to_string() }
        };
        self.arch_name() == other.arch_name()
            && self.vendor_name() == other.vendor_name()
            && self.os_name() == other.os_name()
            && e(self) == e(other)
    }
    pub fn is_amdgcn(&self) -> bool {
        self.arch_name() == "amdgcn"
    }
    pub fn is_r600(&self) -> bool {
        self.arch_name() == "r600"
    }
    pub fn is_amdgpu(&self) -> bool {
        self.is_amdgcn() || self.is_r600()
    }
    pub fn is_nvptx(&self) -> bool {
        self.arch_name().starts_with("nvptx")
    }
}
