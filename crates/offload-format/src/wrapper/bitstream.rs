//! LLVM's bitstream container, write side: fixed and VBR fields packed LSB
//! first into little-endian 32-bit words, nested blocks whose length word is
//! back-patched, abbreviations defined inside a block, and blobs.
//!
//! Blob payloads are 32-bit aligned in the stream, so a long blob is not
//! copied: the writer keeps it as a borrowed piece of the output
//! [`Plan`], between the owned pieces around it.

use crate::plan::Plan;
use std::borrow::Cow;

/// One operand of an abbreviation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AbbrevOp {
    /// A value that is not stored (it must equal this literal).
    Literal(u64),
    /// A fixed-width field of 1..=64 bits.
    Fixed(u32),
    /// A variable-width field in chunks of 2..=32 bits.
    Vbr(u32),
    /// A 6-bit character `[a-zA-Z0-9._]`.
    Char6,
    /// The rest of the record: a vbr6 count and that many elements encoded
    /// with the operand that follows (which must be the last).
    Array,
    /// The rest of the record as bytes: vbr6 length, 32-bit alignment, the
    /// bytes, 32-bit alignment.
    Blob,
}

/// Abbreviation IDs 0..=3 are fixed by the format.
const END_BLOCK: u64 = 0;
const ENTER_SUBBLOCK: u64 = 1;
const DEFINE_ABBREV: u64 = 2;
const UNABBREV_RECORD: u64 = 3;

/// Blobs at least this long are referenced, not copied.
const BORROW_MIN: usize = 512;

enum Chunk<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

struct Open {
    /// Byte offset of the block's length word.
    len_at: u64,
    outer_width: u32,
    outer_abbrevs: Vec<Vec<AbbrevOp>>,
}

/// A record that does not fit what LLVM's reader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong(pub u64);

/// A bitstream being written.
pub struct BitWriter<'a> {
    done: Vec<(u64, Chunk<'a>)>,
    done_len: u64,
    cur: Vec<u8>,
    acc: u64,
    nacc: u32,
    width: u32,
    abbrevs: Vec<Vec<AbbrevOp>>,
    open: Vec<Open>,
}

impl Default for BitWriter<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> BitWriter<'a> {
    /// An empty stream at top level (abbreviation width 2).
    pub fn new() -> Self {
        BitWriter {
            done: Vec::new(),
            done_len: 0,
            cur: Vec::new(),
            acc: 0,
            nacc: 0,
            width: 2,
            abbrevs: Vec::new(),
            open: Vec::new(),
        }
    }

    /// Current position in bits from the start of the stream.
    pub fn bit_pos(&self) -> u64 {
        (self.done_len + self.cur.len() as u64) * 8 + u64::from(self.nacc)
    }

    /// Appends raw bytes at a byte boundary (the magic number).
    pub fn bytes(&mut self, b: &[u8]) {
        debug_assert_eq!(self.nacc, 0);
        self.cur.extend_from_slice(b);
    }

    /// Writes the low `width` bits of `value` (width ≤ 64).
    pub fn fixed(&mut self, value: u64, width: u32) {
        if width > 32 {
            self.fixed(value & 0xffff_ffff, 32);
            self.fixed(value >> 32, width - 32);
            return;
        }
        if width == 0 {
            return;
        }
        let v = value & ((1u64 << width) - 1);
        self.acc |= v << self.nacc;
        self.nacc += width;
        while self.nacc >= 8 {
            self.cur.push(self.acc as u8);
            self.acc >>= 8;
            self.nacc -= 8;
        }
    }

    /// Writes `value` as a VBR with `width`-bit chunks (2..=32).
    pub fn vbr(&mut self, mut value: u64, width: u32) {
        let payload = width.clamp(2, 32) - 1;
        let high = 1u64 << payload;
        while value >= high {
            self.fixed((value & (high - 1)) | high, payload + 1);
            value >>= payload;
        }
        self.fixed(value, payload + 1);
    }

    /// Pads with zero bits to a 32-bit boundary.
    pub fn align32(&mut self) {
        let pad = (32 - (self.bit_pos() % 32) as u32) % 32;
        self.fixed(0, pad);
    }

    /// Opens a block; returns the bit position of its ENTER_SUBBLOCK, which
    /// is 32-bit aligned when the previous item was a block.
    pub fn enter_block(&mut self, id: u64, abbrev_width: u32) -> u64 {
        let start = self.bit_pos();
        self.fixed(ENTER_SUBBLOCK, self.width);
        self.vbr(id, 8);
        self.vbr(u64::from(abbrev_width), 4);
        self.align32();
        let len_at = self.bit_pos() / 8;
        self.fixed(0, 32);
        self.open.push(Open { len_at, outer_width: self.width, outer_abbrevs: std::mem::take(&mut self.abbrevs) });
        self.width = abbrev_width;
        start
    }

    /// Closes the innermost block and back-patches its length in words.
    pub fn end_block(&mut self) {
        self.fixed(END_BLOCK, self.width);
        self.align32();
        let Some(open) = self.open.pop() else { return };
        let words = (self.bit_pos() / 8 - open.len_at - 4) / 4;
        self.patch(open.len_at * 8, words, 32);
        self.width = open.outer_width;
        self.abbrevs = open.outer_abbrevs;
    }

    /// Defines an abbreviation for the current block; returns its ID.
    pub fn define_abbrev(&mut self, ops: &[AbbrevOp]) -> u64 {
        self.fixed(DEFINE_ABBREV, self.width);
        self.vbr(ops.len() as u64, 5);
        for op in ops {
            match *op {
                AbbrevOp::Literal(v) => {
                    self.fixed(1, 1);
                    self.vbr(v, 8);
                }
                AbbrevOp::Fixed(w) => {
                    self.fixed(0, 1);
                    self.fixed(1, 3);
                    self.vbr(u64::from(w), 5);
                }
                AbbrevOp::Vbr(w) => {
                    self.fixed(0, 1);
                    self.fixed(2, 3);
                    self.vbr(u64::from(w), 5);
                }
                AbbrevOp::Array => {
                    self.fixed(0, 1);
                    self.fixed(3, 3);
                }
                AbbrevOp::Char6 => {
                    self.fixed(0, 1);
                    self.fixed(4, 3);
                }
                AbbrevOp::Blob => {
                    self.fixed(0, 1);
                    self.fixed(5, 3);
                }
            }
        }
        self.abbrevs.push(ops.to_vec());
        3 + self.abbrevs.len() as u64
    }

    /// Writes an unabbreviated record. LLVM reads the operand count as a
    /// 32-bit number.
    pub fn record(&mut self, code: u64, ops: &[u64]) -> Result<(), TooLong> {
        check_count(ops.len() as u64)?;
        self.fixed(UNABBREV_RECORD, self.width);
        self.vbr(code, 6);
        self.vbr(ops.len() as u64, 6);
        for &v in ops {
            self.vbr(v, 6);
        }
        Ok(())
    }

    /// Writes a record with abbreviation `id` of the current block. `values`
    /// holds the code and the operands (literals included); `blob` feeds a
    /// Blob operand. Returns the bit position of each scalar field written,
    /// so a fixed field can be back-patched with [`BitWriter::patch`].
    pub fn abbrev_record(&mut self, id: u64, values: &[u64], blob: Cow<'a, [u8]>) -> Result<Vec<u64>, TooLong> {
        let Some(ops) = id.checked_sub(4).and_then(|i| self.abbrevs.get(i as usize)).cloned() else {
            debug_assert!(false, "undefined abbreviation {id}");
            return Ok(Vec::new());
        };
        let mut positions = Vec::new();
        self.fixed(id, self.width);
        let mut vals = values.iter().copied();
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                AbbrevOp::Literal(_) => {
                    vals.next();
                }
                AbbrevOp::Array => {
                    let elem = ops.get(i + 1).copied().unwrap_or(AbbrevOp::Fixed(8));
                    let rest: Vec<u64> = vals.by_ref().collect();
                    check_count(rest.len() as u64)?;
                    self.vbr(rest.len() as u64, 6);
                    for v in rest {
                        self.scalar(elem, v);
                    }
                    i += 1;
                }
                AbbrevOp::Blob => {
                    check_count(blob.len() as u64)?;
                    self.vbr(blob.len() as u64, 6);
                    self.align32();
                    self.blob_bytes(blob.clone());
                    self.align32();
                }
                op => {
                    positions.push(self.bit_pos());
                    self.scalar(op, vals.next().unwrap_or(0));
                }
            }
            i += 1;
        }
        Ok(positions)
    }

    fn scalar(&mut self, op: AbbrevOp, v: u64) {
        match op {
            AbbrevOp::Fixed(w) => self.fixed(v, w),
            AbbrevOp::Vbr(w) => self.vbr(v, w),
            AbbrevOp::Char6 => self.fixed(char6(v as u8), 6),
            AbbrevOp::Literal(_) | AbbrevOp::Array | AbbrevOp::Blob => {}
        }
    }

    fn blob_bytes(&mut self, b: Cow<'a, [u8]>) {
        let b = match b {
            Cow::Borrowed(b) if b.len() >= BORROW_MIN => b,
            _ => {
                self.cur.extend_from_slice(&b);
                return;
            }
        };
        let start = self.done_len;
        let owned = std::mem::take(&mut self.cur);
        self.done_len += owned.len() as u64;
        self.done.push((start, Chunk::Owned(owned)));
        self.done.push((self.done_len, Chunk::Borrowed(b)));
        self.done_len += b.len() as u64;
    }

    /// Overwrites `width` bits at bit position `at` (already written, in
    /// owned bytes) with `value`.
    pub fn patch(&mut self, at: u64, value: u64, width: u32) {
        for i in 0..u64::from(width) {
            let bit = at + i;
            if let Some(byte) = self.byte_mut(bit / 8) {
                let mask = 1u8 << (bit % 8);
                if (value >> i) & 1 == 1 {
                    *byte |= mask;
                } else {
                    *byte &= !mask;
                }
            }
        }
    }

    fn byte_mut(&mut self, at: u64) -> Option<&mut u8> {
        if at >= self.done_len {
            return self.cur.get_mut((at - self.done_len) as usize);
        }
        let i = self.done.partition_point(|(start, _)| *start <= at).checked_sub(1)?;
        match &mut self.done[i] {
            (start, Chunk::Owned(v)) => {
                let off = (at - *start) as usize;
                v.get_mut(off)
            }
            (_, Chunk::Borrowed(_)) => None,
        }
    }

    /// Finishes the stream (closing any open block) and returns it.
    pub fn finish(mut self) -> Plan<'a> {
        while !self.open.is_empty() {
            self.end_block();
        }
        self.align32();
        let mut plan = Plan::new();
        for (_, chunk) in self.done {
            match chunk {
                Chunk::Owned(v) => plan.own(v),
                Chunk::Borrowed(b) => plan.borrow(b),
            }
        }
        plan.own(self.cur);
        plan
    }
}

fn check_count(n: u64) -> Result<(), TooLong> {
    if n > u64::from(u32::MAX) { Err(TooLong(n)) } else { Ok(()) }
}

/// The 6-bit code of `[a-zA-Z0-9._]` (other characters encode as `_`).
pub fn char6(c: u8) -> u64 {
    match c {
        b'a'..=b'z' => u64::from(c - b'a'),
        b'A'..=b'Z' => u64::from(c - b'A') + 26,
        b'0'..=b'9' => u64::from(c - b'0') + 52,
        b'.' => 62,
        _ => 63,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_packed_lsb_first() {
        let mut w = BitWriter::new();
        w.fixed(0b101, 3);
        w.fixed(0b11111, 5);
        w.fixed(0xabcd, 16);
        w.align32();
        assert_eq!(w.finish().to_vec(), [0b1111_1101, 0xcd, 0xab, 0]);
    }

    #[test]
    fn vbr_chunks_carry_a_continuation_bit() {
        let mut w = BitWriter::new();
        // 43 = 0b101011 → chunk 0b1_01011 (continue), then chunk 0b0_00001.
        w.vbr(43, 6);
        w.align32();
        assert_eq!(w.finish().to_vec(), [0b0110_1011, 0, 0, 0]);
    }

    #[test]
    fn block_length_is_back_patched_in_words() {
        let mut w = BitWriter::new();
        w.enter_block(8, 3);
        w.record(1, &[2]).unwrap();
        w.end_block();
        let bytes = w.finish().to_vec();
        assert_eq!(bytes.len() % 4, 0);
        let words = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
        assert_eq!(words as usize, bytes.len() / 4 - 2);
    }

    #[test]
    fn long_blobs_are_borrowed() {
        let data = vec![7u8; 1000];
        let mut w = BitWriter::new();
        w.enter_block(23, 3);
        let id = w.define_abbrev(&[AbbrevOp::Literal(1), AbbrevOp::Blob]);
        w.abbrev_record(id, &[1], Cow::Borrowed(&data)).unwrap();
        w.end_block();
        let plan = w.finish();
        assert!(
            plan.pieces
                .iter()
                .any(|p| matches!(p, crate::plan::Piece::Bytes(std::borrow::Cow::Borrowed(b)) if b.len() == 1000))
        );
        let bytes = plan.to_vec();
        let words = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
        assert_eq!(words as usize, bytes.len() / 4 - 2);
    }

    #[test]
    fn patch_reaches_unaligned_fields() {
        let mut w = BitWriter::new();
        w.fixed(1, 3);
        let at = w.bit_pos();
        w.fixed(0, 32);
        w.fixed(1, 5);
        w.patch(at, 0xdead_beef, 32);
        w.align32();
        let bytes = w.finish().to_vec();
        let all = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        assert_eq!((all >> 3) & 0xffff_ffff, 0xdead_beef);
        assert_eq!(all & 7, 1);
        assert_eq!((all >> 35) & 31, 1);
    }

    #[derive(Debug, Clone)]
    enum Rec {
        Plain(u64, Vec<u64>),
        Fixed(u64, u64),
        Array(Vec<u64>),
        Blob(Vec<u8>),
    }

    fn rec() -> impl proptest::strategy::Strategy<Value = Rec> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..100, prop::collection::vec(any::<u64>(), 0..6)).prop_map(|(c, v)| Rec::Plain(c, v)),
            (0u64..100, any::<u32>()).prop_map(|(c, v)| Rec::Fixed(c, u64::from(v))),
            prop::collection::vec(0u64..256, 0..40).prop_map(Rec::Array),
            prop::collection::vec(any::<u8>(), 0..1200).prop_map(Rec::Blob),
        ]
    }

    proptest::proptest! {
        /// Whatever we write, an independent reader (`llvm-bitcode`) reads
        /// back: nested blocks, unabbreviated records, fixed, array and blob
        /// operands.
        #[test]
        fn an_independent_reader_reads_what_we_write(
            blocks in proptest::collection::vec(proptest::collection::vec(rec(), 0..8), 1..4)
        ) {
            use crate::wrapper::bitcode::tests::{Item, decode};
            let mut w = BitWriter::new();
            w.bytes(b"BC\xC0\xDE");
            w.enter_block(8, 3);
            for (n, recs) in blocks.iter().enumerate() {
                w.enter_block(20 + n as u64, 4);
                let fixed = w.define_abbrev(&[AbbrevOp::Vbr(6), AbbrevOp::Fixed(32)]);
                let array = w.define_abbrev(&[AbbrevOp::Literal(5), AbbrevOp::Array, AbbrevOp::Fixed(8)]);
                let blob = w.define_abbrev(&[AbbrevOp::Literal(6), AbbrevOp::Blob]);
                for r in recs {
                    match r {
                        Rec::Plain(c, v) => w.record(*c, v).unwrap(),
                        Rec::Fixed(c, v) => {
                            w.abbrev_record(fixed, &[*c, *v], Cow::Borrowed(&[])).unwrap();
                        }
                        Rec::Array(v) => {
                            let vals: Vec<u64> = std::iter::once(5).chain(v.iter().copied()).collect();
                            w.abbrev_record(array, &vals, Cow::Borrowed(&[])).unwrap();
                        }
                        Rec::Blob(b) => {
                            w.abbrev_record(blob, &[6], Cow::Borrowed(b)).unwrap();
                        }
                    }
                }
                w.end_block();
            }
            w.end_block();
            let top = decode(&w.finish().to_vec());
            proptest::prop_assert_eq!(top.len(), 1);
            let inner: Vec<_> = top[0].items.iter().collect();
            proptest::prop_assert_eq!(inner.len(), blocks.len());
            for (n, (item, recs)) in inner.iter().zip(&blocks).enumerate() {
                let Item::Block(b) = item else { panic!("expected a block") };
                proptest::prop_assert_eq!(b.id, 20 + n as u32);
                proptest::prop_assert_eq!(b.items.len(), recs.len());
                for (got, want) in b.items.iter().zip(recs) {
                    let Item::Rec(code, ops, payload) = got else { panic!("expected a record") };
                    match want {
                        Rec::Plain(c, v) => {
                            proptest::prop_assert_eq!((code, ops), (c, v));
                        }
                        Rec::Fixed(c, v) => {
                            proptest::prop_assert_eq!((code, ops.as_slice()), (c, &[*v][..]));
                        }
                        Rec::Array(v) => {
                            proptest::prop_assert_eq!((*code, ops), (5, v));
                        }
                        Rec::Blob(bytes) => {
                            proptest::prop_assert_eq!(*code, 6);
                            proptest::prop_assert_eq!(payload.as_deref(), Some(bytes.as_slice()));
                        }
                    }
                }
            }
        }
    }
}
