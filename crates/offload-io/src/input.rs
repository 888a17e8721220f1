//! Inputs as bytes: regular files memory-mapped, anything else read.

use std::fs::{self, File};
use std::io::{self, Read};

use crate::MappedFile;

pub(crate) enum Backing {
    Mapped { map: MappedFile, file: File },
    Owned(Vec<u8>),
}

/// One input file, as bytes.
pub struct Input {
    /// The path as given on the command line (`-` for stdin).
    pub path: String,
    backing: Backing,
}

impl Input {
    /// Opens `path` (`-` reads standard input).
    pub fn open(path: &str) -> io::Result<Input> {
        if path == "-" {
            let mut buf = Vec::new();
            io::stdin().lock().read_to_end(&mut buf)?;
            return Ok(Input::from_bytes(path, buf));
        }
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        if meta.is_file() {
            return Input::from_file(path, file, meta.len());
        }
        let mut buf = Vec::new();
        (&file).read_to_end(&mut buf)?;
        Ok(Input::from_bytes(path, buf))
    }

    /// A regular file of `len` bytes, mapped (an empty one is read).
    fn from_file(path: &str, file: File, len: u64) -> io::Result<Input> {
        if len > 0 {
            // A file truncated by another process while we read it faults;
            // the fault becomes an error naming it (mapped.rs).
            let map = MappedFile::map(&file, path)?;
            return Ok(Input { path: path.to_string(), backing: Backing::Mapped { map, file } });
        }
        let mut buf = Vec::new();
        (&file).read_to_end(&mut buf)?;
        Ok(Input::from_bytes(path, buf))
    }

    /// Opens `path` only if it is a regular file (for files found by a
    /// folder walk or a search, which the user did not name): a pipe,
    /// socket or device is refused before it is opened, and the opened
    /// file is checked again without blocking (docs/reliability.md).
    pub fn open_regular(path: &str) -> io::Result<Input> {
        use std::os::unix::fs::OpenOptionsExt;
        let not_regular = || io::Error::other("not a regular file");
        if !fs::metadata(path)?.is_file() {
            return Err(not_regular());
        }
        let file = fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(not_regular());
        }
        Input::from_file(path, file, meta.len())
    }

    /// An input held in memory (tests, stdin, decompressed data).
    pub fn from_bytes(path: &str, bytes: Vec<u8>) -> Input {
        Input { path: path.to_string(), backing: Backing::Owned(bytes) }
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Mapped { map, .. } => map,
            Backing::Owned(v) => v,
        }
    }

    /// The mapped file, for inputs that are one.
    pub(crate) fn file(&self) -> Option<&File> {
        match &self.backing {
            Backing::Mapped { file, .. } => Some(file),
            Backing::Owned(_) => None,
        }
    }

    /// If `slice` lies inside this input's mapped file: the file and the
    /// slice's offset in it.
    pub(crate) fn locate(&self, slice: &[u8]) -> Option<(&File, u64)> {
        let Backing::Mapped { map, file } = &self.backing else { return None };
        let base = map.as_ptr() as usize;
        let start = slice.as_ptr() as usize;
        let end = start.checked_add(slice.len())?;
        (start >= base && end <= base + map.len()).then(|| (file, (start - base) as u64))
    }
}
