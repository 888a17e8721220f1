//! AMDGPU processors: names, alternative names, target-ID features, ISA
//! versions, ELF processor numbers and generic-target coverage.
//!
//! Clang's target IDs (`gfx90a:xnack+`) name an AMDGPU processor and some
//! on/off features. To compare a stored code object with a requested one, a
//! tool canonicalises the processor name (`fiji` is `gfx803`) and checks
//! that every feature is one the processor supports. Only two features are
//! target-ID features: `xnack` and `sramecc`.
//!
//! Two views of one table ([`Table`]):
//! * [`Table::Llvm19`]: exactly LLVM 19.1.7's processors. The drop-in
//!   `clang-offload-bundler` uses it, because what it accepts and prints
//!   must be LLVM 19's (it refuses `gfx950` as LLVM 19 does).
//! * [`Table::Current`]: every processor of the newest LLVM table (see
//!   its `table` module for the sources and version). The inspector uses it, so that
//!   files built by newer compilers (ROCm 7: gfx950, gfx1153, gfx1250, ...)
//!   are understood.
//!
//! The data is one array with an `in_llvm19` column rather than two arrays:
//! a new GPU is one row, and the two views cannot disagree about a processor
//! they share (its aliases, features or ELF number). The LLVM 19 view is the
//! rows with `in_llvm19` set, in table order, which is LLVM 19's order.

pub mod kernels;
mod table;

use crate::triple::Triple;
use std::sync::LazyLock;

/// One AMDGCN processor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Processor {
    /// The canonical name (`gfx803`).
    pub name: &'static str,
    /// Alternative names LLVM maps to it (`fiji`).
    pub aliases: &'static [&'static str],
    /// Whether `xnack` is a target-ID feature of the processor.
    pub xnack: bool,
    /// Whether `sramecc` is a target-ID feature of the processor.
    pub sramecc: bool,
    /// LLVM's ISA version (major, minor, stepping): gfx90a is (9, 0, 10).
    pub isa_version: (u8, u8, u8),
    /// `EF_AMDGPU_MACH`, the low byte of the ELF header's `e_flags`.
    pub elf_mach: u8,
    /// The generic target whose code objects also run on this processor.
    pub generic: Option<&'static str>,
    /// Whether LLVM 19.1.7 knows the processor.
    pub in_llvm19: bool,
}

impl Processor {
    /// Whether this is a generic target (`gfx9-generic`), not a GPU.
    pub fn is_generic(&self) -> bool {
        self.name.ends_with("-generic")
    }

    /// The number the Linux kernel driver reports for a GPU as
    /// `gfx_target_version` (major * 10000 + minor * 100 + stepping of the
    /// ISA version: gfx90a is 90010); `None` for generic targets.
    pub fn gfx_target_version(&self) -> Option<u32> {
        let (major, minor, stepping) = self.isa_version;
        (!self.is_generic()).then(|| u32::from(major) * 10000 + u32::from(minor) * 100 + u32::from(stepping))
    }
}

/// Which processor table a rule follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Table {
    /// LLVM 19.1.7's, for the drop-in tools.
    Llvm19,
    /// The newest known, for the inspector.
    Current,
}

static LLVM19_AMDGCN: LazyLock<Vec<Processor>> =
    LazyLock::new(|| table::AMDGCN.iter().filter(|p| p.in_llvm19).copied().collect());

impl Table {
    /// Every AMDGCN processor of the table, in LLVM's order.
    pub fn amdgcn_processors(self) -> &'static [Processor] {
        match self {
            Table::Llvm19 => &LLVM19_AMDGCN,
            Table::Current => &table::AMDGCN,
        }
    }

    /// Looks up an AMDGCN processor by canonical or alternative name,
    /// exactly (case-sensitive), as LLVM's `parseArchAMDGCN` does.
    pub fn amdgcn_processor(self, name: &str) -> Option<&'static Processor> {
        self.amdgcn_processors().iter().find(|proc| proc.name == name || proc.aliases.contains(&name))
    }

    /// `AMDGPU::getCanonicalArchName(triple, name)`: the canonical processor
    /// name for an AMDGCN or R600 triple, `None` when the name is not a
    /// processor of that architecture or the triple is not AMDGPU at all.
    /// (Clang's target-ID parser passes processor names through unchanged
    /// for non-AMDGPU triples; that decision belongs to the caller.)
    pub fn canonical_processor(self, triple: &Triple, name: &str) -> Option<&'static str> {
        if triple.is_amdgcn() {
            self.amdgcn_processor(name).map(|proc| proc.name)
        } else if triple.is_r600() {
            r600_canonical(name)
        } else {
            None
        }
    }

    /// The target-ID features a processor supports on this triple, in the
    /// order clang lists them (`getAllPossibleAMDGPUTargetIDFeatures`):
    /// `sramecc` before `xnack`. Empty for unknown processors, R600, and
    /// non-AMDGPU triples.
    pub fn target_id_features(self, triple: &Triple, name: &str) -> &'static [&'static str] {
        if !triple.is_amdgcn() {
            return &[];
        }
        match self.amdgcn_processor(name) {
            Some(Processor { xnack: true, sramecc: true, .. }) => &["sramecc", "xnack"],
            Some(Processor { xnack: true, .. }) => &["xnack"],
            Some(Processor { sramecc: true, .. }) => &["sramecc"],
            _ => &[],
        }
    }
}

/// Every AMDGCN processor LLVM 19.1.7 knows, in LLVM's order.
pub fn amdgcn_processors() -> &'static [Processor] {
    Table::Llvm19.amdgcn_processors()
}

/// An AMDGCN processor of LLVM 19.1.7 by canonical or alternative name:
/// `fiji` gives the `gfx803` entry, `gfx950` and `Gfx906` give `None`.
pub fn amdgcn_processor(name: &str) -> Option<&'static Processor> {
    Table::Llvm19.amdgcn_processor(name)
}

/// The canonical R600 processor name for a name or alias (`parseArchR600`
/// then `getArchNameR600`): `hemlock` gives `cypress`. R600 processors are
/// the same in every table.
pub fn r600_canonical(name: &str) -> Option<&'static str> {
    table::R600.iter().find(|(canon, aliases)| *canon == name || aliases.contains(&name)).map(|&(canon, _)| canon)
}

/// Every R600 processor name (canonical names, then their aliases, in
/// table order), for listings and tests.
pub fn r600_processor_names() -> impl Iterator<Item = &'static str> {
    table::R600.iter().flat_map(|(canon, aliases)| std::iter::once(*canon).chain(aliases.iter().copied()))
}

/// LLVM 19's `getCanonicalArchName`; see [`Table::canonical_processor`].
pub fn canonical_processor(triple: &Triple, name: &str) -> Option<&'static str> {
    Table::Llvm19.canonical_processor(triple, name)
}

/// LLVM 19's target-ID features; see [`Table::target_id_features`].
pub fn target_id_features(triple: &Triple, name: &str) -> &'static [&'static str] {
    Table::Llvm19.target_id_features(triple, name)
}

/// The generic target whose code objects run on `processor` (canonical
/// name, current table): `gfx1151` gives `gfx11-generic`.
pub fn generic_target(processor: &str) -> Option<&'static str> {
    Table::Current.amdgcn_processor(processor).filter(|p| p.name == processor).and_then(|p| p.generic)
}

/// The processors a generic target's code objects run on, in table order.
pub fn generic_coverage(generic: &str) -> impl Iterator<Item = &'static Processor> + '_ {
    table::AMDGCN.iter().filter(move |p| p.generic == Some(generic))
}

/// The processor an ELF code object names by its `EF_AMDGPU_MACH` number.
pub fn processor_by_elf_mach(mach: u8) -> Option<&'static Processor> {
    table::AMDGCN.iter().find(|p| p.elf_mach == mach)
}

/// The processor whose `gfx_target_version` (as the kernel driver reports
/// it in sysfs) is `version`: 90010 gives gfx90a.
pub fn processor_by_gfx_target_version(version: u32) -> Option<&'static Processor> {
    table::AMDGCN.iter().find(|p| p.gfx_target_version() == Some(version))
}

/// Whether `name` has the shape of an AMDGCN processor name (`gfx` and
/// lowercase letters, digits or dashes), known or not. The inspector takes
/// such names from newer compilers at their word.
pub fn looks_like_amdgcn_processor(name: &str) -> bool {
    name.strip_prefix("gfx").is_some_and(|rest| {
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    })
}

#[cfg(test)]
mod tests;
