//! Recognising containers and code by their first bytes, so that a walk
//! reads only members that can matter and names never decide.

/// Bytes a member must show for [`detect`] and [`may_hold_code`] to judge it: the tar magic sits at
/// offset 257, everything else in the first 64 bytes.
pub const HEAD_LEN: usize = 512;

/// A container this module opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A zip archive (wheels, `.conda`, `.zip`, `.jar`); local header `PK\3\4`
    /// or the end record of an empty one.
    Zip,
    /// A POSIX/GNU tar archive (`ustar` at offset 257).
    Tar,
    /// A Debian package: an `ar` archive whose first member is
    /// `debian-binary`.
    Deb,
    /// A gzip stream (a `.tar.gz`, or one compressed file).
    Gzip,
    /// An xz stream.
    Xz,
    /// A zstd stream.
    Zstd,
    /// A bzip2 stream.
    Bzip2,
}

impl Kind {
    /// The name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Zip => "zip",
            Kind::Tar => "tar",
            Kind::Deb => "deb",
            Kind::Gzip => "gzip",
            Kind::Xz => "xz",
            Kind::Zstd => "zstd",
            Kind::Bzip2 => "bzip2",
        }
    }

    /// A single compressed stream (as opposed to an archive of members).
    pub fn is_stream(self) -> bool {
        matches!(self, Kind::Gzip | Kind::Xz | Kind::Zstd | Kind::Bzip2)
    }
}

/// The container `head` (the first bytes of a file or member) starts, if
/// any. Magic numbers: PKWARE APPNOTE 4.3.7 and 4.3.16, POSIX.1-1988 ustar,
/// Debian deb(5), RFC 1952 (gzip), the xz file format 1.0 §2.1.1.1,
/// RFC 8878 §3.1.1 (zstd), and bzip2's `BZh<level>` plus the block magic
/// (the digits of pi).
pub fn detect(head: &[u8]) -> Option<Kind> {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Some(Kind::Zip)
    } else if head.get(257..262) == Some(b"ustar") && !STRONG_CODE_MAGICS.iter().any(|m| head.starts_with(m)) {
        Some(Kind::Tar)
    } else if head.starts_with(b"!<arch>\ndebian-binary") {
        Some(Kind::Deb)
    } else if head.starts_with(&[0x1f, 0x8b, 0x08]) {
        Some(Kind::Gzip)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some(Kind::Xz)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Kind::Zstd)
    } else if head.len() >= 10
        && head.starts_with(b"BZh")
        && head.get(3).is_some_and(|d| (b'1'..=b'9').contains(d))
        && head.get(4..10) == Some(&[0x31, 0x41, 0x59, 0x26, 0x53, 0x59])
    {
        Some(Kind::Bzip2)
    } else {
        None
    }
}

/// Magic numbers that make a file code whatever lies at offset 257 (where
/// an ELF file or a bundle could hold `ustar` by chance).
const STRONG_CODE_MAGICS: &[&[u8]] =
    &[b"\x7fELF", b"__CLANG_OFFLOAD_BUNDLE__", b"CCOB", &[0x10, 0xff, 0x10, 0xad], b"BC\xc0\xde"];

/// Starts of files that can hold offload code objects: what the scanner
/// opens (objects, archives, bundles, compressed bundles, OffloadBinaries,
/// bitcode, CUDA fat binaries).
const CODE_MAGICS: &[&[u8]] = &[
    b"\x7fELF",
    b"!<arch>\n",
    b"!<thin>\n",
    b"__CLANG_OFFLOAD_BUNDLE__",
    b"CCOB",
    &[0x10, 0xff, 0x10, 0xad], // OffloadBinary
    b"BC\xc0\xde",             // LLVM bitcode
    &[0xde, 0xc0, 0x17, 0x0b], // bitcode wrapper
    &[0x50, 0xed, 0x55, 0xba], // CUDA fat binary
    &[0xfe, 0xed, 0xfa, 0xce], // Mach-O, both widths and byte orders
    &[0xfe, 0xed, 0xfa, 0xcf],
    &[0xce, 0xfa, 0xed, 0xfe],
    &[0xcf, 0xfa, 0xed, 0xfe],
    &[0xca, 0xfe, 0xba, 0xbe], // Mach-O universal
    b"MZ",                     // PE image
    b"KPAK",                   // ROCm kpack archive
    &[0x64, 0x86],             // COFF objects: x86-64, i386, arm64
    &[0x4c, 0x01],
    &[0x64, 0xaa],
    &[0x00, 0x00, 0xff, 0xff], // COFF big object / import object
];

/// Whether a file starting with `head` may hold code objects. A text
/// bundle starts with a comment line carrying the bundle marker.
pub fn may_hold_code(head: &[u8]) -> bool {
    if CODE_MAGICS.iter().any(|m| head.starts_with(m)) {
        return true;
    }
    let first_line = head.get(..head.len().min(128)).unwrap_or_default();
    memchr::memmem::find(first_line, b"__CLANG_OFFLOAD_BUNDLE____START__").is_some()
}

/// Whether `head` is worth reading on: a container to open or a file that
/// may hold code.
pub fn interesting(head: &[u8]) -> bool {
    detect(head).is_some() || may_hold_code(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_are_told_apart_by_content() {
        let mut tar = vec![0u8; 512];
        tar[257..263].copy_from_slice(b"ustar\0");
        assert_eq!(detect(&tar), Some(Kind::Tar));
        tar[..4].copy_from_slice(b"\x7fELF");
        assert_eq!(detect(&tar), None, "an ELF file with `ustar` at 257 is not a tarball");
        assert_eq!(detect(b"PK\x03\x04rest"), Some(Kind::Zip));
        assert_eq!(detect(b"!<arch>\ndebian-binary   "), Some(Kind::Deb));
        assert_eq!(detect(b"!<arch>\nfoo.o/          "), None, "a static library is the scanner's");
        assert_eq!(detect(&[0x1f, 0x8b, 8, 0]), Some(Kind::Gzip));
        assert_eq!(detect(b"BZh91AY&SY"), Some(Kind::Bzip2));
        assert_eq!(detect(b"BZh01AY&SY"), None);
        assert_eq!(detect(b"\x7fELF"), None);
        assert!(may_hold_code(b"\x7fELF\x02"));
        assert!(may_hold_code(b"; __CLANG_OFFLOAD_BUNDLE____START__ host-x86_64"));
        assert!(!may_hold_code(b"#!/bin/sh\necho"));
        assert!(!interesting(b"{\"name\": \"torch\"}"));
    }
}
