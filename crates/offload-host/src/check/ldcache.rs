//! The dynamic loader's cache, `/etc/ld.so.cache`, as `ldconfig` writes it
//! (glibc's `glibc-ld.so.cache1.1` format; facts from glibc's
//! `sysdeps/generic/dl-cache.h` and `ldconfig -p`).
//!
//! Layout (native byte order; `ldconfig` writes the host's):
//!
//! * optionally the old format first: `ld.so-1.7.0`, then `nlibs` (u32 at
//!   offset 12) and `nlibs` 12-byte entries; the new header follows at the
//!   next multiple of 8. glibc 2.32 and later write the new format only.
//! * the header: `glibc-ld.so.cache` `1.1` (20 bytes), `nlibs` u32,
//!   `len_strings` u32, a flags byte (2 little endian, 3 big endian), 3
//!   padding bytes, `extension_offset` u32, 12 unused bytes: 48 bytes.
//! * `nlibs` 24-byte entries: `flags` i32, `key` u32, `value` u32,
//!   `osversion` u32, `hwcap` u64. `key` (the soname) and `value` (the
//!   path) are offsets of NUL-terminated strings, counted from the start of
//!   the new header.
//!
//! Reading is lenient and bounds-checked: an entry whose strings lie
//! outside the file is skipped, never trusted.

use offload_format::bytes::{u32_ne, u64_ne};
use std::collections::HashMap;

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
const NEW_HEADER: usize = 48;
const NEW_ENTRY: usize = 24;
const OLD_ENTRY: usize = 12;

/// `flags & FLAG_TYPE_MASK`: an ELF library for glibc.
pub const FLAG_ELF_LIBC6: u32 = 0x0003;
/// `flags & FLAG_REQUIRED_MASK`: an x86-64 64-bit library.
pub const FLAG_X8664_LIB64: u32 = 0x0300;

/// One library the cache knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheEntry {
    /// The soname (`libc.so.6`).
    pub name: String,
    /// Where it is (`/lib/x86_64-linux-gnu/libc.so.6`).
    pub path: String,
    /// The entry's flags: library type in the low byte, ABI in the next.
    pub flags: u32,
    /// Nonzero for libraries in a `glibc-hwcaps` subfolder.
    pub hwcap: u64,
}

/// Why a cache file cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LdCacheError {
    /// Neither the old nor the new magic.
    #[error("not an ld.so.cache file (no 'glibc-ld.so.cache1.1' magic)")]
    NoMagic,
    /// The header or entry table runs past the end.
    #[error("the cache claims {entries} entries at offset {at:#x}, past the end of the file ({len} bytes)")]
    Truncated {
        /// Entries claimed.
        entries: u64,
        /// Offset of the table.
        at: u64,
        /// File size.
        len: u64,
    },
    /// A byte-order flag other than this machine's.
    #[error("the cache is for the other byte order")]
    ByteOrder,
}

/// A parsed cache: every entry, and an index by soname.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LdCache {
    /// The entries in file order (the order `ldconfig -p` prints).
    pub entries: Vec<CacheEntry>,
    by_name: HashMap<String, Vec<usize>>,
}

/// The NUL-terminated string at `at` of `data`, if it lies there whole.
fn string_at(data: &[u8], at: usize) -> Option<String> {
    let rest = data.get(at..)?;
    let end = memchr::memchr(0, rest)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

impl LdCache {
    /// Parses a cache file's bytes.
    pub fn parse(data: &[u8]) -> Result<LdCache, LdCacheError> {
        let start = if data.starts_with(NEW_MAGIC) {
            0
        } else if data.starts_with(OLD_MAGIC) {
            let n = u32_ne(data, 12).ok_or(LdCacheError::NoMagic)?;
            let end = (n as usize).checked_mul(OLD_ENTRY).and_then(|t| t.checked_add(16));
            let start = end.and_then(|e| e.checked_next_multiple_of(8)).filter(|&s| s <= data.len());
            match start {
                Some(s) if data.get(s..).is_some_and(|r| r.starts_with(NEW_MAGIC)) => s,
                // An old-format-only cache (glibc before 2.6): nothing
                // this reader uses.
                _ => return Err(LdCacheError::NoMagic),
            }
        } else {
            return Err(LdCacheError::NoMagic);
        };
        let new = &data[start..];
        let nlibs = u32_ne(new, 20).unwrap_or(0);
        let order = new.get(28).copied().unwrap_or(0);
        let native = if cfg!(target_endian = "little") { 2 } else { 3 };
        if order != 0 && order != native {
            return Err(LdCacheError::ByteOrder);
        }
        let table_end = (nlibs as usize).checked_mul(NEW_ENTRY).and_then(|t| t.checked_add(NEW_HEADER));
        if table_end.is_none_or(|end| end > new.len()) {
            return Err(LdCacheError::Truncated {
                entries: u64::from(nlibs),
                at: (start + NEW_HEADER) as u64,
                len: data.len() as u64,
            });
        }
        let mut cache = LdCache::default();
        for i in 0..nlibs as usize {
            let at = NEW_HEADER + i * NEW_ENTRY;
            let entry = (|| {
                let flags = u32_ne(new, at)?;
                let name = string_at(new, u32_ne(new, at + 4)? as usize)?;
                let path = string_at(new, u32_ne(new, at + 8)? as usize)?;
                let hwcap = u64_ne(new, at + 16)?;
                Some(CacheEntry { name, path, flags, hwcap })
            })();
            if let Some(e) = entry {
                cache.by_name.entry(e.name.clone()).or_default().push(cache.entries.len());
                cache.entries.push(e);
            }
        }
        Ok(cache)
    }

    /// The entries for `soname`, in file order.
    pub fn lookup(&self, soname: &str) -> impl Iterator<Item = &CacheEntry> {
        self.by_name.get(soname).into_iter().flatten().filter_map(|&i| self.entries.get(i))
    }
}

/// Builds caches for the tests of this module and of the loader search.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A cache with the given (name, path, flags) entries, laid out as
    /// ldconfig lays it out (strings after the table).
    pub(crate) fn build(entries: &[(&str, &str, u32)], old_prefix: bool) -> Vec<u8> {
        let mut strings = Vec::new();
        let table = NEW_HEADER + entries.len() * NEW_ENTRY;
        let mut offsets = Vec::new();
        for (name, path, _) in entries {
            let k = table + strings.len();
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
            let v = table + strings.len();
            strings.extend_from_slice(path.as_bytes());
            strings.push(0);
            offsets.push((k as u32, v as u32));
        }
        let mut new = NEW_MAGIC.to_vec();
        new.extend_from_slice(&(entries.len() as u32).to_ne_bytes());
        new.extend_from_slice(&(strings.len() as u32).to_ne_bytes());
        new.extend_from_slice(&[if cfg!(target_endian = "little") { 2 } else { 3 }, 0, 0, 0]);
        new.extend_from_slice(&[0; 16]);
        for ((_, _, flags), (k, v)) in entries.iter().zip(offsets) {
            for w in [*flags, k, v, 0] {
                new.extend_from_slice(&w.to_ne_bytes());
            }
            new.extend_from_slice(&0u64.to_ne_bytes());
        }
        new.extend_from_slice(&strings);
        if !old_prefix {
            return new;
        }
        let mut old = OLD_MAGIC.to_vec();
        old.push(0);
        old.extend_from_slice(&1u32.to_ne_bytes());
        old.extend_from_slice(&[0; OLD_ENTRY]);
        old.resize(old.len().next_multiple_of(8), 0);
        old.extend_from_slice(&new);
        old
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::build as build_with;
    use super::*;

    fn build(entries: &[(&str, &str, u32)], old_prefix: bool) -> Vec<u8> {
        build_with(entries, old_prefix)
    }

    const X64: u32 = FLAG_ELF_LIBC6 | FLAG_X8664_LIB64;

    #[test]
    fn entries_are_found_by_soname_in_both_layouts() {
        let entries = [("libfoo.so.1", "/opt/a/libfoo.so.1", X64), ("libc.so.6", "/lib/libc.so.6", X64)];
        for old in [false, true] {
            let cache = LdCache::parse(&build(&entries, old)).unwrap();
            assert_eq!(cache.entries.len(), 2);
            let found: Vec<&str> = cache.lookup("libfoo.so.1").map(|e| e.path.as_str()).collect();
            assert_eq!(found, ["/opt/a/libfoo.so.1"]);
            assert_eq!(cache.lookup("libbar.so").count(), 0);
        }
    }

    /// The cache glibc 2.36's ldconfig wrote (tests/fixtures/check/make.sh):
    /// what `ldconfig -p -C` prints for it.
    #[test]
    fn reads_what_ldconfig_writes() {
        let data = include_bytes!("../../../offload-testkit/fixtures/check/ld.so.cache");
        let cache = LdCache::parse(data).unwrap();
        let all: Vec<(&str, &str, u32)> =
            cache.entries.iter().map(|e| (e.name.as_str(), e.path.as_str(), e.flags)).collect();
        assert_eq!(
            all,
            [("libsilver.so.3", "/opt/gold/libsilver.so.3", X64), ("libgold.so.1", "/opt/gold/libgold.so.1", X64)]
        );
        assert_eq!(cache.lookup("libgold.so.1").count(), 1);
    }

    #[test]
    fn hostile_caches_are_refused_or_skipped_without_panic() {
        assert_eq!(LdCache::parse(b""), Err(LdCacheError::NoMagic));
        assert_eq!(LdCache::parse(b"ld.so-1.7.0"), Err(LdCacheError::NoMagic));
        let good = build(&[("libfoo.so.1", "/x/libfoo.so.1", X64)], false);
        // Claims a billion entries.
        let mut lying = good.clone();
        lying[20..24].copy_from_slice(&1_000_000_000u32.to_ne_bytes());
        assert!(matches!(LdCache::parse(&lying), Err(LdCacheError::Truncated { entries: 1_000_000_000, .. })));
        // A string offset past the end: the entry is skipped.
        let mut bad = good.clone();
        bad[NEW_HEADER + 4..NEW_HEADER + 8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(LdCache::parse(&bad).unwrap().entries.is_empty());
        // Every truncation parses or fails cleanly.
        for n in 0..good.len() {
            let _ = LdCache::parse(&good[..n]);
        }
        let mut other = good;
        other[28] = if cfg!(target_endian = "little") { 3 } else { 2 };
        assert_eq!(LdCache::parse(&other), Err(LdCacheError::ByteOrder));
    }
}
