//! One host binary: split (`.hip_fatbin` out, marker in) and join (the
//! reverse, for binaries this module split). The layout is described in
//! `docs/formats/kpack.md` ("Writing: our split").
//!
//! The split reuses prune's cutter ([`crate::prune::cut`]): `.hip_fatbin`
//! keeps only the marker at its start, whole pages after it leave the file
//! (the PT_LOAD is split, the program header table moves into the freed
//! bytes), and the section is renamed `.rocm_kpack_ref` (a new section name
//! table is appended at the end of the file). When fewer than two pages
//! would leave, nothing moves: the marker is written at the section start
//! and the rest of the section is zeroed. Every wrapper record becomes
//! `HIPK`, points at the marker and carries its index as `co_index`.
//!
//! The marker holds, next to the two keys the runtime reads, an
//! `offload_join` binary: every byte the split changed outside the device
//! code (zstd-compressed), so that [`join_binary`] restores the input byte
//! for byte. Inputs holding compressed bundles (CCOB) get no join record:
//! their compressed bytes cannot be remade exactly.

use super::KpackError;
use crate::prune::cut::{Cut, CutPlan, Patch, copy_patched, cut_section};
use crate::prune::{Contents, read_contents};
use offload_format::bundle::binary;
use offload_format::bytes::Cursor;
use offload_format::elf::ElfFile;
use offload_format::elf::segments;
use offload_format::kpack::host::HostBinary;
use offload_format::msgpack::{self, encode};
use offload_format::plan::Plan;
use offload_inspect::layout::{FatbinSection, FileMap, Target};
use std::borrow::Cow;
use std::collections::HashSet;

/// The section name the marker section gets.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";
/// The marker key holding our join record.
pub const JOIN_KEY: &str = "offload_join";
/// Magic of the (decompressed) join record.
const JOIN_MAGIC: &[u8; 4] = b"OKJ1";
/// The largest decompressed join record accepted.
const JOIN_LIMIT: u64 = 16 << 20;

/// One code object taken out of a host binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject<'a> {
    /// The wrapper record index (`co_index`, the `#N` of the TOC key).
    pub co_index: u32,
    /// The target ID (`gfx90a:xnack+`, `gfx11-generic`).
    pub target: String,
    /// The bundle entry ID it came from.
    pub source_id: String,
    /// The code object: borrowed from the input, or owned when it came out
    /// of a compressed bundle.
    pub bytes: Cow<'a, [u8]>,
}

/// A split host binary.
#[derive(Clone, Debug)]
pub struct SplitBinary<'a> {
    /// The rewritten host binary.
    pub host: Vec<u8>,
    /// Its code objects, by `co_index` then bundle order.
    pub objects: Vec<CodeObject<'a>>,
    /// Whether pages left the file (else `.hip_fatbin` was zeroed in place).
    pub cut: bool,
    /// Whether the marker holds a join record ([`join_binary`] can restore
    /// the input exactly).
    pub joinable: bool,
}

pub(super) fn refuse(why: impl Into<String>) -> KpackError {
    KpackError::Refused(why.into())
}

/// The marker: `{"kpack_search_paths": [...], "kernel_name": ...}` as AMD's
/// splitter writes it, plus our join record when given.
pub fn marker_bytes(kernel_name: &str, search_paths: &[String], join: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    encode::map(&mut out, if join.is_some() { 3 } else { 2 });
    encode::str(&mut out, "kpack_search_paths");
    encode::array(&mut out, search_paths.len());
    for p in search_paths {
        encode::str(&mut out, p);
    }
    encode::str(&mut out, "kernel_name");
    encode::str(&mut out, kernel_name);
    if let Some(j) = join {
        encode::str(&mut out, JOIN_KEY);
        encode::bin(&mut out, j);
    }
    out
}

/// A piece of the old `.hip_fatbin`: literal bytes, or a code object.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Object { co_index: u32, target: String, len: u64 },
}

/// What a join needs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JoinRecord {
    input_len: u64,
    fatbin_offset: u64,
    fatbin_end: u64,
    removed: u64,
    /// Original bytes at input offsets.
    undo: Vec<(u64, Vec<u8>)>,
    pieces: Vec<Piece>,
}

impl JoinRecord {
    fn encode(&self) -> Result<Vec<u8>, KpackError> {
        let mut o = JOIN_MAGIC.to_vec();
        for v in [self.input_len, self.fatbin_offset, self.fatbin_end, self.removed] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(&(self.undo.len() as u32).to_le_bytes());
        for (at, bytes) in &self.undo {
            o.extend_from_slice(&at.to_le_bytes());
            o.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            o.extend_from_slice(bytes);
        }
        o.extend_from_slice(&(self.pieces.len() as u32).to_le_bytes());
        for p in &self.pieces {
            match p {
                Piece::Literal(b) => {
                    o.push(0);
                    o.extend_from_slice(&(b.len() as u64).to_le_bytes());
                    o.extend_from_slice(b);
                }
                Piece::Object { co_index, target, len } => {
                    o.push(1);
                    o.extend_from_slice(&co_index.to_le_bytes());
                    o.extend_from_slice(&(target.len() as u32).to_le_bytes());
                    o.extend_from_slice(target.as_bytes());
                    o.extend_from_slice(&len.to_le_bytes());
                }
            }
        }
        zstd::bulk::compress(&o, 3).map_err(|e| refuse(format!("zstd: {e}")))
    }

    fn decode(stored: &[u8]) -> Result<JoinRecord, KpackError> {
        let bad = |why: &str| KpackError::Join(format!("damaged join record: {why}"));
        let declared =
            zstd::zstd_safe::get_frame_content_size(stored).ok().flatten().ok_or_else(|| bad("no content size"))?;
        if declared > JOIN_LIMIT {
            return Err(bad("over 16 MiB"));
        }
        let raw = zstd::bulk::decompress(stored, declared as usize).map_err(|e| bad(&e.to_string()))?;
        let mut r = Cursor::new(&raw);
        if r.take(4).ok_or_else(|| bad("short"))? != JOIN_MAGIC {
            return Err(bad("magic"));
        }
        let mut head = [0u64; 4];
        for h in &mut head {
            *h = r.u64_le().ok_or_else(|| bad("short header"))?;
        }
        let n = r.u32_le().ok_or_else(|| bad("short"))?;
        let mut undo = Vec::new();
        for _ in 0..n {
            let at = r.u64_le().ok_or_else(|| bad("short undo"))?;
            let len = r.u32_le().ok_or_else(|| bad("short undo"))?;
            undo.push((at, r.take(len as u64).ok_or_else(|| bad("short undo"))?.to_vec()));
        }
        let n = r.u32_le().ok_or_else(|| bad("short"))?;
        let mut pieces = Vec::new();
        for _ in 0..n {
            match r.take(1).ok_or_else(|| bad("short piece"))?.first() {
                Some(0) => {
                    let len = r.u64_le().ok_or_else(|| bad("short literal"))?;
                    pieces.push(Piece::Literal(r.take(len).ok_or_else(|| bad("short literal"))?.to_vec()));
                }
                Some(1) => {
                    let co_index = r.u32_le().ok_or_else(|| bad("short object"))?;
                    let tlen = r.u32_le().ok_or_else(|| bad("short object"))?;
                    let target = String::from_utf8(r.take(tlen as u64).ok_or_else(|| bad("short object"))?.to_vec())
                        .map_err(|_| bad("target is not UTF-8"))?;
                    let len = r.u64_le().ok_or_else(|| bad("short object"))?;
                    pieces.push(Piece::Object { co_index, target, len });
                }
                _ => return Err(bad("unknown piece")),
            }
        }
        Ok(JoinRecord {
            input_len: head[0],
            fatbin_offset: head[1],
            fatbin_end: head[2],
            removed: head[3],
            undo,
            pieces,
        })
    }
}

/// A bundle entry: its ID, payload and offset in its bundle.
type Entry<'a> = (String, Cow<'a, [u8]>, u64);

/// The target ID of a bundle entry ID: what follows its last `--` (empty
/// for the host entry).
pub(super) fn target_of(id: &str) -> &str {
    id.rfind("--").map_or("", |i| &id[i + 2..])
}

/// The device entries of one fat binary as the code objects of wrapper
/// record `co_index` (the host entry left out); an entry that is not an
/// AMDGPU code object refuses the split. Shared by ELF and PE splitting.
pub(super) fn push_code_objects<'s, 'e>(
    objects: &mut Vec<CodeObject<'e>>,
    co_index: u32,
    entries: impl IntoIterator<Item = (&'s String, Cow<'e, [u8]>)>,
) -> Result<(), KpackError> {
    for (id, payload) in entries {
        let t = target_of(id);
        if t.is_empty() {
            continue;
        }
        if !id.contains("amdgcn-amd-amdhsa") {
            return Err(refuse(format!("bundle entry {id} is not an AMDGPU code object")));
        }
        objects.push(CodeObject { co_index, target: t.to_string(), source_id: id.clone(), bytes: payload });
    }
    Ok(())
}

/// Everything a layout pass needs, independent of the marker's size.
struct Input<'a> {
    data: &'a [u8],
    map: FileMap,
    file: ElfFile<'a>,
    fat_index: usize,
    shstr_index: usize,
    shoff: u64,
}

/// The layout for a marker of `marker_len` bytes.
enum Layout {
    Cut(CutPlan),
    Zero { patches: Vec<Patch> },
}

impl Layout {
    fn patches(&self) -> &[Patch] {
        match self {
            Layout::Cut(c) => &c.patches,
            Layout::Zero { patches } => patches,
        }
    }
    fn removed(&self) -> u64 {
        match self {
            Layout::Cut(c) => c.removed,
            Layout::Zero { .. } => 0,
        }
    }
}

/// Replaces or inserts `patch`, keeping the list sorted.
fn set_patch(patches: &mut Vec<Patch>, patch: Patch) {
    patches.retain(|p| p.offset != patch.offset);
    let at = patches.partition_point(|p| p.offset < patch.offset);
    patches.insert(at, patch);
}

fn layout(inp: &Input, marker_len: u64, out_len_hint: &mut u64) -> Result<Layout, KpackError> {
    let map = &inp.map;
    let (f, s, v) = (map.fatbin_offset, map.fatbin_size, map.fatbin_addr);
    if marker_len > s {
        return Err(refuse(format!("the marker ({marker_len} bytes) does not fit in .hip_fatbin ({s} bytes)")));
    }
    let new_pointers = vec![v; map.wrappers.len()];
    let mut patches: Vec<Patch> = map
        .pointer_edits(inp.data, &new_pointers)
        .map_err(|e| KpackError::RefusedRead(e.into()))?
        .into_iter()
        .map(|e| Patch { offset: e.offset, bytes: e.value.to_le_bytes().to_vec() })
        .collect();
    for (i, w) in map.wrappers.iter().enumerate() {
        patches.push(Patch { offset: w.offset, bytes: offload_format::kpack::host::HIPK.to_le_bytes().to_vec() });
        patches.push(Patch { offset: w.offset + 16, bytes: (i as u64).to_le_bytes().to_vec() });
    }
    let old_offsets = vec![0u64];
    let new_sizes = vec![marker_len];
    let words: HashSet<u64> = map.wrappers.iter().map(|w| w.addr.wrapping_add(8)).collect();
    let packed = crate::prune::cut::Packed {
        name: ".hip_fatbin",
        offset: f,
        addr: v,
        size: s,
        relocatable: map.relocatable,
        old_offsets: &old_offsets,
        new_sizes: &new_sizes,
        words: &words,
    };
    // Symbols at later fat binaries' starts: the cutter moves only the
    // units it is told about, so tell it about them all, packed at 0.
    let mut layout = match cut_section(inp.data, &packed, patches.clone()).map_err(KpackError::Prune)? {
        Cut::Planned(plan) => Layout::Cut(plan),
        Cut::TooSmall { .. } => {
            let mut p = patches;
            p.sort_by_key(|p| p.offset);
            Layout::Zero { patches: p }
        }
    };
    let removed = layout.removed();
    let input_len = inp.data.len() as u64;
    let new_shstr_offset = input_len - removed;
    *out_len_hint = new_shstr_offset;
    let entry = |i: usize| inp.shoff + i as u64 * 64;
    let shstr = inp.file.sections[inp.shstr_index];
    let list = match &mut layout {
        Layout::Cut(c) => &mut c.patches,
        Layout::Zero { patches } => patches,
    };
    set_patch(list, Patch { offset: entry(inp.fat_index), bytes: (shstr.size as u32).to_le_bytes().to_vec() });
    set_patch(list, Patch { offset: entry(inp.fat_index) + 32, bytes: marker_len.to_le_bytes().to_vec() });
    set_patch(list, Patch { offset: entry(inp.shstr_index) + 24, bytes: new_shstr_offset.to_le_bytes().to_vec() });
    set_patch(
        list,
        Patch {
            offset: entry(inp.shstr_index) + 32,
            bytes: (shstr.size + MARKER_SECTION.len() as u64 + 1).to_le_bytes().to_vec(),
        },
    );
    for pair in list.windows(2) {
        if pair[0].offset + pair[0].bytes.len() as u64 > pair[1].offset {
            return Err(refuse(format!("two edits overlap at {:#x}", pair[1].offset)));
        }
    }
    if list.iter().any(|p| p.offset + p.bytes.len() as u64 > f && p.offset < f + s) {
        return Err(refuse("an edit falls inside .hip_fatbin"));
    }
    Ok(layout)
}

fn output(inp: &Input, layout: &Layout, marker: &[u8]) -> Result<Vec<u8>, KpackError> {
    let data = inp.data;
    let map = &inp.map;
    let (f, old_end) = (map.fatbin_offset, map.fatbin_offset + map.fatbin_size);
    let mut plan = Plan::new();
    copy_patched(&mut plan, data, layout.patches(), 0, f);
    plan.own(marker.to_vec());
    match layout {
        Layout::Cut(c) => {
            plan.zeros(c.phdr_offset - f - marker.len() as u64);
            let table = segments::write(&c.segments);
            let table_end = c.phdr_offset + table.len() as u64;
            plan.own(table);
            plan.zeros(c.resume_output - table_end);
            plan.zeros(old_end - c.resume_input);
        }
        Layout::Zero { .. } => plan.zeros(map.fatbin_size - marker.len() as u64),
    }
    copy_patched(&mut plan, data, layout.patches(), old_end, data.len() as u64);
    let shstr = inp.file.section_data(inp.shstr_index).map_err(|e| KpackError::RefusedRead(e.into()))?;
    plan.borrow(shstr);
    plan.own(format!("{MARKER_SECTION}\0").into_bytes());
    Ok(plan.to_vec())
}

/// Splits one host binary: `None` when it has no `.hip_fatbin` (nothing
/// to split), else the rewritten binary and its code objects. The marker
/// names `kernel_name` and `search_paths` (see [`super::search_pattern`]).
/// Before returning, the output is read back: every record must be `HIPK`
/// with this marker, and, when a join record was written, joining the
/// output with the code objects must give back the input byte for byte.
pub fn split_binary<'a>(
    data: &'a [u8],
    kernel_name: &str,
    search_paths: &[String],
) -> Result<Option<SplitBinary<'a>>, KpackError> {
    let Some(Prepared { objects, rest }) = prepare(data, kernel_name, search_paths)? else { return Ok(None) };
    let (host, cut, joinable) = finish(rest, &objects, kernel_name, search_paths)?;
    Ok(Some(SplitBinary { host, objects, cut, joinable }))
}

/// A host binary read for splitting: its code objects, which can be
/// compressed while [`finish`] writes and checks the host binary.
pub(super) struct Prepared<'a> {
    pub(super) objects: Vec<CodeObject<'a>>,
    pub(super) rest: Rest<'a>,
}

/// What [`finish`] needs besides the code objects.
pub(super) enum Rest<'a> {
    /// A PE image, already rewritten (host, pages cut).
    Done(Vec<u8>, bool),
    Elf(Box<ElfRest<'a>>),
}

pub(super) struct ElfRest<'a> {
    inp: Input<'a>,
    unit_entries: Vec<Vec<Entry<'a>>>,
    first_record: Vec<Option<u32>>,
    joinable: bool,
}

/// The first half of [`split_binary`]: reads the binary and its code
/// objects (`None`: nothing to split).
pub(super) fn prepare<'a>(
    data: &'a [u8],
    kernel_name: &str,
    search_paths: &[String],
) -> Result<Option<Prepared<'a>>, KpackError> {
    if offload_format::coff::pe::is_pe(data) {
        return Ok(super::pe::split_pe(data, kernel_name, search_paths)?
            .map(|s| Prepared { objects: s.objects, rest: Rest::Done(s.host, s.cut) }));
    }
    let Ok(file) = ElfFile::parse(data) else { return Ok(None) };
    let has_fatbin = (1..file.sections.len()).any(|i| file.section_name(i).ok() == Some(b".hip_fatbin".as_slice()));
    if !has_fatbin {
        return Ok(None);
    }
    let map = FileMap::read(data).map_err(|e| KpackError::RefusedRead(e.into()))?;
    if map.section != FatbinSection::Hip {
        return Ok(None);
    }
    if map.relocatable {
        return Err(refuse("relocatable objects (.o) are not split; split the linked library"));
    }
    if map.wrappers.is_empty() {
        return Err(refuse("no wrapper records in .hipFatBinSegment"));
    }
    // Code objects by record.
    let mut objects = Vec::new();
    let mut first_record = vec![None::<u32>; map.units.len()];
    let mut joinable = true;
    let mut unit_entries = Vec::new();
    for (u, unit) in map.units.iter().enumerate() {
        let contents = read_contents(data, unit).map_err(KpackError::Prune)?;
        // Payloads borrow the input; only a compressed bundle's are copied
        // out of its decoded bytes.
        let entries: Vec<Entry<'_>> = match contents {
            Contents::Bundle(e) => e
                .into_iter()
                .map(|e| (String::from_utf8_lossy(e.id).into_owned(), Cow::Borrowed(e.payload), e.offset))
                .collect(),
            Contents::Compressed { inner } => {
                joinable = false;
                binary::read(&inner)
                    .map_err(|e| KpackError::RefusedRead(e.into()))?
                    .unwrap_or_default()
                    .iter()
                    .map(|e| (String::from_utf8_lossy(e.id).into_owned(), Cow::Owned(e.payload.to_vec()), e.offset))
                    .collect()
            }
        };
        let mut seen = HashSet::new();
        for (id, _, _) in &entries {
            let t = target_of(id);
            if !t.is_empty() && !seen.insert(t.to_string()) {
                return Err(refuse(format!("fat binary {u} holds two code objects for {t}")));
            }
        }
        unit_entries.push(entries);
    }
    for (i, w) in map.wrappers.iter().enumerate() {
        let Target::Unit(u) = w.target else {
            return Err(refuse(format!("wrapper record {i} does not point at the start of a fat binary")));
        };
        let co_index = u32::try_from(i).map_err(|_| refuse("too many wrapper records"))?;
        if first_record[u].is_none() {
            first_record[u] = Some(co_index);
        }
        push_code_objects(
            &mut objects,
            co_index,
            unit_entries[u].iter().map(|(id, payload, _)| (id, payload.clone())),
        )?;
    }
    if let Some(u) = first_record.iter().position(Option::is_none) {
        return Err(refuse(format!("fat binary {u} is referenced by no wrapper record")));
    }
    let fat_index = (1..file.sections.len())
        .find(|&i| file.section_name(i).ok() == Some(b".hip_fatbin".as_slice()))
        .ok_or_else(|| refuse("no .hip_fatbin"))?;
    let shoff = offload_format::bytes::u64_le(data, 40).unwrap_or(0);
    let shstr_index = file.shstrndx;
    if shstr_index == 0 || shstr_index == fat_index {
        return Err(refuse("no section name table"));
    }
    let inp = Input { data, map, file, fat_index, shstr_index, shoff };
    let rest = Rest::Elf(Box::new(ElfRest { inp, unit_entries, first_record, joinable }));
    Ok(Some(Prepared { objects, rest }))
}

/// The second half of [`split_binary`]: the host binary written and
/// checked (it reads back; it joins back to the input with `objects`).
/// Returns the host binary, whether pages were cut, and whether it holds
/// a join record.
pub(super) fn finish(
    rest: Rest<'_>,
    objects: &[CodeObject<'_>],
    kernel_name: &str,
    search_paths: &[String],
) -> Result<(Vec<u8>, bool, bool), KpackError> {
    let ElfRest { inp, unit_entries, first_record, joinable } = match rest {
        Rest::Done(host, cut) => return Ok((host, cut, false)),
        Rest::Elf(elf) => *elf,
    };
    let data = inp.data;
    // Pass 1 learns which bytes change; the join record keeps their old
    // values; pass 2 lays out the final marker and must change the same.
    let bare = marker_bytes(kernel_name, search_paths, None);
    let mut hint = 0;
    let first = layout(&inp, bare.len() as u64, &mut hint)?;
    let join = if joinable { Some(join_record(&inp, &first, &unit_entries, &first_record)?.encode()?) } else { None };
    let marker = marker_bytes(kernel_name, search_paths, join.as_deref());
    let second = layout(&inp, marker.len() as u64, &mut hint)?;
    let offsets = |l: &Layout| l.patches().iter().map(|p| (p.offset, p.bytes.len())).collect::<Vec<_>>();
    if offsets(&first) != offsets(&second) || first.removed() != second.removed() {
        return Err(refuse("the layout changed with the marker's size"));
    }
    let host = output(&inp, &second, &marker)?;
    check_split(&host, kernel_name, search_paths, inp.map.wrappers.len())?;
    if join.is_some() {
        let back = joins_back_to(
            &host,
            |co, t| objects.iter().find(|o| o.co_index == co && o.target == t).map(|o| Cow::Borrowed(&o.bytes[..])),
            data,
        )?;
        if !back {
            return Err(refuse("the split does not join back to the input (a bug; nothing written)"));
        }
    }
    Ok((host, matches!(second, Layout::Cut(_)), join.is_some()))
}

fn join_record(
    inp: &Input,
    layout: &Layout,
    units: &[Vec<Entry<'_>>],
    first_record: &[Option<u32>],
) -> Result<JoinRecord, KpackError> {
    let data = inp.data;
    let map = &inp.map;
    let (f, end) = (map.fatbin_offset, map.fatbin_offset + map.fatbin_size);
    let undo = layout
        .patches()
        .iter()
        .map(|p| {
            let s = p.offset as usize;
            data.get(s..s + p.bytes.len()).map(|b| (p.offset, b.to_vec())).ok_or_else(|| refuse("edit past the end"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Device payloads by absolute offset; everything else is literal.
    let mut objs: Vec<(u64, u64, u32, String)> = Vec::new();
    for (u, entries) in units.iter().enumerate() {
        let base = map.units[u].offset;
        let co = first_record[u].unwrap_or(0);
        for (id, payload, off) in entries {
            let t = target_of(id);
            if !t.is_empty() && !payload.is_empty() {
                objs.push((base + off, payload.len() as u64, co, t.to_string()));
            }
        }
    }
    objs.sort();
    let mut pieces = Vec::new();
    let mut at = f;
    for (start, len, co_index, target) in objs {
        if start < at || start + len > end {
            return Err(refuse("code objects overlap in .hip_fatbin"));
        }
        pieces.push(Piece::Literal(data[at as usize..start as usize].to_vec()));
        pieces.push(Piece::Object { co_index, target, len });
        at = start + len;
    }
    pieces.push(Piece::Literal(data[at as usize..end as usize].to_vec()));
    Ok(JoinRecord {
        input_len: data.len() as u64,
        fatbin_offset: f,
        fatbin_end: end,
        removed: layout.removed(),
        undo,
        pieces,
    })
}

fn check_split(host: &[u8], kernel_name: &str, search_paths: &[String], records: usize) -> Result<(), KpackError> {
    let fail = |why: String| refuse(format!("the split output does not read back: {why}"));
    let hb = HostBinary::read(host).map_err(|e| KpackError::ReadBack { what: "output", source: e.into() })?;
    if hb.wrappers.len() != records {
        return Err(fail(format!("{} records, not {records}", hb.wrappers.len())));
    }
    for (i, w) in hb.wrappers.iter().enumerate() {
        let m = match &w.marker {
            Some(Ok(m)) => m,
            _ => return Err(fail(format!("record {i} leads to no marker"))),
        };
        if w.record.co_index() as usize != i || m.kernel_name != kernel_name || m.search_paths != search_paths {
            return Err(fail(format!("record {i} has the wrong marker or co_index")));
        }
    }
    match hb.marker {
        Some(Ok(_)) => Ok(()),
        _ => Err(fail(format!("no readable {MARKER_SECTION} section"))),
    }
}

/// The join record in `host`'s marker, if any.
fn find_join(host: &[u8]) -> Result<JoinRecord, KpackError> {
    let hb = HostBinary::read(host).map_err(KpackError::JoinHost)?;
    let file = ElfFile::parse(host).map_err(KpackError::JoinElf)?;
    let section = hb.marker_section.ok_or_else(|| KpackError::Join(format!("no {MARKER_SECTION} section")))?;
    let bytes = file.section_data(section.index).map_err(KpackError::JoinElf)?;
    let (value, _) = msgpack::read(bytes).map_err(|e| KpackError::Join(format!("marker: {e}")))?;
    match value.get(JOIN_KEY) {
        Some(msgpack::Value::Bin(b)) => JoinRecord::decode(b),
        _ => Err(KpackError::Join(
            "this binary was not split by offload (its marker has no join record), or its fat binaries were compressed bundles".into(),
        )),
    }
}

/// Joins a host binary split by [`split_binary`] back into the fat input,
/// byte for byte: `fetch(co_index, target)` gives each code object.
pub fn join_binary(host: &[u8], mut fetch: impl FnMut(u32, &str) -> Option<Vec<u8>>) -> Result<Vec<u8>, KpackError> {
    join_with(host, |co, t| fetch(co, t).map(Cow::Owned))
}

/// [`join_binary`] with code objects that may be borrowed.
fn join_with<'f>(host: &[u8], fetch: impl FnMut(u32, &str) -> Option<Cow<'f, [u8]>>) -> Result<Vec<u8>, KpackError> {
    let r = find_join(host)?;
    let mut out = Vec::with_capacity(r.input_len.min(1 << 34) as usize);
    join_pieces(host, &r, fetch, &mut |b| out.extend_from_slice(b))?;
    let bad = |why: &str| KpackError::Join(format!("the join record does not fit this file: {why}"));
    for (at, bytes) in &r.undo {
        let s = usize::try_from(*at).map_err(|_| bad("undo offset"))?;
        out.get_mut(s..s + bytes.len()).ok_or_else(|| bad("undo past the end"))?.copy_from_slice(bytes);
    }
    Ok(out)
}

/// Whether joining `host` gives `original` back, compared while the join
/// is produced (nothing as large as the file is built): every byte equal,
/// or restored by the join record's undo edits to the original's value.
fn joins_back_to<'f>(
    host: &[u8],
    fetch: impl FnMut(u32, &str) -> Option<Cow<'f, [u8]>>,
    original: &[u8],
) -> Result<bool, KpackError> {
    let r = find_join(host)?;
    for (at, bytes) in &r.undo {
        let s = usize::try_from(*at).unwrap_or(usize::MAX);
        if original.get(s..s.saturating_add(bytes.len())) != Some(bytes.as_slice()) {
            return Ok(false);
        }
    }
    // The undo edits' ranges, sorted: the bytes between them are compared
    // as whole slices (memcmp), the bytes inside them were checked above.
    let mut undone: Vec<(usize, usize)> = r
        .undo
        .iter()
        .map(|(u, b)| {
            let s = usize::try_from(*u).unwrap_or(usize::MAX);
            (s, s.saturating_add(b.len()))
        })
        .collect();
    undone.sort_unstable();
    let (mut pos, mut same) = (0usize, true);
    join_pieces(host, &r, fetch, &mut |b| {
        let end = pos.saturating_add(b.len());
        same &= match original.get(pos..end) {
            Some(o) => equal_outside(o, b, pos, &undone),
            None => false,
        };
        pos = end;
    })?;
    Ok(same && pos == original.len())
}

/// Whether `a` and `b` (equally long, at file offset `at`) are equal at
/// every byte outside the sorted `ranges` of file offsets.
fn equal_outside(a: &[u8], b: &[u8], at: usize, ranges: &[(usize, usize)]) -> bool {
    if a == b {
        return true;
    }
    let end = at.saturating_add(a.len());
    let mut from = at;
    for &(s, e) in ranges.iter().filter(|(s, e)| *e > at && *s < end) {
        let s = s.max(from);
        if a.get(from - at..s - at) != b.get(from - at..s - at) {
            return false;
        }
        from = from.max(e.min(end));
    }
    a.get(from - at..) == b.get(from - at..)
}

/// Produces the joined file (before the undo edits), piece by piece.
fn join_pieces<'f>(
    host: &[u8],
    r: &JoinRecord,
    mut fetch: impl FnMut(u32, &str) -> Option<Cow<'f, [u8]>>,
    emit: &mut dyn FnMut(&[u8]),
) -> Result<(), KpackError> {
    let bad = |why: &str| KpackError::Join(format!("the join record does not fit this file: {why}"));
    if r.fatbin_offset > r.fatbin_end || r.fatbin_end > r.input_len || r.removed > r.fatbin_end {
        return Err(bad("offsets"));
    }
    let tail_from = r.fatbin_end - r.removed;
    let tail_len = r.input_len - r.fatbin_end;
    let head = host.get(..r.fatbin_offset as usize).ok_or_else(|| bad("short head"))?;
    let tail = host
        .get(tail_from as usize..tail_from.checked_add(tail_len).ok_or_else(|| bad("tail"))? as usize)
        .ok_or_else(|| bad("short tail"))?;
    emit(head);
    let mut len_so_far = head.len() as u64;
    for p in &r.pieces {
        match p {
            Piece::Literal(b) => {
                emit(b);
                len_so_far += b.len() as u64;
            }
            Piece::Object { co_index, target, len } => {
                let bytes = fetch(*co_index, target).ok_or_else(|| {
                    KpackError::Join(format!("no code object #{co_index} for {target} in the archives"))
                })?;
                if bytes.len() as u64 != *len {
                    return Err(KpackError::Join(format!(
                        "code object #{co_index} for {target} is {} bytes, the original was {len}",
                        bytes.len()
                    )));
                }
                emit(&bytes);
                len_so_far += *len;
            }
        }
    }
    if len_so_far != r.fatbin_end {
        return Err(bad("the pieces do not fill .hip_fatbin"));
    }
    emit(tail);
    Ok(())
}
