//! `offload prune` on raw bundles, compressed bundles, fat objects
//! (`-type=o`) and static archives, checked with LLVM 19's
//! `clang-offload-bundler`: `-list` shows only the kept entries and
//! `-unbundle` gives the input's bytes for each of them. Plain-cargo-test
//! checks (sizes, `offload list`) run without LLVM; the tests that need LLVM
//! are ignored when it is missing, unless `OFFLOAD_REQUIRE_LLVM=1`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn fixture(path: &str) -> PathBuf {
    common::fixtures().join(path)
}

fn prune(args: &[&str], input: &Path, out: &Path) {
    let mut all = vec!["prune"];
    all.extend_from_slice(args);
    all.extend([p(input), "-o", p(out)]);
    let o = offload(&all);
    assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
}

/// The (kind, target ID) pairs `offload list` reports.
fn listed(file: &Path) -> Vec<String> {
    let o = offload(&["list", "--json", p(file)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let records = v.as_array().cloned().unwrap_or_else(|| v["code_objects"].as_array().cloned().unwrap_or_default());
    records.iter().map(|r| format!("{} {}", r["offload_kind"].as_str().unwrap_or(""), r["target_id"])).collect()
}

fn bundler() -> PathBuf {
    common::llvm_tool(19, "clang-offload-bundler")
}

/// `clang-offload-bundler -list` (sorted).
fn bundler_list(tool: &Path, kind: &str, file: &Path) -> Vec<String> {
    let o = common::run(Command::new(tool).args([&format!("-type={kind}"), "-list", &format!("-input={}", p(file))]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut ids: Vec<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect();
    ids.sort();
    ids
}

/// `clang-offload-bundler -unbundle` of one entry.
fn unbundle(tool: &Path, kind: &str, file: &Path, id: &str, dir: &Path) -> Vec<u8> {
    let out = dir.join(format!("unbundled-{}", id.replace([':', '+'], "_")));
    let o = common::run(Command::new(tool).args([
        &format!("-type={kind}"),
        "-unbundle",
        &format!("-targets={id}"),
        &format!("-input={}", p(file)),
        &format!("-output={}", p(&out)),
        "-allow-missing-bundles",
    ]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(&out).unwrap()
}

const G6: &str = "hip-amdgcn-amd-amdhsa--gfx906";
const G8: &str = "hip-amdgcn-amd-amdhsa--gfx908";

#[test]
fn fat_objects_lose_the_dropped_sections() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["fat-x86_64.o", "fat-cxx-gcc.o", "fat-i386.o", "fat-ppc64.o", "fat-aarch64.o"] {
        let input = fixture(&format!("objects/{name}"));
        let out = dir.path().join(name);
        prune(&["--keep", "gfx906"], &input, &out);
        let size = |f: &Path| std::fs::metadata(f).unwrap().len();
        assert!(size(&out) < size(&input), "{name}: smaller");
        let kinds = listed(&out);
        assert!(kinds.iter().all(|k| !k.contains("gfx908")), "{name}: {kinds:?}");
        assert!(kinds.iter().any(|k| k.contains("gfx906")), "{name}: {kinds:?}");
        let Some(tool) = common::llvm_tool_if_found(19, "clang-offload-bundler") else { continue };
        let want: Vec<String> =
            bundler_list(&tool, "o", &input).into_iter().filter(|i| !i.contains("gfx908")).collect();
        assert_eq!(bundler_list(&tool, "o", &out), want, "{name}");
        // LLVM 19 unbundles the host entry of a fat object as the whole
        // file, so only device entries compare byte for byte; the host
        // code is compared through its symbols.
        for id in want.iter().filter(|i| !i.starts_with("host")) {
            let (a, b) = (unbundle(&tool, "o", &input, id, dir.path()), unbundle(&tool, "o", &out, id, dir.path()));
            assert!(a == b, "{name}: {id} unbundles to the input's bytes");
        }
        let Some(nm) = common::llvm_tool_if_found(19, "llvm-nm") else { continue };
        let symbols = |f: &Path| common::run(Command::new(&nm).arg(f)).stdout;
        assert_eq!(symbols(&input), symbols(&out), "{name}: the host object's symbols");
    }
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn raw_and_compressed_bundles_are_rebuilt_smaller() {
    let tool = bundler();
    let dir = tempfile::tempdir().unwrap();
    let b = fixture("bundler");
    for compress in [false, true] {
        let input = dir.path().join(if compress { "in.ccob" } else { "in.bundle" });
        let mut cmd = Command::new(&tool);
        // A host ID without the trailing '-': LLVM 19 would list one with
        // it twice over (and then not unbundle it by that name).
        cmd.args(["-type=bc", &format!("-targets=host-x86_64-unknown-linux-gnu,{G6},{G8}")]);
        for f in ["host.bin", "dev1.bin", "dev2.bin"] {
            cmd.arg(format!("-input={}", p(&b.join(f))));
        }
        cmd.arg(format!("-output={}", p(&input)));
        if compress {
            cmd.arg("-compress");
        }
        let o = common::run(&mut cmd);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = dir.path().join(if compress { "out.ccob" } else { "out.bundle" });
        prune(&["--keep", "gfx908"], &input, &out);
        assert!(std::fs::metadata(&out).unwrap().len() < std::fs::metadata(&input).unwrap().len());
        let want: Vec<String> =
            bundler_list(&tool, "bc", &input).into_iter().filter(|i| !i.contains("gfx906")).collect();
        assert_eq!(want.len(), 2);
        assert_eq!(bundler_list(&tool, "bc", &out), want, "compress={compress}");
        for id in &want {
            // LLVM 19 lists the host as `host-…-gnu-` but unbundles it only
            // by the name it was bundled with.
            let id = if id.starts_with("host") { "host-x86_64-unknown-linux-gnu" } else { id };
            let (a, b) = (unbundle(&tool, "bc", &out, id, dir.path()), unbundle(&tool, "bc", &input, id, dir.path()));
            assert!(!a.is_empty() && a == b, "compress={compress}: {id}");
        }
        assert_eq!(unbundle(&tool, "bc", &out, G6, dir.path()), b"", "gfx906 is gone");
    }
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn archives_are_pruned_member_by_member_in_place() {
    let dir = tempfile::tempdir().unwrap();
    // Fat objects, a bundle member and a plain host object.
    let input = fixture("objects/lib.a");
    let out = dir.path().join("lib.a");
    prune(&["--mode", "zero", "--drop", "gfx908,gfx906:xnack+", "--allow-empty"], &input, &out);
    let (a, b) = (std::fs::read(&input).unwrap(), std::fs::read(&out).unwrap());
    assert_eq!(a.len(), b.len(), "zero mode keeps every member's size");
    let kinds = listed(&out);
    assert!(kinds.iter().all(|k| !k.contains("gfx908") && !k.contains("xnack+")), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| k.contains("gfx906")).count(), 2, "{kinds:?}");
    // A HIP archive (.hip_fatbin members).
    let hip = dir.path().join("libfat.a");
    prune(&["--keep", "gfx906"], &fixture("inspect/libfat.a"), &hip);
    assert!(listed(&hip).iter().all(|k| !k.contains("gfx90a")));
    let tool = bundler();
    for id in [G6, "host-x86_64-unknown-linux-gnu"] {
        let (x, y) = (unbundle(&tool, "a", &input, id, dir.path()), unbundle(&tool, "a", &out, id, dir.path()));
        assert_eq!(x, y, "{id}: the kept code unbundles as before");
    }
    let gone = unbundle(&tool, "a", &out, G8, dir.path());
    assert_eq!(gone, b"!<arch>\n", "no gfx908 member left");
    let nm = common::llvm_tool(19, "llvm-nm");
    let symbols = |f: &Path| common::run(Command::new(&nm).arg(f)).stdout;
    assert_eq!(symbols(&input), symbols(&out), "the members still read as the same objects");
}

#[test]
fn unsupported_inputs_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for input in [fixture("objects/host-x86_64.o"), fixture("objects/payload.txt")] {
        let o = offload(&["prune", "--keep", "gfx906", p(&input), "-o", p(&out)]);
        assert_eq!(o.status.code(), Some(1), "{}", input.display());
        assert!(!out.exists());
    }
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn a_pruned_archive_of_fat_objects_still_links_and_runs() {
    let (ar, clang) = (common::llvm_tool(19, "llvm-ar"), common::llvm_tool(19, "clang"));
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    std::fs::copy(fixture("objects/fat-x86_64.o"), d("fat.o")).unwrap();
    let o = common::run(Command::new(&ar).args(["rcs", p(&d("in.a")), p(&d("fat.o"))]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    prune(&["--keep", "gfx906"], &d("in.a"), &d("out.a"));
    assert_ne!(std::fs::read(d("in.a")).unwrap(), std::fs::read(d("out.a")).unwrap(), "the gfx908 entry went");
    let mut ran = Vec::new();
    for a in ["in.a", "out.a"] {
        let exe = d(&format!("{a}.exe"));
        let link = Command::new(&clang)
            .args(["-Wl,--whole-archive", p(&d(a)), "-Wl,--no-whole-archive", "-o", p(&exe)])
            .output()
            .unwrap();
        assert!(link.status.success(), "{a}: {}", String::from_utf8_lossy(&link.stderr));
        let run = common::run(&mut Command::new(&exe));
        ran.push((run.status.code(), run.stdout));
    }
    assert_eq!(ran[0], ran[1], "the program linked from the pruned archive runs the same");
    assert!(!ran[0].1.is_empty());
}
