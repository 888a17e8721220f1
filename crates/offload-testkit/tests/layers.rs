//! The layering ARCHITECTURE.md draws is the layering the manifests
//! declare: for every crate of its table, the offload crates in the
//! "may use" column are exactly the ones its `[dependencies]` name, and no
//! crate depends on one above it.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The offload crates a manifest's `[dependencies]` section names.
fn manifest_deps(krate: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml")).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some(name) = line.split(['.', ' ', '=']).next().filter(|n| n.starts_with("offload-")) {
            deps.insert(name.to_string());
        }
    }
    deps
}

/// The table rows of ARCHITECTURE.md: crate names and their "may use"
/// column, short names (`format`) made full (`offload-format`).
fn documented() -> Vec<(Vec<String>, BTreeSet<String>)> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `offload-")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let crates = cells[1].split(',').map(|c| c.trim().trim_matches('`').to_string()).collect();
        let uses = match cells[3] {
            "—" | "" => BTreeSet::new(),
            "everything above" => {
                ["format", "inspect", "rewrite", "host", "io"].iter().map(|s| format!("offload-{s}")).collect()
            }
            list => list.split(',').map(|s| format!("offload-{}", s.split_whitespace().next().unwrap())).collect(),
        };
        rows.push((crates, uses));
    }
    rows
}

#[test]
fn architecture_md_matches_the_manifests() {
    let rows = documented();
    assert!(rows.len() >= 6, "ARCHITECTURE.md's crate table was not found");
    for (crates, uses) in rows {
        for krate in crates {
            assert_eq!(manifest_deps(&krate), uses, "{krate}: its Cargo.toml and ARCHITECTURE.md disagree");
        }
    }
}

#[test]
fn no_crate_depends_on_a_layer_above_it() {
    // Lower index = lower layer; io sits beside inspect.
    let layer = |c: &str| match c {
        "offload-format" => 0,
        "offload-inspect" | "offload-io" => 1,
        "offload-rewrite" | "offload-host" => 2,
        "offload-cli" | "offload-capi" | "offload-py" => 3,
        other => panic!("{other}: a crate this test does not place in a layer"),
    };
    for krate in [
        "offload-format",
        "offload-inspect",
        "offload-io",
        "offload-rewrite",
        "offload-host",
        "offload-cli",
        "offload-capi",
        "offload-py",
    ] {
        for dep in manifest_deps(krate) {
            assert!(layer(&dep) < layer(krate), "{krate} depends on {dep}, which is not below it");
        }
    }
}
