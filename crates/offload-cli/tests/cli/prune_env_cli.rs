//! `offload prune` on wheels, folders and tarballs, and `offload split`
//! (docs/guide/prune-trees.md, docs/guide/split.md): usage errors, a wheel
//! that pip installs into a fresh venv, a folder `check` answers the same
//! for before and after, untouched files byte-identical.

use crate::prune_support;

use prune_support::{fixture, offload, p, stderr};
use std::io::Write;
use std::path::{Path, PathBuf};

fn cuda_fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda").join(name)).unwrap()
}

/// (path, bytes) of a small package: a HIP library (gfx906, gfx90a), a
/// CUDA library (sm_75, sm_90, compute_90), rocBLAS-style data files.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("smallpkg/__init__.py", b"VERSION = 1\n".to_vec()),
        ("smallpkg/lib/libhip.so", std::fs::read(fixture("gnu_rela.so")).unwrap()),
        ("smallpkg/lib/libsmall.so", cuda_fixture("libsmall.so")),
        ("smallpkg/library/TensileLibrary_lazy_gfx906.dat", vec![6; 4000]),
        ("smallpkg/library/TensileLibrary_lazy_gfx90a.dat", vec![10; 4000]),
    ]
}

/// A wheel of [`files`] written with Python's zipfile and a correct RECORD.
fn python_wheel(dir: &Path) -> PathBuf {
    let src = dir.join("src");
    for (name, data) in files() {
        let p = src.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    let script = r#"
import base64, hashlib, os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
dist = "smallpkg-1.0.dist-info"
meta = {"METADATA": "Metadata-Version: 2.1\nName: smallpkg\nVersion: 1.0\n",
        "WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n"}
record = []
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for root, _, names in sorted(os.walk(src)):
        for n in sorted(names):
            path = os.path.join(root, n)
            arc = os.path.relpath(path, src)
            data = open(path, "rb").read()
            z.write(path, arc)
            h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arc},sha256={h},{len(data)}")
    for n, text in meta.items():
        z.writestr(f"{dist}/{n}", text)
        h = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{dist}/{n},sha256={h},{len(text)}")
    record.append(f"{dist}/RECORD,,")
    z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
"#;
    let out = dir.join("smallpkg-1.0-py3-none-any.whl");
    let s = std::process::Command::new("python3").args(["-c", script, p(&src), p(&out)]).status().unwrap();
    assert!(s.success());
    out
}

fn pip_check(dir: &Path, wheel: &Path) -> PathBuf {
    let venv = dir.join("venv");
    let run = |cmd: &mut std::process::Command| {
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{:?}: {}{}", cmd, String::from_utf8_lossy(&o.stdout), stderr(&o));
        o
    };
    run(std::process::Command::new("python3").args(["-m", "venv", p(&venv)]));
    let pip = venv.join("bin/pip");
    run(std::process::Command::new(&pip).args(["install", "-q", "--no-deps", "--no-index", p(wheel)]));
    let o = run(std::process::Command::new(&pip).args(["check"]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("No broken requirements"));
    venv
}

#[test]
#[cfg_attr(not(has_python_venv), ignore = "needs python3 with venv and ensurepip (apt-get install python3-venv)")]
fn a_pruned_wheel_installs_with_pip_and_passes_pip_check() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = python_wheel(dir.path());
    let out = dir.path().join("out/smallpkg-1.0-py3-none-any.whl");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let o = offload(&["prune", "--keep", "gfx90a,sm_90", p(&wheel), "-o", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("removed") && text.contains("bytes saved"), "{text}");
    assert!(std::fs::metadata(&out).unwrap().len() < std::fs::metadata(&wheel).unwrap().len());
    let venv = pip_check(dir.path(), &out);
    let site = std::fs::read_dir(venv.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
    let pkg = site.join("smallpkg");
    assert!(!pkg.join("library/TensileLibrary_lazy_gfx906.dat").exists());
    assert_eq!(std::fs::read(pkg.join("library/TensileLibrary_lazy_gfx90a.dat")).unwrap(), vec![10; 4000]);
    assert_eq!(std::fs::read(pkg.join("__init__.py")).unwrap(), b"VERSION = 1\n");
    // gfx90a loads the same code object before and after.
    let before = loaded(&fixture("gnu_rela.so"), "gfx90a:xnack-");
    assert!(!before.is_empty());
    assert_eq!(before, loaded(&pkg.join("lib/libhip.so"), "gfx90a:xnack-"), "gfx90a loads the same bytes");

    // split: per-family wheels, each installable.
    let split_dir = dir.path().join("split");
    let o = offload(&["split", "--by", "family", p(&wheel), "-o", p(&split_dir)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut wheels: Vec<String> =
        std::fs::read_dir(&split_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    wheels.sort();
    assert_eq!(
        wheels,
        [
            "smallpkg-1.0+gfx906-py3-none-any.whl",
            "smallpkg-1.0+gfx90a-py3-none-any.whl",
            "smallpkg-1.0+sm7x-py3-none-any.whl",
            "smallpkg-1.0+sm9x-py3-none-any.whl"
        ]
    );
    let venv_dir = dir.path().join("v2");
    std::fs::create_dir_all(&venv_dir).unwrap();
    pip_check(&venv_dir, &split_dir.join(&wheels[3]));
}

#[test]
fn folders_need_in_place_and_keep_what_check_says() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("opt");
    for (name, data) in files() {
        let f = root.join(name);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, data).unwrap();
    }
    let o = offload(&["prune", "--keep", "gfx90a", p(&root)]);
    assert_eq!(o.status.code(), Some(2), "no -o, no --in-place: {}", stderr(&o));
    let o = offload(&["prune", "--keep", "gfx90a", p(&root), "-o", p(&dir.path().join("x"))]);
    assert_eq!(o.status.code(), Some(2), "a folder is not written to -o: {}", stderr(&o));
    assert!(stderr(&o).contains("--in-place"), "{}", stderr(&o));
    let check = |gpu: &str| {
        let o = offload(&["check", "--gpu", gpu, p(&root.join("smallpkg/lib/libhip.so"))]);
        (o.status.code(), String::from_utf8_lossy(&o.stdout).lines().count())
    };
    let before = (check("gfx90a:xnack-"), check("gfx90a:xnack+"));
    let o = offload(&["prune", "--keep", "gfx90a", "--dry-run", "--json", p(&root)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["saved_bytes"].as_i64().unwrap() > 0, "{v}");
    assert!(root.join("smallpkg/library/TensileLibrary_lazy_gfx906.dat").exists(), "a dry run writes nothing");
    let o = offload(&["prune", "--keep", "gfx90a", "--in-place", "--json", p(&root)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let actions: Vec<(String, String)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap().to_string(), f["action"].as_str().unwrap().to_string()))
        .collect();
    assert!(actions.contains(&("smallpkg/lib/libhip.so".into(), "rewritten".into())), "{actions:?}");
    assert!(actions.contains(&("smallpkg/library/TensileLibrary_lazy_gfx906.dat".into(), "removed".into())));
    assert!(!root.join("smallpkg/library/TensileLibrary_lazy_gfx906.dat").exists());
    assert_eq!(std::fs::read(root.join("smallpkg/__init__.py")).unwrap(), b"VERSION = 1\n");
    assert_eq!((check("gfx90a:xnack-"), check("gfx90a:xnack+")), before, "check answers as before");
}

#[test]
fn a_file_is_not_its_own_output_without_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("lib.so");
    std::fs::copy(fixture("gnu_rela.so"), &f).unwrap();
    let link = dir.path().join("link.so");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let hard = dir.path().join("hard.so");
    std::fs::hard_link(&f, &hard).unwrap();
    let before = std::fs::read(&f).unwrap();
    for out in [&f, &link, &hard] {
        let o = offload(&["prune", "--keep", "gfx90a", p(&f), "-o", p(out)]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("--in-place"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&f).unwrap(), before);
    }
    let o = offload(&["prune", "--keep", "gfx90a", "--in-place", p(&f)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(std::fs::read(&f).unwrap(), before);
}

/// A `tar | zstd` stream whose first file is large (its first zstd block
/// ends far past 4 KiB) is still recognised as a tarball and pruned.
#[test]
fn a_zstd_tarball_with_a_large_first_file_is_a_tarball() {
    let dir = tempfile::tempdir().unwrap();
    let mut tar = tar::Builder::new(Vec::new());
    // 256 KiB of 16 letters in random order (xorshift): zstd compresses it
    // to about half, in blocks it must read whole before their first byte
    // comes out; then the HIP library.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..1 << 18)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b'a' + (x % 16) as u8
        })
        .collect();
    for (name, data) in [("a/noise.bin", noise), ("a/libhip.so", std::fs::read(fixture("gnu_rela.so")).unwrap())] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        tar.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    let compressed = zstd::encode_all(tar.into_inner().unwrap().as_slice(), 3).unwrap();
    assert!(compressed.len() > 4096 && compressed[4..4096].iter().any(|&b| b != 0));
    let input = dir.path().join("tree.tar.zst");
    std::fs::write(&input, &compressed).unwrap();
    let out = dir.path().join("small.tar.zst");
    let o = offload(&["prune", "--keep", "gfx90a", p(&input), "-o", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = offload(&["list", p(&out)]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("gfx90a") && !text.contains("gfx906"), "{text}");
}

#[test]
fn debian_packages_are_refused_with_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let deb = dir.path().join("x.deb");
    let mut f = std::fs::File::create(&deb).unwrap();
    f.write_all(b"!<arch>\ndebian-binary   0           0     0     100644  4         `\n2.0\n").unwrap();
    let o = offload(&["prune", "--keep", "gfx90a", p(&deb), "-o", p(&dir.path().join("y.deb"))]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("dpkg-deb -R"), "{}", stderr(&o));
    assert!(!dir.path().join("y.deb").exists());
}

/// The files `extract --gpu GPU --output-dir` writes for `f`: what GPU
/// loads, sorted by content (the names carry offsets, which a cut moves).
fn loaded(f: &Path, gpu: &str) -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let o = offload(&["extract", "--gpu", gpu, "--output-dir", p(dir.path()), p(f)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let mut all: Vec<Vec<u8>> = names.iter().map(|n| std::fs::read(n).unwrap()).collect();
    all.sort();
    all
}

fn corpus() -> PathBuf {
    std::env::var_os("OFFLOAD_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/offload-binutils/corpus"))
}

fn only_file(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path()
}

#[test]
#[cfg_attr(
    not(all(has_curand_wheels, has_python_venv)),
    ignore = "needs the real corpus (scripts/fetch-real-corpus.sh) and python3-venv"
)]
fn nvidias_curand_wheel_pruned_to_sm_90_installs_and_loads_the_same_cubin() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = only_file(&corpus().join("packages/curand-linux"));
    let out = dir.path().join(wheel.file_name().unwrap());
    let o = offload(&["prune", "--keep", "sm_90", p(&wheel), "-o", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (a, b) = (std::fs::metadata(&wheel).unwrap().len(), std::fs::metadata(&out).unwrap().len());
    assert!(b < a * 3 / 4, "{a} -> {b}");
    let venv = pip_check(dir.path(), &out);
    let site = std::fs::read_dir(venv.join("lib")).unwrap().next().unwrap().unwrap().path().join("site-packages");
    let lib = site.join("nvidia/curand/lib/libcurand.so.10");
    let unz = dir.path().join("orig");
    let s = std::process::Command::new("python3").args(["-m", "zipfile", "-e", p(&wheel), p(&unz)]).status().unwrap();
    assert!(s.success());
    let orig = unz.join("nvidia/curand/lib/libcurand.so.10");
    let before = loaded(&orig, "sm_90");
    assert!(!before.is_empty());
    assert_eq!(before, loaded(&lib, "sm_90"), "sm_90 loads the same cubins");
    // Every other file of the package is byte-identical.
    let mut stack = vec![unz.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(&unz).unwrap();
            let s = rel.to_string_lossy();
            if s.ends_with("libcurand.so.10") || s.contains(".dist-info") {
                continue;
            }
            assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(site.join(rel)).unwrap(), "{s}");
        }
    }
}

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real corpus (scripts/fetch-real-corpus.sh) and dpkg-deb")]
fn a_rocm_deb_unpacked_to_a_folder_is_pruned_in_place_and_checks_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let deb = only_file(&corpus().join("packages/debian-rocrand"));
    let root = dir.path().join("root");
    let s = std::process::Command::new("dpkg-deb").args(["-x", p(&deb), p(&root)]).status().unwrap();
    assert!(s.success());
    let lib = root.join("usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let check = |gpu: &str| {
        let o = offload(&["check", "--gpu", gpu, p(&lib)]);
        o.status.code()
    };
    let gpus = ["gfx90a:xnack-", "gfx90a:xnack+", "gfx1030"];
    let before: Vec<_> = gpus.iter().map(|g| check(g)).collect();
    let gfx906 = |f: &Path| {
        let o = offload(&["list", "--json", p(f)]);
        String::from_utf8_lossy(&o.stdout).matches("gfx906").count()
    };
    assert!(gfx906(&lib) > 0);
    let size0 = std::fs::metadata(&lib).unwrap().len();
    let o = offload(&["prune", "--keep", "gfx90a,gfx1030", "--in-place", p(&root)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::metadata(&lib).unwrap().len() < size0);
    let after: Vec<_> = gpus.iter().map(|g| check(g)).collect();
    assert_eq!(after, before, "kept GPUs: the same answer");
    assert_eq!(gfx906(&lib), 0, "gfx906's code is gone");
    assert!(root.join("usr/lib/x86_64-linux-gnu/librocrand.so.1").symlink_metadata().unwrap().file_type().is_symlink());
}
