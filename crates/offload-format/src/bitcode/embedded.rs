//! Just enough of an LLVM bitcode reader to find the packages Clang embeds
//! in bitcode (`-fembed-offload-object` with `-emit-llvm`, or LTO objects):
//! the module's named metadata `!llvm.embedded.objects` lists pairs
//! `!{ptr @global, !".llvm.offloading"}`, and each such global's
//! initializer (a constant byte string) is one package.
//!
//! Supported, over the shared bitstream reader ([`super::stream`]): module
//! records that define global values, module-level constants of the string
//! kinds (`STRING`, `CSTRING`) and module-level metadata (`STRINGS`,
//! `STRING_OLD`, `VALUE`, `NODE`, `NAME`/`NAMED_NODE`).
//! Function bodies and everything else are skipped by block length. Only the
//! first module of a file is read, as LLVM does. Every read is bounded by
//! the input; malformed input gives an error, never a panic.

use super::stream::{self, Block, BlockInfo, Cursor, Entry, Header, Result};
use std::collections::HashMap;

/// A package found in bitcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Embedded {
    /// Name of the global holding it (empty if the module has no names).
    pub global: String,
    pub bytes: Vec<u8>,
}

const MODULE_BLOCK: u64 = 8;
const CONSTANTS_BLOCK: u64 = 11;
const METADATA_BLOCK: u64 = 15;
const STRTAB_BLOCK: u64 = 23;

/// What the module defines that matters here.
#[derive(Default)]
struct Module<'a> {
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
    strtab: &'a [u8],
}

enum Md {
    Str(Vec<u8>),
    Value(u64),
    Node(Vec<u64>),
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
    let mut bits = Cursor::new(lengths);
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

fn read_constants(bits: &mut Cursor<'_>, header: &Header, info: &mut BlockInfo, m: &mut Module<'_>) -> Result<()> {
    stream::for_each_record(bits, header, info, |r| {
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
    })
}

fn read_metadata(bits: &mut Cursor<'_>, header: &Header, info: &mut BlockInfo, m: &mut Module<'_>) -> Result<()> {
    let mut pending_name: Option<Vec<u8>> = None;
    stream::for_each_record(bits, header, info, |r| {
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
                m.md.insert(m.next_md, Md::Node(r.ops));
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
    })
}

fn read_module<'a>(bits: &mut Cursor<'_>, header: &Header, info: &mut BlockInfo) -> Result<Module<'a>> {
    let mut m = Module::default();
    let mut block = Block::enter(header, info);
    loop {
        let r = match block.next(bits, info)? {
            Entry::End => return Ok(m),
            Entry::SubBlock(sub) => {
                match sub.id {
                    CONSTANTS_BLOCK => read_constants(bits, &sub, info, &mut m)?,
                    METADATA_BLOCK => read_metadata(bits, &sub, info, &mut m)?,
                    _ => stream::skip_block(bits, &sub)?,
                }
                continue;
            }
            Entry::Record(r) => r,
        };
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
    }
}

/// Finds the packages embedded in a bitcode file.
pub fn embedded_objects(data: &[u8]) -> Result<Vec<Embedded>> {
    let mut bits = stream::open(data)?;
    // LLVM also refuses a stream that does not fill whole 32-bit words.
    if !bits.len_bits().is_multiple_of(32) {
        return Err("bitcode size is not a multiple of 4".into());
    }
    let mut info = BlockInfo::default();
    let mut module: Option<Module> = None;
    while let Some(header) = stream::next_top_block(&mut bits)? {
        match header.id {
            stream::BLOCKINFO_BLOCK => stream::read_blockinfo(&mut bits, header.width, &mut info)?,
            MODULE_BLOCK if module.is_none() => module = Some(read_module(&mut bits, &header, &mut info)?),
            STRTAB_BLOCK => {
                // STRTAB_BLOB [blob]
                let strtab = stream::block_blob(&mut bits, &header, &mut info, 1)?;
                if let Some(m) = module.as_mut().filter(|m| m.strtab.is_empty()) {
                    m.strtab = strtab.unwrap_or_default();
                }
            }
            _ => stream::skip_block(&mut bits, &header)?,
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
