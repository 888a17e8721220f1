//! Writing extracted images as a GNU `ar` archive, as LLVM 19's
//! `clang-offload-packager --archive` does with `writeArchive` (GNU format,
//! deterministic headers, a symbol table of the members' global symbols).
//!
//! The archive layout comes from `ar_archive_writer` (a port of LLVM's
//! archive writer). Its default symbol reader panics on some corrupt
//! objects, so members are read here with our own, fallible reader. As in
//! LLVM, a member that is not an object contributes no symbols; a bitcode
//! member contributes the defined globals of its IR symbol table
//! (`bitcode::archive_symbols`), none when it has no readable table.

use ar_archive_writer::{ArchiveKind, NewArchiveMember, ObjectReader};
use object::{Object, ObjectSymbol, SymbolKind};
use std::io;

/// Why an archive could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// A member that cannot be archived.
    #[error("'{member}': {reason}")]
    Member {
        /// The member's name.
        member: String,
        /// Why.
        reason: String,
    },
    /// Writing the archive failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Whether LLVM's archive writer treats `buf` as a symbolic file (one whose
/// presence makes it write a symbol table, even an empty one).
fn is_symbolic(buf: &[u8]) -> bool {
    // LLVM skips (with a warning) bitcode it cannot read.
    (super::is_bitcode(buf) && super::bitcode::embedded_objects(buf).is_ok())
        || crate::bundle::object::looks_like_object(buf)
}

fn member_symbols(buf: &[u8], f: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<bool> {
    if !is_symbolic(buf) {
        return Ok(false);
    }
    if super::is_bitcode(buf) {
        for name in crate::bitcode::archive_symbols(buf).unwrap_or_default() {
            f(name)?;
        }
        return Ok(true);
    }
    let invalid = |e: crate::elf::ElfError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    if crate::elf::is_elf(buf) {
        let elf = crate::elf::symbol_index::open(buf).map_err(invalid)?;
        for name in crate::elf::symbol_index::names(&elf).map_err(invalid)? {
            f(name)?;
        }
        return Ok(true);
    }
    // COFF and Mach-O: read through `object` (ARCHITECTURE.md, "One reader
    // per format").
    let file = object::File::parse(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    for sym in file.symbols() {
        if matches!(sym.kind(), SymbolKind::File | SymbolKind::Section) || !sym.is_global() || sym.is_undefined() {
            continue;
        }
        let name = sym.name_bytes().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        f(name)?;
    }
    Ok(true)
}

fn is_64_bit(buf: &[u8]) -> bool {
    (crate::elf::has_ident(buf) && buf.get(4) == Some(&2))
        || matches!(object::FileKind::parse(buf), Ok(object::FileKind::MachO64 | object::FileKind::MachOFat64))
}

fn coff_machine(buf: &[u8]) -> Option<u16> {
    match object::FileKind::parse(buf) {
        Ok(object::FileKind::Coff) => crate::bytes::u16_le(buf, 0),
        Ok(object::FileKind::CoffImport) => crate::bytes::u16_le(buf, 6),
        _ => None,
    }
}

fn is_ec(buf: &[u8]) -> bool {
    coff_machine(buf).is_some_and(|m| m != object::pe::IMAGE_FILE_MACHINE_ARM64.0)
}

fn is_any_arm64_coff(buf: &[u8]) -> bool {
    coff_machine(buf).is_some_and(|m| {
        m == object::pe::IMAGE_FILE_MACHINE_ARM64.0
            || m == object::pe::IMAGE_FILE_MACHINE_ARM64EC.0
            || m == object::pe::IMAGE_FILE_MACHINE_ARM64X.0
    })
}

fn xcoff_alignment(_: &[u8]) -> u32 {
    // Only AIX big archives align members; GNU archives do not ask.
    2
}

static READER: ObjectReader = ObjectReader {
    get_symbols: member_symbols,
    is_64_bit_object_file: is_64_bit,
    is_ec_object_file: is_ec,
    is_any_arm64_coff,
    get_xcoff_member_alignment: xcoff_alignment,
};

/// A GNU archive of `members` (name, bytes) in the given order.
pub fn write_gnu_archive(members: &[(&str, &[u8])]) -> Result<Vec<u8>, ArchiveError> {
    // Read every member's symbols first so that a corrupt one is reported
    // by name instead of failing the whole write anonymously.
    for (name, bytes) in members {
        member_symbols(bytes, &mut |_| Ok(()))
            .map_err(|e| ArchiveError::Member { member: name.to_string(), reason: e.to_string() })?;
    }
    // ar_archive_writer 0.5 pads a short member name to its 16-byte field
    // by counting characters, not bytes, so a name with non-ASCII
    // characters (`café.out`) would shift the rest of the header and
    // corrupt the archive. Such names are written as ASCII placeholders of
    // the same byte length and patched in afterwards.
    let placeholders: Vec<String> = members.iter().map(|(name, _)| header_safe_name(name)).collect();
    let new: Vec<NewArchiveMember<'_>> = members
        .iter()
        .zip(&placeholders)
        .map(|((_, bytes), name)| NewArchiveMember::new(*bytes, &READER, name.clone()))
        .collect();
    let mut out = io::Cursor::new(Vec::new());
    ar_archive_writer::write_archive_to_stream(&mut out, &new, ArchiveKind::Gnu, false, None)?;
    let mut out = out.into_inner();
    patch_short_names(&mut out, members.iter().map(|(name, _)| *name));
    if !members.iter().any(|(_, bytes)| is_symbolic(bytes)) {
        // LLVM writes no symbol table when no member is a symbolic file;
        // ar_archive_writer 0.5 always writes one. Without symbols nothing
        // refers to it, so it can simply be dropped.
        drop_empty_symbol_table(&mut out);
    }
    Ok(out)
}

/// Whether a name goes into the 16-byte name field of its GNU member
/// header (shorter than 16 bytes, no `/`: otherwise it goes to the long-name
/// table) and contains non-ASCII characters.
fn needs_byte_padding(name: &str) -> bool {
    !name.is_ascii() && name.len() < 16 && !name.contains('/')
}

/// The name to give `ar_archive_writer` for a member called `name`: the
/// name itself, or for a short non-ASCII name an ASCII placeholder of the
/// same byte length (the writer pads short names by characters, not bytes,
/// which would corrupt the header), to be replaced by
/// [`patch_short_names`].
pub(crate) fn header_safe_name(name: &str) -> String {
    if needs_byte_padding(name) { "x".repeat(name.len()) } else { name.to_string() }
}

/// Writes each short non-ASCII member name into its header's name field,
/// padded to 16 bytes as LLVM does, after writing with
/// [`header_safe_name`]s. `names` are the real names in member order; the
/// symbol table (`/`) and long-name table (`//`) are skipped.
pub(crate) fn patch_short_names<'n>(ar: &mut [u8], names: impl IntoIterator<Item = &'n str>) {
    const HEADER: usize = 60;
    let mut names = names.into_iter();
    let mut pos = 8;
    while let Some(header) = ar.get_mut(pos..pos + HEADER) {
        let size: Option<usize> = std::str::from_utf8(&header[48..58]).ok().and_then(|s| s.trim().parse().ok());
        let Some(size) = size else { return };
        let special = header.starts_with(b"/ ") || header.starts_with(b"// ");
        if !special {
            let Some(name) = names.next() else { return };
            if needs_byte_padding(name) {
                let field = &mut header[..16];
                field.fill(b' ');
                field[..name.len()].copy_from_slice(name.as_bytes());
                field[name.len()] = b'/';
            }
        }
        pos += HEADER + size + size % 2;
    }
}

/// Removes a leading GNU symbol table member (`/`) that lists no symbols.
fn drop_empty_symbol_table(ar: &mut Vec<u8>) {
    const HEADER: usize = 60;
    let Some(header) = ar.get(8..8 + HEADER) else { return };
    if &header[..16] != b"/               " {
        return;
    }
    let size: Option<usize> = std::str::from_utf8(&header[48..58]).ok().and_then(|s| s.trim().parse().ok());
    let Some(size) = size else { return };
    let body = ar.get(8 + HEADER..8 + HEADER + size).unwrap_or(&[]);
    if body.len() != size || body.get(..4).is_none_or(|count| count != [0, 0, 0, 0]) {
        return;
    }
    let end = 8 + HEADER + size + size % 2;
    ar.drain(8..end.min(ar.len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each member's name and bytes, in order.
    fn members_of(ar: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let archive = object::read::archive::ArchiveFile::parse(ar).unwrap();
        archive
            .members()
            .map(|m| {
                let m = m.unwrap();
                (m.name().to_vec(), m.data(ar).unwrap().to_vec())
            })
            .collect()
    }

    #[test]
    fn members_come_back_in_order() {
        let ar = write_gnu_archive(&[("d/pkg.out", b"hello"), ("d/pkg.out", b"ABCDEFGHIJKLMNOP")]).unwrap();
        assert!(ar.starts_with(b"!<arch>\n"));
        let got = members_of(&ar);
        assert_eq!(
            got,
            [(b"d/pkg.out".to_vec(), b"hello".to_vec()), (b"d/pkg.out".to_vec(), b"ABCDEFGHIJKLMNOP".to_vec())]
        );
    }

    /// Found by fuzzing (rt_archive): a short name with non-ASCII
    /// characters made ar_archive_writer write a 61-byte member header.
    #[test]
    fn non_ascii_short_names_keep_the_header_size() {
        let names = ["caf\u{e9}.out", "\u{7}qq\u{64e}", "\u{1F600}\u{1F600}\u{1F600}", "ascii", "d/caf\u{e9}.out"];
        let data: [&[u8]; 5] = [b"one", b"", b"three", b"four!", b"5"];
        let members: Vec<(&str, &[u8])> = names.iter().copied().zip(data).collect();
        let ar = write_gnu_archive(&members).unwrap();
        let got = members_of(&ar);
        let want: Vec<(Vec<u8>, Vec<u8>)> = members.iter().map(|(n, d)| (n.as_bytes().to_vec(), d.to_vec())).collect();
        assert_eq!(got, want);
        // The name field is byte-padded: `café.out/` and 6 spaces.
        let field = "caf\u{e9}.out/      ".as_bytes();
        assert!(ar.windows(16).any(|w| w == field));
    }

    #[test]
    fn no_symbol_table_without_objects() {
        let ar = write_gnu_archive(&[("x", b"not an object")]).unwrap();
        assert_eq!(&ar[8..10], b"x/");
    }

    #[test]
    fn corrupt_objects_do_not_panic() {
        // An ELF header whose section table points nowhere.
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[6] = 1;
        elf[16] = 1;
        elf[40] = 0xff;
        let _ = write_gnu_archive(&[("x.o", &elf)]);
    }
}
