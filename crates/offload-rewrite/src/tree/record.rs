//! A wheel's `RECORD` (docs/guide/prune-trees.md, "Wheels"): one CSV line
//! per file, `path,sha256=<digest>,<size>`, the digest in URL-safe base64
//! without `=` padding (the binary distribution format, PEP 376/427).

use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// `sha256=<urlsafe base64, no padding>` of `data`.
pub(crate) fn hash(data: &[u8]) -> String {
    format!("sha256={}", base64_urlsafe(&Sha256::digest(data)))
}

fn base64_urlsafe(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// The first CSV field of `line` (the path) and the rest after its comma.
fn split_path(line: &str) -> Option<(String, &str)> {
    if let Some(quoted) = line.strip_prefix('"') {
        let mut path = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '"' {
                if chars.peek().map(|&(_, c)| c) == Some('"') {
                    chars.next();
                    path.push('"');
                    continue;
                }
                return Some((path, quoted.get(i + 1..)?.strip_prefix(',')?));
            }
            path.push(c);
        }
        return None;
    }
    let (path, rest) = line.split_once(',')?;
    Some((path.to_string(), rest))
}

/// The path of a RECORD line (unquoted), if the line has one.
pub(crate) fn path_of(line: &str) -> Option<String> {
    split_path(line.trim_end_matches(['\n', '\r'])).map(|(p, _)| p)
}

fn quote(path: &str) -> String {
    if path.contains([',', '"', '\n', '\r']) { format!("\"{}\"", path.replace('"', "\"\"")) } else { path.to_string() }
}

/// A new RECORD: the lines of `removed` paths go, rewritten paths get
/// their new `(hash, size)`, every path is renamed by `rename`; other
/// lines stay as they were, in their order, with the input's line ends.
pub(crate) fn rewrite(
    old: &str,
    new_hashes: &HashMap<String, (String, u64)>,
    removed: &std::collections::HashSet<String>,
    rename: &dyn Fn(&str) -> String,
) -> String {
    let mut out = String::with_capacity(old.len());
    for line in old.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let end = &line[body.len()..];
        let Some((path, rest)) = split_path(body) else {
            out.push_str(line);
            continue;
        };
        if removed.contains(&path) {
            continue;
        }
        let new_path = rename(&path);
        match new_hashes.get(&path) {
            Some((hash, size)) => out.push_str(&format!("{},{hash},{size}{end}", quote(&new_path))),
            None if new_path != path => out.push_str(&format!("{},{rest}{end}", quote(&new_path))),
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_urlsafe_base64_without_padding() {
        // sha256("") = e3b0c442...: the well-known value of an empty RECORD line.
        assert_eq!(hash(b""), "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
        assert_eq!(base64_urlsafe(b"\xfb\xff"), "-_8");
        assert_eq!(base64_urlsafe(b"abc"), "YWJj");
    }

    #[test]
    fn record_lines_are_rehashed_removed_and_renamed() {
        let old = "a/x.so,sha256=old,10\r\n\"a/with,comma.dat\",sha256=q,3\r\nd-1.dist-info/RECORD,,\r\n";
        let mut hashes = HashMap::new();
        hashes.insert("a/x.so".to_string(), ("sha256=new".to_string(), 4));
        let removed = ["a/with,comma.dat".to_string()].into_iter().collect();
        let out = rewrite(old, &hashes, &removed, &|p| p.replace("d-1.dist-info", "d-1+sm90.dist-info"));
        assert_eq!(out, "a/x.so,sha256=new,4\r\nd-1+sm90.dist-info/RECORD,,\r\n");
    }
}
