//! What the Python functions take as input (a path or bytes) and the
//! errors they raise, built so that the work itself runs without the GIL:
//! everything here is `Send` and holds no Python object.

use offload_io::{Input, error_text};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::path::PathBuf;

/// A path or the bytes of a file.
pub enum Source<'py> {
    Path(String),
    /// Borrowed from an immutable `bytes` object the caller keeps alive.
    Bytes(&'py [u8]),
    /// Copied from a mutable buffer (`bytearray`).
    Owned(Vec<u8>),
}

impl<'py> Source<'py> {
    /// `str`/`os.PathLike` is a path; `bytes`, `bytearray`, `memoryview`
    /// are contents.
    pub fn from_py(obj: &'py Bound<'py, PyAny>) -> PyResult<Source<'py>> {
        if let Ok(b) = obj.downcast::<PyBytes>() {
            return Ok(Source::Bytes(b.as_bytes()));
        }
        if let Ok(b) = obj.downcast::<PyByteArray>() {
            return Ok(Source::Owned(b.to_vec()));
        }
        if let Ok(path) = obj.extract::<PathBuf>() {
            let text = path.to_str().ok_or_else(|| {
                Failure::Invalid(format!("'{}': the path is not valid UTF-8", path.display())).into_py_err()
            })?;
            return Ok(Source::Path(text.to_string()));
        }
        if let Ok(v) = obj.extract::<Vec<u8>>() {
            return Ok(Source::Owned(v));
        }
        Err(pyo3::exceptions::PyTypeError::new_err("expected a path (str or os.PathLike) or bytes"))
    }

    /// The `file` field of records: the path, or None for bytes.
    pub fn file(&self) -> Option<&str> {
        match self {
            Source::Path(p) => Some(p),
            _ => None,
        }
    }

    /// The prefix of error messages: `path: ` as the CLI writes it, or
    /// nothing for bytes.
    pub fn prefix(&self) -> String {
        self.file().map(|p| format!("{p}: ")).unwrap_or_default()
    }

    /// The name archive locations use (`member NAME(...)`), as the CLI.
    pub fn display_name(&self) -> String {
        match self {
            Source::Path(p) if p == "-" => "<stdin>".into(),
            Source::Path(p) => {
                std::path::Path::new(p).file_name().map_or_else(|| p.clone(), |n| n.to_string_lossy().into_owned())
            }
            _ => "<bytes>".into(),
        }
    }

    /// Runs `f` on the contents (a path is memory-mapped for the call).
    pub fn with_bytes<T>(&self, f: impl FnOnce(&[u8]) -> Result<T, Failure>) -> Result<T, Failure> {
        match self {
            Source::Path(p) => {
                let input = Input::open(p).map_err(|e| Failure::File(format!("'{p}': {}", error_text(&e))))?;
                f(input.bytes())
            }
            Source::Bytes(b) => f(b),
            Source::Owned(v) => f(v),
        }
    }
}

pyo3::create_exception!(offload_binutils, Error, pyo3::exceptions::PyException, "Every offload_binutils error.");
pyo3::create_exception!(offload_binutils, FileError, Error, "A file could not be opened or read.");
pyo3::create_exception!(
    offload_binutils,
    FormatError,
    Error,
    "Damaged input: a code object that cannot be decompressed, an OffloadBinary that does not parse."
);
pyo3::create_exception!(
    offload_binutils,
    SelectError,
    Error,
    "Nothing loads on the GPU in some fat binary (the `candidates` attribute holds select's verdicts)."
);
pyo3::create_exception!(offload_binutils, BundlerError, Error, "clang-offload-bundler's errors, in its words.");
pyo3::create_exception!(offload_binutils, InvalidArgumentError, Error, "A bad GPU name, runtime or code object.");

/// A failure, made without the GIL and raised with it.
#[derive(Debug)]
pub enum Failure {
    File(String),
    Format(String),
    Bundler(String),
    Invalid(String),
}

impl Failure {
    pub fn into_py_err(self) -> PyErr {
        match self {
            Failure::File(m) => FileError::new_err(m),
            Failure::Format(m) => FormatError::new_err(m),
            Failure::Bundler(m) => BundlerError::new_err(m),
            Failure::Invalid(m) => InvalidArgumentError::new_err(m),
        }
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        f.into_py_err()
    }
}
