//! Finding OffloadBinary packages in the files tools are given, the way
//! LLVM 19's `extractOffloadBinaries` dispatches on the file's magic:
//!
//! * a raw package (`10 FF 10 AD`): the whole file;
//! * ELF relocatable, executable or shared object: every section of type
//!   `SHT_LLVM_OFFLOADING` (the name is not checked);
//! * COFF object: every section whose name starts with `.llvm.offloading`;
//! * LLVM bitcode (raw or wrapped): the globals that the named metadata
//!   `!llvm.embedded.objects` pairs with `".llvm.offloading"`;
//! * `ar` archive: each member, recursively;
//! * anything else (including Mach-O and ELF core files): nothing.
//!
//! The packages are returned unparsed; read each with
//! [`super::OffloadBinary::parse_all`]. Payloads are borrowed from the input
//! except those decoded from bitcode.

use super::{MAGIC, SHT_LLVM_OFFLOADING, bitcode};
use crate::elf::ElfFile;
use object::read::archive::ArchiveFile;
use object::{Object, ObjectSection};
use std::borrow::Cow;

/// Where a package was found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The file (or archive member) is the package.
    Raw,
    /// An ELF section of type `SHT_LLVM_OFFLOADING`.
    ElfSection {
        /// The section's index in the section table.
        index: usize,
        /// The section's name.
        name: String,
        /// Offset of the section's contents in the file.
        file_offset: u64,
    },
    /// A COFF section named `.llvm.offloading*`.
    CoffSection {
        /// The section's index in the section table.
        index: usize,
        /// The section's name.
        name: String,
        /// Offset of the section's contents in the file.
        file_offset: u64,
    },
    /// A global of a bitcode module listed in `!llvm.embedded.objects`.
    Bitcode {
        /// The global's name.
        global: String,
    },
}

/// One package (one or more concatenated OffloadBinaries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package<'a> {
    /// The package's bytes: a slice of the input, or decoded from bitcode.
    pub data: Cow<'a, [u8]>,
    /// Where it was found.
    pub origin: Origin,
    /// Archive members the package lies in, outermost first.
    pub members: Vec<String>,
    /// The name LLVM attaches to the package's buffer (the innermost
    /// archive member's name, else the file's); LLVM 19 uses it as the
    /// member name when it writes extracted images to an archive.
    pub identifier: String,
}

/// A container that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContainerError {
    /// An ELF or COFF object LLVM would also reject.
    #[error("{identifier}: {reason}")]
    Object {
        /// The name of the file or member.
        identifier: String,
        /// What is wrong.
        reason: String,
    },
    /// Bitcode that LLVM could not turn into a module.
    #[error("Failed to create module")]
    Bitcode {
        /// The name of the file or member.
        identifier: String,
        /// What is wrong.
        reason: String,
    },
    /// A malformed `ar` archive.
    #[error("truncated or malformed archive ({reason})")]
    Archive {
        /// The name of the file or member.
        identifier: String,
        /// What is wrong.
        reason: String,
    },
    /// Members of thin archives live in other files, which this library
    /// does not read.
    #[error("'{member}': members of thin archives are not read")]
    ThinArchive {
        /// The archive's name.
        identifier: String,
        /// The member's name.
        member: String,
    },
    /// Archives inside archives beyond the depth limit.
    #[error("'{identifier}': archives nested too deeply")]
    TooDeep {
        /// The innermost archive's name.
        identifier: String,
    },
}

impl ContainerError {
    /// Why the container was refused, in full.
    pub fn detail(&self) -> String {
        match self {
            ContainerError::Bitcode { identifier, reason } => format!("{identifier}: bitcode: {reason}"),
            ContainerError::Archive { identifier, reason } => format!("{identifier}: archive: {reason}"),
            e => e.to_string(),
        }
    }
}

/// The result of a scan: the packages found, in file order, and the error
/// that stopped the scan, if any (it lies after every package listed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan<'a> {
    /// The packages found, in file order.
    pub packages: Vec<Package<'a>>,
    /// The error that stopped the scan.
    pub error: Option<ContainerError>,
}

/// The kinds of file the scan tells apart (LLVM's `identify_magic`, reduced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// Starts with the OffloadBinary magic.
    OffloadBinary,
    /// LLVM bitcode.
    Bitcode,
    /// ELF with e_type relocatable, executable or shared object.
    Elf,
    /// A COFF object.
    Coff,
    /// An `ar` archive.
    Archive,
    /// Anything else.
    Other,
}

/// Classifies `data` by its first bytes.
pub fn file_kind(data: &[u8]) -> FileKind {
    if data.len() >= 4 && data[..4] == MAGIC {
        return FileKind::OffloadBinary;
    }
    if super::is_bitcode(data) {
        return FileKind::Bitcode;
    }
    if data.starts_with(b"!<arch>\n") || data.starts_with(b"!<thin>\n") || data.starts_with(b"<bigaf>\n") {
        return FileKind::Archive;
    }
    if data.len() >= 18 && data.starts_with(b"\x7fELF") {
        let (hi, lo) = if data[5] == 2 { (data[16], data[17]) } else { (data[17], data[16]) };
        return if hi == 0 && (1..=3).contains(&lo) { FileKind::Elf } else { FileKind::Other };
    }
    if matches!(object::FileKind::parse(data), Ok(object::FileKind::Coff | object::FileKind::CoffBig)) {
        return FileKind::Coff;
    }
    FileKind::Other
}

const MAX_DEPTH: usize = 16;

/// Finds every package in `data`; `identifier` names the file (LLVM's
/// buffer identifier: the path as given, `<stdin>` for standard input).
pub fn scan<'a>(data: &'a [u8], identifier: &str) -> Scan<'a> {
    let mut out = Scan::default();
    if let Err(e) = scan_into(data, identifier, &[], &mut out.packages, 0) {
        out.error = Some(e);
    }
    out
}

fn scan_into<'a>(
    data: &'a [u8],
    identifier: &str,
    members: &[String],
    out: &mut Vec<Package<'a>>,
    depth: usize,
) -> Result<(), ContainerError> {
    let package = |data: Cow<'a, [u8]>, origin| Package {
        data,
        origin,
        members: members.to_vec(),
        identifier: identifier.to_string(),
    };
    match file_kind(data) {
        FileKind::OffloadBinary => out.push(package(Cow::Borrowed(data), Origin::Raw)),
        FileKind::Elf => {
            let found = elf_sections(data)
                .map_err(|reason| ContainerError::Object { identifier: identifier.into(), reason })?;
            for (index, name, file_offset, bytes) in found {
                out.push(package(Cow::Borrowed(bytes), Origin::ElfSection { index, name, file_offset }));
            }
        }
        FileKind::Coff => {
            let err =
                |e: object::Error| ContainerError::Object { identifier: identifier.into(), reason: e.to_string() };
            let file = object::File::parse(data).map_err(err)?;
            for section in file.sections() {
                let name = section.name().map_err(err)?;
                if !name.starts_with(".llvm.offloading") {
                    continue;
                }
                let bytes = section.data().map_err(err)?;
                let file_offset = section.file_range().map(|(o, _)| o).unwrap_or(0);
                let origin = Origin::CoffSection { index: section.index().0, name: name.to_string(), file_offset };
                out.push(package(Cow::Borrowed(bytes), origin));
            }
        }
        FileKind::Bitcode => {
            let found = bitcode::embedded_objects(data)
                .map_err(|reason| ContainerError::Bitcode { identifier: identifier.into(), reason })?;
            for e in found {
                out.push(package(Cow::Owned(e.bytes), Origin::Bitcode { global: e.global }));
            }
        }
        FileKind::Archive => {
            if depth >= MAX_DEPTH {
                return Err(ContainerError::TooDeep { identifier: identifier.into() });
            }
            let err =
                |e: object::Error| ContainerError::Archive { identifier: identifier.into(), reason: e.to_string() };
            let archive = ArchiveFile::parse(data).map_err(err)?;
            for member in archive.members() {
                let member = member.map_err(err)?;
                let name = String::from_utf8_lossy(member.name()).into_owned();
                if archive.is_thin() {
                    return Err(ContainerError::ThinArchive { identifier: identifier.into(), member: name });
                }
                let bytes = member.data(data).map_err(err)?;
                let mut chain = members.to_vec();
                chain.push(name.clone());
                scan_into(bytes, &name, &chain, out, depth + 1)?;
            }
        }
        FileKind::Other => {}
    }
    Ok(())
}

type ElfFound<'a> = Vec<(usize, String, u64, &'a [u8])>;

fn elf_sections(data: &[u8]) -> Result<ElfFound<'_>, String> {
    let file = ElfFile::parse(data).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (index, section) in file.sections.iter().enumerate() {
        if section.sh_type != SHT_LLVM_OFFLOADING {
            continue;
        }
        let bytes = file.section_data(index).map_err(|e| e.to_string())?;
        let name = file.section_name(index).map(|n| String::from_utf8_lossy(n).into_owned());
        out.push((index, name.unwrap_or_default(), section.offset, bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_magic() {
        assert_eq!(file_kind(b"\x10\xff\x10\xad"), FileKind::OffloadBinary);
        assert_eq!(file_kind(b"BC\xC0\xDE"), FileKind::Bitcode);
        assert_eq!(file_kind(b"!<arch>\n"), FileKind::Archive);
        let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0".to_vec();
        assert_eq!(file_kind(&elf), FileKind::Elf);
        elf[16] = 4; // core file
        assert_eq!(file_kind(&elf), FileKind::Other);
        assert_eq!(file_kind(b"hello"), FileKind::Other);
        assert_eq!(file_kind(b""), FileKind::Other);
    }

    #[test]
    fn foreign_files_yield_nothing_and_broken_ones_an_error() {
        let s = scan(b"just some text, nothing to see", "x");
        assert!(s.packages.is_empty() && s.error.is_none());
        let s = scan(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0\x3e\0", "x");
        assert!(s.error.is_some());
        let s = scan(b"!<arch>\nbroken", "x");
        assert!(matches!(s.error, Some(ContainerError::Archive { .. })), "{s:?}");
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_containers_never_panic(
            magic in 0usize..6,
            tail in prop::collection::vec(any::<u8>(), 0..600),
        ) {
            let prefixes: [&[u8]; 6] = [
                b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x01\0",
                b"\x7fELF\x01\x02\x01\0\0\0\0\0\0\0\0\0\0\x01",
                b"!<arch>\n",
                b"BC\xC0\xDE",
                b"\xDE\xC0\x17\x0B",
                b"\x64\x86",
            ];
            let mut d = prefixes[magic].to_vec();
            d.extend(tail);
            let s = scan(&d, "x");
            for p in &s.packages {
                prop_assert!(p.data.len() <= d.len());
            }
        }
    }
}
