//! Members of thin archives, which live in files of their own.

use crate::*;
use std::fs;
use std::path::Path;

/// Reads a member of a thin archive: the file its stored `name` gives,
/// relative to the archive's folder unless absolute, as LLVM resolves it.
/// Only regular files are read (a name could point at a device or a pipe).
pub fn read_thin_member(archive: &str, name: &[u8]) -> Result<Vec<u8>, String> {
    use std::os::unix::ffi::OsStrExt;
    let name = Path::new(std::ffi::OsStr::from_bytes(name));
    let path = Path::new(archive).parent().map_or_else(|| name.to_path_buf(), |dir| dir.join(name));
    let meta = fs::metadata(&path).map_err(|e| error_text(&e))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    fs::read(&path).map_err(|e| error_text(&e))
}
