//! ROCm code-object URIs: `file://PATH#offset=N&size=M`, the name that
//! the ROCm loader, debugger (rocgdb) and profilers give a code object, and
//! that `llvm-objcopy --dump-offload-bundle` (LLVM 20 and later) reads.
//!
//! The grammar is LLVM's AMDGPUUsage "Loaded Code Object Path Uniform
//! Resource Identifier (URI)":
//!
//! ```text
//! code_object_uri ::= file_uri | memory_uri
//! file_uri        ::= "file://" file_path [ range_specifier ]
//! memory_uri      ::= "memory://" process_id range_specifier
//! range_specifier ::= ( "#" | "?" ) "offset=" number "&" "size=" number
//! ```
//!
//! `file_path` is percent-encoded: every byte outside `[A-Za-z0-9/_.~-]`
//! becomes `%XX` (upper-case hex). `number` is a C integer literal:
//! decimal, `0x` hexadecimal or `0` octal. An omitted offset is 0 and an
//! omitted size runs to the end of the file. A `memory://` URI names bytes
//! in a running process and cannot be read from a file.
//!
//! What the range of a listed code object is ([`range`]): the code object
//! itself where it is stored as is; for a code object inside a compressed
//! bundle, which has no range of its own in the file, the whole compressed
//! bundle (what the HIP runtime reads to get at it).

use super::{Bytes, CodeObject, Payload};

/// Bytes kept as they are in a URI path; every other byte is `%XX`.
fn kept(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/_.~-".contains(&b)
}

/// `path` percent-encoded as AMDGPUUsage asks.
pub fn encode_path(path: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(path.len());
    for &b in path {
        if kept(b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

/// The URI of the `size` bytes at `offset` of the file at `path` (the
/// path's bytes, encoded here), numbers in decimal.
pub fn file_uri(path: &[u8], offset: u64, size: u64) -> String {
    with_range(&format!("file://{}", encode_path(path)), offset, size)
}

/// The URI of the `size` bytes at `offset` of the file at `path`, which
/// is named by its absolute path (made absolute against the current
/// folder, symbolic links kept), as ROCm's loader names the files it
/// opened; `None` when the current folder cannot be read.
pub fn for_path(path: &std::path::Path, offset: u64, size: u64) -> Option<String> {
    Some(with_range(&file_prefix(path)?, offset, size))
}

/// `file://` and the encoded absolute path of `path`, the part of
/// [`for_path`]'s URI that all code objects of one file share.
pub fn file_prefix(path: &std::path::Path) -> Option<String> {
    let absolute = std::path::absolute(path).ok()?;
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        absolute.as_os_str().as_bytes().to_vec()
    };
    #[cfg(not(unix))]
    let bytes = absolute.to_string_lossy().replace('\\', "/").into_bytes();
    Some(format!("file://{}", encode_path(&bytes)))
}

/// A URI made of a [`file_prefix`] and a range.
pub fn with_range(prefix: &str, offset: u64, size: u64) -> String {
    format!("{prefix}#offset={offset}&size={size}")
}

/// The byte range a code object's URI names, as (offset, size) in
/// `scanned`, the bytes the inventory was scanned from; `None` where the
/// bytes lie in no range of `scanned` (decoded from bitcode, inside a
/// compressed CUDA entry, or unplaced).
pub fn range(object: &CodeObject, scanned: &[u8]) -> Option<(u64, u64)> {
    let bytes = match object.payload {
        Payload::Plain(Bytes::Borrowed(b)) => b,
        Payload::Compressed { blob: Bytes::Borrowed(b), .. } => b,
        Payload::Kpack { stored: Bytes::Borrowed(b), .. } => b,
        _ => return None,
    };
    let start = (bytes.as_ptr() as usize).checked_sub(scanned.as_ptr() as usize)?;
    (start.checked_add(bytes.len())? <= scanned.len()).then_some((start as u64, bytes.len() as u64))
}

/// Where scanned bytes lie in a file, for their code objects' URIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The file's [`file_prefix`].
    pub prefix: &'a str,
    /// Offset in the file of the scanned bytes' first byte (a package
    /// member's offset; 0 for the file itself).
    pub offset: u64,
}

/// The URI of code object `o`, found in `scanned`, which lie at `origin`:
/// [`range`] moved to the file; `None` where the object has no range.
pub fn in_file(o: &CodeObject, scanned: &[u8], origin: &Origin) -> Option<String> {
    let (start, size) = range(o, scanned)?;
    Some(with_range(origin.prefix, origin.offset.checked_add(start)?, size))
}

/// A parsed `file://` URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileUri {
    /// The file's path, percent-decoded (bytes: a path need not be UTF-8).
    pub path: Vec<u8>,
    /// Byte offset of the range in the file (0 when omitted).
    pub offset: u64,
    /// Size of the range in bytes; `None` when omitted: to the end of the
    /// file.
    pub size: Option<u64>,
}

/// Why a text is not a usable code-object URI.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// A `memory://` URI: bytes of a running process, not of a file.
    #[error("'{uri}' names memory of a running process, not a file: only file:// URIs can be read")]
    Memory {
        /// The URI given.
        uri: String,
    },
    /// Not a `file://` URI at all.
    #[error("'{uri}' is not a file:// URI")]
    Scheme {
        /// The URI given.
        uri: String,
    },
    /// `file://` with nothing after it.
    #[error("'{uri}' names no file")]
    NoPath {
        /// The URI given.
        uri: String,
    },
    /// A `%` not followed by two hexadecimal digits (at this byte of the
    /// path).
    #[error("'{uri}': bad percent escape at byte {at} of the path")]
    Escape {
        /// The URI.
        uri: String,
        /// Offset of the `%` in the encoded path.
        at: usize,
    },
    /// A range parameter other than `offset` and `size`, or one given twice.
    #[error("'{uri}': unexpected '{part}' in the range (expected offset=N&size=M)")]
    Parameter {
        /// The URI.
        uri: String,
        /// The parameter as written.
        part: String,
    },
    /// A number that is not a C integer literal within 64 bits.
    #[error("'{uri}': {name} '{text}' is not a decimal, 0x hexadecimal or 0 octal number below 2^64")]
    Number {
        /// The URI.
        uri: String,
        /// `offset` or `size`.
        name: &'static str,
        /// The number as written.
        text: String,
    },
}

/// Parses a C integer literal: `0x`/`0X` hexadecimal, a leading `0` octal,
/// else decimal.
fn number(text: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        (hex, 16)
    } else if text.len() > 1 && text.starts_with('0') {
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    // from_str_radix takes a sign; a URI number has none.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn decode(uri: &str, encoded: &str) -> Result<Vec<u8>, UriError> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match hex.filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit())).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(v) => out.push(v),
            None => return Err(UriError::Escape { uri: uri.to_string(), at: i }),
        }
        i += 3;
    }
    Ok(out)
}

/// Parses a code-object URI. The scheme is matched without regard to case;
/// the range parameters may come in either order, each at most once.
pub fn parse(uri: &str) -> Result<FileUri, UriError> {
    let scheme_end = uri.find("://").ok_or_else(|| UriError::Scheme { uri: uri.to_string() })?;
    let scheme = &uri[..scheme_end];
    if scheme.eq_ignore_ascii_case("memory") {
        return Err(UriError::Memory { uri: uri.to_string() });
    }
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(UriError::Scheme { uri: uri.to_string() });
    }
    let rest = &uri[scheme_end + 3..];
    let (encoded, query) = match rest.find(['#', '?']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    if encoded.is_empty() {
        return Err(UriError::NoPath { uri: uri.to_string() });
    }
    let path = decode(uri, encoded)?;
    let (mut offset, mut size) = (None, None);
    for part in query.into_iter().flat_map(|q| q.split('&')) {
        let bad = || UriError::Parameter { uri: uri.to_string(), part: part.to_string() };
        let (key, value) = part.split_once('=').ok_or_else(bad)?;
        let (slot, name) = match key {
            "offset" => (&mut offset, "offset"),
            "size" => (&mut size, "size"),
            _ => return Err(bad()),
        };
        if slot.is_some() {
            return Err(bad());
        }
        let n =
            number(value).ok_or_else(|| UriError::Number { uri: uri.to_string(), name, text: value.to_string() })?;
        *slot = Some(n);
    }
    Ok(FileUri { path, offset: offset.unwrap_or(0), size })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_encoded_as_amdgpuusage_says() {
        assert_eq!(encode_path(b"/opt/rocm-6.2/lib/libx_y.so.6~"), "/opt/rocm-6.2/lib/libx_y.so.6~");
        assert_eq!(encode_path("/a b/%#?&é".as_bytes()), "/a%20b/%25%23%3F%26%C3%A9");
        assert_eq!(file_uri(b"/t/lib.so", 8192, 3000), "file:///t/lib.so#offset=8192&size=3000");
        let here = std::env::current_dir().unwrap();
        let want = format!("file://{}/a%20b.so#offset=1&size=2", encode_path(here.to_str().unwrap().as_bytes()));
        assert_eq!(for_path(std::path::Path::new("a b.so"), 1, 2).unwrap(), want);
    }

    #[test]
    fn parse_reads_what_encode_writes() {
        for path in [&b"/t/lib.so"[..], b"/a b/%#?&\xff.so", b"rel/x"] {
            let uri = file_uri(path, 0x1234, 77);
            assert_eq!(parse(&uri).unwrap(), FileUri { path: path.to_vec(), offset: 0x1234, size: Some(77) });
        }
    }

    #[test]
    fn numbers_follow_c_literals_and_defaults_apply() {
        let p = parse("FILE:///x?size=0X10&offset=010").unwrap();
        assert_eq!((p.offset, p.size), (8, Some(16)));
        let p = parse("file:///x#offset=0").unwrap();
        assert_eq!((p.offset, p.size), (0, None));
        let p = parse("file:///dir3/dir4/file2").unwrap();
        assert_eq!((p.path.as_slice(), p.offset, p.size), (&b"/dir3/dir4/file2"[..], 0, None));
    }

    #[test]
    fn bad_uris_say_what_is_wrong() {
        let cases = [
            ("memory://1234#offset=0x20000&size=3000", "running process"),
            ("http://x/y", "not a file:// URI"),
            ("/plain/path", "not a file:// URI"),
            ("file://#offset=1&size=2", "names no file"),
            ("file:///a%2", "percent escape at byte 2"),
            ("file:///a%zz", "percent escape"),
            ("file:///a#offset=1&offset=2", "'offset=2'"),
            ("file:///a#length=1", "'length=1'"),
            ("file:///a#offset", "'offset'"),
            ("file:///a#offset=-1", "offset '-1'"),
            ("file:///a#offset=+1", "offset '+1'"),
            ("file:///a#size=0x", "size '0x'"),
            ("file:///a#size=09", "size '09'"),
            ("file:///a#size=18446744073709551616", "below 2^64"),
        ];
        for (uri, want) in cases {
            let e = parse(uri).unwrap_err().to_string();
            assert!(e.contains(want), "{uri}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_path_and_range_round_trip(path in proptest::collection::vec(1u8.., 1..40), offset: u64, size: u64) {
            let uri = file_uri(&path, offset, size);
            proptest::prop_assert!(uri.is_ascii());
            proptest::prop_assert_eq!(parse(&uri).unwrap(), FileUri { path, offset, size: Some(size) });
        }

        #[test]
        fn any_text_parses_or_fails_cleanly(text in "(file|FILE|memory)?(://)?[%#?&=0-9a-fxX/ .é-]{0,40}") {
            let _ = parse(&text);
        }
    }

    #[test]
    fn hostile_text_never_panics() {
        for uri in ["file://%", "file://%%", "file://é%é", "file://x#&&&", "file://x#=", "file://x?offset=0x%"] {
            let _ = parse(uri);
        }
    }
}
