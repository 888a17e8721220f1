//! `replace` in a static archive: the entry is replaced inside one member
//! (a HIP or CUDA object, or a bundle), picked by name or, when exactly
//! one member holds a matching entry, automatically. Every other byte of
//! the archive is copied. Objects are rewritten in place (they have no
//! segments to grow into), so the member keeps its size and neither its
//! header nor the archive symbol table (which holds member offsets)
//! changes; a member whose size would change (a bundle member that grows
//! or shrinks) is refused.

use super::{ArchiveMember, InputKind, Placement, ReplaceError, Replaced};
use object::read::archive::ArchiveFile;

/// The magic of a (GNU or BSD) archive.
const MAGIC: &[u8] = b"!<arch>\n";

/// Whether `data` is a static archive.
pub(super) fn is_archive(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

/// One member: its name, the file offset of its data, and the data.
type Member<'a> = (String, u64, &'a [u8]);

/// The members of `data`.
fn members(data: &[u8]) -> Result<Vec<Member<'_>>, ReplaceError> {
    let bad = ReplaceError::MalformedArchive;
    let archive = ArchiveFile::parse(data).map_err(bad)?;
    if archive.is_thin() {
        return Err(ReplaceError::Archive("a thin archive: its members live in other files; replace in those".into()));
    }
    let mut out = Vec::new();
    for member in archive.members() {
        let member = member.map_err(bad)?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        out.push((name, member.file_range().0, member.data(data).map_err(bad)?));
    }
    Ok(out)
}

/// Whether a member's plan failed because it holds no matching entry (or
/// no device code at all), rather than for a reason worth reporting.
fn not_a_candidate(e: &ReplaceError) -> bool {
    matches!(e, ReplaceError::NoEntry { .. } | ReplaceError::UnknownInput | ReplaceError::Layout(_))
}

/// Plans replacing entry `wanted` in member `member` of archive `data`
/// (or in the one member that holds it).
pub(super) fn plan<'a>(
    data: &'a [u8],
    object: &'a [u8],
    wanted: &str,
    unit: Option<usize>,
    member: Option<&str>,
) -> Result<Replaced<'a>, ReplaceError> {
    let all = members(data)?;
    // An MSVC `.lib` holds COFF objects, which replace does not rewrite.
    if all.iter().any(|m| super::windows_kind(m.2).is_some()) {
        return Err(super::windows_refusal("an archive of COFF objects (.lib)"));
    }
    let in_member = |name: &str, e: ReplaceError| ReplaceError::Member { name: name.into(), source: Box::new(e) };
    let (name, offset, bytes, inner) = match member {
        Some(wanted_name) => {
            let Some(&(ref name, offset, bytes)) = all.iter().find(|m| m.0 == wanted_name) else {
                let names = all.iter().map(|m| m.0.as_str()).collect::<Vec<_>>().join(", ");
                return Err(ReplaceError::NoMember { name: wanted_name.into(), members: names });
            };
            let inner = super::plan_in(bytes, object, wanted, unit, None).map_err(|e| in_member(name, e))?;
            (name.clone(), offset, bytes, inner)
        }
        None => {
            let mut found = Vec::new();
            let mut candidates = Vec::new();
            for (name, offset, bytes) in &all {
                match super::plan_in(bytes, object, wanted, unit, None) {
                    Err(e) if not_a_candidate(&e) => {}
                    result => {
                        candidates.push(name.clone());
                        found.push((name.clone(), *offset, *bytes, result));
                    }
                }
            }
            if found.len() != 1 {
                return Err(ReplaceError::MemberChoice { wanted: wanted.into(), candidates });
            }
            let (name, offset, bytes, result) = found.remove(0);
            let inner = result.map_err(|e| in_member(&name, e))?;
            (name, offset, bytes, inner)
        }
    };
    if inner.output.len() != bytes.len() as u64 {
        return Err(in_member(
            &name,
            ReplaceError::NotSupported(format!(
                "the member would change size ({} -> {} bytes); archives are rewritten only where members keep their size",
                bytes.len(),
                inner.output.len()
            )),
        ));
    }
    let start = offset as usize;
    let mut output = offload_format::plan::Plan::borrowed(data.get(..start).unwrap_or(&[]));
    output.pieces.extend(inner.output.pieces);
    output.borrow(data.get(start + bytes.len()..).unwrap_or(&[]));
    let shift = |o: u64| o + offset;
    let mut unit_info = inner.unit;
    unit_info.offset = shift(unit_info.offset);
    Ok(Replaced {
        input: InputKind::Archive,
        unit: unit_info,
        new_unit_offsets: inner.new_unit_offsets.iter().map(|&o| shift(o)).collect(),
        zeroed: inner.zeroed.iter().map(|&(o, n)| (shift(o), n)).collect(),
        placement: Placement::InPlace,
        member: Some(ArchiveMember { name, offset, size: bytes.len() as u64, input: inner.input }),
        output,
        ..inner
    })
}

/// [`super::verify`] for an archive: the same members, every byte outside
/// the replaced member unchanged, and the member itself passing the check
/// of what it is (re-planned from the input, which gives the same plan).
pub(super) fn verify(output: &[u8], input: &[u8], replaced: &Replaced, object: &[u8]) -> Result<(), ReplaceError> {
    let fail = |msg: String| ReplaceError::Verify(msg);
    let Some(member) = &replaced.member else { return Err(fail("no archive member in the plan".into())) };
    let (before, after) = (members(input)?, members(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?);
    let names = |list: &[Member]| list.iter().map(|m| (m.0.clone(), m.1, m.2.len())).collect::<Vec<_>>();
    if names(&before) != names(&after) {
        return Err(fail("its members differ from the input's in name, place or size".into()));
    }
    let (start, end) = (member.offset as usize, (member.offset + member.size) as usize);
    if output.len() != input.len() || output.get(..start) != input.get(..start) || output.get(end..) != input.get(end..)
    {
        return Err(fail(format!("bytes outside member {} changed", member.name)));
    }
    let (old, new) = (&input[start..end], &output[start..end]);
    // The member's own plan, made again (the same input gives the same plan).
    let inner = super::plan_in(old, object, &replaced.entry_id, Some(replaced.unit_index), None)?;
    super::verify(new, old, &inner, object)
}

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
