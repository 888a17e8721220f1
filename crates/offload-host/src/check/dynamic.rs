//! What the dynamic loader reads from a program or shared library before it
//! loads anything else: the ELF class and machine (a library of another
//! ABI is passed over), and the dynamic section's `DT_NEEDED`, `DT_SONAME`,
//! `DT_RPATH`, `DT_RUNPATH` and `DF_1_NODEFLIB` (tag values from the
//! System V ABI and glibc's `elf.h`).
//!
//! The dynamic section is found through the section table (`SHT_DYNAMIC`,
//! its `sh_link` naming the string table), as every linker writes it.

use offload_format::elf::{DT_FLAGS_1, DT_NEEDED, DT_NULL, DT_RPATH, DT_RUNPATH, DT_SONAME, ET_DYN, ET_EXEC};
use offload_format::elf::{ElfFile, SHT_DYNAMIC};

const DF_1_NODEFLIB: u64 = 0x800;

/// The ABI a loader accepts: a library must match the program in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Abi {
    /// ELFCLASS64.
    pub is64: bool,
    /// Little endian.
    pub little: bool,
    /// `e_machine`.
    pub machine: u16,
}

/// The loader's view of one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dynamic {
    /// Libraries it needs, in `DT_NEEDED` order.
    pub needed: Vec<String>,
    /// Its `DT_SONAME`.
    pub soname: Option<String>,
    /// `DT_RPATH`, as stored (colon-separated, `$ORIGIN` unexpanded).
    pub rpath: Option<String>,
    /// `DT_RUNPATH`, as stored.
    pub runpath: Option<String>,
    /// `DF_1_NODEFLIB`: its dependencies are not looked up in the cache
    /// or the system folders.
    pub nodeflib: bool,
}

/// Why an ELF file's dynamic section cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DynamicError {
    /// The ELF headers are malformed.
    #[error(transparent)]
    Elf(#[from] offload_format::elf::ElfError),
    /// A string offset outside the dynamic string table.
    #[error("dynamic entry {index} (tag {tag:#x}) names string offset {offset:#x}, outside its string table")]
    BadString {
        /// Index of the entry in the dynamic section.
        index: usize,
        /// Its tag.
        tag: u64,
        /// The offset it names.
        offset: u64,
    },
}

/// The ABI of an ELF file, read from its identification bytes; `None` when
/// the bytes are not ELF.
pub fn abi(data: &[u8]) -> Option<Abi> {
    if !offload_format::elf::is_elf(data) || data.len() < 20 {
        return None;
    }
    let little = data[5] != 2;
    let machine = offload_format::bytes::u16_endian(data, 18, !little)?;
    Some(Abi { is64: data[4] == 2, little, machine })
}

/// Whether the file is a program or shared library (`ET_EXEC`, `ET_DYN`),
/// the only kinds the loader maps.
pub fn is_loadable(data: &[u8]) -> bool {
    ElfFile::parse(data).is_ok_and(|f| matches!(f.header.e_type, ET_EXEC | ET_DYN))
}

/// Reads the dynamic section; a statically linked file (no `SHT_DYNAMIC`)
/// gives the empty [`Dynamic`].
pub fn read(data: &[u8]) -> Result<Dynamic, DynamicError> {
    let file = ElfFile::parse(data)?;
    let mut out = Dynamic::default();
    let Some(index) = file.sections.iter().position(|s| s.sh_type == SHT_DYNAMIC) else {
        return Ok(out);
    };
    let table = file.section_data(index)?;
    let link = file.sections.get(index).map_or(0, |s| s.link as usize);
    let strings = file.string_table(link)?;
    let c = &file.codec;
    let w = c.word_size();
    let mut flags_1 = 0;
    for (i, at) in (0..table.len() / (2 * w)).map(|i| (i, i * 2 * w)) {
        let (Some(tag), Some(val)) = (c.word(table, at), c.word(table, at + w)) else { break };
        let string = || {
            u32::try_from(val)
                .ok()
                .and_then(|o| offload_format::elf::c_string(strings, o))
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .ok_or(DynamicError::BadString { index: i, tag, offset: val })
        };
        match tag {
            DT_NULL => break,
            DT_NEEDED => out.needed.push(string()?),
            DT_SONAME => out.soname = Some(string()?),
            DT_RPATH => out.rpath = Some(string()?),
            DT_RUNPATH => out.runpath = Some(string()?),
            DT_FLAGS_1 => flags_1 = val,
            _ => {}
        }
    }
    out.nodeflib = flags_1 & DF_1_NODEFLIB != 0;
    Ok(out)
}
