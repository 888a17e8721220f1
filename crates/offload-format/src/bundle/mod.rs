//! Clang offload bundles: the formats that hold one code object per target.
//!
//! * [`binary`]: the `__CLANG_OFFLOAD_BUNDLE__` header format;
//! * [`text`]: entries between comment marker lines;
//! * [`compressed`]: either of them compressed behind a `CCOB` header;
//! * [`object`]: sections of an object file;
//! * [`archive`]: archives of bundles, split per target.

pub mod archive;
pub mod binary;
pub mod compressed;
pub mod object;
pub mod text;

/// A bundle that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("malformed bundle: the {what} at offset {offset} runs past the end of the input ({len} bytes)")]
    Truncated { what: &'static str, offset: u64, len: u64 },
    #[error(
        "malformed bundle: entry {index} ('{id}') claims {size} bytes at offset {offset}, outside the input ({len} bytes)"
    )]
    PayloadOutOfRange { index: u64, id: String, offset: u64, size: u64, len: u64 },
    #[error("malformed text bundle: entry '{id}' starting at offset {offset} has no END marker")]
    MissingEndMarker { id: String, offset: u64 },
}

/// How a `-type` value is bundled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    /// Text with marker lines in the given comment syntax.
    Text { comment: &'static str },
    /// The binary header format.
    Binary,
    /// Object files: bundles are sections; non-objects fall back to binary.
    Object,
    /// Archives of bundled objects (unbundling only).
    Archive,
}

impl FileType {
    /// The `-type` values LLVM 19 accepts.
    pub fn parse(name: &str) -> Option<FileType> {
        Some(match name {
            "i" | "ii" | "cui" | "hipi" => FileType::Text { comment: "//" },
            "d" | "s" => FileType::Text { comment: "#" },
            "ll" => FileType::Text { comment: ";" },
            "bc" | "gch" | "ast" => FileType::Binary,
            "o" => FileType::Object,
            "a" => FileType::Archive,
            _ => return None,
        })
    }
}
