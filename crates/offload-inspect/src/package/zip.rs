//! Zip archives (wheels, `.conda`, `.zip`), read from their central
//! directory by the `zip` crate. Stored members are slices of the input;
//! deflated ones are decompressed (and their CRC-32 checked) only when
//! their first bytes say they may hold code.

use super::{ErrorKind, Walker, start_in};
use std::io::Cursor;
use zip::CompressionMethod;
use zip::ZipArchive;

pub(super) fn walk(w: &mut Walker, data: &[u8], offset: Option<u64>, depth: usize) -> Result<(), ErrorKind> {
    let mut archive = ZipArchive::new(Cursor::new(data)).map_err(|e| ErrorKind::Zip(e.to_string()))?;
    let total = archive.len();
    let overlapping = overlaps(&mut archive);
    // The count is known before the first member: a first member that
    // takes long shows `0/N members`.
    w.progress(depth, 0, Some(total as u64));
    for i in 0..total {
        let name = archive.name_for_index(i).unwrap_or_default().as_bytes().to_vec();
        if let Some(&first) = overlapping.get(&i) {
            let other = archive.name_for_index(first).unwrap_or_default().to_string();
            w.within(&name, |w| {
                w.problem(ErrorKind::Zip(format!("member data overlaps that of {other} (a zip bomb?); not read")))
            });
            w.progress(depth, i as u64 + 1, Some(total as u64));
            continue;
        }
        w.within(&name, |w| member(w, &mut archive, i, data, offset, depth));
        w.progress(depth, i as u64 + 1, Some(total as u64));
    }
    Ok(())
}

fn member(
    w: &mut Walker,
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    i: usize,
    data: &[u8],
    offset: Option<u64>,
    depth: usize,
) {
    let (method, stored) = match archive.by_index_raw(i) {
        Err(e) => return w.problem(ErrorKind::Zip(e.to_string())),
        Ok(f) if f.is_dir() || f.is_symlink() => return,
        Ok(f) => {
            let range = f.data_start().and_then(|s| Some(s..s.checked_add(f.compressed_size())?));
            let slice = range.and_then(|r| Some((usize::try_from(r.start).ok()?, usize::try_from(r.end).ok()?)));
            (f.compression(), slice.map(|(s, e)| (data.get(s..e), f.size())))
        }
    };
    if method == CompressionMethod::Stored {
        match stored {
            Some((Some(bytes), size)) if size == bytes.len() as u64 => {
                let at = start_in(data, bytes).and_then(|s| offset?.checked_add(s));
                w.member(bytes, at, depth);
            }
            Some((Some(bytes), size)) => w.problem(ErrorKind::Zip(format!(
                "stored member of {} bytes claims {size} bytes uncompressed",
                bytes.len()
            ))),
            _ => w.problem(ErrorKind::Zip("member data lies outside the archive".into())),
        }
        return;
    }
    let format = if method == CompressionMethod::Deflated { "deflate" } else { "zip member" };
    // Where the compressed bytes lie in the input, for progress.
    let place = stored.and_then(|(bytes, _)| bytes).and_then(|b| Some((w.offset_of(b)?, b.len() as u64)));
    match archive.by_index(i) {
        Ok(mut f) => {
            let declared = f.size();
            let estimated = Estimated { inner: &mut f, place, declared, out: 0, read: w.read.clone() };
            let mut reader = w.budget.meter(estimated);
            w.member_stream(&mut reader, Some(declared), format, depth);
        }
        Err(zip::result::ZipError::UnsupportedArchive(why)) => {
            w.problem(ErrorKind::Unsupported(format!("{why} (compression method {method})")))
        }
        Err(e) => w.problem(ErrorKind::Zip(e.to_string())),
    }
    // Passed, read or skipped after its first bytes: its compressed bytes
    // count as read.
    if let Some(end) = place.and_then(|(start, len)| start.checked_add(len)) {
        w.read.set(w.read.get().max(end));
    }
}

/// A zip member's decoder that moves the walk's read mark through the
/// member's compressed bytes (`place`: their offset in the input and
/// length) in proportion to the share of its declared size produced so
/// far. The `zip` crate reads the compressed bytes through the archive's
/// own reader, so how far it has read cannot be counted as it is for the
/// other decoders; for a deflate stream the share is close. A false
/// declared size only makes the estimate wrong, never past the member's
/// end.
struct Estimated<R> {
    inner: R,
    place: Option<(u64, u64)>,
    declared: u64,
    out: u64,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl<R: std::io::Read> std::io::Read for Estimated<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out = self.out.saturating_add(n as u64);
        if let Some((start, len)) = self.place
            && self.declared > 0
        {
            let share = u128::from(self.out.min(self.declared)) * u128::from(len) / u128::from(self.declared);
            let at = start.saturating_add(u64::try_from(share).unwrap_or(len));
            self.read.set(self.read.get().max(at));
        }
        Ok(n)
    }
}

/// The members whose bytes (local header to end of data) overlap those of
/// a member before them in the central directory, each with the index of
/// the one it overlaps. A real archive never shares bytes between members;
/// a zip bomb points thousands of entries at one stream so that it is
/// decoded thousands of times (docs/reliability.md).
fn overlaps(archive: &mut ZipArchive<Cursor<&[u8]>>) -> std::collections::HashMap<usize, usize> {
    let mut ranges: Vec<(u64, u64, usize)> = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        if let Ok(f) = archive.by_index_raw(i) {
            let end = f.data_start().and_then(|s| s.checked_add(f.compressed_size()));
            if let Some(end) = end {
                ranges.push((f.header_start(), end, i));
            }
        }
    }
    ranges.sort_unstable();
    let mut out = std::collections::HashMap::new();
    // Sorted by start: a range overlaps an earlier one when it starts
    // before the furthest end seen so far.
    let mut furthest: Option<(u64, usize)> = None;
    for &(start, end, i) in &ranges {
        match furthest {
            Some((reach, j)) if start < reach => {
                let (later, earlier) = if i > j { (i, j) } else { (j, i) };
                out.entry(later).or_insert(earlier);
                if end > reach {
                    furthest = Some((end, i));
                }
            }
            _ => furthest = Some((end, i)),
        }
    }
    out
}
