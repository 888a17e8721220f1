//! Single compressed streams: gzip (RFC 1952, several members allowed),
//! xz, zstd and bzip2. A stream holding a tarball is walked member by
//! member as it decompresses; any other contents are one member (a
//! `libx.so.gz`), read only if its first bytes may hold code.

use super::detect::{HEAD_LEN, Kind};
use super::{ErrorKind, Walker, tar};
use std::io::{Cursor, Read};

/// The most memory an xz block may ask for (KiB): `xz -9` and `-9e` use a
/// 64 MiB dictionary; a header claiming twice that is refused (damage, or
/// an attack on memory) with a clear error.
const XZ_MEMORY_LIMIT_KIB: u32 = 160 << 10;

fn decoder<'a>(kind: Kind, data: super::Counted<'a>) -> Result<Box<dyn Read + 'a>, ErrorKind> {
    Ok(match kind {
        Kind::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Kind::Xz => Box::new(lzma_rust2::XzReader::new_mem_limit(data, true, XZ_MEMORY_LIMIT_KIB)),
        // zstd's default window limit (128 MiB) stays: frames made with
        // `--long=31` are refused with zstd's own message.
        Kind::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| ErrorKind::Stream { format: "zstd", message: e.to_string() })?,
        ),
        Kind::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(data)),
        Kind::Zip | Kind::Tar | Kind::Deb => {
            return Err(ErrorKind::Unsupported(format!("{} is not a compressed stream", kind.name())));
        }
    })
}

pub(super) fn walk(w: &mut Walker, kind: Kind, data: &[u8], depth: usize) -> Result<(), ErrorKind> {
    let format = kind.name();
    // Every byte the decoder produces is charged, skipped ones included.
    // The compressed bytes it takes in are counted for progress.
    let mut reader = w.budget.meter(decoder(kind, w.counted(data))?);
    let mut head = Vec::with_capacity(HEAD_LEN);
    if let Err(e) = (&mut reader).take(HEAD_LEN as u64).read_to_end(&mut head) {
        if w.budget.spent() {
            w.read_problem(format, e);
            return Ok(());
        }
        return Err(ErrorKind::Stream { format, message: e.to_string() });
    }
    let mut whole = Cursor::new(head).chain(reader);
    let first = whole.get_ref().0.get_ref();
    if super::detect(first) == Some(Kind::Tar) {
        return tar::walk_stream(w, &mut whole, format, depth);
    }
    // Not a tarball: the contents are one member, with no name of their own.
    w.member_stream(&mut whole, None, format, depth);
    Ok(())
}
