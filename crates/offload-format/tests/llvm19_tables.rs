//! Checks the triple, AMDGPU-processor and offload-arch tables against test
//! vectors recorded from LLVM 19.1.7 (`tests/fixtures/llvm19/`, regenerated
//! by `scripts/gen-llvm19-fixtures.sh`; see the `COMMANDS.md` there).
//!
//! `bundler_*.tsv` hold what the clang-offload-bundler 19.1.7 binary did;
//! `lib_*.*` hold what the LLVM 19.1.7 libraries it loads computed. No LLVM
//! is needed to run these tests.

use offload_format::amdgpu::{amdgcn_processor, amdgcn_processors, r600_canonical, r600_processor_names};
use offload_format::offload_arch::{LLVM19_OFFLOAD_ARCH_NAMES, is_llvm19_offload_arch};
use offload_format::triple::Triple;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llvm19").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Data rows of a fixture: lines not starting with `#`, split at tabs.
/// Empty fields are kept (the empty name is a real test case).
fn rows(text: &str, columns: usize) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let row: Vec<&str> = l.split('\t').collect();
            assert_eq!(row.len(), columns, "bad fixture row {l:?}");
            row
        })
        .collect()
}

fn flag(s: &str) -> bool {
    match s {
        "1" => true,
        "0" => false,
        _ => panic!("bad flag {s:?}"),
    }
}

/// The triple as LLVM 19's bundler holds it: parsed from text, then
/// rebuilt from its four component names.
fn bundler_triple(text: &str) -> Triple {
    let t = Triple::parse(text);
    Triple::from_parts(t.arch_name(), t.vendor_name(), t.os_name(), t.environment_name())
}

/// Reports mismatches (all of them, so a failure is easy to diagnose) and
/// the number of cases compared.
fn check(what: &str, compared: usize, mismatches: Vec<String>, at_least: usize) {
    println!("{what}: {compared} cases compared, {} mismatched", mismatches.len());
    assert!(compared >= at_least, "{what}: only {compared} cases in the fixture");
    assert!(mismatches.is_empty(), "{what}: mismatches:\n{}", mismatches.join("\n"));
}

// ---------------------------------------------------------------------------
// Observed with the clang-offload-bundler 19.1.7 binary
// ---------------------------------------------------------------------------

#[test]
fn bundler_accepts_exactly_the_known_arches() {
    let text = fixture("bundler_arch_validity.tsv");
    let rows = rows(&text, 2);
    let mut bad = Vec::new();
    let (mut known, mut unknown) = (0, 0);
    for r in &rows {
        let accepted = flag(r[1]);
        if accepted {
            known += 1;
        } else {
            unknown += 1;
        }
        let ours = bundler_triple(&format!("{}-unknown-linux-gnu", r[0])).is_known_arch();
        if ours != accepted {
            bad.push(format!("arch {:?}: bundler {accepted}, ours {ours}", r[0]));
        }
    }
    assert!(known > 100 && unknown > 100, "{known} known, {unknown} unknown");
    check("arch validity", rows.len(), bad, 800);
}

/// What 19 lists for `hip-amdgcn-amd-amdhsa--<name>`: the text before the
/// first `:` is split at its last `-`; if that last piece is in the
/// offload-arch table, the target ID starts at its first occurrence in the
/// ID and the ID is kept; otherwise the features are dropped and a `-`
/// (the empty target ID) is appended. (The triple part of these IDs is
/// already in 19's four-field form, so it does not change.)
fn expected_listing(id: &str) -> String {
    let pre = id.split(':').next().unwrap_or(id);
    let (prefix, last) = pre.rsplit_once('-').unwrap_or((pre, ""));
    if is_llvm19_offload_arch(last) {
        let start = id.find(last).unwrap_or(0);
        format!("{prefix}-{}", &id[start..])
    } else {
        format!("{pre}-")
    }
}

#[test]
fn bundler_offload_arch_names() {
    let text = fixture("bundler_offload_arch_listing.tsv");
    let rows = rows(&text, 2);
    let mut bad = Vec::new();
    for r in &rows {
        let id = format!("hip-amdgcn-amd-amdhsa--{}", r[0]);
        let expected = expected_listing(&id);
        if expected != r[1] {
            bad.push(format!("name {:?}: bundler listed {:?}, expected {expected:?}", r[0], r[1]));
        }
    }
    // The quirks the table must reproduce.
    let listed = |name: &str| rows.iter().find(|r| r[0] == name).map(|r| r[1]);
    assert_eq!(listed(""), Some("hip-amdgcn-amd-amdhsa--hip-amdgcn-amd-amdhsa--"));
    assert_eq!(listed("fiji"), Some("hip-amdgcn-amd-amdhsa--fiji-"));
    assert_eq!(listed("gfx950"), Some("hip-amdgcn-amd-amdhsa--gfx950-"));
    assert_eq!(listed("sm_100"), Some("hip-amdgcn-amd-amdhsa--sm_100-"));
    assert_eq!(listed("sm_90a"), Some("hip-amdgcn-amd-amdhsa--sm_90a"));
    check("offload-arch names", rows.len(), bad, 150);
}

#[test]
fn bundler_triple_compatibility() {
    let text = fixture("bundler_triple_compat.tsv");
    let rows = rows(&text, 3);
    let mut bad = Vec::new();
    let mut found = 0;
    for r in &rows {
        let observed = flag(r[2]);
        found += usize::from(observed);
        let ours = bundler_triple(r[0]).is_compatible_with(&bundler_triple(r[1]));
        if ours != observed {
            bad.push(format!("stored {} / requested {}: bundler {observed}, ours {ours}", r[0], r[1]));
        }
    }
    // Non-trivial: compatible pairs well beyond the identical ones.
    let identical = rows.iter().filter(|r| r[0] == r[1]).count();
    assert!(found > identical + 100, "{found} found, {identical} identical");
    check("triple compatibility", rows.len(), bad, 1000);
}

/// Requesting `<name>:<feature>+` finds a bundle of `<name>` when the last
/// `-` piece of the name is an offload-arch name that is an AMDGCN processor
/// supporting the feature. When that piece is not an offload-arch name, 19
/// keeps no target ID for either side and drops the features, so the
/// request always finds the bundle.
fn expected_features(name: &str) -> (bool, bool) {
    let last = name.rsplit('-').next().unwrap_or(name);
    if !is_llvm19_offload_arch(last) {
        return (true, true);
    }
    amdgcn_processor(last).map_or((false, false), |p| (p.xnack, p.sramecc))
}

#[test]
fn bundler_processor_features() {
    let text = fixture("bundler_processor_features.tsv");
    let rows = rows(&text, 3);
    let mut bad = Vec::new();
    let mut processors = 0;
    for r in &rows {
        let observed = (flag(r[1]), flag(r[2]));
        let expected = expected_features(r[0]);
        if observed != expected {
            bad.push(format!("{:?}: bundler (xnack, sramecc) = {observed:?}, expected {expected:?}", r[0]));
        }
        processors += usize::from(amdgcn_processors().iter().any(|p| p.name == r[0]));
    }
    // Every canonical processor name was tried.
    assert_eq!(processors, amdgcn_processors().len());
    check("processor features", rows.len(), bad, 140);
}

/// Alternative names (`fiji`) are not offload-arch names in 19, so they are
/// never target IDs: a request naming one matches only a bundle whose ID
/// has the same text before any `:`, and never one naming the canonical
/// processor (or the reverse). Canonical names match as target IDs.
fn expected_alias_request(stored: &str, requested: &str) -> bool {
    let stored_pre = stored.split(':').next().unwrap_or(stored);
    let mut requested_parts = requested.split(':');
    let requested_pre = requested_parts.next().unwrap_or(requested);
    let stored_last = stored_pre.rsplit('-').next().unwrap_or("");
    let requested_last = requested_pre.rsplit('-').next().unwrap_or("");
    match (is_llvm19_offload_arch(stored_last), is_llvm19_offload_arch(requested_last)) {
        (false, false) => stored_pre == requested_pre,
        (true, true) => {
            let Some(proc) = amdgcn_processor(requested_last) else {
                return false;
            };
            stored_last == requested_last
                && requested_parts.all(|f| {
                    let name = f.trim_end_matches(['+', '-']);
                    (name == "xnack" && proc.xnack) || (name == "sramecc" && proc.sramecc)
                })
        }
        _ => false,
    }
}

#[test]
fn bundler_alternative_processor_names() {
    let text = fixture("bundler_alias_requests.tsv");
    let rows = rows(&text, 3);
    let mut bad = Vec::new();
    for r in &rows {
        let observed = flag(r[2]);
        let expected = expected_alias_request(r[0], r[1]);
        if observed != expected {
            bad.push(format!("stored {} / requested {}: bundler {observed}, expected {expected}", r[0], r[1]));
        }
    }
    check("alternative-name requests", rows.len(), bad, 15);
}

// ---------------------------------------------------------------------------
// Computed by the LLVM 19.1.7 libraries (scripts/llvm19-oracle/oracle.cpp)
// ---------------------------------------------------------------------------

#[test]
fn library_triple_parsing() {
    let text = fixture("lib_triple_parse.tsv");
    let rows = rows(&text, 7);
    let mut bad = Vec::new();
    for r in &rows {
        let t = Triple::parse(r[0]);
        let ours = [
            t.arch().name(),
            t.sub_arch().name(),
            t.vendor().name(),
            t.os().name(),
            t.environment().name(),
            t.object_format().name(),
        ];
        if ours[..] != r[1..] {
            bad.push(format!("{:?}: llvm {:?}, ours {ours:?}", r[0], &r[1..]));
        }
        if t.as_str() != r[0] {
            bad.push(format!("{:?}: text not kept", r[0]));
        }
    }
    check("triple parsing", rows.len(), bad, 1300);
}

#[test]
fn library_four_part_constructor() {
    let text = fixture("lib_triple_from_parts.tsv");
    let rows = rows(&text, 11);
    let mut bad = Vec::new();
    for r in &rows {
        let t = Triple::from_parts(r[0], r[1], r[2], r[3]);
        let ours = [
            t.as_str(),
            t.arch().name(),
            t.sub_arch().name(),
            t.vendor().name(),
            t.os().name(),
            t.environment().name(),
            t.object_format().name(),
        ];
        if ours[..] != r[4..] {
            bad.push(format!("{:?}: llvm {:?}, ours {ours:?}", &r[..4], &r[4..]));
        }
    }
    check("four-part constructor", rows.len(), bad, 20);
}

#[test]
fn library_amdgpu_processors() {
    let text = fixture("lib_amdgpu.tsv");
    let rows = rows(&text, 5);
    let mut bad = Vec::new();
    for r in &rows {
        let ours_gcn = amdgcn_processor(r[0]);
        let ours = (
            ours_gcn.map_or("", |p| p.name),
            ours_gcn.is_some_and(|p| p.xnack),
            ours_gcn.is_some_and(|p| p.sramecc),
            r600_canonical(r[0]).unwrap_or(""),
        );
        let llvm = (r[1], flag(r[2]), flag(r[3]), r[4]);
        if ours != llvm {
            bad.push(format!("{:?}: llvm {llvm:?}, ours {ours:?}", r[0]));
        }
    }
    check("AMDGPU processor names", rows.len(), bad, 150);
}

#[test]
fn library_processor_lists_are_complete() {
    let gcn = fixture("lib_amdgcn_list.txt");
    let llvm: Vec<&str> = gcn.lines().filter(|l| !l.starts_with('#')).collect();
    let ours: Vec<&str> =
        amdgcn_processors().iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied())).collect();
    assert_eq!(ours, llvm, "AMDGCN names (LLVM order)");

    let r600 = fixture("lib_r600_list.txt");
    let mut llvm: Vec<&str> = r600.lines().filter(|l| !l.starts_with('#')).collect();
    let mut ours: Vec<&str> = r600_processor_names().collect();
    llvm.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, llvm, "R600 names");
    println!("processor lists: {} AMDGCN and {} R600 names compared", gcn.lines().count() - 1, llvm.len());
}

#[test]
fn library_offload_arch_table_is_complete() {
    let text = fixture("lib_offload_arch_list.txt");
    let llvm: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(LLVM19_OFFLOAD_ARCH_NAMES, &llvm[..]);
    println!("offload-arch table: {} names compared", llvm.len());
}
