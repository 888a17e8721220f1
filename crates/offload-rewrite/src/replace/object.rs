//! Whether a new code object may take an entry's place. The HIP runtime
//! picks an entry by its ID (for `hip-` IDs by the code object's `e_flags`,
//! docs/formats/host-references.md §1.4) and then finds kernels and variables by the names the
//! host registers, so the new object must be an AMDGPU ELF for exactly the
//! entry's target and define every kernel descriptor (`NAME.kd`) and
//! global variable the old object defined.

use super::ReplaceError;
use offload_format::bytes::{u16_le, u32_le};
use offload_format::elf::{EM_CUDA, STB_LOCAL, STT_OBJECT};
use offload_format::elf::{ElfFile, SHT_DYNSYM, SHT_SYMTAB};
use offload_format::target_id::TargetId;
use offload_format::triple::Triple;
use offload_inspect::elf_flags::{self, Setting};
use offload_inspect::id::split_entry_id;
use std::collections::BTreeSet;

/// What was checked about the new code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectCheck {
    /// The processor both objects are for.
    pub processor: String,
    /// The old object's `e_flags`.
    pub old_flags: u32,
    /// The new object's `e_flags`.
    pub new_flags: u32,
    /// The old object's `EI_ABIVERSION` (code object version - 2 for v3+).
    pub old_abi_version: u8,
    /// The new object's `EI_ABIVERSION`.
    pub new_abi_version: u8,
    /// The kernel descriptors and global variables both define, sorted.
    pub symbols: Vec<String>,
}

fn setting_text(s: Setting) -> &'static str {
    match s {
        Setting::Unknown => "unsupported",
        Setting::Any => "any",
        Setting::Off => "off",
        Setting::On => "on",
    }
}

/// Names of the defined, non-local data symbols (`STT_OBJECT`: kernel
/// descriptors and variables) of an ELF file, from `.symtab` and `.dynsym`.
fn data_symbols(elf: &ElfFile) -> BTreeSet<String> {
    defined_symbols(elf, &[STT_OBJECT])
}

/// Names of the defined, non-local symbols of the given `STT_*` types of
/// an ELF file, from `.symtab` and `.dynsym`.
pub(super) fn defined_symbols(elf: &ElfFile, types: &[u8]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (index, sh) in elf.sections.iter().enumerate() {
        if sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM {
            continue;
        }
        let (Ok(table), Ok(strings)) = (elf.section_data(index), elf.string_table(sh.link as usize)) else {
            continue;
        };
        // Entry 0 is the null symbol.
        for sym in table.chunks_exact(24).skip(1) {
            // Symbols are 24 bytes each: these reads cannot fail.
            let (Some(name), Some(info), Some(shndx)) =
                (u32_le(sym, 0), offload_format::bytes::u8(sym, 4), u16_le(sym, 6))
            else {
                continue;
            };
            if shndx == 0 || info >> 4 == STB_LOCAL || !types.contains(&(info & 0xf)) {
                continue;
            }
            // `__hip_cuid_<hash>` only tells translation units apart; the
            // host never registers it, and a rebuild with other options
            // gets another hash.
            let wanted = |n: &&[u8]| !n.is_empty() && !n.starts_with(b"__hip_cuid_");
            if let Some(n) = offload_format::elf::c_string(strings, name).filter(wanted) {
                names.insert(String::from_utf8_lossy(n).into_owned());
            }
        }
    }
    names
}

/// Checks that `new` may replace `old`, the code object of entry `id`.
pub fn check_object(id: &str, old: &[u8], new: &[u8]) -> Result<ObjectCheck, ReplaceError> {
    let fail = |reason: String| ReplaceError::Object { id: id.to_string(), reason };
    let entry = split_entry_id(id);
    let triple = Triple::parse(&entry.triple);
    if triple.is_nvptx() {
        return Err(ReplaceError::NotSupported(format!(
            "entry '{id}' is NVIDIA code in a clang offload bundle: replacing it there is not supported yet (entries of CUDA fat binaries are)"
        )));
    }
    if !triple.is_amdgcn() {
        return Err(fail(format!(
            "only AMDGPU (amdgcn) entries can be replaced; this entry's triple is '{}'",
            entry.triple
        )));
    }
    let table = offload_format::amdgpu::Table::Current;
    let tid = TargetId::parse_in(table, &triple, &entry.target).map_err(|e| fail(format!("its target ID: {e}")))?;
    if !new.starts_with(b"\x7fELF") {
        return Err(fail("the new file is not an ELF code object".into()));
    }
    if new.get(4) != Some(&2) || new.get(5) != Some(&1) {
        return Err(fail("the new file is not a 64-bit little-endian ELF file, as AMDGPU code objects are".into()));
    }
    let new_target = elf_flags::read(new).ok_or_else(|| fail("the new file's ELF header is truncated".into()))?;
    if new_target.machine == EM_CUDA {
        return Err(fail("the new file is an NVIDIA code object (EM_CUDA), not an AMDGPU one".into()));
    }
    if new_target.machine != elf_flags::EM_AMDGPU {
        return Err(fail(format!("the new file is for ELF machine {}, not AMDGPU (224)", new_target.machine)));
    }
    let Some(old_target) = elf_flags::read(old).filter(|t| t.machine == elf_flags::EM_AMDGPU) else {
        return Err(fail("the old payload is not an AMDGPU ELF code object, so its kernels cannot be compared".into()));
    };
    let (old_osabi, new_osabi) = (old.get(7).copied().unwrap_or(0), new.get(7).copied().unwrap_or(0));
    if old_osabi != new_osabi {
        return Err(fail(format!("ELF OSABI {new_osabi}, the old object's is {old_osabi}")));
    }
    match new_target.processor {
        Some(p) if p == tid.processor => {}
        Some(p) => {
            return Err(fail(format!(
                "it is built for {p} (e_flags {:#x}), the entry is for {}",
                new_target.flags, tid.processor
            )));
        }
        None => {
            return Err(fail(format!(
                "its e_flags {:#x} name a processor missing from the processor table, the entry is for {}",
                new_target.flags, tid.processor
            )));
        }
    }
    // Only target-ID features: what the entry says must be what the
    // object was built with (a missing feature means "any").
    let supported = table.target_id_features(&triple, &tid.processor);
    for (feature, setting) in [("xnack", new_target.xnack), ("sramecc", new_target.sramecc)] {
        if !supported.contains(&feature) || setting == Setting::Unknown {
            continue;
        }
        let wanted = match tid.features.get(feature) {
            Some(true) => Setting::On,
            Some(false) => Setting::Off,
            None => Setting::Any,
        };
        if setting != wanted {
            return Err(fail(format!(
                "it is built with {feature} {} (e_flags {:#x}), the entry says {feature} {}",
                setting_text(setting),
                new_target.flags,
                setting_text(wanted)
            )));
        }
    }
    let old_elf = ElfFile::parse(old).map_err(|e| fail(format!("the old code object: {e}")))?;
    let new_elf = ElfFile::parse(new).map_err(|e| fail(format!("the new code object: {e}")))?;
    let (before, after) = (data_symbols(&old_elf), data_symbols(&new_elf));
    let missing: Vec<String> = before.difference(&after).cloned().collect();
    if !missing.is_empty() {
        return Err(ReplaceError::MissingSymbols { missing });
    }
    Ok(ObjectCheck {
        processor: tid.processor,
        old_flags: old_target.flags,
        new_flags: new_target.flags,
        old_abi_version: old.get(8).copied().unwrap_or(0),
        new_abi_version: new.get(8).copied().unwrap_or(0),
        symbols: before.into_iter().collect(),
    })
}
