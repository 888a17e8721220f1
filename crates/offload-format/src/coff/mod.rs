//! COFF relocatable objects: adding and removing sections with the output
//! llvm-objcopy 19 writes, so fat COFF objects and their extracted host
//! objects are byte-identical to LLVM's.
//!
//! llvm-objcopy keeps a COFF object as sections (header, contents,
//! relocations), symbols (record and auxiliary records) and rebuilds the
//! rest: the file header, then the section table, then for each section its
//! raw data followed by its relocations, then the symbol table and a string
//! table of every long section and symbol name, tail-merged in LLVM's
//! order. Sections without raw data get a zero data pointer. New sections
//! are appended with the next virtual address, readable and
//! `IMAGE_SCN_LNK_REMOVE` (`--set-section-flags=readonly,exclude`).
//! Removing a section removes the symbols defined in it (and COMDAT
//! sections associated with it) and renumbers the rest.
//!
//! Big objects (`/bigobj`), PE images and sections with more than 65534
//! relocations are refused.

pub mod pe;
mod view;
pub use view::{ObjectSection, ObjectSymbol, ObjectView, SectionChecksum, is_object};

use crate::bytes::{ReadError, array, u16_le, u32_le};
use crate::elf::NewSection;
use crate::plan::Plan;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Why a COFF file cannot be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoffError {
    /// A field or table that cannot be read: what, at which file offset,
    /// and how.
    #[error("malformed COFF file: {0}")]
    Read(#[source] ReadError),
    /// A valid COFF file this writer cannot rewrite (why).
    #[error("cannot rewrite this COFF file: {0}")]
    Unsupported(String),
    /// A request LLVM's tools also refuse (their message).
    #[error("{0}")]
    Refused(String),
}

fn invalid(offset: usize, what: &'static str, why: impl Into<String>) -> CoffError {
    CoffError::Read(ReadError::invalid(offset as u64, what, why))
}

fn truncated(data: &[u8], offset: usize, need: usize, what: &'static str) -> CoffError {
    CoffError::Read(ReadError::truncated(data, offset as u64, need as u64, what))
}

const HEADER: usize = 20;
const SECTION: usize = 40;
const SYMBOL: usize = 18;
const RELOC: usize = 10;
const IMAGE_SCN_CNT_CODE: u32 = 0x20;
const IMAGE_SCN_LNK_REMOVE: u32 = 0x800;
const IMAGE_SCN_LNK_NRELOC_OVFL: u32 = 0x0100_0000;
const IMAGE_SCN_MEM_READ: u32 = 0x4000_0000;
const CLASS_STATIC: u8 = 3;
const CLASS_WEAK_EXTERNAL: u8 = 105;
const SELECT_ASSOCIATIVE: u8 = 5;

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

struct Section<'a> {
    id: usize,
    name: Cow<'a, [u8]>,
    /// The 40-byte header as read; name and layout fields are rewritten.
    header: [u8; SECTION],
    contents: &'a [u8],
    /// (virtual address, symbol id, type) per relocation.
    relocs: Vec<(u32, usize, u16)>,
}

struct Symbol<'a> {
    id: usize,
    name: &'a [u8],
    /// The 18-byte record as read; name and section number are rewritten.
    record: [u8; SYMBOL],
    aux: Vec<u8>,
    /// 1-based id of the defining section, or the raw (≤ 0) section number.
    section: i32,
    associative: Option<usize>,
    weak_target: Option<usize>,
}

struct Model<'a> {
    header: [u8; HEADER],
    sections: Vec<Section<'a>>,
    symbols: Vec<Symbol<'a>>,
}

fn string_at(table: &[u8], offset: u32) -> Option<&[u8]> {
    let rest = table.get(offset as usize..)?;
    Some(&rest[..memchr::memchr(0, rest)?])
}

fn decode_base64_offset(s: &[u8]) -> Option<u32> {
    let mut v: u64 = 0;
    for &c in s {
        let d = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        v = v * 64 + u64::from(d);
    }
    u32::try_from(v).ok()
}

/// Whether a section name goes into the string table: names longer than
/// the 8-byte header field, and (unlike llvm-objcopy, which writes them
/// inline and so makes an object no reader accepts) short names starting
/// with `/`, which a header field would present as a string table offset.
fn section_name_in_table(name: &[u8]) -> bool {
    name.len() > 8 || name.starts_with(b"/")
}

/// `/<decimal>` for string table offsets up to 9999999, else `//` and six
/// base-64 digits.
fn encode_section_name(offset: u32) -> Vec<u8> {
    if offset <= 9_999_999 {
        return format!("/{offset}").into_bytes();
    }
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut e = b"//".to_vec();
    for k in (0..6).rev() {
        e.push(B64[(offset as usize >> (6 * k)) & 63]);
    }
    e
}

fn short_name(raw: &[u8]) -> &[u8] {
    &raw[..memchr::memchr(0, raw).unwrap_or(raw.len())]
}

impl<'a> Model<'a> {
    fn read(data: &'a [u8]) -> Result<Model<'a>, CoffError> {
        let header: [u8; HEADER] = array(data, 0).ok_or_else(|| truncated(data, 0, HEADER, "file header"))?;
        if u16_le(&header, 0) == Some(0) && u16_le(&header, 2) == Some(0xffff) {
            return Err(CoffError::Unsupported("big objects (/bigobj)".into()));
        }
        let nsec = u16_le(&header, 2).unwrap_or(0) as usize;
        let symptr = u32_le(&header, 8).unwrap_or(0) as usize;
        let nsym = u32_le(&header, 12).unwrap_or(0) as usize;
        if u16_le(&header, 16) != Some(0) {
            return Err(CoffError::Unsupported("PE images (an optional header is present)".into()));
        }
        let table_end = HEADER + nsec * SECTION;
        if table_end > data.len() {
            return Err(truncated(data, HEADER, nsec * SECTION, "section table"));
        }
        // The string table follows the symbol table, also when there are no
        // symbols (an object with only long section names, such as a fat
        // object whose host has no symbols, as llvm-objcopy writes it).
        let (symbols_raw, strings): (&[u8], &[u8]) = if nsym == 0 && symptr == 0 {
            (&[], &[])
        } else {
            let end = nsym.checked_mul(SYMBOL).and_then(|n| n.checked_add(symptr)).filter(|&e| e <= data.len());
            let end = end.ok_or_else(|| truncated(data, symptr, nsym.saturating_mul(SYMBOL), "symbol table"))?;
            let size = (u32_le(data, end).unwrap_or(4) as usize).max(4);
            let strings = match data.get(end..end.saturating_add(size)) {
                Some(strings) => strings,
                // No symbols and nothing after them: no string table either.
                None if nsym == 0 && end == data.len() => &[],
                None => return Err(truncated(data, end, size, "string table")),
            };
            (&data[symptr..end], strings)
        };
        // `at`: where the name field is in the file.
        let long = |offset: u32, at: usize, what: &dyn Fn() -> String| {
            string_at(strings, offset)
                .filter(|_| offset >= 4)
                .ok_or_else(|| invalid(at, "long name", format!("{}: bad string table offset {offset}", what())))
        };

        let mut sections = Vec::with_capacity(nsec);
        for i in 0..nsec {
            let at = HEADER + i * SECTION;
            // Inside the section table, which lies inside `data`.
            let header: [u8; SECTION] = array(data, at).unwrap_or([0; SECTION]);
            let raw_name = &data[at..at + 8];
            let what = || format!("section {}", i + 1);
            let name = if raw_name.starts_with(b"//") {
                let offset = decode_base64_offset(short_name(&raw_name[2..]))
                    .ok_or_else(|| invalid(at, "section name", format!("{}: bad name", what())))?;
                long(offset, at, &what)?
            } else if raw_name.starts_with(b"/") {
                let digits = std::str::from_utf8(short_name(&raw_name[1..])).ok().and_then(|s| s.parse::<u32>().ok());
                let offset = digits.ok_or_else(|| invalid(at, "section name", format!("{}: bad name", what())))?;
                long(offset, at, &what)?
            } else {
                short_name(raw_name)
            };
            let size = u32_le(&header, 16).unwrap_or(0) as usize;
            let ptr = u32_le(&header, 20).unwrap_or(0) as usize;
            let contents = if ptr == 0 {
                &[][..]
            } else {
                data.get(ptr..ptr.saturating_add(size)).ok_or_else(|| truncated(data, ptr, size, "section raw data"))?
            };
            let characteristics = u32_le(&header, 36).unwrap_or(0);
            let nrel = u16_le(&header, 32).unwrap_or(0) as usize;
            if characteristics & IMAGE_SCN_LNK_NRELOC_OVFL != 0 && nrel == 0xffff {
                return Err(CoffError::Unsupported(format!("{}: more than 65534 relocations", what())));
            }
            let rptr = u32_le(&header, 24).unwrap_or(0) as usize;
            let rdata = data
                .get(rptr..rptr.saturating_add(nrel * RELOC))
                .filter(|_| nrel == 0 || rptr != 0)
                .ok_or_else(|| truncated(data, rptr, nrel * RELOC, "section relocations"))?;
            let relocs = rdata
                .chunks_exact(RELOC)
                .map(|r| (u32_le(r, 0).unwrap_or(0), u32_le(r, 4).unwrap_or(0) as usize, u16_le(r, 8).unwrap_or(0)))
                .collect();
            sections.push(Section { id: i + 1, name: Cow::Borrowed(name), header, contents, relocs });
        }

        let mut symbols = Vec::new();
        let mut k = 0;
        while k < nsym {
            // k < nsym, and the symbol table's nsym records lie inside it.
            let record: [u8; SYMBOL] = array(symbols_raw, k * SYMBOL).unwrap_or([0; SYMBOL]);
            let naux = record[17] as usize;
            let aux = symbols_raw.get((k + 1) * SYMBOL..(k + 1 + naux) * SYMBOL).ok_or_else(|| {
                let why = format!("symbol {k}: auxiliary records past the symbol table");
                invalid(symptr + (k + 1) * SYMBOL, "auxiliary symbol records", why)
            })?;
            let name = if record[..4] == [0; 4] {
                long(u32_le(&record, 4).unwrap_or(0), symptr + k * SYMBOL, &|| format!("symbol {k}"))?
            } else {
                short_name(&symbols_raw[k * SYMBOL..k * SYMBOL + 8])
            };
            let section = i32::from(u16_le(&record, 12).unwrap_or(0) as i16);
            if section > nsec as i32 {
                let why = format!("symbol {k} refers to section {section}");
                return Err(invalid(symptr + k * SYMBOL + 12, "symbol section number", why));
            }
            let class = record[16];
            let mut associative = None;
            let mut weak_target = None;
            if class == CLASS_STATIC && naux == 1 && section > 0 && aux[14] == SELECT_ASSOCIATIVE {
                associative = Some(u16_le(aux, 12).unwrap_or(0) as usize);
            }
            if class == CLASS_WEAK_EXTERNAL && naux >= 1 {
                weak_target = Some(u32_le(aux, 0).unwrap_or(0) as usize);
            }
            symbols.push(Symbol { id: k, name, record, aux: aux.to_vec(), section, associative, weak_target });
            k += 1 + naux;
        }
        Ok(Model { header, sections, symbols })
    }

    fn remove(&mut self, pred: &dyn Fn(&[u8]) -> bool) {
        let mut removed: Vec<usize> = self.sections.iter().filter(|s| pred(&s.name)).map(|s| s.id).collect();
        while !removed.is_empty() {
            self.sections.retain(|s| !removed.contains(&s.id));
            let mut associated = Vec::new();
            self.symbols.retain(|s| {
                if s.associative.is_some_and(|a| removed.contains(&a)) && s.section > 0 {
                    associated.push(s.section as usize);
                }
                !(s.section > 0 && removed.contains(&(s.section as usize)))
            });
            removed = associated;
        }
    }

    fn add(&mut self, new: Vec<NewSection<'a>>) {
        for s in new {
            let (va, vsize) = self
                .sections
                .last()
                .map(|l| (u32_le(&l.header, 12).unwrap_or(0), u32_le(&l.header, 8).unwrap_or(0)))
                .unwrap_or((0, 0));
            let mut header = [0u8; SECTION];
            let size = s.data.len() as u32;
            put_u32(&mut header, 8, size);
            put_u32(&mut header, 12, va.wrapping_add(vsize));
            put_u32(&mut header, 16, size);
            put_u32(&mut header, 36, IMAGE_SCN_MEM_READ | IMAGE_SCN_LNK_REMOVE);
            let id = usize::MAX - self.sections.len();
            self.sections.push(Section { id, name: Cow::Owned(s.name), header, contents: s.data, relocs: Vec::new() });
        }
    }

    fn write(mut self) -> Result<Plan<'a>, CoffError> {
        // Raw symbol indices and section numbers of the output.
        let mut raw_index: BTreeMap<usize, u32> = BTreeMap::new();
        let mut next = 0u32;
        for s in &self.symbols {
            raw_index.insert(s.id, next);
            next += 1 + u32::from(s.record[17]);
        }
        let section_index: BTreeMap<usize, u32> =
            self.sections.iter().enumerate().map(|(k, s)| (s.id, k as u32 + 1)).collect();

        // Long names share one tail-merged string table.
        let mut long: Vec<&[u8]> = Vec::new();
        long.extend(self.sections.iter().map(|s| &*s.name).filter(|n| section_name_in_table(n)));
        long.extend(self.symbols.iter().map(|s| s.name).filter(|n| n.len() > 8));
        long.sort_unstable_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
        long.dedup();
        let mut strtab = vec![0u8; 4];
        let mut offsets: BTreeMap<&[u8], u32> = BTreeMap::new();
        let mut previous: &[u8] = &[];
        for s in long {
            let offset = if previous.ends_with(s) {
                strtab.len() - 1 - s.len()
            } else {
                let at = strtab.len();
                strtab.extend_from_slice(s);
                strtab.push(0);
                previous = s;
                at
            };
            offsets.insert(
                s,
                u32::try_from(offset).map_err(|_| CoffError::Unsupported("a string table over 4 GiB".into()))?,
            );
        }
        let strtab_len =
            u32::try_from(strtab.len()).map_err(|_| CoffError::Unsupported("a string table over 4 GiB".into()))?;
        strtab[..4].copy_from_slice(&strtab_len.to_le_bytes());

        // Symbols: names, section numbers, section definitions, weak targets.
        let mut symtab = Vec::with_capacity(next as usize * SYMBOL);
        for s in &mut self.symbols {
            let mut rec = s.record;
            rec[..8].fill(0);
            if s.name.len() > 8 {
                put_u32(&mut rec, 4, offsets.get(s.name).copied().unwrap_or(0));
            } else {
                rec[..s.name.len()].copy_from_slice(s.name);
            }
            if s.section > 0 {
                let index = section_index.get(&(s.section as usize)).copied().ok_or_else(|| {
                    CoffError::Refused(format!(
                        "symbol '{}' points to a removed section",
                        String::from_utf8_lossy(s.name)
                    ))
                })?;
                put_u16(&mut rec, 12, index as u16);
                if rec[17] == 1 && rec[16] == CLASS_STATIC {
                    let number = match s.associative {
                        Some(a) => section_index.get(&a).copied().ok_or_else(|| {
                            CoffError::Refused(format!(
                                "symbol '{}' is associative to a removed section",
                                String::from_utf8_lossy(s.name)
                            ))
                        })?,
                        None => index,
                    };
                    put_u16(&mut s.aux, 12, number as u16);
                    put_u16(&mut s.aux, 16, (number >> 16) as u16);
                }
            }
            if let (Some(target), 1) = (s.weak_target, rec[17]) {
                let index = raw_index.get(&target).copied().ok_or_else(|| {
                    CoffError::Refused(format!(
                        "symbol '{}' is missing its weak target",
                        String::from_utf8_lossy(s.name)
                    ))
                })?;
                put_u32(&mut s.aux, 0, index);
            }
            symtab.extend_from_slice(&rec);
            symtab.extend_from_slice(&s.aux);
        }

        // Layout: headers, then each section's data and relocations.
        let mut pos = (HEADER + SECTION * self.sections.len()) as u64;
        let mut headers = Vec::with_capacity(SECTION * self.sections.len());
        let mut body: Vec<(Cow<'a, [u8]>, u64, u8)> = Vec::new();
        for s in &self.sections {
            let mut h = s.header;
            h[..8].fill(0);
            if section_name_in_table(&s.name) {
                let offset = offsets.get(&*s.name).copied().unwrap_or(0);
                let encoded = encode_section_name(offset);
                h[..encoded.len()].copy_from_slice(&encoded);
            } else {
                h[..s.name.len()].copy_from_slice(&s.name);
            }
            let raw_size = u64::from(u32_le(&h, 16).unwrap_or(0));
            put_u32(&mut h, 20, if raw_size > 0 { pos as u32 } else { 0 });
            if raw_size > 0 {
                let fill = if u32_le(&h, 36).unwrap_or(0) & IMAGE_SCN_CNT_CODE != 0 { 0xcc } else { 0 };
                body.push((Cow::Borrowed(&s.contents[..s.contents.len().min(raw_size as usize)]), raw_size, fill));
            }
            pos += raw_size;
            put_u16(&mut h, 32, s.relocs.len() as u16);
            put_u32(&mut h, 24, if s.relocs.is_empty() { 0 } else { pos as u32 });
            if !s.relocs.is_empty() {
                let mut r = Vec::with_capacity(s.relocs.len() * RELOC);
                for &(va, target, ty) in &s.relocs {
                    let index = raw_index.get(&target).copied().ok_or_else(|| {
                        CoffError::Refused(format!(
                            "relocation target ({target}) of section '{}' not found",
                            String::from_utf8_lossy(&s.name)
                        ))
                    })?;
                    r.extend_from_slice(&va.to_le_bytes());
                    r.extend_from_slice(&index.to_le_bytes());
                    r.extend_from_slice(&ty.to_le_bytes());
                }
                pos += r.len() as u64;
                body.push((Cow::Owned(r), 0, 0));
            }
            headers.extend_from_slice(&h);
        }
        if pos + symtab.len() as u64 + strtab.len() as u64 > u64::from(u32::MAX) {
            return Err(CoffError::Unsupported("the output would exceed 4 GiB".into()));
        }
        let mut file_header = self.header;
        put_u16(&mut file_header, 2, self.sections.len() as u16);
        put_u32(&mut file_header, 8, pos as u32);
        put_u32(&mut file_header, 12, next);

        let mut plan = Plan::new();
        plan.own(file_header.to_vec());
        plan.own(headers);
        for (bytes, raw_size, fill) in body {
            let len = bytes.len() as u64;
            match bytes {
                Cow::Borrowed(b) => plan.borrow(b),
                Cow::Owned(b) => plan.own(b),
            }
            // Raw data the input does not hold (uninitialized data, whose
            // size a header gives) is written, as llvm-objcopy writes it,
            // but never allocated.
            plan.fill(fill, raw_size.saturating_sub(len));
        }
        plan.own(symtab);
        plan.own(strtab);
        Ok(plan)
    }
}

/// Drops the sections whose name satisfies `remove`, appends `add`, and
/// writes the object as llvm-objcopy does.
pub fn rewrite<'a>(
    input: &'a [u8],
    remove: &dyn Fn(&[u8]) -> bool,
    add: Vec<NewSection<'a>>,
) -> Result<Plan<'a>, CoffError> {
    let mut model = Model::read(input)?;
    model.remove(remove);
    if model.sections.len() + add.len() > 0xfeff {
        return Err(CoffError::Unsupported("more than 65279 sections".into()));
    }
    model.add(add);
    model.write()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Piece;

    /// An object without symbols still has a string table, after the empty
    /// symbol table, holding the long names of bundle sections;
    /// extracting the host from such a fat object failed ("bad string
    /// table offset"). The expected bytes are LLVM 19's `-unbundle` output
    /// for the same fat object.
    #[test]
    fn objects_without_symbols_keep_their_string_table() {
        let mut host = vec![0u8; 89];
        host[..4].copy_from_slice(&[0x4c, 0x01, 0x01, 0x00]);
        host[0x24] = 16; // SizeOfRawData 16, no raw data pointer
        let fat = rewrite(
            &host,
            &|_| false,
            vec![
                NewSection { name: b"__CLANG_OFFLOAD_BUNDLE__host-x86_64-unknown-linux-gnu-".to_vec(), data: &[0] },
                NewSection { name: b"__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx906".to_vec(), data: b"DEV1" },
            ],
        )
        .unwrap()
        .to_vec();
        assert_eq!(u32_le(&fat, 12), Some(0), "no symbols");
        let extracted = rewrite(&fat, &|name| name.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"), Vec::new()).unwrap();
        let mut llvm19 = vec![0u8; 80];
        llvm19[..4].copy_from_slice(&[0x4c, 0x01, 0x01, 0x00]);
        llvm19[8] = 0x4c; // PointerToSymbolTable: right after the data
        llvm19[0x24] = 0x10; // SizeOfRawData
        llvm19[0x28] = 0x3c; // PointerToRawData
        llvm19[0x4c] = 4; // an empty string table
        assert_eq!(extracted.to_vec(), llvm19);
    }

    /// Found by fuzzing (bundle_object): a section whose name, from the
    /// string table, is short but starts with `/` was written inline, where
    /// readers take it for a string table offset (llvm-objcopy 19 does the
    /// same and its output is rejected by llvm-objdump). It goes through
    /// the string table now.
    #[test]
    fn short_names_starting_with_a_slash_go_through_the_string_table() {
        use object::{Object, ObjectSection};
        let mut host = vec![0u8; 89];
        host[..4].copy_from_slice(&[0x4c, 0x01, 0x01, 0x00]);
        host[0x24] = 16;
        let added = vec![
            NewSection { name: b"/16ANG".to_vec(), data: b"one" },
            NewSection { name: b"/".to_vec(), data: b"two" },
            NewSection { name: b"short".to_vec(), data: b"three" },
        ];
        let out = rewrite(&host, &|_| false, added).unwrap().to_vec();
        let file = object::File::parse(&out[..]).unwrap();
        let names: Vec<String> = file.sections().map(|s| s.name().unwrap().to_string()).collect();
        assert_eq!(names, ["", "/16ANG", "/", "short"]);
        assert!(out.windows(8).any(|w| w == b"short\0\0\0"), "short names stay inline");
    }

    /// Found by fuzzing (bundle_object): an 89-byte i386 object whose one
    /// section has no raw data (pointer 0) but a raw size of 0x7b000000.
    /// llvm-objcopy writes that many bytes (zeros, or 0xcc in code
    /// sections); so do we, as a fill piece that is never allocated.
    #[test]
    fn raw_data_the_input_lacks_is_a_fill_not_an_allocation() {
        let mut object = vec![0u8; 89];
        object[..4].copy_from_slice(&[0x4c, 0x01, 0x01, 0x00]);
        object[0x27] = 0x7b; // SizeOfRawData = 0x7b000000
        object[0x3c] = 0x58;
        object[0x4c] = 0x01;
        object[0x54] = 0x66;
        object[0x58] = 0x22;
        for (characteristics, byte) in [(0u32, 0u8), (IMAGE_SCN_CNT_CODE, 0xcc)] {
            object[56..60].copy_from_slice(&characteristics.to_le_bytes());
            let plan = rewrite(&object, &|_| false, Vec::new()).unwrap();
            let fills: Vec<(u8, u64)> = plan
                .pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Fill { byte, len } => Some((*byte, *len)),
                    Piece::Bytes(_) => None,
                })
                .collect();
            assert_eq!(fills, [(byte, 0x7b00_0000)]);
            assert!(plan.len() > 0x7b00_0000 && plan.len() < 0x7b00_0000 + 4096);
            assert!(plan.pieces.iter().all(|p| matches!(p, Piece::Fill { .. }) || p.len() < 4096));
        }
    }

    #[test]
    fn long_section_names_encode_and_decode() {
        assert_eq!(encode_section_name(76), b"/76");
        assert_eq!(encode_section_name(9_999_999), b"/9999999");
        for offset in [10_000_000u32, 12_345_678, u32::MAX] {
            let e = encode_section_name(offset);
            assert_eq!(e.len(), 8);
            assert_eq!(decode_base64_offset(&e[2..]), Some(offset));
        }
        assert_eq!(decode_base64_offset(b"AAAAAA"), Some(0));
        assert_eq!(decode_base64_offset(b"A*"), None);
    }

    #[test]
    fn truncated_files_are_errors() {
        assert!(matches!(rewrite(&[0x64, 0x86, 1, 0], &|_| false, Vec::new()), Err(CoffError::Read(_))));
        let mut h = vec![0x64, 0x86, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(rewrite(&h, &|_| false, Vec::new()), Err(CoffError::Read(_))));
        h[8..12].fill(0);
        h[12] = 0;
        assert!(rewrite(&h, &|_| false, Vec::new()).is_ok());
    }
}
