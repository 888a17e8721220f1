//! The URI round trip, shared by the fixture and real-corpus tests: every
//! `uri` that `offload extract --all --json` prints (the same key `list`
//! prints) extracts, through `offload extract URI`, to the bytes `extract`
//! wrote for that code object.
#![allow(dead_code)]

use crate::inspect_support::{json, offload, s};
use std::collections::HashMap;
use std::path::Path;

/// What [`round_trip`] compared.
#[derive(Debug, Default)]
pub struct Trip {
    /// Code objects whose URI gave the same bytes.
    pub same: usize,
    /// Of those, code objects inside a compressed bundle (their URI names
    /// the bundle, which gives all its code objects).
    pub compressed: usize,
    /// Code objects with no URI (`uri` null).
    pub without: usize,
}

/// Extracts every code object of `file` twice, by `extract --all` and by
/// `extract URI...`, under `work`, and compares.
pub fn round_trip(file: &Path, work: &Path) -> Trip {
    let all_dir = work.join("all");
    let uri_dir = work.join("uri");
    std::fs::create_dir_all(&all_dir).unwrap();
    std::fs::create_dir_all(&uri_dir).unwrap();
    let out =
        offload(&["extract", "--all", "--json", "--output-dir", all_dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let written = json(&out);
    let mut uris: Vec<&str> = written.iter().filter_map(|r| r["uri"].as_str()).collect();
    uris.dedup();
    let mut by_uri: HashMap<(String, Option<String>), String> = HashMap::new();
    for batch in uris.chunks(100) {
        let mut args = vec!["extract", "--json", "--output-dir", uri_dir.to_str().unwrap()];
        args.extend(batch);
        let out = offload(&args);
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        for r in json(&out) {
            let key = (s(&r, "uri").to_string(), r["id"].as_str().map(str::to_string));
            by_uri.insert(key, s(&r, "path").to_string());
        }
    }
    let mut trip = Trip::default();
    for r in &written {
        let Some(uri) = r["uri"].as_str() else {
            trip.without += 1;
            continue;
        };
        let inside = s(r, "format") == "compressed-bundle";
        let key = (uri.to_string(), inside.then(|| s(r, "id").to_string()));
        let path = by_uri.get(&key).unwrap_or_else(|| panic!("{}: {uri} gave nothing for {r}", file.display()));
        let want = std::fs::read(s(r, "path")).unwrap();
        assert!(std::fs::read(path).unwrap() == want, "{}: {uri} gave other bytes than {r}", file.display());
        trip.same += 1;
        trip.compressed += usize::from(inside);
    }
    trip
}

/// The keys of each object `offload` printed, in the order printed
/// (serde_json's own map sorts them).
pub fn printed_keys(stdout: &[u8]) -> Vec<Vec<String>> {
    let text = String::from_utf8_lossy(stdout);
    text.lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|line| {
            // Keys are the strings followed by `": `; no value holds `": `
            // in these records (URIs are percent-encoded).
            line.match_indices("\": ")
                .map(|(at, _)| {
                    let start = line[..at].rfind('"').unwrap() + 1;
                    line[start..at].to_string()
                })
                .collect()
        })
        .collect()
}
