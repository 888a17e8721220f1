//! `prune` on COFF relocatable objects (`.obj`, and the members of `.lib`
//! archives) holding CUDA (`.nv_fatbin`, `__nv_relfatbin`) or HIP
//! (`.hip_fatbin`) fat binaries (docs/formats/pe.md §6).
//!
//! Zero mode rewrites each fat binary at its own offset, zeros after it,
//! as on ELF objects; the only other bytes that change are the checksums
//! of the rewritten sections' definitions (the auxiliary record of the
//! section symbol), which clang sets and `lld-link` may compare.
//!
//! Cut mode (`plan_coff_cut`) packs the fat binaries from their section's
//! start and shortens the section's raw data; what follows in the file
//! (later raw data, relocation tables, line numbers, the symbol and string
//! tables) moves down, and the file offsets pointing there follow. A
//! reference into a fat binary section is moved with the fat binary it
//! leads to: the value of a symbol defined there, and the addend of a
//! relocation through such a symbol (COFF keeps the addend in the
//! relocated field). What the rewrite does not understand is refused: a
//! reference to anything but a fat binary's start, relocations applied to
//! a fat binary section, relocation types whose addend is not a plain
//! offset, and any other structure lying inside a fat binary section.

use super::cut::{Patch, copy_patched, pack_units, shifted};
use super::files::{FatRegion, check_unit, plan_regions};
use super::{PruneError, Pruned, UnitChange};
use offload_format::bytes::{u32_le, u64_le};
use offload_format::coff::{ObjectSection, ObjectView, SectionChecksum};
use offload_format::plan::{Piece, Plan};

/// Full section names that hold fat binaries in an object.
pub const FAT_SECTIONS: [&[u8]; 3] = super::cut_object::FAT_SECTIONS;
/// Bytes of a symbol record.
const SYMBOL: usize = 18;
/// `IMAGE_SYM_CLASS_STATIC`: section definitions are static symbols.
const CLASS_STATIC: u8 = 3;
/// Bytes removed from an object are a multiple of this, so everything
/// after a cut section keeps its alignment in the file.
const SHIFT_ALIGN: u64 = 8;

fn view(data: &[u8]) -> Result<ObjectView, PruneError> {
    ObjectView::read(data).map_err(|e| PruneError::UnsupportedRead(e.into()))
}

fn is_fat(s: &ObjectSection) -> bool {
    FAT_SECTIONS.contains(&s.name.as_slice()) && s.raw_range().is_some()
}

/// What zero mode needs to know of a COFF object: for each fat binary
/// section with a section definition whose checksum is set, the
/// section's file range and the checksum field's offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoffInput {
    /// (raw offset, raw size, checksum field offset) per section.
    pub checksums: Vec<(u64, u64, u64)>,
}

/// The offset of the checksum field of `section`'s definition, when the
/// object has one and it is set.
fn checksum_field(data: &[u8], v: &ObjectView, section: &ObjectSection) -> Option<u64> {
    let def = v.symbols.iter().find(|s| {
        s.section == section.number as i32
            && s.class == CLASS_STATIC
            && s.aux == 1
            && s.value == 0
            && s.name == section.name
    })?;
    let field = def.offset + SYMBOL + 8;
    (u32_le(data, field).is_some_and(|c| c != 0)).then_some(field as u64)
}

/// Plans zero mode on a COFF object; `None` when it has no fat binary
/// section.
pub(crate) fn plan_object<'a>(
    data: &'a [u8],
    rules: &super::Rules,
) -> Result<Option<(CoffInput, Vec<UnitChange<'a>>)>, PruneError> {
    let v = view(data)?;
    let fat: Vec<&ObjectSection> = v.sections.iter().filter(|s| is_fat(s)).collect();
    if fat.is_empty() {
        return Ok(None);
    }
    let mut regions: Vec<FatRegion> = fat
        .iter()
        .filter_map(|s| {
            let (offset, len) = s.raw_range()?;
            Some(FatRegion { offset, len, cuda: s.name != b".hip_fatbin" })
        })
        .collect();
    let units = plan_regions(data, &mut regions, rules)?;
    Ok(Some((CoffInput { checksums: checksum_fields(data, &v) }, units)))
}

/// (raw offset, raw size, checksum field offset) of each fat binary
/// section of the object whose definition has a checksum set.
fn checksum_fields(data: &[u8], v: &ObjectView) -> Vec<(u64, u64, u64)> {
    v.sections
        .iter()
        .filter(|s| is_fat(s))
        .filter_map(|s| {
            let (offset, len) = s.raw_range()?;
            Some((offset, len, checksum_field(data, v, s)?))
        })
        .collect()
}

/// The checksum fields of an archive member at `base` that is a COFF
/// object, at archive offsets (none for anything else).
pub(crate) fn member_checksums(data: &[u8], base: u64) -> Vec<(u64, u64, u64)> {
    let Ok(v) = ObjectView::read(data) else { return Vec::new() };
    checksum_fields(data, &v).into_iter().map(|(o, l, f)| (base + o, l, base + f)).collect()
}

/// The checksum of the output bytes `[from, from + len)` of `plan`.
fn plan_checksum(plan: &Plan, from: u64, len: u64) -> u32 {
    let mut c = SectionChecksum::default();
    let (to, mut pos) = (from + len, 0u64);
    for piece in &plan.pieces {
        let (p0, p1) = (pos, pos + piece.len());
        pos = p1;
        if p1 <= from || p0 >= to {
            continue;
        }
        let (a, b) = (from.max(p0) - p0, to.min(p1) - p0);
        match piece {
            Piece::Bytes(bytes) => c.update(&bytes[a as usize..b as usize]),
            Piece::Fill { byte: 0, .. } => c.zeros(b - a),
            Piece::Fill { byte, .. } => c.update(&vec![*byte; (b - a) as usize]),
        }
    }
    c.finish()
}

/// `plan` with the checksums of `fields` ((output range, field offset in
/// the output)) recomputed from the planned bytes.
fn with_checksums<'a>(mut plan: Plan<'a>, fields: &[(u64, u64, u64)]) -> Plan<'a> {
    let sums: Vec<(u64, u32)> = fields.iter().map(|&(at, len, field)| (field, plan_checksum(&plan, at, len))).collect();
    for (field, sum) in sums {
        plan = super::pe::patch(plan, field, &sum.to_le_bytes());
    }
    plan
}

/// The zero-mode output: [`Pruned::output_plan`] with the checksums of
/// the rewritten sections recomputed.
pub fn output_plan<'a>(data: &'a [u8], input: &CoffInput, pruned: &Pruned<'a>) -> Plan<'a> {
    with_checksums(pruned.output_plan(data), &changed_checksums(input, pruned))
}

/// The checksum fields of the sections holding a rewritten unit.
fn changed_checksums(input: &CoffInput, pruned: &Pruned) -> Vec<(u64, u64, u64)> {
    input
        .checksums
        .iter()
        .copied()
        .filter(|&(at, len, _)| {
            pruned.units.iter().any(|u| u.changed() && u.unit.offset >= at && u.unit.offset < at + len)
        })
        .collect()
}

fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

/// Checks a zero-mode output from its bytes: the generic in-place check
/// with the checksum fields left out, then each checksum against the
/// output's own section bytes, and the output still reads as the same
/// object.
pub fn verify_zero(output: &[u8], input: &[u8], coff: &CoffInput, pruned: &Pruned) -> Result<(), PruneError> {
    verify_checksummed(output, input, coff, pruned)?;
    same_object(output, input)
}

/// The in-place check with the checksum fields of `coff` left out, then
/// each checksum against the output's own section bytes (an object, or an
/// archive of objects).
pub(crate) fn verify_checksummed(
    output: &[u8],
    input: &[u8],
    coff: &CoffInput,
    pruned: &Pruned,
) -> Result<(), PruneError> {
    let fields = changed_checksums(coff, pruned);
    let mut masked = output.to_vec();
    for &(_, _, field) in &fields {
        let at = field as usize;
        match (masked.get_mut(at..at + 4), input.get(at..at + 4)) {
            (Some(m), Some(i)) => m.copy_from_slice(i),
            _ => return Err(fail(format!("the checksum field at {at:#x} lies past the end"))),
        }
    }
    super::files::verify_in_place(&masked, input, pruned)?;
    for &(at, len, field) in &fields {
        let bytes = output.get(at as usize..(at + len) as usize).unwrap_or(&[]);
        if u32_le(output, field as usize) != Some(SectionChecksum::of(bytes)) {
            return Err(fail(format!("the section checksum at {field:#x} is wrong")));
        }
    }
    Ok(())
}

/// The output reads as an object with the input's sections (names,
/// relocation counts) and symbols (names, sections).
fn same_object(output: &[u8], input: &[u8]) -> Result<(), PruneError> {
    let new = ObjectView::read(output).map_err(|e| fail(format!("it no longer reads as COFF: {e}")))?;
    let old = view(input)?;
    let names = |v: &ObjectView| v.sections.iter().map(|s| (s.name.clone(), s.relocations.len())).collect::<Vec<_>>();
    let symbols = |v: &ObjectView| v.symbols.iter().map(|s| (s.name.clone(), s.section, s.class)).collect::<Vec<_>>();
    if names(&new) != names(&old) || symbols(&new) != symbols(&old) {
        return Err(fail("its sections or symbols changed".into()));
    }
    Ok(())
}

/// A planned `--mode cut` of a COFF object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoffCut {
    /// Per fat section: (raw offset, old raw size, new raw size), by
    /// offset.
    pub sections: Vec<(u64, u64, u64)>,
    /// New offset (in the object) of each unit of the plan, in its order.
    pub unit_offsets: Vec<u64>,
    /// Field edits at object offsets outside the fat sections, sorted.
    pub patches: Vec<Patch>,
    /// Checksum fields to recompute: (new raw offset, new raw size, new
    /// field offset).
    pub checksums: Vec<(u64, u64, u64)>,
    /// Bytes of the input object.
    pub input_len: u64,
}

fn refuse(why: impl Into<String>) -> PruneError {
    PruneError::CutRefused(why.into())
}

/// Bytes a relocation of `machine` and `kind` reads its addend from, when
/// that addend is a plain offset from the symbol: x86-64 `ADDR64`,
/// `ADDR32`, `ADDR32NB`, `REL32`…`REL32_5`, `SECREL`; i386 `DIR32`,
/// `DIR32NB`, `SECREL`, `REL32`. `None` for anything else (ARM64's
/// addends live in instruction fields).
fn addend_width(machine: u16, kind: u16) -> Option<usize> {
    match (machine, kind) {
        (0x8664, 1) => Some(8),
        (0x8664, 2..=9 | 0x0b) => Some(4),
        (0x014c, 6 | 7 | 0x0b | 0x14) => Some(4),
        _ => None,
    }
}

fn put(v: u64, width: usize) -> Vec<u8> {
    v.to_le_bytes()[..width].to_vec()
}

/// Plans the cut of the object `data` whose fat binaries `units` lists
/// (zero-mode plans, their offsets `base` + an offset in `data`).
pub fn plan_coff_cut(data: &[u8], base: u64, units: &[UnitChange]) -> Result<CoffCut, PruneError> {
    let v = ObjectView::read(data).map_err(|e| PruneError::CutRead(e.into()))?;
    let len = data.len() as u64;
    let mut fat: Vec<&ObjectSection> = v.sections.iter().filter(|s| is_fat(s)).collect();
    fat.sort_by_key(|s| s.raw_offset);
    let mut unit_offsets = vec![0u64; units.len()];
    let mut sections = Vec::new();
    // Per fat section number: (old section offset, new section offset).
    let mut moves: Vec<(usize, u64, u64)> = Vec::new();
    for s in &fat {
        let (start, old_size) = s.raw_range().unwrap_or((0, 0));
        if !s.relocations.is_empty() {
            return Err(refuse(format!("relocations apply to {}", String::from_utf8_lossy(&s.name))));
        }
        let inside: Vec<usize> = (0..units.len())
            .filter(|&k| units[k].unit.offset >= base + start && units[k].unit.offset < base + start + old_size)
            .collect();
        let old: Vec<u64> = inside.iter().map(|&k| units[k].unit.offset - base - start).collect();
        let sizes: Vec<u64> = inside.iter().map(|&k| units[k].new_used).collect();
        let new = pack_units(0, &old, &sizes);
        let end = new.last().zip(sizes.last()).map_or(0, |(o, s)| o + s);
        moves.push((s.number, 0, 0));
        for ((&k, &o), &n) in inside.iter().zip(&old).zip(&new) {
            unit_offsets[k] = start + n;
            moves.push((s.number, o, n));
        }
        let removed = (old_size - end.min(old_size)) / SHIFT_ALIGN * SHIFT_ALIGN;
        sections.push((start, old_size, old_size - removed));
    }
    if sections.iter().all(|&(_, old, new)| old == new) {
        return Err(refuse("no byte of the fat binary sections is freed"));
    }
    let in_fat = |at: u64| sections.iter().any(|&(off, old, _)| at >= off && at < off + old);
    // Nothing else may start inside a fat section.
    let mut starts: Vec<u64> = Vec::new();
    for s in &v.sections {
        if !is_fat(s) {
            starts.extend(s.raw_range().map(|r| r.0));
        }
        starts.extend([s.relocations_offset, s.line_numbers_offset].into_iter().filter(|&o| o != 0).map(u64::from));
    }
    if v.symbol_table != 0 {
        starts.push(u64::from(v.symbol_table));
    }
    if let Some(&at) = starts.iter().find(|&&at| in_fat(at)) {
        return Err(refuse(format!("a table or section at {at:#x} lies inside a fat binary section")));
    }
    let at = |old: u64| shifted(&sections, old);
    let mut patches: Vec<Patch> = Vec::new();
    let mut patch = |offset: u64, bytes: Vec<u8>| patches.push(Patch { offset, bytes });
    // The section table.
    for s in &v.sections {
        let h = s.header_offset as u64;
        if let Some(&(_, _, new)) = sections.iter().find(|&&(off, _, _)| Some(off) == s.raw_range().map(|r| r.0)) {
            patch(h + 16, put(new, 4));
        }
        for (field, old) in [(20, s.raw_offset), (24, s.relocations_offset), (28, s.line_numbers_offset)] {
            if old != 0 && at(u64::from(old)) != u64::from(old) {
                patch(h + field, put(at(u64::from(old)), 4));
            }
        }
    }
    if v.symbol_table != 0 && at(u64::from(v.symbol_table)) != u64::from(v.symbol_table) {
        patch(8, put(at(u64::from(v.symbol_table)), 4));
    }
    // Symbols defined in a fat section, and section definitions' lengths.
    let moved =
        |number: i32, old: u64| moves.iter().find(|&&(n, o, _)| n as i32 == number && o == old).map(|&(_, _, new)| new);
    let new_size = |number: i32| {
        let s = v.section(number)?;
        let start = s.raw_range()?.0;
        sections.iter().find(|&&(off, _, _)| off == start).map(|&(_, _, new)| new)
    };
    let mut checksums = Vec::new();
    for sym in &v.symbols {
        let Some(size) = new_size(sym.section) else { continue };
        let value = u64::from(sym.value);
        let new = moved(sym.section, value).ok_or_else(|| {
            refuse(format!(
                "symbol '{}' points into a fat binary section, not at a fat binary",
                String::from_utf8_lossy(&sym.name)
            ))
        })?;
        let record = at(sym.offset as u64);
        if new != value {
            patch(sym.offset as u64 + 8, put(new, 4));
        }
        let definition = v
            .section(sym.section)
            .filter(|s| sym.class == CLASS_STATIC && sym.aux == 1 && sym.value == 0 && sym.name == s.name);
        if let Some(s) = definition {
            patch(sym.offset as u64 + SYMBOL as u64, put(size, 4));
            if checksum_field(data, &v, s).is_some() {
                let start = s.raw_range().map_or(0, |r| r.0);
                checksums.push((at(start), size, record + SYMBOL as u64 + 8));
            }
        }
    }
    // Relocations through symbols defined in a fat section.
    for s in &v.sections {
        let Some((raw, raw_len)) = s.raw_range() else { continue };
        for &(va, index, kind) in &s.relocations {
            let Some(sym) = v.symbol(index).filter(|sym| new_size(sym.section).is_some()) else { continue };
            let width = addend_width(v.machine, kind)
                .ok_or_else(|| refuse(format!("a relocation of type {kind:#x} leads into a fat binary section")))?;
            let field = u64::from(va);
            if field + width as u64 > raw_len {
                return Err(refuse(format!("a relocation at {field:#x} lies outside its section")));
            }
            let addend = match width {
                8 => u64_le(data, (raw + field) as usize).unwrap_or(0),
                _ => u64::from(u32_le(data, (raw + field) as usize).unwrap_or(0)),
            };
            let old_target = u64::from(sym.value) + addend;
            let new_target = moved(sym.section, old_target).ok_or_else(|| {
                refuse(format!("a relocation at {:#x} points into a fat binary, not at its start", raw + field))
            })?;
            let new_value = moved(sym.section, u64::from(sym.value)).unwrap_or(0);
            let new_addend = new_target.checked_sub(new_value).ok_or_else(|| refuse("a negative addend"))?;
            if new_addend != addend {
                patch(raw + field, put(new_addend, width));
            }
        }
    }
    patches.sort_by_key(|p| p.offset);
    if patches.windows(2).any(|w| w[0].offset + w[0].bytes.len() as u64 > w[1].offset) {
        return Err(refuse("two fields to rewrite overlap"));
    }
    if patches.iter().any(|p| in_fat(p.offset)) {
        return Err(refuse("a field to rewrite lies inside a fat binary section"));
    }
    Ok(CoffCut { sections, unit_offsets, patches, checksums, input_len: len })
}

impl CoffCut {
    /// Bytes the output is smaller than the input.
    pub fn saved(&self) -> u64 {
        self.sections.iter().map(|&(_, old, new)| old - new).sum()
    }

    /// The new offset of unit `k` in the object.
    pub fn unit_offset(&self, k: usize) -> Option<u64> {
        self.unit_offsets.get(k).copied()
    }

    /// The output object; `base` is the object's offset in `data` (an
    /// archive member's) and the units' offsets include it.
    pub fn output_plan<'a>(&self, data: &'a [u8], base: u64, units: &[UnitChange<'a>]) -> Plan<'a> {
        let object = data.get(base as usize..(base + self.input_len) as usize).unwrap_or(&[]);
        let mut plan = Plan::new();
        let mut at = 0u64;
        for &(start, old, new) in &self.sections {
            copy_patched(&mut plan, object, &self.patches, at, start);
            let mut pos = start;
            for (k, c) in units.iter().enumerate() {
                let offset = c.unit.offset - base;
                if offset < start || offset >= start + old {
                    continue;
                }
                plan.zeros(self.unit_offsets[k] - pos);
                match &c.replacement {
                    Some(rep) => plan.pieces.extend(super::pe::truncated(rep, c.new_used).pieces),
                    None => plan.borrow(object.get(offset as usize..(offset + c.unit.used) as usize).unwrap_or(&[])),
                }
                pos = self.unit_offsets[k] + c.new_used;
            }
            plan.zeros((start + new).saturating_sub(pos));
            at = start + old;
        }
        copy_patched(&mut plan, object, &self.patches, at, self.input_len);
        with_checksums(plan, &self.checksums)
    }

    /// Checks a cut output (at `out_base` in `output`) from its bytes: it
    /// reads as the input's object, every section but the fat ones holds
    /// the input's bytes (but for the rewritten addends) and relocations,
    /// each fat binary at its new offset holds exactly the kept entries,
    /// every symbol and relocation into a fat section leads to a fat
    /// binary's start, and the checksums are right.
    pub fn verify(
        &self,
        output: &[u8],
        out_base: u64,
        input: &[u8],
        in_base: u64,
        units: &[UnitChange],
    ) -> Result<(), PruneError> {
        let out_len = self.input_len - self.saved();
        let new_bytes = output
            .get(out_base as usize..(out_base + out_len) as usize)
            .ok_or_else(|| fail("the object lies past the end".into()))?;
        let old_bytes = input.get(in_base as usize..(in_base + self.input_len) as usize).unwrap_or(&[]);
        same_object(new_bytes, old_bytes)?;
        let (new, old) = (ObjectView::read(new_bytes).map_err(|e| PruneError::VerifyRead(e.into()))?, view(old_bytes)?);
        let patched = |at: u64| self.patches.iter().any(|p| at >= p.offset && at < p.offset + p.bytes.len() as u64);
        for (n, o) in new.sections.iter().zip(&old.sections) {
            if n.relocations != o.relocations {
                return Err(fail(format!("the relocations of {} changed", String::from_utf8_lossy(&o.name))));
            }
            if is_fat(o) {
                continue;
            }
            let (nb, ob) = (section_bytes(new_bytes, n), section_bytes(old_bytes, o));
            let base = u64::from(o.raw_offset);
            if nb.len() != ob.len()
                || nb.iter().zip(ob).enumerate().any(|(i, (a, b))| a != b && !patched(base + i as u64))
            {
                return Err(fail(format!("section {} changed", String::from_utf8_lossy(&o.name))));
            }
        }
        for (k, c) in units.iter().enumerate() {
            let at = (out_base + self.unit_offsets[k]) as usize;
            if c.replacement.is_some() {
                check_unit(output, at, input, c)?;
            } else if output.get(at..at + c.unit.used as usize)
                != input.get(c.unit.offset as usize..(c.unit.offset + c.unit.used) as usize)
            {
                return Err(fail(format!("the unchanged unit at {:#x} differs", c.unit.offset)));
            }
        }
        // References into fat sections lead to fat binary starts.
        let starts: Vec<(i32, u64)> = new
            .sections
            .iter()
            .filter(|s| is_fat(s))
            .flat_map(|s| {
                let start = u64::from(s.raw_offset);
                let own: Vec<u64> = self
                    .unit_offsets
                    .iter()
                    .filter(|&&o| o >= start && o < start + u64::from(s.raw_size))
                    .map(|&o| o - start)
                    .collect();
                std::iter::once((s.number as i32, 0)).chain(own.into_iter().map(move |o| (s.number as i32, o)))
            })
            .collect();
        let fat_number = |n: i32| new.section(n).is_some_and(is_fat);
        for sym in new.symbols.iter().filter(|s| fat_number(s.section)) {
            if !starts.contains(&(sym.section, u64::from(sym.value))) {
                return Err(fail(format!("symbol '{}' points at no fat binary", String::from_utf8_lossy(&sym.name))));
            }
        }
        for s in &new.sections {
            let raw = u64::from(s.raw_offset);
            for &(va, index, kind) in &s.relocations {
                let Some(sym) = new.symbol(index).filter(|sym| fat_number(sym.section)) else { continue };
                let at = (raw + u64::from(va)) as usize;
                let addend = match addend_width(new.machine, kind) {
                    Some(8) => u64_le(new_bytes, at),
                    Some(_) => u32_le(new_bytes, at).map(u64::from),
                    None => None,
                };
                let target = addend.map(|a| u64::from(sym.value) + a);
                if !target.is_some_and(|t| starts.contains(&(sym.section, t))) {
                    return Err(fail(format!("the relocation at {at:#x} points at no fat binary")));
                }
            }
        }
        for &(start, len, field) in &self.checksums {
            let bytes = new_bytes.get(start as usize..(start + len) as usize).unwrap_or(&[]);
            if u32_le(new_bytes, field as usize) != Some(SectionChecksum::of(bytes)) {
                return Err(fail(format!("the section checksum at {field:#x} is wrong")));
            }
        }
        Ok(())
    }
}

fn section_bytes<'a>(data: &'a [u8], s: &ObjectSection) -> &'a [u8] {
    s.raw_range().and_then(|(o, l)| data.get(o as usize..(o + l) as usize)).unwrap_or(&[])
}

#[cfg(test)]
#[path = "coff_tests.rs"]
mod tests;
