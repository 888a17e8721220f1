//! Tar archives (POSIX ustar, pax and GNU extensions, via the `tar`
//! crate). A plain tarball in the input is walked in place: each regular
//! member is a slice at its absolute offset, and skipped members cost a
//! seek. A decompressed tarball is walked as a stream, one member at a
//! time. Links, folders and devices are skipped (a hard link's content is
//! listed under the name it was first stored as).

use super::{ErrorKind, Walker, start_in};
use std::io::{Cursor, Read};
use tar::{Archive, EntryType};

fn wanted(kind: EntryType) -> bool {
    matches!(kind, EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse)
}

pub(super) fn walk_mapped(w: &mut Walker, data: &[u8], offset: Option<u64>, depth: usize) -> Result<(), ErrorKind> {
    let damaged = |e: std::io::Error| ErrorKind::Tar(e.to_string());
    let mut archive = Archive::new(Cursor::new(data));
    let mut done = 0;
    for entry in archive.entries_with_seek().map_err(damaged)? {
        let mut entry = entry.map_err(damaged)?;
        done += 1;
        let kind = entry.header().entry_type();
        if wanted(kind) {
            let name = entry.path_bytes().into_owned();
            let (start, size) = (entry.raw_file_position(), entry.size());
            let range = usize::try_from(start).ok().zip(usize::try_from(size).ok());
            let slice = range.and_then(|(s, n)| data.get(s..s.checked_add(n)?));
            w.within(&name, |w| match slice {
                // A sparse member's stored bytes are not its contents.
                // Its holes expand without compression: metered.
                _ if kind == EntryType::GNUSparse => {
                    let mut reader = w.budget.meter(&mut entry);
                    w.member_stream(&mut reader, Some(size), "tar", depth)
                }
                Some(bytes) => {
                    let at = start_in(data, bytes).and_then(|s| offset?.checked_add(s));
                    w.member(bytes, at, depth);
                }
                None => w.problem(ErrorKind::Tar("member data lies outside the archive".into())),
            });
        }
        w.progress(depth, done, None);
    }
    Ok(())
}

/// Walks a tarball that `reader` decompresses (`format` names the
/// compression in errors).
pub(super) fn walk_stream(
    w: &mut Walker,
    reader: &mut dyn Read,
    format: &'static str,
    depth: usize,
) -> Result<(), ErrorKind> {
    let damaged = |e: std::io::Error| ErrorKind::Stream { format, message: format!("tar archive inside: {e}") };
    let mut archive = Archive::new(reader);
    let mut done = 0;
    let mut last = Vec::new();
    for entry in archive.entries().map_err(damaged)? {
        let mut entry = match entry {
            Ok(entry) => entry,
            // The budget ran out while the member before was skipped: said
            // once, naming that member, and the walk of this stream ends
            // (docs/reliability.md).
            Err(e) if w.budget.spent() => {
                w.within(&last, |w| w.read_problem(format, e));
                return Ok(());
            }
            Err(e) => return Err(damaged(e)),
        };
        done += 1;
        last = entry.path_bytes().into_owned();
        if wanted(entry.header().entry_type()) {
            let name = entry.path_bytes().into_owned();
            let size = entry.size();
            w.within(&name, |w| w.member_stream(&mut entry, Some(size), format, depth));
        }
        w.progress(depth, done, None);
    }
    Ok(())
}
