//! `prune --mode cut` for static archives (`!<arch>`, GNU/SysV or BSD
//! symbol tables, 32- or 64-bit, with or without a long-name table), as
//! nvprune shrinks `.a` files.
//!
//! The archive keeps its layout, member for member: every member that is
//! an object with device code is cut (`cut_object`), a fat object member
//! loses its dropped bundle sections and a bundle member its dropped
//! entries (both already smaller in zero mode, here without the zeros);
//! every other member is copied. Each rewritten member gets its header
//! back with the new size (the name, date, owner and mode fields as they
//! were; a BSD `#1/N` name stays in front of the data) and the even-byte
//! padding (`\n`). No symbol is removed, so the symbol table keeps its
//! size and names; only its member offsets are rewritten.
//!
//! Members are read with `object`'s archive reader, the one the rest of
//! the crate uses. Thin, COFF (Windows), AIX and z/OS archives are refused.

use super::cut::append_prefix;
use super::cut_object::{ObjectCut, plan_object_cut, verify_object_cut};
use super::files::check_unit;
use super::{PruneError, Pruned, UnitChange};
use object::read::archive::{ArchiveFile, ArchiveKind};
use offload_format::bytes::{u32_endian, u64_endian};
use offload_format::plan::Plan;
use offload_inspect::layout::UnitKind;
use std::ops::Range;

/// Bytes of an archive member header.
const HEADER: u64 = 60;

/// How one member is rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberRewrite {
    /// Copied as it is.
    Copy,
    /// An object whose fat binary sections shrink.
    Object(ObjectCut),
    /// A fat object or bundle member: its zero-mode rewrite without the
    /// trailing zeros.
    Rebuilt,
}

/// One member of the archive, special members included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberCut {
    /// Its name.
    pub name: String,
    /// Offset of its header in the input.
    pub header: u64,
    /// Bytes of a BSD `#1/N` name between the header and the data.
    pub name_len: u64,
    /// Offset and size of its data in the input.
    pub data: (u64, u64),
    /// Its fat binaries: a range of the pruned units.
    pub units: Range<usize>,
    /// What happens to it.
    pub rewrite: MemberRewrite,
    /// Offset of its header in the output.
    pub new_header: u64,
    /// Size of its data in the output.
    pub new_size: u64,
}

/// The layout of a cut archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveCut {
    /// Every member in file order (the symbol and name tables too).
    pub members: Vec<MemberCut>,
    /// The symbol table's data offset and its rewritten bytes.
    pub symbol_table: Option<(u64, Vec<u8>)>,
    /// The new offset of each pruned unit, in the units' order.
    pub unit_offsets: Vec<u64>,
    /// Bytes of the output.
    pub output_len: u64,
}

fn refuse(why: impl Into<String>) -> PruneError {
    PruneError::CutRefused(why.into())
}

fn bad(e: object::Error) -> PruneError {
    PruneError::CutArchive(e)
}

/// A member as walked: (name, header offset, BSD name bytes, data offset,
/// data size).
type Walked = (String, u64, u64, u64, u64);

/// An archive as walked: its kind, the symbol table's data (offset, size),
/// where the first regular member's header starts, and every regular
/// member in file order.
struct Layout {
    kind: ArchiveKind,
    symbol_table: Option<(u64, u64)>,
    first: u64,
    members: Vec<Walked>,
}

/// The length of a BSD `#1/N` name from a header's name field, 0 for
/// other names.
fn bsd_name_len(name: &[u8]) -> Option<u64> {
    match name.strip_prefix(b"#1/") {
        Some(rest) => std::str::from_utf8(rest).ok()?.trim_end().parse::<u64>().ok(),
        None => Some(0),
    }
}

/// The symbol table's data (offset, size), from the header at offset 8.
/// `object` reads the special members but does not say where their bytes
/// are, so their header's size field is read here; the table's offsets
/// are then checked against `object`'s reading of them.
fn symbol_table_range(data: &[u8]) -> Option<(u64, u64)> {
    let h = data.get(8..8 + HEADER as usize)?;
    let size = std::str::from_utf8(&h[48..58]).ok()?.trim_end().parse::<u64>().ok()?;
    let name_len = bsd_name_len(&h[..16])?;
    (h[58..60] == *b"`\n" && name_len <= size).then_some((8 + HEADER + name_len, size - name_len))
}

/// Walks the archive.
fn walk(data: &[u8]) -> Result<Layout, PruneError> {
    let archive = ArchiveFile::parse(data).map_err(bad)?;
    if archive.is_thin() {
        return Err(refuse("a thin archive: its members live in other files"));
    }
    let kind = archive.kind();
    if !matches!(
        kind,
        ArchiveKind::Gnu | ArchiveKind::Gnu64 | ArchiveKind::Bsd | ArchiveKind::Bsd64 | ArchiveKind::Unknown
    ) {
        let name = match kind {
            ArchiveKind::Coff => "COFF (Windows .lib)".to_string(),
            other => format!("{other:?}"),
        };
        return Err(refuse(format!("a {name} archive")));
    }
    let mut symbol_table = None;
    if let Some(symbols) = archive.symbols().map_err(bad)? {
        let range = symbol_table_range(data).ok_or_else(|| refuse("a damaged symbol table header"))?;
        symbol_table = Some(range);
        // Bounded by the table's bytes: each symbol has a name.
        for symbol in symbols {
            symbol.map_err(bad)?;
        }
    }
    let mut members: Vec<Walked> = Vec::new();
    for member in archive.members() {
        let member = member.map_err(bad)?;
        let (offset, size) = member.file_range();
        // The header sits right after the previous member (or the special
        // members); a BSD name, if any, between it and the data.
        let name_len = member.header().map_or(Some(0), |h| bsd_name_len(&h.name));
        let header = name_len
            .and_then(|n| offset.checked_sub(HEADER + n))
            .ok_or_else(|| refuse("a member header overlaps its data"))?;
        if let Some(prev) = members.last()
            && (prev.3 + prev.4).next_multiple_of(2) != header
        {
            return Err(refuse(format!("bytes between members before offset {header:#x}")));
        }
        if offset.checked_add(size).is_none_or(|end| end > data.len() as u64) {
            return Err(refuse(format!("the member at {header:#x} runs past the end of the archive")));
        }
        let name = String::from_utf8_lossy(member.name()).into_owned();
        members.push((name, header, name_len.unwrap_or(0), offset, size));
    }
    let end = members.last().map(|m| (m.3 + m.4).next_multiple_of(2));
    if end.is_some_and(|e| e < data.len() as u64) {
        return Err(refuse("bytes after the last member"));
    }
    let first = members.first().map_or(data.len() as u64, |m| m.1);
    if symbol_table.is_some_and(|(at, size)| at + size > first) {
        return Err(refuse("the symbol table overlaps the members"));
    }
    Ok(Layout { kind, symbol_table, first, members })
}

/// Plans the cut of the archive `data`, pruned in zero mode as `pruned`
/// (units at archive offsets, member by member).
pub fn plan_archive_cut(data: &[u8], pruned: &Pruned) -> Result<ArchiveCut, PruneError> {
    let layout = walk(data)?;
    let units = &pruned.units;
    let mut members = Vec::with_capacity(layout.members.len());
    let mut next_unit = 0usize;
    let mut out = layout.first;
    for (name, header, name_len, offset, size) in layout.members {
        let start = next_unit;
        while next_unit < units.len() && units[next_unit].unit.offset < offset + size {
            if units[next_unit].unit.offset < offset {
                return Err(refuse(format!("a fat binary at {:#x} lies in no member", units[next_unit].unit.offset)));
            }
            next_unit += 1;
        }
        let range = start..next_unit;
        let member_units = &units[range.clone()];
        let bytes = data.get(offset as usize..(offset + size) as usize).unwrap_or(&[]);
        let in_member = |e: PruneError| PruneError::Member { name: name.clone(), source: Box::new(e) };
        let (rewrite, new_size) = if member_units.iter().all(|u| !u.changed()) {
            (MemberRewrite::Copy, size)
        } else if bytes.starts_with(b"\x7fELF") && member_units.iter().all(|u| u.unit.kind != UnitKind::Object) {
            let cut = plan_object_cut(bytes, offset, member_units).map_err(in_member)?;
            let len = cut.output_len();
            (MemberRewrite::Object(cut), len)
        } else {
            (MemberRewrite::Rebuilt, rebuilt_len(member_units, size))
        };
        if (name_len + new_size).to_string().len() > 10 {
            return Err(refuse(format!("member {name} is too large for its header")));
        }
        members.push(MemberCut {
            name,
            header,
            name_len,
            data: (offset, size),
            units: range,
            rewrite,
            new_header: out,
            new_size,
        });
        out = (out + HEADER + name_len + new_size).next_multiple_of(2);
    }
    if next_unit != units.len() {
        return Err(refuse("some fat binaries lie in no member"));
    }
    let symbol_table = match layout.symbol_table {
        Some(at) => Some((at.0, symbol_table(data, layout.kind, at, &members)?)),
        None => None,
    };
    let mut unit_offsets = Vec::with_capacity(units.len());
    for m in &members {
        let data_at = m.new_header + HEADER + m.name_len;
        for k in m.units.clone() {
            let in_member = units[k].unit.offset - m.data.0;
            unit_offsets.push(match &m.rewrite {
                MemberRewrite::Copy => data_at + in_member,
                MemberRewrite::Object(cut) => data_at + cut.unit_offset(k - m.units.start).unwrap_or(0),
                MemberRewrite::Rebuilt => data_at + in_member - removed_before(units, m, k),
            });
        }
    }
    Ok(ArchiveCut { members, symbol_table, unit_offsets, output_len: out })
}

/// Bytes dropped from a rebuilt member before its unit `k`: the zeros
/// after each earlier changed unit.
fn removed_before(units: &[UnitChange], m: &MemberCut, k: usize) -> u64 {
    units[m.units.start..k].iter().filter(|u| u.changed()).map(|u| u.unit.extent - u.new_used).sum()
}

fn rebuilt_len(units: &[UnitChange], size: u64) -> u64 {
    size - units.iter().filter(|u| u.changed()).map(|u| u.unit.extent - u.new_used).sum::<u64>()
}

/// The member whose header starts at `header` (members are in file order,
/// so a symbol table of any size is resolved in logarithmic time each).
fn member_at(members: &[MemberCut], header: u64) -> Option<&MemberCut> {
    members.binary_search_by_key(&header, |m| m.header).ok().map(|i| &members[i])
}

/// The symbol table's data with every member offset moved.
fn symbol_table(
    data: &[u8],
    kind: ArchiveKind,
    table: (u64, u64),
    members: &[MemberCut],
) -> Result<Vec<u8>, PruneError> {
    let (offset, size) = table;
    let mut bytes = data.get(offset as usize..(offset + size) as usize).unwrap_or(&[]).to_vec();
    // (width, big-endian, first offset field, stride, count)
    let read = |bytes: &[u8], at: usize, width: usize, big: bool| -> Option<u64> {
        match width {
            4 => u32_endian(bytes, at, big).map(u64::from),
            _ => u64_endian(bytes, at, big),
        }
    };
    let short = || refuse("the archive symbol table is truncated");
    let (width, big, first, stride, count) = match kind {
        ArchiveKind::Gnu => (4usize, true, 4usize, 4usize, read(&bytes, 0, 4, true).ok_or_else(short)?),
        ArchiveKind::Gnu64 => (8, true, 8, 8, read(&bytes, 0, 8, true).ok_or_else(short)?),
        ArchiveKind::Bsd => (4, false, 8, 8, read(&bytes, 0, 4, false).ok_or_else(short)? / 8),
        ArchiveKind::Bsd64 => (8, false, 16, 16, read(&bytes, 0, 8, false).ok_or_else(short)? / 16),
        _ => return Err(refuse(format!("a {kind:?} symbol table"))),
    };
    // Every offset field lies in the table (so the loop is bounded by it).
    let last_end = count.checked_mul(stride as u64).and_then(|n| n.checked_add(first as u64));
    if last_end.is_none_or(|end| end > size.saturating_add(width as u64)) {
        return Err(short());
    }
    for i in 0..count as usize {
        let at = first + i * stride;
        let old = read(&bytes, at, width, big).ok_or_else(short)?;
        let Some(m) = member_at(members, old) else {
            return Err(refuse(format!("the archive symbol table names offset {old:#x}, where no member starts")));
        };
        let new = m.new_header;
        let field: Vec<u8> = match (width, big) {
            (4, true) => (new as u32).to_be_bytes().to_vec(),
            (4, false) => (new as u32).to_le_bytes().to_vec(),
            (_, true) => new.to_be_bytes().to_vec(),
            (_, false) => new.to_le_bytes().to_vec(),
        };
        bytes[at..at + width].copy_from_slice(&field);
    }
    Ok(bytes)
}

impl ArchiveCut {
    /// The output archive.
    pub fn output_plan<'a>(&self, data: &'a [u8], pruned: &Pruned<'a>) -> Plan<'a> {
        let mut plan = Plan::new();
        let first = self.members.first().map_or(data.len() as u64, |m| m.header);
        match &self.symbol_table {
            Some((at, table)) => {
                plan.borrow(data.get(..*at as usize).unwrap_or(&[]));
                plan.own(table.clone());
                plan.borrow(data.get(*at as usize + table.len()..first as usize).unwrap_or(&[]));
            }
            None => plan.borrow(data.get(..first as usize).unwrap_or(&[])),
        }
        for m in &self.members {
            let header = data.get(m.header as usize..(m.header + HEADER) as usize).unwrap_or(&[]);
            let (offset, size) = m.data;
            if m.new_size == size || header.len() != HEADER as usize {
                plan.borrow(header);
            } else {
                let mut h = header.to_vec();
                let field = format!("{:<10}", m.name_len + m.new_size);
                h[48..58].copy_from_slice(field.as_bytes());
                plan.own(h);
            }
            plan.borrow(data.get((m.header + HEADER) as usize..offset as usize).unwrap_or(&[]));
            let units = &pruned.units[m.units.clone()];
            match &m.rewrite {
                MemberRewrite::Copy => plan.borrow(data.get(offset as usize..(offset + size) as usize).unwrap_or(&[])),
                MemberRewrite::Object(cut) => {
                    let bytes = data.get(offset as usize..(offset + size) as usize).unwrap_or(&[]);
                    plan.pieces.extend(cut.output_plan(bytes, offset, units).pieces);
                }
                MemberRewrite::Rebuilt => {
                    let mut at = offset;
                    for u in units {
                        let Some(rep) = &u.replacement else { continue };
                        plan.borrow(data.get(at as usize..u.unit.offset as usize).unwrap_or(&[]));
                        append_prefix(&mut plan, rep, u.new_used);
                        at = u.unit.offset + u.unit.extent;
                    }
                    plan.borrow(data.get(at as usize..(offset + size) as usize).unwrap_or(&[]));
                }
            }
            if (m.name_len + m.new_size) % 2 == 1 {
                plan.own(b"\n".to_vec());
            }
        }
        plan
    }

    /// The new offset of pruned unit `k`.
    pub fn unit_offset(&self, k: usize) -> Option<u64> {
        self.unit_offsets.get(k).copied()
    }
}

fn at(d: &[u8], o: u64, n: u64) -> Option<&[u8]> {
    d.get(usize::try_from(o).ok()?..usize::try_from(o.checked_add(n)?).ok()?)
}

/// Checks a cut archive read back from `output`: the same members in the
/// same order with the same header fields but the size; copied members
/// identical; each rewritten one holding exactly its kept entries (a cut
/// object passing `verify_object_cut`); the symbol table naming the same
/// symbols, each at the new offset of the member it named.
pub fn verify_archive_cut(output: &[u8], input: &[u8], pruned: &Pruned, cut: &ArchiveCut) -> Result<(), PruneError> {
    let fail = |m: String| PruneError::Verify(m);
    if output.len() as u64 != cut.output_len {
        return Err(fail(format!("it is {} bytes, {} planned", output.len(), cut.output_len)));
    }
    let layout = walk(output).map_err(|e| fail(e.to_string()))?;
    let walked = layout.members;
    let first = cut.members.first().map_or(input.len() as u64, |m| m.header);
    if layout.first != first || output.get(..8) != input.get(..8) {
        return Err(fail("the archive header or special members moved".into()));
    }
    if walked.len() != cut.members.len() {
        return Err(fail(format!("{} members, {} planned", walked.len(), cut.members.len())));
    }
    for (m, (name, header, name_len, offset, size)) in cut.members.iter().zip(&walked) {
        let same_header = |a: u64, b: u64, r: Range<u64>| {
            output.get((a + r.start) as usize..(a + r.end) as usize)
                == input.get((b + r.start) as usize..(b + r.end) as usize)
        };
        if *name != m.name
            || *header != m.new_header
            || *name_len != m.name_len
            || *size != m.new_size
            || !same_header(*header, m.header, 0..48)
            || !same_header(*header, m.header, 58..60 + m.name_len)
        {
            return Err(fail(format!("member {}: its header is not the planned one", m.name)));
        }
        let units = &pruned.units[m.units.clone()];
        match &m.rewrite {
            MemberRewrite::Copy => {
                if at(output, *offset, *size) != at(input, m.data.0, m.data.1) {
                    return Err(fail(format!("member {} changed", m.name)));
                }
            }
            MemberRewrite::Object(c) => verify_object_cut(output, *offset, input, m.data.0, units, c)
                .map_err(|e| fail(format!("member {}: {e}", m.name)))?,
            MemberRewrite::Rebuilt => {
                for (j, u) in units.iter().enumerate() {
                    let placed = cut.unit_offsets[m.units.start + j];
                    if u.changed() {
                        check_unit(output, placed as usize, input, u)?;
                    } else if at(output, placed, u.unit.used) != at(input, u.unit.offset, u.unit.used) {
                        return Err(fail(format!("member {}: a fat binary changed", m.name)));
                    }
                }
            }
        }
    }
    let symbols = |d: &[u8]| -> Result<Vec<(Vec<u8>, u64)>, PruneError> {
        let a = ArchiveFile::parse(d).map_err(bad)?;
        let Some(list) = a.symbols().map_err(bad)? else { return Ok(Vec::new()) };
        list.map(|s| s.map(|s| (s.name().to_vec(), s.offset().0)).map_err(bad)).collect()
    };
    let (old, new) = (symbols(input)?, symbols(output)?);
    if old.len() != new.len() {
        return Err(fail("the symbol table changed in length".into()));
    }
    for ((on, oo), (nn, no)) in old.iter().zip(&new) {
        let moved = member_at(&cut.members, *oo).map(|m| m.new_header);
        if on != nn || moved != Some(*no) {
            return Err(fail(format!("symbol {} does not lead to its member", String::from_utf8_lossy(on))));
        }
    }
    Ok(())
}
