//! The symbols an archive index lists for an LLVM bitcode member.
//!
//! LLVM's archive writer loads bitcode members as IR and indexes their
//! defined global symbols. Clang also writes those symbols, in the same
//! order and with the same flags, into the bitcode file's IR symbol table
//! (`SYMTAB_BLOCK`, names in the following `STRTAB_BLOCK`), so reading that
//! table gives the same index without an IR reader. This module walks the
//! top-level blocks of the bitstream to find the two blobs; it never
//! panics, and returns `None` for anything it cannot read.

/// Top-level block IDs and the record code of their blob.
const STRTAB_BLOCK: u64 = 23;
const SYMTAB_BLOCK: u64 = 25;
const BLOB_RECORD: u64 = 1;

/// Whether `data` is a (possibly wrapped) bitcode file.
pub fn is_bitcode(data: &[u8]) -> bool {
    data.starts_with(b"BC\xc0\xde") || data.starts_with(&[0xde, 0xc0, 0x17, 0x0b])
}

struct Bits<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: usize,
}

impl<'a> Bits<'a> {
    fn read(&mut self, width: u32) -> Option<u64> {
        if width > 64 {
            return None;
        }
        let mut value = 0u64;
        for i in 0..width {
            let byte = *self.data.get(self.pos / 8)?;
            let bit = (byte >> (self.pos % 8)) & 1;
            value |= u64::from(bit) << i;
            self.pos += 1;
        }
        Some(value)
    }

    fn vbr(&mut self, width: u32) -> Option<u64> {
        if !(2..=32).contains(&width) {
            return None;
        }
        let high = 1u64 << (width - 1);
        let mut value = 0u64;
        let mut shift = 0u32;
        loop {
            let chunk = self.read(width)?;
            if shift >= 64 {
                return None;
            }
            value |= (chunk & (high - 1)) << shift;
            if chunk & high == 0 {
                return Some(value);
            }
            shift += width - 1;
        }
    }

    fn align32(&mut self) {
        self.pos = self.pos.next_multiple_of(32);
    }

    fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let start = self.pos / 8;
        let out = self.data.get(start..start.checked_add(len)?)?;
        self.pos += len * 8;
        Some(out)
    }
}

#[derive(Clone, Copy)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array,
    Char6,
    Blob,
}

/// Reads the blob record of a SYMTAB or STRTAB block whose contents start
/// at the cursor (just after the block length word).
fn block_blob<'a>(bits: &mut Bits<'a>, abbrev_width: u32) -> Option<&'a [u8]> {
    let mut abbrevs: Vec<Vec<Op>> = Vec::new();
    loop {
        match bits.read(abbrev_width)? {
            0 => return None, // END_BLOCK without a blob
            1 => return None, // nested blocks do not occur here
            2 => {
                let count = bits.vbr(5)?;
                let mut ops = Vec::new();
                for _ in 0..count.min(64) {
                    if bits.read(1)? == 1 {
                        ops.push(Op::Literal(bits.vbr(8)?));
                        continue;
                    }
                    ops.push(match bits.read(3)? {
                        1 => Op::Fixed(bits.vbr(5)? as u32),
                        2 => Op::Vbr(bits.vbr(5)? as u32),
                        3 => Op::Array,
                        4 => Op::Char6,
                        5 => Op::Blob,
                        _ => return None,
                    });
                }
                abbrevs.push(ops);
            }
            3 => {
                let _code = bits.vbr(6)?;
                let n = bits.vbr(6)?;
                for _ in 0..n {
                    bits.vbr(6)?;
                }
            }
            id => {
                let ops = abbrevs.get(usize::try_from(id - 4).ok()?)?.clone();
                let mut code = None;
                let mut i = 0;
                while i < ops.len() {
                    let value = match ops[i] {
                        Op::Literal(v) => Some(v),
                        Op::Fixed(w) => Some(bits.read(w)?),
                        Op::Vbr(w) => Some(bits.vbr(w)?),
                        Op::Char6 => Some(bits.read(6)?),
                        Op::Array => {
                            let len = bits.vbr(6)?;
                            let elt = *ops.get(i + 1)?;
                            let left = (bits.data.len() * 8).saturating_sub(bits.pos) as u64;
                            if matches!(elt, Op::Fixed(0)) {
                                i += 2;
                                continue;
                            }
                            if len > left {
                                return None;
                            }
                            for _ in 0..len {
                                match elt {
                                    Op::Fixed(w) => bits.read(w)?,
                                    Op::Vbr(w) => bits.vbr(w)?,
                                    Op::Char6 => bits.read(6)?,
                                    _ => return None,
                                };
                            }
                            i += 1;
                            None
                        }
                        Op::Blob => {
                            let len = usize::try_from(bits.vbr(6)?).ok()?;
                            bits.align32();
                            let blob = bits.bytes(len)?;
                            bits.align32();
                            if code == Some(BLOB_RECORD) {
                                return Some(blob);
                            }
                            None
                        }
                    };
                    if code.is_none() {
                        code = value;
                    }
                    i += 1;
                }
            }
        }
    }
}

/// The IR symbol table and its string table, if the file has them.
fn symtab_and_strtab(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let data = if data.starts_with(&[0xde, 0xc0, 0x17, 0x0b]) {
        // Wrapper header: magic, version, offset, size, CPU type.
        let word = |at: usize| data.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let (offset, size) = (word(8)?, word(12)?);
        data.get(offset..offset.checked_add(size)?)?
    } else {
        data
    };
    if !data.starts_with(b"BC\xc0\xde") {
        return None;
    }
    let mut bits = Bits { data, pos: 32 };
    let (mut symtab, mut strtab) = (None, None);
    while bits.pos / 8 + 4 <= data.len() {
        if bits.read(2)? != 1 {
            return None; // only blocks at the top level
        }
        let id = bits.vbr(8)?;
        let width = bits.vbr(4)? as u32;
        bits.align32();
        let words = usize::try_from(bits.read(32)?).ok()?;
        let start = bits.pos;
        let end = start.checked_add(words.checked_mul(32)?)?;
        if end > data.len() * 8 {
            return None;
        }
        if id == SYMTAB_BLOCK && symtab.is_none() {
            symtab = block_blob(&mut bits, width);
        } else if id == STRTAB_BLOCK && symtab.is_some() && strtab.is_none() {
            strtab = block_blob(&mut bits, width);
        }
        bits.pos = end;
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
    let word = |at: usize| symtab.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
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
        let w = |at: usize| u32::from_le_bytes([sym[at], sym[at + 1], sym[at + 2], sym[at + 3]]) as usize;
        let flags = w(20) as u32;
        if flags & FB_GLOBAL == 0 || flags & (FB_UNDEFINED | FB_FORMAT_SPECIFIC) != 0 {
            continue;
        }
        names.push(strtab.get(w(0)..w(0).checked_add(w(4))?)?);
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_reader_reads_fixed_and_vbr_fields() {
        // Bits are read from the least significant end of each byte.
        let mut b = Bits { data: &[0b0101_0101, 0, 0, 0, 0xff], pos: 0 };
        assert_eq!(b.read(5), Some(0b10101));
        b.align32();
        assert_eq!(b.bytes(1), Some(&[0xff][..]));
        assert_eq!(b.read(1), None);
        // VBR4 9 = chunk 0b1001 (1, more follows) then 0b0001 (1 << 3).
        let mut v = Bits { data: &[0x19], pos: 0 };
        assert_eq!(v.vbr(4), Some(9));
    }

    #[test]
    fn garbage_is_not_read() {
        assert_eq!(archive_symbols(b"BC\xc0\xde"), None);
        assert_eq!(archive_symbols(b"BC\xc0\xde\xff\xff\xff\xff\xff\xff\xff\xff"), None);
        assert_eq!(archive_symbols(b"not bitcode"), None);
        assert_eq!(archive_symbols(&[0xde, 0xc0, 0x17, 0x0b, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), None);
    }
}
