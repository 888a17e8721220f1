//! `clang-offload-wrapper -add-omp-offload-notes` (LLVM 14): a section
//! `.note.openmp` with three `LLVMOMPOFFLOAD` ELF notes (image format
//! version "1.0", producer "LLVM", producer version) added to each ELF
//! device image before it is wrapped.
//!
//! LLVM 14 has `llvm-objcopy --add-section` add the section; we lay the
//! image out as that objcopy does, so the result is byte-identical to LLVM
//! 14's for the images its regression test uses (docs/formats/wrapper.md
//! §1.4 has the layout and the limits).

use crate::bytes::{u16_endian, u32_endian, u64_endian};
use crate::elf::{Codec, SHN_LORESERVE, SHT_NOBITS, SHT_NOTE, SHT_STRTAB, SHT_SYMTAB};

/// The note owner ("name") of every note.
pub const OWNER: &str = "LLVMOMPOFFLOAD";
/// The name of the section added.
pub const SECTION: &str = ".note.openmp";
/// `NT_LLVM_OPENMP_OFFLOAD_VERSION`, `_PRODUCER`, `_PRODUCER_VERSION`.
pub const NOTE_TYPES: [u32; 3] = [1, 2, 3];

/// Why notes were not added; the image is then wrapped unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotesError {
    /// Not an ELF file (LLVM 14's warning names the file).
    #[error("is not an ELF image, so notes cannot be added to it.")]
    NotElf,
    /// An ELF file whose headers do not hold together, or a layout this
    /// writer does not handle.
    #[error("cannot add notes to it: {0}")]
    Unsupported(String),
}

/// The bytes of the three notes in the image's byte order: each a header
/// (name size, descriptor size, type), the owner with its NUL, and the
/// descriptor, both padded to 4 bytes.
pub fn note_bytes(big_endian: bool, producer_version: &str) -> Vec<u8> {
    let u32b = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut out = Vec::new();
    for (ty, desc) in NOTE_TYPES.iter().zip(["1.0", "LLVM", producer_version]) {
        let name_size = OWNER.len() + 1;
        out.extend_from_slice(&u32b(name_size as u32));
        out.extend_from_slice(&u32b(desc.len() as u32));
        out.extend_from_slice(&u32b(*ty));
        out.extend_from_slice(OWNER.as_bytes());
        out.push(0);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc.as_bytes());
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}

/// Field access in the image's class and byte order, bounds-checked.
struct Reader<'a> {
    data: &'a [u8],
    wide: bool,
    big: bool,
}

impl Reader<'_> {
    fn bytes(&self, at: u64, len: u64) -> Result<&[u8], NotesError> {
        let end = at.checked_add(len).ok_or_else(|| bad("offset overflows"))?;
        let (a, e) = (usize::try_from(at).ok(), usize::try_from(end).ok());
        a.zip(e).and_then(|(a, e)| self.data.get(a..e)).ok_or_else(|| bad("a header points past the end of the file"))
    }
    // `bytes` gives the refusal for a field past the end; the field read
    // from what it returns cannot fail.
    fn u16(&self, at: u64) -> Result<u64, NotesError> {
        u16_endian(self.bytes(at, 2)?, 0, self.big).map(u64::from).ok_or_else(|| bad("short"))
    }
    fn u32(&self, at: u64) -> Result<u64, NotesError> {
        u32_endian(self.bytes(at, 4)?, 0, self.big).map(u64::from).ok_or_else(|| bad("short"))
    }
    fn u64(&self, at: u64) -> Result<u64, NotesError> {
        u64_endian(self.bytes(at, 8)?, 0, self.big).ok_or_else(|| bad("short"))
    }
    /// An address-sized field (`Elf32_Addr`/`Elf64_Addr`, offsets, sizes).
    fn word(&self, at: u64) -> Result<u64, NotesError> {
        if self.wide { self.u64(at) } else { self.u32(at) }
    }
}

fn bad(what: &str) -> NotesError {
    NotesError::Unsupported(what.to_string())
}

fn put(out: &mut [u8], at: u64, value: u64, size: usize, big: bool) {
    let bytes = value.to_be_bytes();
    let mut field = bytes[8 - size..].to_vec();
    if !big {
        field.reverse();
    }
    if let Some(dst) = usize::try_from(at).ok().and_then(|a| out.get_mut(a..a + size)) {
        dst.copy_from_slice(&field);
    }
}

#[derive(Clone)]
struct Section {
    name: Vec<u8>,
    header: Vec<u8>,
    kind: u32,
    offset: u64,
    size: u64,
    align: u64,
    link: u64,
    /// Inside a segment: keeps its offset.
    fixed: bool,
    /// New contents (rebuilt string and symbol tables, the notes).
    data: Option<Vec<u8>>,
}

/// The string table as LLVM's ELF string-table builder lays it out: a
/// leading NUL, then the names ordered by their reversed bytes, largest
/// first, each name that ends another one (just placed) pointing into it.
/// Returns the table and each name's offset.
fn string_table(names: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
    let mut unique: Vec<&[u8]> = names.iter().copied().filter(|n| !n.is_empty()).collect();
    unique.sort_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
    unique.dedup();
    let mut table = vec![0u8];
    let mut offsets: Vec<(&[u8], u64)> = Vec::with_capacity(unique.len());
    let mut previous: &[u8] = &[];
    for name in unique {
        if !previous.is_empty() && previous.ends_with(name) {
            let pos = table.len() - name.len() - 1;
            offsets.push((name, pos as u64));
            continue;
        }
        offsets.push((name, table.len() as u64));
        table.extend_from_slice(name);
        table.push(0);
        previous = name;
    }
    let find = |n: &[u8]| offsets.iter().find(|(s, _)| *s == n).map_or(0, |&(_, o)| o);
    (table, names.iter().map(|n| find(n)).collect())
}

/// `image` with the notes section added (see the module comment), or why
/// not. `producer_version` is the LLVM version the notes name ("14.0.6").
pub fn add_notes(image: &[u8], producer_version: &str) -> Result<Vec<u8>, NotesError> {
    if image.len() < 16 || !image.starts_with(b"\x7fELF") {
        return Err(NotesError::NotElf);
    }
    let wide = match image[4] {
        1 => false,
        2 => true,
        _ => return Err(NotesError::NotElf),
    };
    let big = match image[5] {
        1 => false,
        2 => true,
        _ => return Err(NotesError::NotElf),
    };
    let r = Reader { data: image, wide, big };
    let (ehsize, phent, shent) = if wide { (64u64, 56u64, 64u64) } else { (52, 32, 40) };
    if (image.len() as u64) < ehsize {
        return Err(NotesError::NotElf);
    }
    // Header fields: e_phoff, e_shoff, e_phnum, e_shnum, e_shstrndx.
    let (phoff_at, shoff_at, half_at) = if wide { (32, 40, 54) } else { (28, 32, 42) };
    let phoff = r.word(phoff_at)?;
    let shoff = r.word(shoff_at)?;
    let phentsize = r.u16(half_at)?;
    let phnum = r.u16(half_at + 2)?;
    let shentsize = r.u16(half_at + 4)?;
    let shnum = r.u16(half_at + 6)?;
    let shstrndx = r.u16(half_at + 8)?;
    if shoff == 0 || shnum == 0 || shstrndx == 0 || shstrndx >= shnum || shnum + 1 >= u64::from(SHN_LORESERVE) {
        return Err(bad("no section header table, or an extended one"));
    }
    if shentsize != shent || (phnum > 0 && phentsize != phent) {
        return Err(bad("unexpected header entry sizes"));
    }
    // Segments: the file range they cover is kept as it is.
    let mut segments = Vec::new();
    let mut keep_end = ehsize;
    if phnum > 0 {
        keep_end = keep_end.max(phoff.checked_add(phnum * phent).ok_or_else(|| bad("program headers overflow"))?);
        r.bytes(phoff, phnum * phent)?;
    }
    for i in 0..phnum {
        let at = phoff + i * phent;
        let header = crate::elf::segments::entry(Codec { is64: wide, big }, r.bytes(at, phent)?, 0);
        let (off, filesz) = header.map(|s| (s.offset, s.filesz)).ok_or_else(|| bad("short"))?;
        r.bytes(off, filesz)?;
        segments.push((off, off + filesz));
        keep_end = keep_end.max(off + filesz);
    }
    r.bytes(shoff, shnum * shent)?;
    let strtab_hdr = shoff + shstrndx * shent;
    let (str_off, str_size) = if wide {
        (r.u64(strtab_hdr + 24)?, r.u64(strtab_hdr + 32)?)
    } else {
        (r.u32(strtab_hdr + 16)?, r.u32(strtab_hdr + 20)?)
    };
    let names = r.bytes(str_off, str_size)?;
    let mut sections = Vec::new();
    for i in 1..shnum {
        let at = shoff + i * shent;
        let header = r.bytes(at, shent)?.to_vec();
        let name_at = r.u32(at)?;
        let kind = r.u32(at + 4)? as u32;
        let (offset, size, link, align) = if wide {
            (r.u64(at + 24)?, r.u64(at + 32)?, r.u32(at + 40)?, r.u64(at + 48)?)
        } else {
            (r.u32(at + 16)?, r.u32(at + 20)?, r.u32(at + 24)?, r.u32(at + 32)?)
        };
        let name = usize::try_from(name_at)
            .ok()
            .and_then(|n| names.get(n..))
            .and_then(|s| s.split(|&b| b == 0).next())
            .ok_or_else(|| bad("a section name is outside the name table"))?
            .to_vec();
        if kind != SHT_NOBITS {
            r.bytes(offset, size)?;
        }
        let fixed = kind != SHT_NOBITS && size > 0 && segments.iter().any(|&(s, e)| offset >= s && offset + size <= e);
        sections.push(Section { name, header, kind, offset, size, align: align.max(1), link, fixed, data: None });
    }
    let notes = note_bytes(big, producer_version);
    let mut header = vec![0u8; shent as usize];
    put(&mut header, 4, u64::from(SHT_NOTE), 4, big);
    sections.push(Section {
        name: SECTION.as_bytes().to_vec(),
        header,
        kind: SHT_NOTE,
        offset: 0,
        size: notes.len() as u64,
        align: 1,
        link: 0,
        fixed: false,
        data: Some(notes),
    });
    // llvm-objcopy rebuilds the section-name table and the string table of
    // each symbol table (one table when they are the same section); the
    // symbols keep their order and get their new name offsets.
    let mut tables: Vec<u64> = vec![shstrndx];
    for sec in &sections {
        if sec.kind == SHT_SYMTAB && !tables.contains(&sec.link) {
            tables.push(sec.link);
        }
    }
    let entsize = if wide { 24 } else { 16 };
    let mut section_name_offsets = Vec::new();
    for &t in &tables {
        let table_index = usize::try_from(t).ok().and_then(|t| t.checked_sub(1)).filter(|&t| t + 1 < sections.len());
        let table_index = table_index
            .filter(|&t| sections[t].kind == SHT_STRTAB)
            .ok_or_else(|| bad("a symbol table links to no string table"))?;
        let old_table = r.bytes(sections[table_index].offset, sections[table_index].size)?;
        let mut names: Vec<Vec<u8>> = Vec::new();
        if t == shstrndx {
            names.extend(sections.iter().map(|s| s.name.clone()));
        }
        // (symbol table index, number of its names) in `names` order.
        let mut symtabs = Vec::new();
        for (i, sec) in sections.iter().enumerate() {
            if sec.kind != SHT_SYMTAB || sec.link != t {
                continue;
            }
            let data = r.bytes(sec.offset, sec.size)?;
            let count = data.len() / entsize;
            for k in 0..count {
                let at = (k * entsize) as u64;
                let name_at = Reader { data, wide, big }.u32(at)?;
                let name = usize::try_from(name_at)
                    .ok()
                    .and_then(|n| old_table.get(n..))
                    .and_then(|s| s.split(|&b| b == 0).next())
                    .ok_or_else(|| bad("a symbol name is outside its string table"))?;
                names.push(name.to_vec());
            }
            symtabs.push((i, count));
        }
        let refs: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        let (table, offsets) = string_table(&refs);
        let mut next = 0;
        if t == shstrndx {
            section_name_offsets = offsets[..sections.len()].to_vec();
            next = sections.len();
        }
        for (i, count) in symtabs {
            let sec = &sections[i];
            let mut data = r.bytes(sec.offset, sec.size)?.to_vec();
            for k in 0..count {
                put(&mut data, (k * entsize) as u64, offsets[next + k], 4, big);
            }
            next += count;
            sections[i].data = Some(data);
        }
        let sec = &mut sections[table_index];
        sec.size = table.len() as u64;
        sec.data = Some(table);
    }
    if sections.iter().any(|s| s.fixed && s.data.is_some()) {
        return Err(bad("a string or symbol table lies inside a segment"));
    }
    let name_offsets = section_name_offsets;
    // Layout: sections outside segments one after the other in the order
    // of their offsets in the input (the new section last), each at its
    // alignment, after the kept range; then the section header table
    // aligned to an address's size.
    let mut order: Vec<usize> = (0..sections.len()).collect();
    let last = sections.len() - 1;
    order.sort_by_key(|&i| if i == last { u64::MAX } else { sections[i].offset });
    let mut offset = keep_end;
    let mut placed: Vec<u64> = sections.iter().map(|s| s.offset).collect();
    for &i in &order {
        let s = &sections[i];
        if s.fixed {
            continue;
        }
        offset = offset.checked_next_multiple_of(s.align).ok_or_else(|| bad("alignment overflows"))?;
        placed[i] = offset;
        if s.kind != SHT_NOBITS {
            offset = offset.checked_add(s.size).ok_or_else(|| bad("size overflows"))?;
        }
    }
    let word = if wide { 8 } else { 4 };
    let new_shoff = offset.next_multiple_of(word);
    let new_shnum = shnum + 1;
    let total = new_shoff + new_shnum * shent;
    // A sensible layout is about the input plus the rebuilt tables and the
    // notes (sections that overlap in the input would be copied apart:
    // refused past twice the input's size); every range it copies was
    // checked above.
    let added: u64 = sections.iter().filter_map(|s| s.data.as_ref()).map(|d| d.len() as u64).sum();
    if total > (image.len() as u64).saturating_mul(2).saturating_add(added).saturating_add(4096) {
        return Err(bad("sections would not fit a sensible layout"));
    }
    let mut out = vec![0u8; total as usize];
    let keep = keep_end as usize;
    out[..keep].copy_from_slice(r.bytes(0, keep_end)?);
    for (i, s) in sections.iter().enumerate() {
        if s.fixed || s.kind == SHT_NOBITS {
            continue;
        }
        let data: &[u8] = match &s.data {
            Some(d) => d,
            None => r.bytes(s.offset, s.size)?,
        };
        let at = placed[i] as usize;
        out[at..at + data.len()].copy_from_slice(data);
    }
    // Section headers: the null entry as it was, then each with its new
    // name index, offset and (for the name table) size.
    let null = r.bytes(shoff, shent)?;
    let base = new_shoff as usize;
    out[base..base + shent as usize].copy_from_slice(null);
    for (i, s) in sections.iter().enumerate() {
        let at = new_shoff + (i as u64 + 1) * shent;
        let a = at as usize;
        out[a..a + shent as usize].copy_from_slice(&s.header);
        put(&mut out, at, name_offsets[i], 4, big);
        if wide {
            put(&mut out, at + 24, placed[i], 8, big);
            put(&mut out, at + 32, s.size, 8, big);
            put(&mut out, at + 48, s.align, 8, big);
        } else {
            put(&mut out, at + 16, placed[i], 4, big);
            put(&mut out, at + 20, s.size, 4, big);
            put(&mut out, at + 32, s.align, 4, big);
        }
    }
    put(&mut out, shoff_at, new_shoff, word as usize, big);
    put(&mut out, half_at + 6, new_shnum, 2, big);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_padded_to_four_bytes_in_the_image_order() {
        let le = note_bytes(false, "14.0.6");
        assert_eq!(le.len(), 100);
        assert_eq!(&le[..12], &[15, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(&le[12..28], b"LLVMOMPOFFLOAD\0\0");
        assert_eq!(&le[28..32], b"1.0\0");
        let be = note_bytes(true, "14.0.6");
        assert_eq!(&be[..12], &[0, 0, 0, 15, 0, 0, 0, 3, 0, 0, 0, 1]);
        assert_eq!(&be[92..], b"14.0.6\0\0");
    }

    #[test]
    fn names_are_ordered_by_their_ends_and_merged() {
        let (table, offsets) = string_table(&[b".strtab", b".shstrtab", b".note.openmp", b".symtab", b"tab"]);
        assert_eq!(table, b"\0.note.openmp\0.shstrtab\0.strtab\0.symtab\0");
        assert_eq!(offsets, vec![24, 14, 1, 32, 36]);
    }

    #[test]
    fn non_elf_and_broken_headers_are_refused() {
        assert_eq!(add_notes(b"Content of device file\n", "14.0.6"), Err(NotesError::NotElf));
        let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1];
        elf.resize(64, 0);
        elf[40] = 0xff; // e_shoff far past the end
        elf[60] = 3;
        elf[62] = 1;
        assert!(matches!(add_notes(&elf, "14.0.6"), Err(NotesError::Unsupported(_))));
        for cut in 0..elf.len() {
            assert!(add_notes(&elf[..cut], "14.0.6").is_err());
        }
    }
}
