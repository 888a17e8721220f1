//! LLVM's bitstream container, read side: the one reader under both the
//! archive symbol lookup ([`super::symtab`]) and the embedded-package
//! reader ([`super::embedded`]). `wrapper::bitstream` is the write side.
//!
//! Fields are packed LSB first: fixed-width, VBR (chunks whose top bit says
//! that another follows) and char6. Blocks nest; each header gives the
//! block's abbreviation width and its length in 32-bit words, so a reader
//! skips what it does not need without looking inside. A record is either
//! unabbreviated (code and operands as vbr6) or follows an abbreviation
//! defined earlier in the block, or registered for the block's id by a
//! BLOCKINFO block; an abbreviation may end in an array or a blob, whose
//! bytes are 32-bit aligned and returned as a slice of the input.
//!
//! Every read is bounded by the input: a field, a skip or a blob that
//! would pass the end is an error, and no count sizes an allocation before
//! it has been checked against the bits that remain. Nothing here panics.
//! Errors are messages: the embedded-package reader reports them, the
//! symbol lookup only needs to know that there was one.

use std::collections::HashMap;
use std::rc::Rc;

pub(crate) type Result<T> = std::result::Result<T, String>;

/// The block id of BLOCKINFO, which registers abbreviations for other ids.
pub(crate) const BLOCKINFO_BLOCK: u64 = 0;

const END_OF_STREAM: &str = "unexpected end of the bitstream";

/// A position in a bitstream.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: u64,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    pub(crate) fn len_bits(&self) -> u64 {
        self.data.len() as u64 * 8
    }

    fn remaining(&self) -> u64 {
        self.len_bits().saturating_sub(self.pos)
    }

    /// A fixed-width field of up to 64 bits.
    pub(crate) fn read(&mut self, width: u32) -> Result<u64> {
        if width > 64 {
            return Err(format!("field width {width} is too large"));
        }
        if self.remaining() < u64::from(width) {
            return Err(END_OF_STREAM.into());
        }
        let (mut v, mut got) = (0u64, 0u32);
        while got < width {
            let byte = u64::from(*self.data.get((self.pos / 8) as usize).ok_or(END_OF_STREAM)?);
            let shift = (self.pos % 8) as u32;
            let take = (8 - shift).min(width - got);
            v |= ((byte >> shift) & ((1 << take) - 1)) << got;
            got += take;
            self.pos += u64::from(take);
        }
        Ok(v)
    }

    /// A VBR field with `width`-bit chunks (2..=32); a value that does not
    /// fit 64 bits is an error.
    pub(crate) fn vbr(&mut self, width: u32) -> Result<u64> {
        if !(2..=32).contains(&width) {
            return Err(format!("invalid VBR width {width}"));
        }
        let hi = 1u64 << (width - 1);
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let piece = self.read(width)?;
            if shift >= 64 {
                return Err("VBR value is too large".into());
            }
            v |= (piece & (hi - 1)) << shift;
            if piece & hi == 0 {
                return Ok(v);
            }
            shift += width - 1;
        }
    }

    fn align32(&mut self) -> Result<()> {
        let aligned = self.pos.div_ceil(32) * 32;
        if aligned > self.len_bits() {
            return Err(END_OF_STREAM.into());
        }
        self.pos = aligned;
        Ok(())
    }

    fn skip_bits(&mut self, n: u64) -> Result<()> {
        if self.remaining() < n {
            return Err("block extends past the end of the bitstream".into());
        }
        self.pos += n;
        Ok(())
    }

    /// `n` bytes from the current position, which is at a byte boundary
    /// (blobs are 32-bit aligned).
    fn bytes(&mut self, n: u64) -> Result<&'a [u8]> {
        let start = self.pos / 8;
        self.skip_bits(n.checked_mul(8).ok_or("blob is too large")?)?;
        // Both ends are within the input now.
        self.data.get(start as usize..(start + n) as usize).ok_or_else(|| END_OF_STREAM.into())
    }
}

/// Checks the magic number, after the wrapper header if there is one (its
/// offset and size select the stream); returns a cursor just after the
/// magic.
pub(crate) fn open(data: &[u8]) -> Result<Cursor<'_>> {
    let mut data = data;
    // The wrapper header: magic, version, offset, size, cpu type.
    if data.starts_with(&[0xDE, 0xC0, 0x17, 0x0B]) {
        let word = |i: usize| crate::bytes::u32_le(data, i).map(|w| w as usize);
        let (off, size) = (word(8).ok_or("short wrapper header")?, word(12).ok_or("short wrapper header")?);
        data = off.checked_add(size).and_then(|end| data.get(off..end)).ok_or("invalid bitcode wrapper header")?;
    }
    if !data.starts_with(&[0x42, 0x43, 0xC0, 0xDE]) {
        return Err("invalid bitcode signature".into());
    }
    Ok(Cursor { data, pos: 32 })
}

/// One operand of an abbreviation.
#[derive(Clone, Debug)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array(Box<Op>),
    Char6,
    Blob,
}

/// One record: its code and operands (a blob operand is kept separately).
pub(crate) struct Record<'a> {
    pub(crate) code: u64,
    pub(crate) ops: Vec<u64>,
    pub(crate) blob: Option<&'a [u8]>,
}

const CHAR6: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._";

fn read_scalar(bits: &mut Cursor<'_>, op: &Op) -> Result<u64> {
    match op {
        Op::Literal(v) => Ok(*v),
        Op::Fixed(w) => bits.read(*w),
        Op::Vbr(w) => bits.vbr(*w),
        Op::Char6 => Ok(u64::from(CHAR6[bits.read(6)? as usize & 63])),
        Op::Array(_) | Op::Blob => Err("array or blob used as an element".into()),
    }
}

/// The fewest bits one element can take (0 for a literal, which takes none:
/// a count of those cannot be checked against the input).
fn op_min_bits(op: &Op) -> u64 {
    match op {
        Op::Literal(_) => 0,
        Op::Fixed(w) | Op::Vbr(w) => u64::from(*w),
        Op::Char6 => 6,
        Op::Array(_) | Op::Blob => 1,
    }
}

fn read_abbrev_def(bits: &mut Cursor<'_>) -> Result<Rc<[Op]>> {
    let n = bits.vbr(5)?;
    let mut ops = Vec::new();
    let mut i = 0;
    while i < n {
        if ops.len() > 1024 {
            return Err("abbreviation has too many operands".into());
        }
        let op = read_op(bits, Some((i, n)))?;
        // An array's element definition counts as an operand.
        i += if matches!(op, Op::Array(_)) { 2 } else { 1 };
        ops.push(op);
    }
    if ops.is_empty() {
        return Err("empty abbreviation".into());
    }
    Ok(ops.into())
}

/// One operand definition: operand `i` of `n`, or (`at` is `None`) the
/// element of an array, which follows the array's own definition.
fn read_op(bits: &mut Cursor<'_>, at: Option<(u64, u64)>) -> Result<Op> {
    if bits.read(1)? == 1 {
        return Ok(Op::Literal(bits.vbr(8)?));
    }
    let element = at.is_none();
    match (bits.read(3)?, at) {
        (enc @ (1 | 2), _) => {
            let w = bits.vbr(5)?;
            if w > 64 || (enc == 2 && (w > 32 || (element && w < 2))) {
                return Err("invalid abbreviation width".into());
            }
            // Width 0 reads as the literal 0, as in LLVM (an element of
            // width 0 is kept: an array of it can only be empty).
            Ok(match (w, enc) {
                (0, _) if !element => Op::Literal(0),
                (_, 1) => Op::Fixed(w as u32),
                _ => Op::Vbr(w as u32),
            })
        }
        (4, _) => Ok(Op::Char6),
        (_, None) => Err("invalid array element encoding".into()),
        (3, Some((i, n))) if i + 2 == n => Ok(Op::Array(Box::new(read_op(bits, None)?))),
        (3, _) => Err("array must be the next to last abbreviation operand".into()),
        (5, Some((i, n))) if i + 1 == n => Ok(Op::Blob),
        (5, _) => Err("blob must be the last abbreviation operand".into()),
        (enc, _) => Err(format!("invalid abbreviation encoding {enc}")),
    }
}

/// Reads an unabbreviated record (after its abbreviation id 3).
fn read_unabbreviated<'a>(bits: &mut Cursor<'a>) -> Result<Record<'a>> {
    let code = bits.vbr(6)?;
    let n = bits.vbr(6)?;
    if n.saturating_mul(6) > bits.remaining() {
        return Err("record has more operands than the bitstream holds".into());
    }
    let mut ops = Vec::with_capacity(n as usize);
    for _ in 0..n {
        ops.push(bits.vbr(6)?);
    }
    Ok(Record { code, ops, blob: None })
}

/// Reads a record encoded with the abbreviation `ops`.
fn read_abbreviated<'a>(bits: &mut Cursor<'a>, ops: &[Op]) -> Result<Record<'a>> {
    let mut vals = Vec::new();
    let mut blob = None;
    for op in ops {
        match op {
            Op::Array(elt) => {
                let n = bits.vbr(6)?;
                let min = op_min_bits(elt);
                if n > 0 && (min == 0 || n.saturating_mul(min) > bits.remaining()) {
                    return Err("array is longer than the bitstream".into());
                }
                vals.reserve(n as usize);
                for _ in 0..n {
                    vals.push(read_scalar(bits, elt)?);
                }
            }
            Op::Blob => {
                let n = bits.vbr(6)?;
                bits.align32()?;
                blob = Some(bits.bytes(n)?);
                bits.align32()?;
            }
            scalar => vals.push(read_scalar(bits, scalar)?),
        }
    }
    if vals.is_empty() {
        return Err("abbreviated record without a code".into());
    }
    let code = vals.remove(0);
    Ok(Record { code, ops: vals, blob })
}

/// Abbreviations registered for block ids by BLOCKINFO blocks.
#[derive(Default)]
pub(crate) struct BlockInfo {
    abbrevs: HashMap<u64, Vec<Rc<[Op]>>>,
}

/// A block header: read after ENTER_SUBBLOCK, before the block's contents.
pub(crate) struct Header {
    pub(crate) id: u64,
    pub(crate) width: u32,
    pub(crate) len_words: u64,
}

fn block_header(bits: &mut Cursor<'_>) -> Result<Header> {
    let id = bits.vbr(8)?;
    let width = bits.vbr(4)?;
    if width == 0 || width > 32 {
        return Err(format!("invalid abbreviation width {width}"));
    }
    bits.align32()?;
    let len_words = bits.read(32)?;
    Ok(Header { id, width: width as u32, len_words })
}

/// Skips the contents of a block whose header has been read.
pub(crate) fn skip_block(bits: &mut Cursor<'_>, header: &Header) -> Result<()> {
    bits.skip_bits(header.len_words.checked_mul(32).ok_or("block is too large")?)
}

/// The header of the next top-level block, or `None` at the end of the
/// stream: fewer than 32 bits left, or a last word that starts with the
/// END_BLOCK id (zero padding). Anything but a block at the top level is an
/// error.
pub(crate) fn next_top_block(bits: &mut Cursor<'_>) -> Result<Option<Header>> {
    if bits.remaining() < 32 {
        return Ok(None);
    }
    let abbrev = bits.read(2)?;
    if abbrev != 1 {
        if abbrev == 0 && bits.pos.div_ceil(32) * 32 == bits.len_bits() {
            return Ok(None);
        }
        return Err("expected a block at the top level".into());
    }
    block_header(bits).map(Some)
}

/// Reads a BLOCKINFO block whose header has been read, adding its
/// abbreviations to `info`. Its own sub-blocks are skipped.
pub(crate) fn read_blockinfo(bits: &mut Cursor<'_>, width: u32, info: &mut BlockInfo) -> Result<()> {
    let mut target: Option<u64> = None;
    loop {
        match bits.read(width)? {
            0 => return bits.align32(),
            1 => {
                let header = block_header(bits)?;
                skip_block(bits, &header)?;
            }
            2 => {
                let def = read_abbrev_def(bits)?;
                let t = target.ok_or("abbreviation in BLOCKINFO before SETBID")?;
                info.abbrevs.entry(t).or_default().push(def);
            }
            3 => {
                let r = read_unabbreviated(bits)?;
                // SETBID [block id]; names are not needed.
                if r.code == 1 {
                    target = Some(*r.ops.first().ok_or("SETBID without a block id")?);
                }
            }
            n => return Err(format!("abbreviated record {n} in BLOCKINFO")),
        }
    }
}

/// What comes next in a block.
pub(crate) enum Entry<'a> {
    Record(Record<'a>),
    /// A sub-block whose header has been read: the caller enters it
    /// ([`Block::enter`]) or skips it ([`skip_block`]).
    SubBlock(Header),
    /// END_BLOCK: the cursor is after the block.
    End,
}

/// A block being read: its abbreviation width and the abbreviations in
/// scope, those BLOCKINFO registered for its id first.
pub(crate) struct Block {
    width: u32,
    abbrevs: Vec<Rc<[Op]>>,
}

impl Block {
    /// Starts reading the block whose header has been read.
    pub(crate) fn enter(header: &Header, info: &BlockInfo) -> Block {
        Block { width: header.width, abbrevs: info.abbrevs.get(&header.id).cloned().unwrap_or_default() }
    }

    /// The next record, sub-block or end. Abbreviation definitions are
    /// taken in here, and a BLOCKINFO sub-block is read into `info` (it
    /// applies to the blocks entered after it).
    pub(crate) fn next<'a>(&mut self, bits: &mut Cursor<'a>, info: &mut BlockInfo) -> Result<Entry<'a>> {
        loop {
            match bits.read(self.width)? {
                0 => {
                    bits.align32()?;
                    return Ok(Entry::End);
                }
                1 => {
                    let header = block_header(bits)?;
                    if header.id != BLOCKINFO_BLOCK {
                        return Ok(Entry::SubBlock(header));
                    }
                    let end = bits.pos + header.len_words.saturating_mul(32);
                    read_blockinfo(bits, header.width, info)?;
                    if bits.pos != end {
                        return Err("BLOCKINFO length mismatch".into());
                    }
                }
                2 => self.abbrevs.push(read_abbrev_def(bits)?),
                3 => return read_unabbreviated(bits).map(Entry::Record),
                id => {
                    let abbrev =
                        self.abbrevs.get((id - 4) as usize).ok_or_else(|| format!("undefined abbreviation {id}"))?;
                    return read_abbreviated(bits, abbrev).map(Entry::Record);
                }
            }
        }
    }
}

/// Reads the block whose header has been read to its end, passing each
/// record to `f` and skipping sub-blocks.
pub(crate) fn for_each_record<'a>(
    bits: &mut Cursor<'a>,
    header: &Header,
    info: &mut BlockInfo,
    mut f: impl FnMut(Record<'a>) -> Result<()>,
) -> Result<()> {
    let mut block = Block::enter(header, info);
    loop {
        match block.next(bits, info)? {
            Entry::Record(r) => f(r)?,
            Entry::SubBlock(sub) => skip_block(bits, &sub)?,
            Entry::End => return Ok(()),
        }
    }
}

/// The blob of the last record with `code` that has one, in the block whose
/// header has been read (a STRTAB or SYMTAB block), read to its end.
pub(crate) fn block_blob<'a>(
    bits: &mut Cursor<'a>,
    header: &Header,
    info: &mut BlockInfo,
    code: u64,
) -> Result<Option<&'a [u8]>> {
    let mut found = None;
    for_each_record(bits, header, info, |r| {
        if r.code == code && r.blob.is_some() {
            found = r.blob;
        }
        Ok(())
    })?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrapper::bitstream::{AbbrevOp, BitWriter};
    use std::borrow::Cow;

    #[test]
    fn fixed_and_vbr_fields_are_read_lsb_first() {
        let mut b = Cursor::new(&[0b0101_0101, 0, 0, 0, 0xff]);
        assert_eq!(b.read(5), Ok(0b10101));
        b.align32().unwrap();
        assert_eq!(b.bytes(1), Ok(&[0xff][..]));
        assert!(b.read(1).is_err());
        assert!(b.bytes(1).is_err());
        // VBR4 9 = chunk 0b1001 (1, more follows) then 0b0001 (1 << 3).
        assert_eq!(Cursor::new(&[0x19]).vbr(4), Ok(9));
        // Ten chunks of 0x7f with the continuation bit carry more than 64 bits.
        let mut long = [0xffu8; 12];
        long[11] = 0x01;
        assert_eq!(Cursor::new(&long).vbr(8), Err("VBR value is too large".to_string()));
        assert!(Cursor::new(&[0; 16]).read(65).is_err());
        assert!(Cursor::new(&[0; 16]).vbr(33).is_err());
    }

    /// The magic, a BLOCKINFO block giving block 10 an abbreviation, then
    /// block 9: records of each encoding, block 10 nested, and two blobs.
    fn sample() -> Vec<u8> {
        let mut w = BitWriter::new();
        w.bytes(b"BC\xC0\xDE");
        w.enter_block(BLOCKINFO_BLOCK, 2);
        w.record(1, &[10]).unwrap();
        w.define_abbrev(&[AbbrevOp::Literal(7), AbbrevOp::Vbr(6), AbbrevOp::Fixed(3)]);
        w.end_block();
        w.enter_block(9, 4);
        w.record(5, &[1, 1000, 3]).unwrap();
        let array = w.define_abbrev(&[AbbrevOp::Fixed(4), AbbrevOp::Array, AbbrevOp::Char6]);
        let blob = w.define_abbrev(&[AbbrevOp::Literal(1), AbbrevOp::Blob]);
        w.enter_block(10, 3);
        // With the BLOCKINFO abbreviation (id 4, which the writer does not
        // know): code 7, then 300 as vbr6 and 5 in 3 bits.
        w.fixed(4, 3);
        w.vbr(300, 6);
        w.fixed(5, 3);
        w.end_block();
        let chars = [12, u64::from(b'a'), u64::from(b'Z'), u64::from(b'.')];
        w.abbrev_record(array, &chars, Cow::Borrowed(b"")).unwrap();
        w.abbrev_record(blob, &[1], Cow::Borrowed(b"first")).unwrap();
        w.abbrev_record(blob, &[1], Cow::Borrowed(b"second blob")).unwrap();
        w.end_block();
        w.finish().to_vec()
    }

    type Seen = (u64, Vec<u64>, Option<Vec<u8>>);

    /// Reads a block and the blocks in it, records in order.
    fn read_block(bits: &mut Cursor<'_>, header: &Header, info: &mut BlockInfo, seen: &mut Vec<Seen>) -> Result<()> {
        let mut block = Block::enter(header, info);
        loop {
            match block.next(bits, info)? {
                Entry::Record(r) => seen.push((r.code, r.ops, r.blob.map(<[u8]>::to_vec))),
                Entry::SubBlock(sub) => read_block(bits, &sub, info, seen)?,
                Entry::End => return Ok(()),
            }
        }
    }

    /// Every record of a stream; with `blockinfo` false, the top-level
    /// BLOCKINFO block is skipped.
    fn read_all(data: &[u8], blockinfo: bool) -> Result<Vec<Seen>> {
        let (mut bits, mut info, mut seen) = (open(data)?, BlockInfo::default(), Vec::new());
        while let Some(header) = next_top_block(&mut bits)? {
            match header.id {
                BLOCKINFO_BLOCK if blockinfo => read_blockinfo(&mut bits, header.width, &mut info)?,
                BLOCKINFO_BLOCK => skip_block(&mut bits, &header)?,
                _ => read_block(&mut bits, &header, &mut info, &mut seen)?,
            }
        }
        Ok(seen)
    }

    #[test]
    fn blocks_records_and_blobs_are_read() {
        let data = sample();
        let chars = b"aZ.".iter().map(|&c| u64::from(c)).collect();
        let want = [
            (5, vec![1, 1000, 3], None),
            (7, vec![300, 5], None),
            (12, chars, None),
            (1, vec![], Some(b"first".to_vec())),
            (1, vec![], Some(b"second blob".to_vec())),
        ];
        assert_eq!(read_all(&data, true), Ok(want.to_vec()));
        assert_eq!(read_all(&data, false), Err("undefined abbreviation 4".to_string()));
        // Only the cuts between top-level blocks leave a stream that reads
        // (a tail shorter than a word is not looked at). BLOCKINFO ends
        // after its header word, length word and contents.
        let blockinfo_end = 12 + 4 * u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize;
        let cuts: Vec<usize> = (4..data.len()).filter(|&len| read_all(&data[..len], true).is_ok()).collect();
        let between: Vec<usize> = [4, blockinfo_end].iter().flat_map(|&at| at..at + 4).collect();
        assert_eq!(cuts, between);
    }

    #[test]
    fn a_block_blob_is_the_last_one_and_sub_blocks_are_skipped() {
        let data = sample();
        let (mut bits, mut info) = (open(&data).unwrap(), BlockInfo::default());
        let header = next_top_block(&mut bits).unwrap().unwrap();
        read_blockinfo(&mut bits, header.width, &mut info).unwrap();
        let header = next_top_block(&mut bits).unwrap().unwrap();
        assert_eq!(block_blob(&mut bits.clone(), &header, &mut info, 1), Ok(Some(&b"second blob"[..])));
        assert_eq!(block_blob(&mut bits.clone(), &header, &mut info, 5), Ok(None));
        // Block 10 is not read, so its abbreviation is not needed.
        let mut no_info = BlockInfo::default();
        assert_eq!(block_blob(&mut bits, &header, &mut no_info, 1), Ok(Some(&b"second blob"[..])));
    }

    #[test]
    fn the_wrapper_header_selects_the_stream() {
        let inner = sample();
        let mut wrapped = vec![0xDE, 0xC0, 0x17, 0x0B, 0, 0, 0, 0, 20, 0, 0, 0];
        wrapped.extend_from_slice(&(inner.len() as u32).to_le_bytes());
        wrapped.extend_from_slice(&[0; 4]);
        wrapped.extend_from_slice(&inner);
        wrapped.extend_from_slice(b"trailing");
        assert_eq!(open(&wrapped).unwrap().len_bits(), inner.len() as u64 * 8);
        assert_eq!(open(&wrapped[..12]).err().as_deref(), Some("short wrapper header"));
        assert_eq!(open(&wrapped[..30]).err().as_deref(), Some("invalid bitcode wrapper header"));
        assert_eq!(open(b"BC\xC0").err().as_deref(), Some("invalid bitcode signature"));
    }
}
