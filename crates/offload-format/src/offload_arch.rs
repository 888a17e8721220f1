//! TEMPORARY stand-in until the `triples` branch lands with LLVM 19's tables.
pub const LLVM19_OFFLOAD_ARCH_NAMES: &[&str] = &[
    "", "sm_70", "sm_80", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "generic",
];
pub fn is_llvm19_offload_arch(name: &str) -> bool {
    LLVM19_OFFLOAD_ARCH_NAMES.contains(&name)
}
