//! Whether a new code object may take the place of an entry of a CUDA fat
//! binary. The CUDA runtime picks an entry by its header (kind and SM,
//! docs/formats/cuda-fatbin.md §7) and then finds kernels and variables by the names
//! the host registers, so:
//!
//! * a cubin entry takes a cubin (ELF, `EM_CUDA`) of the same class, for
//!   the same SM (read from `e_flags` in either cubin ABI, docs/formats/cuda-fatbin.md §4 "The
//!   cubin itself"), of the same ELF type (whole-program `ET_EXEC` or
//!   relocatable `ET_REL`), with the same address size, defining every
//!   kernel and variable (global `STT_FUNC`/`STT_OBJECT` symbol) the old
//!   one defined;
//! * a PTX entry takes PTX text whose `.target` names the entry's
//!   architecture (suffix included) and which declares every `.entry` the
//!   old text declared.
//!
//! The suffix of `sm_90a` is not in a cubin's `e_flags` (docs/formats/cuda-fatbin.md §4), so only
//! the number is compared for cubins; the entry header keeps its suffix.

use super::ReplaceError;
use super::object::{ObjectCheck, defined_symbols};
use offload_format::bytes::u16_le;
use offload_format::cuda::{Arch, Cubin, EM_CUDA, Entry, EntryKind, cubin_extent, ptx_text};
use offload_format::elf::symbols::STT_FUNC;
use offload_format::elf::{EF_CUDA_64BIT_ADDRESS, EM_AMDGPU, ET_REL, ElfFile, STT_OBJECT};
use std::collections::BTreeSet;

/// `EI_OSABI` of pre-CUDA-13 cubins, whose `e_flags` carry the bit above.
const OLD_CUBIN_ABI: u8 = 0x33;

/// What the checks decided: the report and the code version (major,
/// minor) the new entry header carries, `None` to keep the old one.
pub(super) struct Checked {
    pub check: ObjectCheck,
    pub version: Option<(u16, u16)>,
}

/// Checks that `new` may replace `old`, the code object (as `cuobjdump`
/// extracts it) of `entry`, whose ID is `id`.
pub(super) fn check(id: &str, entry: &Entry, old: &[u8], new: &[u8]) -> Result<Checked, ReplaceError> {
    match entry.header.kind() {
        EntryKind::Elf => check_cubin(id, entry, old, new),
        EntryKind::Ptx => check_ptx(id, entry, old, new),
        kind => Err(ReplaceError::NotSupported(format!(
            "entry '{id}' holds {} code: only cubin (elf) and PTX entries of CUDA fat binaries can be replaced (NVVM is obfuscated)",
            kind.name()
        ))),
    }
}

fn check_cubin(id: &str, entry: &Entry, old: &[u8], new: &[u8]) -> Result<Checked, ReplaceError> {
    let fail = |reason: String| ReplaceError::Object { id: id.to_string(), reason };
    let arch = entry.header.arch();
    if !new.starts_with(b"\x7fELF") {
        let ptx = ptx_directives(new).target.is_some();
        let hint = if ptx { " (it looks like PTX text: replace the entry's compute_ PTX entry instead)" } else { "" };
        return Err(fail(format!("the new file is not an ELF cubin{hint}")));
    }
    let class = |d: &[u8]| if d.get(4) == Some(&1) { 32 } else { 64 };
    if new.get(4) != old.get(4) {
        return Err(fail(format!("the new file is a {}-bit ELF, the entry's cubin is {}-bit", class(new), class(old))));
    }
    if new.get(5) != Some(&1) {
        return Err(fail("the new file is not a little-endian ELF file, as cubins are".into()));
    }
    match u16_le(new, 18) {
        Some(EM_CUDA) => {}
        Some(EM_AMDGPU) => return Err(fail("the new file is an AMDGPU code object, not an NVIDIA cubin".into())),
        Some(m) => return Err(fail(format!("the new file is for ELF machine {m}, not EM_CUDA (190)"))),
        None => return Err(fail("the new file's ELF header is truncated".into())),
    }
    let new_cubin = Cubin::parse(new).ok_or_else(|| fail("the new file's ELF header is truncated".into()))?;
    if cubin_extent(new).is_none() {
        return Err(fail("the new cubin's section or program headers reach past the end of the file".into()));
    }
    let old_cubin = Cubin::parse(old)
        .ok_or_else(|| fail("the entry's payload is not a cubin, so its kernels cannot be compared".into()))?;
    if new_cubin.sm() != arch.number {
        return Err(fail(format!(
            "it is built for sm_{} (e_flags {:#x}, ELF OSABI {:#x}), the entry is for {arch}",
            new_cubin.sm(),
            new_cubin.elf_flags,
            new_cubin.osabi
        )));
    }
    if new_cubin.elf_type != old_cubin.elf_type {
        let what = |t: u16| if t == ET_REL { "relocatable device code (ET_REL, -rdc)" } else { "whole-program code" };
        return Err(fail(format!("it is {}, the entry holds {}", what(new_cubin.elf_type), what(old_cubin.elf_type))));
    }
    let address_bits = |c: &Cubin| c.elf_flags & EF_CUDA_64BIT_ADDRESS != 0;
    if old_cubin.osabi == OLD_CUBIN_ABI
        && new_cubin.osabi == OLD_CUBIN_ABI
        && address_bits(&old_cubin) != address_bits(&new_cubin)
    {
        return Err(fail(format!(
            "its address size differs from the entry's (e_flags {:#x}, the old cubin's {:#x})",
            new_cubin.elf_flags, old_cubin.elf_flags
        )));
    }
    let old_elf = ElfFile::parse(old).map_err(|e| fail(format!("the old cubin: {e}")))?;
    let new_elf = ElfFile::parse(new).map_err(|e| fail(format!("the new cubin: {e}")))?;
    let before = defined_symbols(&old_elf, &[STT_FUNC, STT_OBJECT]);
    let after = defined_symbols(&new_elf, &[STT_FUNC, STT_OBJECT]);
    missing(&before, &after)?;
    // The entry's code version minor is the cubin ABI version (docs/formats/cuda-fatbin.md §4);
    // it follows the new cubin where it followed the old one.
    let version = (entry.header.version_minor == u16::from(old_cubin.abi_version))
        .then_some((entry.header.version_major, u16::from(new_cubin.abi_version)));
    Ok(Checked {
        check: ObjectCheck {
            processor: arch.to_string(),
            old_flags: old_cubin.elf_flags,
            new_flags: new_cubin.elf_flags,
            old_abi_version: old_cubin.abi_version,
            new_abi_version: new_cubin.abi_version,
            symbols: before.into_iter().collect(),
        },
        version,
    })
}

fn missing(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Result<(), ReplaceError> {
    let missing: Vec<String> = before.difference(after).cloned().collect();
    if missing.is_empty() { Ok(()) } else { Err(ReplaceError::MissingSymbols { missing }) }
}

/// The directives of PTX text `replace` looks at.
#[derive(Default)]
struct PtxDirectives {
    /// `.version` as (major, minor).
    version: Option<(u16, u16)>,
    /// The first word after `.target` (`sm_80`).
    target: Option<String>,
    /// The names after `.entry`.
    entries: BTreeSet<String>,
}

/// Reads `.version`, `.target` and `.entry` from PTX text, word by word,
/// skipping `//` comments (the form compilers write).
fn ptx_directives(text: &[u8]) -> PtxDirectives {
    let mut found = PtxDirectives::default();
    let text = String::from_utf8_lossy(ptx_text(text));
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let separator = |c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | ';' | '{');
        let words: Vec<&str> = line.split(separator).filter(|w| !w.is_empty()).collect();
        for pair in words.windows(2) {
            match pair[0] {
                ".version" if found.version.is_none() => {
                    found.version = pair[1].split_once('.').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                }
                ".target" if found.target.is_none() => found.target = Some(pair[1].to_string()),
                ".entry" => {
                    found.entries.insert(pair[1].to_string());
                }
                _ => {}
            }
        }
    }
    found
}

fn check_ptx(id: &str, entry: &Entry, old: &[u8], new: &[u8]) -> Result<Checked, ReplaceError> {
    let fail = |reason: String| ReplaceError::Object { id: id.to_string(), reason };
    let arch = entry.header.arch();
    let compute = format!("compute_{}", &arch.to_string()[3..]);
    if new.starts_with(b"\x7fELF") {
        return Err(fail(format!("the new file is an ELF file; the entry holds {compute} PTX text")));
    }
    let text_len = ptx_text(new).len();
    if new[text_len..].iter().any(|&b| b != 0) {
        return Err(fail("the new file has bytes after a NUL: it is not PTX text".into()));
    }
    let after = ptx_directives(new);
    let Some(version) = after.version else {
        return Err(fail("the new file has no .version directive: it is not PTX text".into()));
    };
    let Some(target) = after.target else {
        return Err(fail("the new PTX has no .target directive".into()));
    };
    if Arch::parse(&target) != Some(arch) {
        return Err(fail(format!("its .target is {target}, the entry is {compute} PTX (.target {arch})")));
    }
    let before = ptx_directives(old);
    missing(&before.entries, &after.entries)?;
    Ok(Checked {
        check: ObjectCheck {
            processor: compute,
            old_flags: 0,
            new_flags: 0,
            old_abi_version: 0,
            new_abi_version: 0,
            symbols: before.entries.into_iter().collect(),
        },
        version: Some(version),
    })
}
