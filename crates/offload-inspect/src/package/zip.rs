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
    for i in 0..total {
        let name = archive.name_for_index(i).unwrap_or_default().as_bytes().to_vec();
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
    match archive.by_index(i) {
        Ok(mut f) => {
            let declared = f.size();
            w.member_stream(&mut f, Some(declared), format, depth);
        }
        Err(zip::result::ZipError::UnsupportedArchive(why)) => {
            w.problem(ErrorKind::Unsupported(format!("{why} (compression method {method})")))
        }
        Err(e) => w.problem(ErrorKind::Zip(e.to_string())),
    }
}
