//! Folders as inputs: every regular file below a folder, in a stable order
//! (names sorted bytewise, depth first). Symbolic links are not followed:
//! a link to a file or folder inside the tree would list its target a
//! second time, one pointing outside leaves the tree, and a link cycle
//! could loop; their targets inside the tree are listed under their own
//! names. A folder reached twice (a bind mount of a parent) is walked once.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A folder that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("'{}': {error}", path.display())]
pub struct DirError {
    /// The file or folder concerned.
    pub path: PathBuf,
    /// What the system said.
    pub error: io::Error,
}

/// The regular files below a folder (see the module documentation).
pub struct Files {
    /// Entries still to visit, per open folder, last one first.
    stack: Vec<Vec<PathBuf>>,
    seen: HashSet<(u64, u64)>,
    /// The folder given, read on the first call (a link given by the user
    /// is followed).
    root: Option<PathBuf>,
}

/// Starts a walk at `root`, a folder.
pub fn files(root: &Path) -> Files {
    Files { stack: Vec::new(), seen: HashSet::new(), root: Some(root.to_path_buf()) }
}

fn sorted_entries(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)? {
        names.push(entry?.path());
    }
    names.sort_by(|a, b| b.as_os_str().as_encoded_bytes().cmp(a.as_os_str().as_encoded_bytes()));
    Ok(names)
}

impl Iterator for Files {
    type Item = Result<PathBuf, DirError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(root) = self.root.take() {
            if let Err(error) = fs::metadata(&root).map(|m| self.seen.insert((m.dev(), m.ino()))) {
                return Some(Err(DirError { path: root, error }));
            }
            match sorted_entries(&root) {
                Ok(entries) => self.stack.push(entries),
                Err(error) => return Some(Err(DirError { path: root, error })),
            }
        }
        loop {
            let top = self.stack.last_mut()?;
            let Some(path) = top.pop() else {
                self.stack.pop();
                continue;
            };
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(error) => return Some(Err(DirError { path, error })),
            };
            if meta.is_file() {
                return Some(Ok(path));
            }
            if !meta.is_dir() || !self.seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            match sorted_entries(&path) {
                Ok(entries) => self.stack.push(entries),
                Err(error) => return Some(Err(DirError { path, error })),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_listed_sorted_and_links_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fs::create_dir_all(r.join("b/c")).unwrap();
        fs::write(r.join("b/c/z"), b"z").unwrap();
        fs::write(r.join("b/a"), b"a").unwrap();
        fs::write(r.join("a"), b"a").unwrap();
        std::os::unix::fs::symlink(r, r.join("b/c/loop")).unwrap();
        std::os::unix::fs::symlink(r.join("a"), r.join("link-to-a")).unwrap();
        std::os::unix::fs::symlink("/etc", r.join("outside")).unwrap();
        std::os::unix::fs::symlink(r, root.path().with_extension("link")).unwrap();
        let via_link: Vec<PathBuf> = files(&root.path().with_extension("link")).map(|f| f.unwrap()).collect();
        assert_eq!(via_link.len(), 3, "a folder given as a link is read: {via_link:?}");
        fs::remove_file(root.path().with_extension("link")).unwrap();
        let found: Vec<PathBuf> = files(r).map(|f| f.unwrap().strip_prefix(r).unwrap().to_path_buf()).collect();
        assert_eq!(found, [PathBuf::from("a"), "b/a".into(), "b/c/z".into()]);
    }
}
