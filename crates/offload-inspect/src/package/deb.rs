//! Debian packages: an `ar` archive holding `debian-binary`,
//! `control.tar.*` and `data.tar.*` (deb(5)). Only `data.tar.*` holds the
//! installed files; the control tarball (maintainer scripts, file lists) is
//! skipped. Read with `object`'s zero-copy archive reader.

use super::{ErrorKind, Walker, start_in};
use object::read::archive::ArchiveFile;

pub(super) fn walk(w: &mut Walker, data: &[u8], offset: Option<u64>, depth: usize) -> Result<(), ErrorKind> {
    let archive = ArchiveFile::parse(data).map_err(ErrorKind::Ar)?;
    let mut done = 0;
    for member in archive.members() {
        let member = member.map_err(ErrorKind::Ar)?;
        done += 1;
        let name = member.name().to_vec();
        if name == b"debian-binary" || name.starts_with(b"control.tar") {
            w.progress(depth, done, None);
            continue;
        }
        w.within(&name, |w| match member.data(data) {
            Ok(bytes) => {
                let at = start_in(data, bytes).and_then(|s| offset?.checked_add(s));
                w.member(bytes, at, depth);
            }
            Err(e) => w.problem(ErrorKind::Ar(e)),
        });
        w.progress(depth, done, None);
    }
    Ok(())
}
