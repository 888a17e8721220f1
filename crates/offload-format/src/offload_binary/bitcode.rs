//! Just enough of an LLVM bitcode reader to find the packages Clang embeds
//! in bitcode (`-fembed-offload-object` with `-emit-llvm`, or LTO objects):
//! the module's named metadata `!llvm.embedded.objects` lists pairs
//! `!{ptr @global, !".llvm.offloading"}`, and each such global's
//! initializer (a constant byte string) is one package.
//!
//! Supported: the bitstream container (abbreviations, BLOCKINFO, blobs, the
//! wrapper header), module records that define global values, module-level
//! constants of the string kinds (`STRING`, `CSTRING`) and module-level
//! metadata (`STRINGS`, `STRING_OLD`, `VALUE`, `NODE`, `NAME`/`NAMED_NODE`).
//! Function bodies and everything else are skipped by block length. Only the
//! first module of a file is read, as LLVM does. Every read is bounded by
//! the input; malformed input gives an error, never a panic.

use std::collections::HashMap;

/// A package found in bitcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embedded {
    /// Name of the global holding it (empty if the module has no names).
    pub global: String,
    pub bytes: Vec<u8>,
}

type Result<T> = std::result::Result<T, String>;

#[derive(Clone, Debug)]
enum Op {
    Literal(u64),
    Fixed(u32),
    Vbr(u32),
    Array(Box<Op>),
    Char6,
    Blob,
}

struct Bits<'a> {
    data: &'a [u8],
    /// Position in bits.
    pos: u64,
}

impl<'a> Bits<'a> {
    fn len_bits(&self) -> u64 {
        self.data.len() as u64 * 8
    }

    fn remaining(&self) -> u64 {
        self.len_bits().saturating_sub(self.pos)
    }

    fn read(&mut self, width: u32) -> Result<u64> {
        if width > 64 {
            return Err(format!("field width {width} is too large"));
        }
        if self.remaining() < u64::from(width) {
            return Err("unexpected end of the bitstream".into());
        }
        let mut v = 0u64;
        let mut got = 0u32;
        while got < width {
            let byte = self.data[(self.pos / 8) as usize];
            let bit_in_byte = (self.pos % 8) as u32;
            let take = (8 - bit_in_byte).min(width - got);
            let bits = (u64::from(byte) >> bit_in_byte) & ((1u64 << take) - 1);
            v |= bits << got;
            got += take;
            self.pos += u64::from(take);
        }
        Ok(v)
    }

    fn vbr(&mut self, width: u32) -> Result<u64> {
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
            return Err("unexpected end of the bitstream".into());
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

    fn bytes(&mut self, n: u64) -> Result<&'a [u8]> {
        // Called at a byte boundary (after align32).
        let start = (self.pos / 8) as usize;
        let n_bits = n.checked_mul(8).ok_or("blob is too large")?;
        self.skip_bits(n_bits)?;
        Ok(&self.data[start..start + n as usize])
    }
}

/// One record: its code and operands (a blob operand is kept separately).
struct Record<'a> {
    code: u64,
    ops: Vec<u64>,
    blob: Option<&'a [u8]>,
}

const CHAR6: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._";

fn read_scalar(bits: &mut Bits<'_>, op: &Op) -> Result<u64> {
    match op {
        Op::Literal(v) => Ok(*v),
        Op::Fixed(w) => bits.read(*w),
        Op::Vbr(w) => bits.vbr(*w),
        Op::Char6 => Ok(u64::from(CHAR6[bits.read(6)? as usize])),
        Op::Array(_) | Op::Blob => Err("array or blob used as an element".into()),
    }
}

fn op_min_bits(op: &Op) -> u64 {
    match op {
        Op::Literal(_) => 0,
        Op::Fixed(w) | Op::Vbr(w) => u64::from(*w),
        Op::Char6 => 6,
        Op::Array(_) | Op::Blob => 1,
    }
}

fn read_abbrev_def(bits: &mut Bits<'_>) -> Result<Vec<Op>> {
    let n = bits.vbr(5)?;
    let mut ops = Vec::new();
    let mut i = 0;
    while i < n {
        if ops.len() > 1024 {
            return Err("abbreviation has too many operands".into());
        }
        let literal = bits.read(1)? == 1;
        if literal {
            ops.push(Op::Literal(bits.vbr(8)?));
            i += 1;
            continue;
        }
        let enc = bits.read(3)?;
        let op = match enc {
            1 | 2 => {
                let w = bits.vbr(5)?;
                if w > 64 || (enc == 2 && w > 32) {
                    return Err("invalid abbreviation width".into());
                }
                // Width 0 reads as the literal 0, as in LLVM.
                if w == 0 {
                    Op::Literal(0)
                } else if enc == 1 {
                    Op::Fixed(w as u32)
                } else {
                    Op::Vbr(w as u32)
                }
            }
            3 => {
                // The element type is the next operand definition.
                if i + 2 != n {
                    return Err("array must be the next to last abbreviation operand".into());
                }
                let elt_literal = bits.read(1)? == 1;
                let elt = if elt_literal {
                    Op::Literal(bits.vbr(8)?)
                } else {
                    match bits.read(3)? {
                        1 => Op::Fixed(bits.vbr(5)?.min(65) as u32),
                        2 => Op::Vbr(bits.vbr(5)?.min(65) as u32),
                        4 => Op::Char6,
                        _ => return Err("invalid array element encoding".into()),
                    }
                };
                if matches!(elt, Op::Fixed(w) if w > 64) || matches!(elt, Op::Vbr(w) if !(2..=32).contains(&w)) {
                    return Err("invalid abbreviation width".into());
                }
                i += 1;
                Op::Array(Box::new(elt))
            }
            4 => Op::Char6,
            5 => {
                if i + 1 != n {
                    return Err("blob must be the last abbreviation operand".into());
                }
                Op::Blob
            }
            _ => return Err(format!("invalid abbreviation encoding {enc}")),
        };
        ops.push(op);
        i += 1;
    }
    if ops.is_empty() {
        return Err("empty abbreviation".into());
    }
    Ok(ops)
}

/// Reads an unabbreviated record (after its abbreviation id 3).
fn read_unabbreviated<'a>(bits: &mut Bits<'a>) -> Result<Record<'a>> {
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
fn read_abbreviated<'a>(bits: &mut Bits<'a>, ops: &[Op]) -> Result<Record<'a>> {
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

/// Abbreviations registered for block ids by the BLOCKINFO block.
#[derive(Default)]
struct BlockInfo {
    abbrevs: HashMap<u64, Vec<std::rc::Rc<Vec<Op>>>>,
}

const BLOCKINFO_BLOCK: u64 = 0;
const MODULE_BLOCK: u64 = 8;
const CONSTANTS_BLOCK: u64 = 11;
const METADATA_BLOCK: u64 = 15;
const STRTAB_BLOCK: u64 = 23;

/// What the module defines that matters here.
#[derive(Default)]
struct Module {
    version: u64,
    /// Global values in value-id order: (is a variable, name offset, name
    /// size, initializer id + 1).
    globals: Vec<(bool, u64, u64, u64)>,
    /// Module-level constants: value id -> bytes of string constants.
    strings: HashMap<u64, Vec<u8>>,
    next_value: u64,
    /// Metadata by id.
    md: HashMap<u64, Md>,
    next_md: u64,
    named: HashMap<Vec<u8>, Vec<u64>>,
    strtab: Vec<u8>,
}

enum Md {
    Str(Vec<u8>),
    Value(u64),
    Node(Vec<u64>),
}

fn skip_block(bits: &mut Bits<'_>, len_words: u64) -> Result<()> {
    bits.skip_bits(len_words.checked_mul(32).ok_or("block is too large")?)
}

fn read_blockinfo(bits: &mut Bits<'_>, width: u32, info: &mut BlockInfo) -> Result<()> {
    let mut target: Option<u64> = None;
    loop {
        match bits.read(width)? {
            0 => return bits.align32(),
            1 => {
                let (_, _, len) = block_header(bits)?;
                skip_block(bits, len)?;
            }
            2 => {
                let def = read_abbrev_def(bits)?;
                let t = target.ok_or("abbreviation in BLOCKINFO before SETBID")?;
                info.abbrevs.entry(t).or_default().push(std::rc::Rc::new(def));
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

/// Reads or skips a sub-block: (stream, block id, abbreviation width,
/// length in words, block info).
type SubBlockFn<'f, 'a> = dyn FnMut(&mut Bits<'a>, u64, u32, u64, &mut BlockInfo) -> Result<()> + 'f;

/// Parses the header of a sub-block at the current position (after its
/// abbreviation id): returns (block id, abbreviation width, length in words).
fn block_header(bits: &mut Bits<'_>) -> Result<(u64, u32, u64)> {
    let id = bits.vbr(8)?;
    let width = bits.vbr(4)?;
    if width == 0 || width > 32 {
        return Err(format!("invalid abbreviation width {width}"));
    }
    bits.align32()?;
    let len = bits.read(32)?;
    Ok((id, width as u32, len))
}

/// Walks a block's entries: records go to `rec`, sub-blocks to `sub`
/// (which must consume them).
fn walk_block<'a>(
    bits: &mut Bits<'a>,
    width: u32,
    block_id: u64,
    info: &mut BlockInfo,
    rec: &mut dyn FnMut(Record<'a>) -> Result<()>,
    sub: &mut SubBlockFn<'_, 'a>,
) -> Result<()> {
    let mut abbrevs = info.abbrevs.get(&block_id).cloned().unwrap_or_default();
    loop {
        let id = bits.read(width)?;
        match id {
            0 => {
                bits.align32()?;
                return Ok(());
            }
            1 => {
                let (sub_id, sub_width, len) = block_header(bits)?;
                if sub_id == BLOCKINFO_BLOCK {
                    let end = bits.pos + len.saturating_mul(32);
                    read_blockinfo(bits, sub_width, info)?;
                    if bits.pos != end {
                        return Err("BLOCKINFO length mismatch".into());
                    }
                } else {
                    sub(bits, sub_id, sub_width, len, info)?;
                }
            }
            2 => abbrevs.push(std::rc::Rc::new(read_abbrev_def(bits)?)),
            3 => rec(read_unabbreviated(bits)?)?,
            other => {
                let abbrev =
                    abbrevs.get((other - 4) as usize).ok_or_else(|| format!("undefined abbreviation {other}"))?;
                rec(read_abbreviated(bits, abbrev)?)?;
            }
        }
    }
}

fn chars(ops: &[u64]) -> Vec<u8> {
    ops.iter().map(|&v| v as u8).collect()
}

/// Decodes a METADATA_STRINGS record: `count` lengths as VBR6 in a
/// bitstream at the start of the blob, the characters from `offset`.
fn metadata_strings(count: u64, offset: u64, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
    let offset = usize::try_from(offset).map_err(|_| "bad metadata strings offset")?;
    let lengths = blob.get(..offset).ok_or("metadata strings offset past the blob")?;
    let mut chars = blob.get(offset..).ok_or("metadata strings offset past the blob")?;
    let mut bits = Bits { data: lengths, pos: 0 };
    if count > lengths.len() as u64 * 8 / 6 + 1 {
        return Err("too many metadata strings".into());
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let len = bits.vbr(6)?;
        let len = usize::try_from(len).ok().filter(|&l| l <= chars.len()).ok_or("metadata string past the blob")?;
        out.push(chars[..len].to_vec());
        chars = &chars[len..];
    }
    Ok(out)
}

fn read_constants<'a>(bits: &mut Bits<'a>, width: u32, info: &mut BlockInfo, m: &mut Module) -> Result<()> {
    walk_block(
        bits,
        width,
        CONSTANTS_BLOCK,
        info,
        &mut |r| {
            match r.code {
                1 => return Ok(()), // SETTYPE defines no value
                8 => {
                    m.strings.insert(m.next_value, chars(&r.ops));
                }
                9 => {
                    let mut s = chars(&r.ops);
                    s.push(0);
                    m.strings.insert(m.next_value, s);
                }
                _ => {}
            }
            m.next_value += 1;
            Ok(())
        },
        &mut |b, _, _, len, _| skip_block(b, len),
    )
}

fn read_metadata<'a>(bits: &mut Bits<'a>, width: u32, info: &mut BlockInfo, m: &mut Module) -> Result<()> {
    let mut pending_name: Option<Vec<u8>> = None;
    walk_block(
        bits,
        width,
        METADATA_BLOCK,
        info,
        &mut |r| {
            match r.code {
                // STRING_OLD
                1 => {
                    m.md.insert(m.next_md, Md::Str(chars(&r.ops)));
                    m.next_md += 1;
                }
                // VALUE [type, value id]
                2 => {
                    let v = *r.ops.get(1).ok_or("short METADATA_VALUE")?;
                    m.md.insert(m.next_md, Md::Value(v));
                    m.next_md += 1;
                }
                // NODE / DISTINCT_NODE [ids + 1]
                3 | 5 => {
                    m.md.insert(m.next_md, Md::Node(r.ops.clone()));
                    m.next_md += 1;
                }
                // NAME, then NAMED_NODE
                4 => pending_name = Some(chars(&r.ops)),
                10 => {
                    let name = pending_name.take().ok_or("METADATA_NAMED_NODE without a name")?;
                    m.named.entry(name).or_default().extend_from_slice(&r.ops);
                }
                // STRINGS [count, offset] + blob
                35 => {
                    let (count, offset) = match r.ops[..] {
                        [c, o, ..] => (c, o),
                        _ => return Err("short METADATA_STRINGS".into()),
                    };
                    let blob = r.blob.ok_or("METADATA_STRINGS without a blob")?;
                    for s in metadata_strings(count, offset, blob)? {
                        m.md.insert(m.next_md, Md::Str(s));
                        m.next_md += 1;
                    }
                }
                // KIND, GLOBAL_DECL_ATTACHMENT, INDEX_OFFSET, INDEX: no id.
                6 | 36 | 38 | 39 => {}
                _ => m.next_md += 1,
            }
            Ok(())
        },
        &mut |b, _, _, len, _| skip_block(b, len),
    )
}

fn read_module<'a>(bits: &mut Bits<'a>, width: u32, info: &mut BlockInfo, m: &mut Module) -> Result<()> {
    // Records and sub-blocks both need `m`; collect records through a cell.
    let m_cell = std::cell::RefCell::new(std::mem::take(m));
    walk_block(
        bits,
        width,
        MODULE_BLOCK,
        info,
        &mut |r| {
            let mut m = m_cell.borrow_mut();
            let base = if m.version >= 2 { 2 } else { 0 };
            match r.code {
                1 => m.version = r.ops.first().copied().unwrap_or(0),
                // GLOBALVAR
                7 => {
                    let (off, size) = if base == 2 { (r.ops.first(), r.ops.get(1)) } else { (None, None) };
                    let init = r.ops.get(base + 2).copied().unwrap_or(0);
                    m.globals.push((true, off.copied().unwrap_or(0), size.copied().unwrap_or(0), init));
                    m.next_value += 1;
                }
                // FUNCTION, ALIAS_OLD, ALIAS, IFUNC
                8 | 9 | 14 | 15 => {
                    m.globals.push((false, 0, 0, 0));
                    m.next_value += 1;
                }
                _ => {}
            }
            Ok(())
        },
        &mut |b, id, w, len, info| {
            let mut m = m_cell.borrow_mut();
            match id {
                CONSTANTS_BLOCK => read_constants(b, w, info, &mut m),
                METADATA_BLOCK => read_metadata(b, w, info, &mut m),
                _ => skip_block(b, len),
            }
        },
    )?;
    *m = m_cell.into_inner();
    Ok(())
}

/// Finds the packages embedded in a bitcode file.
pub fn embedded_objects(data: &[u8]) -> Result<Vec<Embedded>> {
    let mut data = data;
    // The wrapper header: magic, version, offset, size, cpu type.
    if data.len() >= 4 && data[..4] == [0xDE, 0xC0, 0x17, 0x0B] {
        let word = |i: usize| data.get(i..i + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let (off, size) = (word(8).ok_or("short wrapper header")?, word(12).ok_or("short wrapper header")?);
        data = off.checked_add(size).and_then(|end| data.get(off..end)).ok_or("invalid bitcode wrapper header")?;
    }
    if data.len() < 4 || data[..4] != [0x42, 0x43, 0xC0, 0xDE] {
        return Err("invalid bitcode signature".into());
    }
    // LLVM also refuses a stream that does not fill whole 32-bit words.
    if !data.len().is_multiple_of(4) {
        return Err("bitcode size is not a multiple of 4".into());
    }
    let mut bits = Bits { data, pos: 32 };
    let mut info = BlockInfo::default();
    let mut module: Option<Module> = None;
    while bits.remaining() >= 32 {
        let abbrev = bits.read(2)?;
        if abbrev != 1 {
            // Padding at the end of the stream.
            if abbrev == 0 && bits.pos.div_ceil(32) * 32 == bits.len_bits() {
                break;
            }
            return Err("expected a block at the top level".into());
        }
        let (id, width, len) = block_header(&mut bits)?;
        match id {
            BLOCKINFO_BLOCK => read_blockinfo(&mut bits, width, &mut info)?,
            MODULE_BLOCK if module.is_none() => {
                let mut m = Module::default();
                read_module(&mut bits, width, &mut info, &mut m)?;
                module = Some(m);
            }
            STRTAB_BLOCK => {
                let mut strtab = Vec::new();
                walk_block(
                    &mut bits,
                    width,
                    STRTAB_BLOCK,
                    &mut info,
                    &mut |r| {
                        if let (1, Some(b)) = (r.code, r.blob) {
                            strtab = b.to_vec();
                        }
                        Ok(())
                    },
                    &mut |b, _, _, len, _| skip_block(b, len),
                )?;
                if let Some(m) = module.as_mut().filter(|m| m.strtab.is_empty()) {
                    m.strtab = strtab;
                }
            }
            _ => skip_block(&mut bits, len)?,
        }
    }
    let m = module.ok_or("no module in the bitcode")?;
    let mut out = Vec::new();
    let Some(nodes) = m.named.get(&b"llvm.embedded.objects"[..]) else { return Ok(out) };
    for node in nodes {
        let Some(Md::Node(ops)) = m.md.get(node) else { continue };
        if ops.len() < 2 {
            continue;
        }
        // Operands are stored as id + 1 (0 is null).
        let md = |i: usize| ops[i].checked_sub(1).and_then(|id| m.md.get(&id));
        if !matches!(md(1), Some(Md::Str(s)) if s == b".llvm.offloading") {
            continue;
        }
        let Some(Md::Value(vid)) = md(0) else { continue };
        let Some(&(true, name_off, name_len, init)) = usize::try_from(*vid).ok().and_then(|v| m.globals.get(v)) else {
            continue;
        };
        let Some(bytes) = init.checked_sub(1).and_then(|c| m.strings.get(&c)) else { continue };
        let name = usize::try_from(name_off)
            .ok()
            .zip(usize::try_from(name_len).ok())
            .and_then(|(o, l)| m.strtab.get(o..o.checked_add(l)?))
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default();
        out.push(Embedded { global: name, bytes: bytes.clone() });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(embedded_objects(b"").is_err());
        assert!(embedded_objects(b"BC\xC0\xDE").is_err());
        assert!(embedded_objects(b"BC\xC0\xDE\xff\xff\xff\xff").is_err());
        assert!(embedded_objects(b"\xDE\xC0\x17\x0B\0\0\0\0\xff\xff\xff\xff\x10\0\0\0").is_err());
        let mut x: u32 = 12345;
        for len in 0..200 {
            let mut v = b"BC\xC0\xDE".to_vec();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                v.push(x as u8);
            }
            let _ = embedded_objects(&v);
        }
    }
}
