//! Bundles stored as sections of an object file (`-type=o`): one section
//! `__CLANG_OFFLOAD_BUNDLE__<id>` per entry, the host entry being a section
//! of one zero byte while the object itself is the host code.
//!
//! Reading works for ELF, COFF and Mach-O (Mach-O section names have at
//! most 16 bytes, so a Mach-O file never holds a bundle, as with LLVM).
//! Writing and host extraction rewrite ELF files in process the way
//! llvm-objcopy does ([`crate::elf::rewrite()`]) and COFF files with
//! [`crate::coff`]; LLVM cannot write Mach-O bundles either.

use super::binary::MAGIC;
use crate::elf::{self, ElfError, ElfFile, NewSection};
use crate::plan::Plan;
use object::read::{Object as _, ObjectSection as _};

/// The contents of the host entry's section.
pub const HOST_MARKER: &[u8] = &[0];

/// Errors of object files that look like objects but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// A malformed ELF file.
    #[error("{0}")]
    Elf(#[from] ElfError),
    /// A malformed COFF file.
    #[error("{0}")]
    Coff(#[from] crate::coff::CoffError),
    /// A malformed object of another format (Mach-O).
    #[error("malformed {format} file: {message}")]
    Malformed {
        /// The format's name.
        format: &'static str,
        /// What is wrong.
        message: String,
    },
    /// An object the bundler cannot handle (the reason).
    #[error("{0}")]
    Unsupported(String),
}

/// The object formats whose sections can hold bundles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// ELF, 32 or 64 bits, either byte order.
    Elf,
    /// COFF (Windows objects).
    Coff,
    /// Mach-O: recognised, but LLVM 19's bundler cannot put bundles in it.
    MachO,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Elf => "ELF",
            Format::Coff => "COFF",
            Format::MachO => "Mach-O",
        }
    }
}

/// Whether `data` starts like an ELF, COFF or Mach-O object file (32 or
/// 64 bits), judged by its header alone: the test LLVM's archive writer
/// and our scanner use before opening a file as an object.
pub fn looks_like_object(data: &[u8]) -> bool {
    elf::has_ident(data)
        || matches!(
            object::FileKind::parse(data),
            Ok(object::FileKind::Coff
                | object::FileKind::CoffBig
                | object::FileKind::MachO32
                | object::FileKind::MachO64)
        )
}

/// Whether `data` is an object file, which makes LLVM's bundler use the
/// object handler for `-type=o` and archive members (everything else uses
/// the binary format). Files with an ELF or Mach-O magic that do not parse
/// are an error here; LLVM silently treats them as non-objects.
pub fn detect(data: &[u8]) -> Result<Option<Format>, ObjectError> {
    if elf::is_elf(data) {
        ElfFile::parse(data)?;
        return Ok(Some(Format::Elf));
    }
    let kind = object::FileKind::parse(data);
    let format = match kind {
        Ok(object::FileKind::Coff | object::FileKind::CoffBig) => Format::Coff,
        Ok(object::FileKind::MachO32 | object::FileKind::MachO64) => Format::MachO,
        _ => return Ok(None),
    };
    match object::File::parse(data) {
        Ok(_) => Ok(Some(format)),
        // COFF has no magic number: a blob that merely starts like one is
        // not an object, as for LLVM.
        Err(_) if format == Format::Coff => Ok(None),
        Err(e) => Err(ObjectError::Malformed { format: format.name(), message: e.to_string() }),
    }
}

/// A bundle section: its entry ID and contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BundleSection<'a> {
    /// The entry ID (the section name without its prefix).
    pub id: &'a [u8],
    /// The section's contents, a slice of the input.
    pub contents: &'a [u8],
}

impl BundleSection<'_> {
    /// A one-zero-byte section stands for the host object itself.
    pub fn is_host_marker(&self) -> bool {
        self.contents == HOST_MARKER
    }
}

/// The bundle sections of an object, in section table order.
pub fn bundles(data: &[u8], format: Format) -> Result<Vec<BundleSection<'_>>, ObjectError> {
    let mut out = Vec::new();
    match format {
        Format::Elf => {
            let file = ElfFile::parse(data)?;
            for i in 0..file.sections.len() {
                let name = file.section_name(i)?;
                if let Some(id) = name.strip_prefix(MAGIC.as_slice()) {
                    out.push(BundleSection { id, contents: file.section_data(i)? });
                }
            }
        }
        Format::Coff | Format::MachO => {
            let bad = |e: object::Error| ObjectError::Malformed { format: format.name(), message: e.to_string() };
            let file = object::File::parse(data).map_err(bad)?;
            for section in file.sections() {
                let name = section.name_bytes().map_err(bad)?;
                if let Some(id) = name.strip_prefix(MAGIC.as_slice()) {
                    out.push(BundleSection { id, contents: section.data().map_err(bad)? });
                }
            }
        }
    }
    Ok(out)
}

fn is_bundle_section(name: &[u8]) -> bool {
    name.starts_with(MAGIC)
}

/// The host object of a fat object: the object without its bundle
/// sections, as `llvm-objcopy --regex --remove-section=__CLANG_OFFLOAD_BUNDLE__.*`
/// writes it.
pub fn host_object(data: &[u8], format: Format) -> Result<Plan<'_>, ObjectError> {
    match format {
        Format::Elf => Ok(elf::rewrite(data, &is_bundle_section, Vec::new())?),
        Format::Coff => Ok(crate::coff::rewrite(data, &is_bundle_section, Vec::new())?),
        Format::MachO => Err(ObjectError::Unsupported("Mach-O objects cannot hold offload bundles".into())),
    }
}

/// Adds one bundle section per entry to `host` (entries in `-targets`
/// order, IDs already standardized); the entry at `host_index` gets the
/// one-byte host marker.
pub fn bundle<'a>(
    host: &'a [u8],
    format: Format,
    entries: &[(&[u8], &'a [u8])],
    host_index: usize,
) -> Result<Plan<'a>, ObjectError> {
    let sections: Vec<NewSection<'a>> = entries
        .iter()
        .enumerate()
        .map(|(i, (id, payload))| NewSection {
            name: [MAGIC.as_slice(), id].concat(),
            data: if i == host_index { HOST_MARKER } else { payload },
        })
        .collect();
    match format {
        Format::Elf => Ok(elf::rewrite(host, &|_| false, sections)?),
        Format::Coff => Ok(crate::coff::rewrite(host, &|_| false, sections)?),
        Format::MachO => Err(ObjectError::Unsupported(
            "cannot add offload bundle sections to a Mach-O object (LLVM 19's llvm-objcopy cannot either)".into(),
        )),
    }
}
