//! Checks of a parsed archive beyond what parsing needs
//! (`docs/formats/kpack.md`, "What this implementation checks"). Parsing
//! already guarantees that the blob and every code object lie inside the
//! file; [`verify`] adds the rules AMD's writer follows and its loader
//! relies on, and optionally decodes every code object.

use super::archive::{Archive, ArchiveError, Scheme};
use super::frame;
use std::fmt;

/// How thoroughly to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyOptions {
    /// Decode every referenced code object (checks the decoded size and the
    /// zstd content checksum when the frame has one).
    pub decompress: bool,
    /// The largest declared size decoded; a larger one is a problem.
    pub limit: u64,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions { decompress: true, limit: 4 << 30 }
    }
}

/// One thing wrong with an archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// `format_version` is present and not 1.
    FormatVersion(u64),
    /// `compression_scheme` names an unknown scheme (read as `none`, as the
    /// runtime does).
    UnknownScheme {
        /// The scheme the TOC names.
        scheme: String,
    },
    /// Bytes between the end of the TOC value and the end of the file.
    TrailingBytes(u64),
    /// The blob or a code object overlaps the 16-byte header.
    OverlapsHeader {
        /// The ordinal, or `None` for the `zstd-per-kernel` blob.
        ordinal: Option<u32>,
    },
    /// The blob or a code object reaches into the TOC.
    OverlapsToc {
        /// The ordinal, or `None` for the `zstd-per-kernel` blob.
        ordinal: Option<u32>,
    },
    /// Two code objects share bytes (`none` scheme).
    Overlap(u32, u32),
    /// The frames of a `zstd-per-kernel` blob end before the blob does.
    BlobSlack(u64),
    /// An entry's ordinal names no stored code object.
    Ordinal {
        /// The binary key.
        key: String,
        /// The target.
        target: String,
        /// The ordinal.
        ordinal: u32,
    },
    /// An entry of a type other than `hsaco`.
    Kind {
        /// The binary key.
        key: String,
        /// The target.
        target: String,
        /// The type written.
        kind: String,
    },
    /// An entry filed under a target that `gfx_arches` does not list: the
    /// loader never reaches it.
    TargetNotListed {
        /// The binary key.
        key: String,
        /// The target.
        target: String,
    },
    /// A stored code object no entry refers to.
    Unreferenced(u32),
    /// A frame that does not start with a valid zstd frame header.
    NotZstd {
        /// The ordinal.
        ordinal: u32,
        /// Why.
        reason: String,
    },
    /// A zstd frame whose length is not its length prefix (bytes after the
    /// frame, or a frame cut short).
    FrameLength {
        /// The ordinal.
        ordinal: u32,
        /// The length prefix.
        stored: u64,
        /// What zstd measures (`None`: it cannot tell).
        measured: Option<u64>,
    },
    /// A frame header's content size differs from the entry's
    /// `original_size`.
    ContentSize {
        /// The ordinal.
        ordinal: u32,
        /// The size in the frame header.
        frame: u64,
        /// `original_size`.
        toc: u64,
    },
    /// Decoding failed, or gave another size (the reader's error).
    Decode {
        /// The binary key.
        key: String,
        /// The target.
        target: String,
        /// The error.
        error: ArchiveError,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = |o: &Option<u32>| o.map_or_else(|| "the zstd blob".to_string(), |o| format!("code object {o}"));
        match self {
            Problem::FormatVersion(v) => write!(f, "format_version {v} (1 is the only one written)"),
            Problem::UnknownScheme { scheme } => {
                write!(f, "unknown compression_scheme {scheme:?} (the runtime reads it as none)")
            }
            Problem::TrailingBytes(n) => write!(f, "{n} bytes follow the table of contents"),
            Problem::OverlapsHeader { ordinal } => write!(f, "{} overlaps the 16-byte header", what(ordinal)),
            Problem::OverlapsToc { ordinal } => write!(f, "{} reaches into the table of contents", what(ordinal)),
            Problem::Overlap(a, b) => write!(f, "code objects {a} and {b} overlap"),
            Problem::BlobSlack(n) => write!(f, "{n} bytes of the zstd blob follow its last frame"),
            Problem::Ordinal { key, target, ordinal } => {
                write!(f, "{key} [{target}]: ordinal {ordinal} names no stored code object")
            }
            Problem::Kind { key, target, kind } => write!(f, "{key} [{target}]: type {kind:?}, not \"hsaco\""),
            Problem::TargetNotListed { key, target } => {
                write!(f, "{key} is filed under {target}, which gfx_arches does not list: the loader never reaches it")
            }
            Problem::Unreferenced(o) => write!(f, "code object {o} is referenced by no TOC entry"),
            Problem::NotZstd { ordinal, reason } => write!(f, "code object {ordinal}: {reason}"),
            Problem::FrameLength { ordinal, stored, measured: Some(m) } => {
                write!(f, "code object {ordinal}: the zstd frame is {m} bytes, its length prefix says {stored}")
            }
            Problem::FrameLength { ordinal, stored, measured: None } => {
                write!(f, "code object {ordinal}: the {stored} bytes are not one complete zstd frame")
            }
            Problem::ContentSize { ordinal, frame, toc } => {
                write!(f, "code object {ordinal}: the zstd frame declares {frame} bytes, the TOC's original_size {toc}")
            }
            Problem::Decode { key, target, error } => write!(f, "{key} [{target}]: {error}"),
        }
    }
}

/// Checks `archive`; an empty list means no problem was found.
pub fn verify(archive: &Archive<'_>, options: &VerifyOptions) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(v) = archive.format_version.filter(|&v| v != 1) {
        problems.push(Problem::FormatVersion(v));
    }
    if let Some(s) = archive.unknown_scheme {
        problems.push(Problem::UnknownScheme { scheme: s.to_string() });
    }
    let file_len = archive.data().len() as u64;
    let toc_end = archive.toc_offset + archive.toc_len;
    if toc_end < file_len {
        problems.push(Problem::TrailingBytes(file_len - toc_end));
    }
    let header = super::archive::HEADER_LEN;
    let mut place = |ordinal: Option<u32>, offset: u64, end: u64| {
        if offset < header && end > 0 {
            problems.push(Problem::OverlapsHeader { ordinal });
        }
        if end > archive.toc_offset && offset < file_len {
            problems.push(Problem::OverlapsToc { ordinal });
        }
    };
    match (archive.scheme, archive.blob) {
        (Scheme::ZstdPerKernel, Some(blob)) => {
            place(None, blob.offset, blob.end());
            let used = archive.spans.last().map_or(blob.offset + 4, |s| s.end());
            if used < blob.end() {
                problems.push(Problem::BlobSlack(blob.end() - used));
            }
        }
        _ => {
            for (ordinal, span) in archive.spans.iter().enumerate() {
                place(Some(ordinal as u32), span.offset, span.end());
            }
            // Sort by offset and compare neighbours; an empty span overlaps
            // nothing.
            let mut order: Vec<usize> = (0..archive.spans.len()).filter(|&i| archive.spans[i].size > 0).collect();
            order.sort_by_key(|&i| archive.spans[i].offset);
            let mut reach: Option<usize> = None;
            for &i in &order {
                if let Some(r) = reach {
                    if archive.spans[i].offset < archive.spans[r].end() {
                        problems.push(Problem::Overlap(r.min(i) as u32, r.max(i) as u32));
                    }
                    if archive.spans[i].end() > archive.spans[r].end() {
                        reach = Some(i);
                    }
                } else {
                    reach = Some(i);
                }
            }
        }
    }
    let mut referenced = vec![false; archive.spans.len()];
    for (key, entry) in archive.entries() {
        let (k, t) = (key.to_string(), entry.target.to_string());
        if entry.kind != "hsaco" {
            problems.push(Problem::Kind { key: k.clone(), target: t.clone(), kind: entry.kind.to_string() });
        }
        if !archive.gfx_arches.contains(&entry.target) {
            problems.push(Problem::TargetNotListed { key: k.clone(), target: t.clone() });
        }
        let Some(seen) = referenced.get_mut(entry.ordinal as usize) else {
            problems.push(Problem::Ordinal { key: k, target: t, ordinal: entry.ordinal });
            continue;
        };
        let first = !*seen;
        *seen = true;
        if first && archive.scheme == Scheme::ZstdPerKernel {
            check_frame(archive, entry.ordinal, entry.original_size, &mut problems);
        }
        if let Some(Err(error)) = options.decompress.then(|| archive.decompress(entry, options.limit)) {
            problems.push(Problem::Decode { key: k, target: t, error });
        }
    }
    for (ordinal, seen) in referenced.iter().enumerate() {
        if !seen {
            problems.push(Problem::Unreferenced(ordinal as u32));
        }
    }
    problems
}

fn check_frame(archive: &Archive<'_>, ordinal: u32, original_size: u64, problems: &mut Vec<Problem>) {
    let Ok(stored) = archive.stored(ordinal) else { return };
    match frame::read_header(stored) {
        Err(e) => problems.push(Problem::NotZstd { ordinal, reason: e.to_string() }),
        Ok(h) => {
            if let Some(frame) = h.content_size.filter(|&s| s != original_size) {
                problems.push(Problem::ContentSize { ordinal, frame, toc: original_size });
            }
            let measured = zstd::zstd_safe::find_frame_compressed_size(stored).ok().map(|n| n as u64);
            if measured != Some(stored.len() as u64) {
                problems.push(Problem::FrameLength { ordinal, stored: stored.len() as u64, measured });
            }
        }
    }
}
