//! `offload size` and `offload diff` on bundles built here with the
//! workspace's own `clang-offload-bundler` (plain and compressed), the
//! inspector fixtures, wheels and folders; `size --keep` against
//! `prune --dry-run` on the prune fixtures.

use crate::common;
use crate::package_support;

use package_support::zip_of;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn inspect_fixture(name: &str) -> PathBuf {
    common::fixtures().join("inspect").join(name)
}

fn prune_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune").join(name)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Bytes that differ with `seed` (a linear congruential sequence); with
/// `text`, a compressible text.
fn data(seed: u64, len: usize, text: bool) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if text { b"kernel_code "[i % 12] ^ u8::from(i % 997 == 0 && seed % 2 == 1) } else { (x >> 33) as u8 }
        })
        .collect()
}

/// A bundle of a host entry and one device entry per (target, bytes).
fn bundle(dir: &Path, name: &str, devices: &[(&str, &[u8])], compress: bool) -> PathBuf {
    let host = dir.join(format!("{name}.host"));
    std::fs::write(&host, b"").unwrap();
    let mut targets = vec!["host-x86_64-unknown-linux-gnu".to_string()];
    let mut inputs = vec![format!("-input={}", p(&host))];
    for (i, (target, bytes)) in devices.iter().enumerate() {
        let f = dir.join(format!("{name}.{i}"));
        std::fs::write(&f, bytes).unwrap();
        targets.push(format!("hipv4-amdgcn-amd-amdhsa--{target}"));
        inputs.push(format!("-input={}", p(&f)));
    }
    let out = dir.join(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clang-offload-bundler"));
    cmd.arg("-type=o").arg(format!("-targets={}", targets.join(","))).args(&inputs);
    cmd.arg(format!("-output={}", p(&out)));
    if compress {
        cmd.arg("-compress");
    }
    let o = common::run(&mut cmd);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn row<'a>(targets: &'a Value, target: &str) -> &'a Value {
    targets.as_array().unwrap().iter().find(|r| r["target"] == target).unwrap_or_else(|| panic!("{target}: {targets}"))
}

#[test]
fn size_shares_a_compressed_bundle_out_by_uncompressed_size() {
    let dir = tempfile::tempdir().unwrap();
    let a = data(1, 40_000, true);
    let b = data(2, 10_000, true);
    let f = bundle(dir.path(), "c.co", &[("gfx906", &a), ("gfx90a", &b)], true);
    let file_len = std::fs::metadata(&f).unwrap().len();
    let v = json(&offload(&["size", "--json", p(&f)]));
    let targets = &v["files"][0]["targets"];
    let (s906, s90a) =
        (row(targets, "gfx906")["stored"].as_u64().unwrap(), row(targets, "gfx90a")["stored"].as_u64().unwrap());
    assert_eq!(row(targets, "gfx906")["bytes"], 40_000);
    assert!(s906 + s90a <= file_len && s906 + s90a + 2 >= file_len, "{s906} + {s90a} vs {file_len}");
    assert!(s906 < 40_000 / 4, "compressed text takes less room: {s906}");
    // In proportion to the uncompressed sizes (4:1), up to rounding.
    assert!((s906 as i64 - 4 * s90a as i64).abs() <= 4, "{s906} {s90a}");
}

#[test]
fn size_keep_agrees_with_prune_dry_run() {
    for (fixture, keep) in [
        ("gnu_rela.so", "gfx90a:xnack+,gfx906"),
        ("gnu_rela.so", "gfx90a"),
        ("rdc_ccob_lld.so", "gfx906"),
        ("lld_relr.so", "gfx90a:xnack-"),
    ] {
        let f = prune_fixture(fixture);
        let pruned = offload(&["prune", "--keep", keep, "--dry-run", "--json", p(&f)]);
        assert!(pruned.status.success(), "{fixture}: {}", String::from_utf8_lossy(&pruned.stderr));
        let pruned = json(&pruned);
        let size = json(&offload(&["size", "--keep", keep, "--json", p(&f)]));
        let prunable = &size["total"]["prunable"];
        assert_eq!(prunable["bytes"], pruned["dropped_bytes"], "{fixture} --keep {keep}");
        let dropped: usize =
            pruned["units"].as_array().unwrap().iter().map(|u| u["dropped"].as_array().unwrap().len()).sum();
        assert_eq!(prunable["objects"], dropped as u64, "{fixture} --keep {keep}");
        assert!(dropped > 0 || keep == "gfx90a", "{fixture} --keep {keep}: the case must drop something");
    }
}

/// CUDA fat binaries: `size --keep` counts what prune's CUDA rule drops
/// (a concatenated entry's cubins only together). Prune reports payload
/// bytes with their padding (a PTX text's NULs), so entries are compared.
#[test]
fn size_keep_agrees_with_prune_dry_run_on_cuda() {
    let cuda = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
    for (fixture, keep, expected) in [
        ("kern_nocompress.fatbin", "sm_80", 3u64),
        ("concat.fatbin", "sm_80", 1),
        ("kern_zstd_all.fatbin", "compute_90", 3),
    ] {
        let f = cuda.join(fixture);
        let pruned = offload(&["prune", "--keep", keep, "--dry-run", "--json", p(&f)]);
        assert!(pruned.status.success(), "{fixture}: {}", String::from_utf8_lossy(&pruned.stderr));
        let pruned = json(&pruned);
        let dropped: usize =
            pruned["units"].as_array().unwrap().iter().map(|u| u["dropped"].as_array().unwrap().len()).sum();
        let size = json(&offload(&["size", "--keep", keep, "--json", p(&f)]));
        assert_eq!(size["total"]["prunable"]["objects"], expected, "{fixture} --keep {keep}");
        assert_eq!(dropped as u64, expected, "{fixture} --keep {keep}");
    }
}

#[test]
fn size_of_a_wheel_and_a_folder_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let (scale, two) =
        (std::fs::read(inspect_fixture("libscale.so")).unwrap(), std::fs::read(inspect_fixture("libtwo.so")).unwrap());
    let wheel = dir.path().join("pkg.whl");
    std::fs::write(&wheel, zip_of(&[("pkg/libscale.so", &scale, true), ("pkg/libtwo.so", &two, false)])).unwrap();
    let folder = dir.path().join("tree");
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    std::fs::write(folder.join("libscale.so"), &scale).unwrap();
    std::fs::write(folder.join("sub/libtwo.so"), &two).unwrap();
    let separate =
        json(&offload(&["size", "--json", p(&inspect_fixture("libscale.so")), p(&inspect_fixture("libtwo.so"))]));
    for path in [&wheel, &folder] {
        let v = json(&offload(&["size", "--json", p(path)]));
        assert_eq!(v["total"]["device"], separate["total"]["device"], "{}", path.display());
        assert_eq!(v["total"]["targets"], separate["total"]["targets"], "{}", path.display());
    }
    let w = json(&offload(&["size", "--json", p(&wheel)]));
    assert_eq!(w["files"].as_array().unwrap().len(), 1, "a package is one file");
    let f = json(&offload(&["size", "--json", p(&folder)]));
    assert_eq!(f["files"].as_array().unwrap().len(), 2, "a folder's files each");
}

#[test]
fn diff_of_identical_inputs_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let f = inspect_fixture("libtwo.so");
    let copy = dir.path().join("copy.so");
    std::fs::copy(&f, &copy).unwrap();
    let o = offload(&["diff", p(&f), p(&copy)]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stdout).contains("identical: 0 added, 0 removed, 0 changed, 6 unchanged"));
    let v = json(&offload(&["diff", "--json", p(&f), p(&copy)]));
    assert_eq!(v["identical"], true);
    assert_eq!(v["total"]["unchanged"], 6);
    assert_eq!(v["changes"], Value::Array(vec![]));
}

#[test]
fn diff_finds_changed_added_and_removed_code_objects() {
    let dir = tempfile::tempdir().unwrap();
    for compress in [false, true] {
        let (old906, new906, same90a, added) =
            (data(3, 6000, true), data(8, 6000, true), data(4, 5000, false), data(6, 7000, false));
        let a = bundle(dir.path(), &format!("a{compress}.co"), &[("gfx906", &old906), ("gfx90a", &same90a)], compress);
        let b = bundle(
            dir.path(),
            &format!("b{compress}.co"),
            &[("gfx906", &new906), ("gfx90a", &same90a), ("gfx1030", &added)],
            compress,
        );
        let o = offload(&["diff", "--json", p(&a), p(&b)]);
        assert_eq!(o.status.code(), Some(1), "compress {compress}");
        let v = json(&o);
        assert_eq!(v["identical"], false);
        let t = &v["total"];
        assert_eq!(
            (t["added"].as_u64(), t["removed"].as_u64(), t["changed"].as_u64(), t["unchanged"].as_u64()),
            (Some(1), Some(0), Some(1), Some(2)),
            "compress {compress}: {t}"
        );
        let targets = v["targets"].as_array().unwrap();
        let of = |name: &str| targets.iter().find(|r| r["target"] == name).unwrap();
        assert_eq!(of("gfx906")["changed"], 1);
        assert_eq!(of("gfx90a")["unchanged"], 1);
        assert_eq!(of("gfx1030")["added"], 1);
        assert_eq!(of("gfx1030")["bytes_b"], 7000);
        let changes = v["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 2);
        let changed = changes.iter().find(|c| c["status"] == "changed").unwrap();
        assert_eq!((changed["size_a"].as_u64(), changed["size_b"].as_u64()), (Some(6000), Some(6000)));
        // The other way round the target is removed.
        let back = json(&offload(&["diff", "--json", p(&b), p(&a)]));
        assert_eq!(back["total"]["removed"], 1);
    }
}

#[test]
fn diff_matches_package_members_and_folder_files_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let (scale, two) =
        (std::fs::read(inspect_fixture("libscale.so")).unwrap(), std::fs::read(inspect_fixture("libtwo.so")).unwrap());
    let v1 = dir.path().join("pkg-1.whl");
    let v2 = dir.path().join("pkg-2.whl");
    std::fs::write(&v1, zip_of(&[("pkg/libscale.so", &scale, true), ("pkg/libtwo.so", &two, false)])).unwrap();
    std::fs::write(&v2, zip_of(&[("pkg/libscale.so", &scale, false)])).unwrap();
    let o = offload(&["diff", "--json", p(&v1), p(&v2)]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["total"]["removed"], 6, "every object of the removed member");
    assert_eq!(v["total"]["unchanged"], 3, "a member stored another way is the same code");
    let files = v["files"].as_array().unwrap();
    let removed = files.iter().find(|f| f["file"] == "pkg/libtwo.so").unwrap();
    assert_eq!(removed["removed"], 6);
    assert_eq!(removed["bytes_b"], 0);
    // The same between folders, and a wheel against itself is identical.
    let (d1, d2) = (dir.path().join("d1"), dir.path().join("d2"));
    for (d, files) in
        [(&d1, vec![("a/libscale.so", &scale), ("libtwo.so", &two)]), (&d2, vec![("a/libscale.so", &scale)])]
    {
        for (name, bytes) in files {
            std::fs::create_dir_all(d.join(name).parent().unwrap()).unwrap();
            std::fs::write(d.join(name), bytes).unwrap();
        }
    }
    let v = json(&offload(&["diff", "--json", p(&d1), p(&d2)]));
    assert_eq!((v["total"]["removed"].as_u64(), v["total"]["unchanged"].as_u64()), (Some(6), Some(3)));
    assert_eq!(offload(&["diff", p(&v1), p(&v1)]).status.code(), Some(0));
}

#[test]
fn diff_of_a_corrupt_compressed_bundle_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = bundle(dir.path(), "good.co", &[("gfx906", &data(1, 4000, true))], true);
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[16] ^= 0xff; // the decompressed bundle's hash (version 2 header)
    let bad = dir.path().join("bad.co");
    std::fs::write(&bad, &bytes).unwrap();
    let o = offload(&["diff", p(&good), p(&bad)]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stdout));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.co") && err.contains("not compared"), "{err}");
}
