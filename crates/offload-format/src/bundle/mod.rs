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
#[doc(hidden)]
pub mod md5_pair;
pub mod object;
pub mod text;

/// A bundle that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    /// A header part does not fit in the input.
    #[error("malformed bundle: the {what} at offset {offset} runs past the end of the input ({len} bytes)")]
    Truncated {
        /// Which part (`entry table`, `entry ID`, ...).
        what: &'static str,
        /// Where it starts in the input.
        offset: u64,
        /// The input's length in bytes.
        len: u64,
    },
    /// An entry's payload lies (partly) outside the input.
    #[error(
        "malformed bundle: entry {index} ('{id}') claims {size} bytes at offset {offset}, outside the input ({len} bytes)"
    )]
    PayloadOutOfRange {
        /// The entry's position in the table, from 0.
        index: u64,
        /// The entry's ID (lossy UTF-8).
        id: String,
        /// The payload offset the entry claims.
        offset: u64,
        /// The payload size the entry claims, in bytes.
        size: u64,
        /// The input's length in bytes.
        len: u64,
    },
    /// A text bundle entry that is never closed.
    #[error("malformed text bundle: entry '{id}' starting at offset {offset} has no END marker")]
    MissingEndMarker {
        /// The entry's ID.
        id: String,
        /// Offset of its start marker.
        offset: u64,
    },
}

/// How a `-type` value is bundled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileType {
    /// Text with marker lines in the given comment syntax.
    Text {
        /// The line-comment token (`//`, `#`, `;`).
        comment: &'static str,
    },
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
