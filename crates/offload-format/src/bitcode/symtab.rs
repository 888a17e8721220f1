//! The symbols an archive index lists for an LLVM bitcode member.
//!
//! LLVM's archive writer loads bitcode members as IR and indexes their
//! defined global symbols. Clang also writes those symbols, in the same
//! order and with the same flags, into the bitcode file's IR symbol table
//! (`SYMTAB_BLOCK`, names in the following `STRTAB_BLOCK`), so reading that
//! table gives the same index without an IR reader. Only the top-level
//! blocks of the bitstream are walked, to find the two blobs; it never
//! panics, and gives `None` for anything it cannot read.

use super::stream::{self, BlockInfo};

/// Top-level block IDs and the record code of their blob.
const STRTAB_BLOCK: u64 = 23;
const SYMTAB_BLOCK: u64 = 25;
const BLOB_RECORD: u64 = 1;

/// The IR symbol table and its string table, if the file has them: the
/// first SYMTAB block that has a blob, and the first such STRTAB block
/// after it. A block that cannot be read is passed over by its length.
fn symtab_and_strtab(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut bits = stream::open(data).ok()?;
    // Stays empty: top-level BLOCKINFO blocks are skipped like any other.
    let mut info = BlockInfo::default();
    let (mut symtab, mut strtab) = (None, None);
    while let Some(header) = stream::next_top_block(&mut bits).ok()? {
        let wanted = match header.id {
            SYMTAB_BLOCK => symtab.is_none(),
            STRTAB_BLOCK => symtab.is_some() && strtab.is_none(),
            _ => false,
        };
        if wanted {
            let blob = stream::block_blob(&mut bits.clone(), &header, &mut info, BLOB_RECORD).ok().flatten();
            if header.id == SYMTAB_BLOCK { symtab = blob } else { strtab = blob }
        }
        stream::skip_block(&mut bits, &header).ok()?;
    }
    Some((symtab?, strtab?))
}

const FB_UNDEFINED: u32 = 1 << 3;
const FB_GLOBAL: u32 = 1 << 10;
const FB_FORMAT_SPECIFIC: u32 = 1 << 11;

/// The names an archive symbol index lists for this bitcode file: its
/// defined global symbols that are not format-specific, in IR order.
/// `None` when the file has no readable IR symbol table.
pub fn archive_symbols(data: &[u8]) -> Option<Vec<&[u8]>> {
    let (symtab, strtab) = symtab_and_strtab(data)?;
    let word = |at: usize| crate::bytes::u32_le(symtab, at);
    let version = word(0)?;
    if !(1..=4).contains(&version) {
        return None;
    }
    // Header: Version, Producer{off,size}, Modules{off,n}, Comdats{off,n},
    // Symbols{off,n}, ...; each symbol is Name, IRName, ComdatIndex, Flags.
    let (offset, count) = (word(28)? as usize, word(32)? as usize);
    let table = symtab.get(offset..offset.checked_add(count.checked_mul(24)?)?)?;
    let mut names = Vec::new();
    for sym in table.chunks_exact(24) {
        // Each symbol is 24 bytes, so these reads never fail.
        let w = |at: usize| crate::bytes::u32_le(sym, at).map(|v| v as usize);
        let flags = w(20)? as u32;
        if flags & FB_GLOBAL == 0 || flags & (FB_UNDEFINED | FB_FORMAT_SPECIFIC) != 0 {
            continue;
        }
        let (name, len) = (w(0)?, w(4)?);
        names.push(strtab.get(name..name.checked_add(len)?)?);
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::bitstream::{AbbrevOp, BitWriter};
    use std::borrow::Cow;

    #[test]
    fn garbage_is_not_read() {
        assert_eq!(archive_symbols(b"BC\xc0\xde"), None);
        assert_eq!(archive_symbols(b"BC\xc0\xde\xff\xff\xff\xff\xff\xff\xff\xff"), None);
        assert_eq!(archive_symbols(b"not bitcode"), None);
        assert_eq!(archive_symbols(&[0xde, 0xc0, 0x17, 0x0b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), None);
    }

    /// A version 3 symbol table listing (name, flags) pairs whose names are
    /// `strtab` ranges.
    fn symtab(symbols: &[((u32, u32), u32)]) -> Vec<u8> {
        let mut header = [0u32; 9];
        header[0] = 3;
        (header[7], header[8]) = (36, symbols.len() as u32);
        let mut out: Vec<u8> = header.iter().flat_map(|w| w.to_le_bytes()).collect();
        for &((name, size), flags) in symbols {
            out.extend([name, size, 0, 0, u32::MAX, flags].iter().flat_map(|w| w.to_le_bytes()));
        }
        out
    }

    fn file(blocks: &[(u64, &[u8])]) -> Vec<u8> {
        let mut w = BitWriter::new();
        w.bytes(b"BC\xC0\xDE");
        for &(id, blob) in blocks {
            w.enter_block(id, 3);
            let abbrev = w.define_abbrev(&[AbbrevOp::Literal(BLOB_RECORD), AbbrevOp::Blob]);
            w.abbrev_record(abbrev, &[BLOB_RECORD], Cow::Owned(blob.to_vec())).unwrap();
            w.end_block();
        }
        w.finish().to_vec()
    }

    #[test]
    fn defined_globals_are_listed_in_order() {
        let table = symtab(&[
            ((0, 4), FB_GLOBAL),
            ((4, 3), 0),                               // local
            ((7, 5), FB_GLOBAL | FB_UNDEFINED),        // declared only
            ((12, 4), FB_GLOBAL | FB_FORMAT_SPECIFIC), // e.g. llvm.used
            ((16, 3), FB_GLOBAL | 1),
        ]);
        let strtab = b"mainhidundefllvmvar";
        let bc = file(&[(8, b"module"), (SYMTAB_BLOCK, &table), (STRTAB_BLOCK, strtab)]);
        assert_eq!(archive_symbols(&bc), Some(vec![&b"main"[..], b"var"]));
        // The string table must follow the symbol table.
        assert_eq!(archive_symbols(&file(&[(STRTAB_BLOCK, strtab), (SYMTAB_BLOCK, &table)])), None);
        // A name past the string table makes the whole table unreadable.
        assert_eq!(archive_symbols(&file(&[(SYMTAB_BLOCK, &table), (STRTAB_BLOCK, b"main")])), None);
        // Every cut that loses a block loses the table; none panics.
        for len in 0..bc.len() {
            assert_eq!(archive_symbols(&bc[..len]), None);
        }
    }
}
