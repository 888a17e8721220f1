//! `offload diff` and `offload size` on two real versions of one package:
//! JAX's ROCm 6.2 plugin (jax-rocm60-plugin 0.5.0) against its ROCm 7.2
//! successor (jax-rocm7-plugin 0.10.2), the two `_prng.so`/`_solver.so`
//! pairs that `scripts/fetch-real-corpus.sh` fetches into
//! `rocm6-jax-plugin/` and `rocm7-jax-plugin/`. The expected changes are
//! worked out from `offload list --json` (itself checked against LLVM 19
//! and ROCm's decompressor by `real_corpus.rs`): code objects present on
//! one side only are added or removed, and every pair present on both
//! sides differs in size, so must be changed. Ignored without the corpus,
//! failing under `OFFLOAD_REQUIRE_REAL_CORPUS=1`.

use crate::inspect_support;
use crate::real_corpus_support;

use inspect_support::{list_json, n, offload, s};
use real_corpus_support::Corpus;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn folder(corpus: &Corpus, name: &str) -> PathBuf {
    let any = corpus.files().into_iter().find(|f| f.parent().is_some_and(|p| p.ends_with(name))).unwrap();
    any.parent().unwrap().to_path_buf()
}

/// (file name, unit, id) -> size, from `list --json` of each file below `dir`.
fn listed(dir: &Path) -> BTreeMap<(String, u64, String), u64> {
    let mut out = BTreeMap::new();
    for name in ["_prng.so", "_solver.so"] {
        for r in list_json(&dir.join(name)) {
            out.insert((name.to_string(), n(&r, "unit"), s(&r, "id").to_string()), n(&r, "size"));
        }
    }
    out
}

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn jax_rocm6_to_rocm7_plugin_diff() {
    let corpus = Corpus::get();
    let (old, new) = (folder(&corpus, "rocm6-jax-plugin"), folder(&corpus, "rocm7-jax-plugin"));
    let (a, b) = (listed(&old), listed(&new));
    let o = offload(&["diff", "--json", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let added = b.keys().filter(|k| !a.contains_key(*k)).count() as u64;
    let removed = a.keys().filter(|k| !b.contains_key(*k)).count() as u64;
    let both: Vec<_> = a.keys().filter(|k| b.contains_key(*k)).collect();
    assert!(both.iter().all(|k| a[*k] != b[*k]), "the premise: every common code object changed size");
    let t = &v["total"];
    assert_eq!(t["added"].as_u64(), Some(added));
    assert_eq!(t["removed"].as_u64(), Some(removed));
    assert_eq!(t["changed"].as_u64(), Some(both.len() as u64));
    assert_eq!(t["unchanged"], 0);
    assert_eq!(t["bytes_a"].as_u64(), Some(a.values().sum::<u64>()));
    assert_eq!(t["bytes_b"].as_u64(), Some(b.values().sum::<u64>()));
    // The figures docs/guide/size-and-diff.md shows.
    assert_eq!((added, removed, both.len()), (66, 6, 18));
    let targets = v["targets"].as_array().unwrap();
    let of = |t: &str| targets.iter().find(|r| r["target"] == t).unwrap();
    assert_eq!((of("gfx940")["removed"].as_u64(), of("gfx950")["added"].as_u64()), (Some(2), Some(3)));
    let files: Vec<&str> = v["files"].as_array().unwrap().iter().map(|f| f["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["_prng.so", "_solver.so"]);
    // A version against itself is identical; size agrees with list.
    let same = offload(&["diff", new.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(0));
    let size = offload(&["size", "--json", new.to_str().unwrap()]);
    assert!(size.status.success());
    let size: Value = serde_json::from_slice(&size.stdout).unwrap();
    let device: u64 = b.iter().filter(|(k, _)| !k.2.starts_with("host-")).map(|(_, v)| v).sum();
    assert_eq!(size["total"]["device"]["bytes"].as_u64(), Some(device));
    let stored = size["total"]["device"]["stored"].as_u64().unwrap();
    assert!(stored < device / 4, "ROCm 7's compressed bundles: {stored} of {device}");
}

/// (kind, target, name) of every kernel `offload kernels --json` lists below `dir`.
fn kernel_keys(dir: &Path) -> std::collections::BTreeSet<(String, String, String)> {
    let o = offload(&["kernels", "--json", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["unreadable"].as_array().map(Vec::len), Some(0));
    v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (s(k, "kind").to_string(), s(k, "target").to_string(), s(k, "name").to_string()))
        .collect()
}

/// `diff --kernels` between the two plugin versions agrees with the two
/// `offload kernels` listings: a kernel is added or removed exactly when
/// one listing lacks it, and every kernel of both is changed or unchanged.
#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn jax_rocm6_to_rocm7_plugin_kernel_diff() {
    let corpus = Corpus::get();
    let (old, new) = (folder(&corpus, "rocm6-jax-plugin"), folder(&corpus, "rocm7-jax-plugin"));
    let (a, b) = (kernel_keys(&old), kernel_keys(&new));
    assert!(!a.is_empty() && !b.is_empty());
    let o = offload(&["diff", "--kernels", "--json", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys = |list: &Value| -> Vec<(String, String, String)> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|k| (s(k, "kind").to_string(), s(k, "target").to_string(), s(k, "name").to_string()))
            .collect()
    };
    let added: Vec<_> = b.difference(&a).cloned().collect();
    let removed: Vec<_> = a.difference(&b).cloned().collect();
    assert_eq!(keys(&v["added"]), added);
    assert_eq!(keys(&v["removed"]), removed);
    let both = a.intersection(&b).count() as u64;
    assert_eq!(v["changed"].as_array().unwrap().len() as u64 + v["unchanged"].as_u64().unwrap(), both);
    // Register use changed between the two releases (ThreeFry2x32Kernel on
    // gfx900: 24 VGPRs in the ROCm 6 build, 23 in the ROCm 7 one).
    let register_changes = v["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["changes"].as_array().unwrap().iter().any(|c| c["resource"] == "vgprs"))
        .count();
    assert!(register_changes > 0, "{}", v["changed"]);
    eprintln!(
        "kernels: {} old, {} new; {} added, {} removed, {} changed, {} unchanged",
        a.len(),
        b.len(),
        added.len(),
        removed.len(),
        v["changed"].as_array().unwrap().len(),
        v["unchanged"]
    );
}
