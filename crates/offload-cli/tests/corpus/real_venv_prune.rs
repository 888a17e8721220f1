//! `offload prune --keep sm_90 --in-place venv/` on a real virtual
//! environment (docs/guide/prune-trees.md, "Measured on real packages"):
//! NVIDIA's `nvidia-curand-cu12` manylinux wheel and JAX's ROCm 7 plug-in
//! installed with pip into a fresh venv, then pruned in place. Checked:
//! what sm_90 selects is byte-identical before and after (`offload extract
//! --gpu sm_90`), every file the report does not name is byte-identical,
//! `offload check --gpu sm_90` gives the same answer, `pip check` the same
//! (only the dependency that `--no-deps` left out), every installed
//! `RECORD` matches the files (checked with Python's hashlib; cuRAND's gets
//! the pruned library's new hash), and the venv is smaller. Ignored without the cuRAND wheels, the real corpus or Python's
//! venv (build.rs); failing under `OFFLOAD_REQUIRE_REAL_CORPUS=1`.

use crate::inspect_support::offload;
use md5::{Digest, Md5};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus_dir() -> PathBuf {
    match std::env::var_os("OFFLOAD_CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus"),
    }
}

fn package(artifact: &str) -> PathBuf {
    let dir = corpus_dir().join("packages").join(artifact);
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|mut d| d.next())
        .and_then(|e| e.ok())
        .map(|e| e.path())
        .unwrap_or_else(|| panic!("no package in {}; run scripts/fetch-real-corpus.sh", dir.display()))
}

/// Every regular file under `root` (symbolic links as their target text):
/// relative path -> (size, MD5).
fn snapshot(root: &Path) -> BTreeMap<String, (u64, [u8; 16])> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.insert(rel, (0, Md5::digest(target.to_string_lossy().as_bytes()).into()));
            } else {
                out.insert(rel, (meta.len(), Md5::digest(std::fs::read(&p).unwrap()).into()));
            }
        }
    }
    out
}

/// What `offload extract --gpu GPU` writes for `root`, in its order: the
/// file name without the code object's index (`venv-113-cuda-elf-sm_90.cubin`
/// -> `venv-cuda-elf-sm_90.cubin`: indices move when entries are dropped)
/// and the MD5 of its bytes.
fn selected(root: &Path, gpu: &str, out_dir: &Path) -> Vec<(String, [u8; 16])> {
    std::fs::create_dir_all(out_dir).unwrap();
    let out = offload(&["extract", "--gpu", gpu, "--output-dir", out_dir.to_str().unwrap(), root.to_str().unwrap()]);
    assert!(out.status.success(), "extract: {}", String::from_utf8_lossy(&out.stderr));
    let mut files: Vec<(u64, String, [u8; 16])> = std::fs::read_dir(out_dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let (prefix, rest) = name.split_once('-').unwrap();
            let (index, id) = rest.split_once('-').unwrap();
            (index.parse().unwrap(), format!("{prefix}-{id}"), Md5::digest(std::fs::read(&p).unwrap()).into())
        })
        .collect();
    files.sort();
    std::fs::remove_dir_all(out_dir).unwrap();
    files.into_iter().map(|(_, name, md5)| (name, md5)).collect()
}

/// Every installed distribution's RECORD against the files: (lines
/// checked, mismatches, the mismatching names).
fn check_records(venv: &Path) -> (u64, u64, String) {
    // Python's own hashlib, by the script scripts/real-env-prune.sh uses too.
    let checker = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check_installed_records.py");
    let (ok, text) = run(Command::new("python3").arg(checker).arg(venv));
    assert!(ok, "{text}");
    let mut it = text.trim().splitn(3, ' ');
    let checked = it.next().unwrap().parse().unwrap();
    let bad = it.next().unwrap().parse().unwrap();
    (checked, bad, it.next().unwrap_or("").to_string())
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
#[cfg_attr(
    not(all(has_curand_wheels, has_real_corpus, has_python_venv)),
    ignore = "needs the cuRAND wheels, the real corpus and python3-venv: run scripts/fetch-real-corpus.sh"
)]
fn a_real_venv_pruned_in_place_for_sm_90_keeps_what_sm_90_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let (ok, text) = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    assert!(ok, "python3 -m venv: {text}");
    let pip = venv.join("bin/pip");
    let (ok, text) = run(Command::new(&pip)
        .args(["install", "-q", "--no-deps", "--no-index"])
        .arg(package("curand-linux"))
        .arg(package("rocm7-jax-plugin")));
    assert!(ok, "pip install: {text}");
    let v = venv.to_str().unwrap();

    let (checked, bad, which) = check_records(&venv);
    assert!(checked > 100 && bad == 0, "pip's RECORDs before: {checked} checked, {bad} wrong: {which}");
    let before = snapshot(&venv);
    let sm90_before = selected(&venv, "sm_90", &tmp.path().join("sel"));
    // One sm_90 cubin for each of the 10 registered fat binaries of
    // libcurand.so.10 (its first, device-linked one has no record); the
    // ROCm plug-in has nothing for sm_90.
    assert_eq!(sm90_before.len(), 10, "{sm90_before:?}");
    let (check_ok, check_before) =
        run(Command::new(env!("CARGO_BIN_EXE_offload")).args(["check", "--gpu", "sm_90", v]));
    let (_, pip_before) = run(Command::new(&pip).arg("check"));

    let out = offload(&["prune", "--keep", "sm_90", "--in-place", "--json", v]);
    assert!(out.status.success(), "prune: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let after = snapshot(&venv);

    // The installed RECORDs follow the pruned files (curand's RECORD is
    // rewritten for it, so it is not compared below).
    let (checked_after, bad, which) = check_records(&venv);
    assert_eq!((checked_after, bad), (checked, 0), "RECORDs after the prune: {which}");
    let record = before.keys().find(|p| p.contains("nvidia_curand_cu12-") && p.ends_with(".dist-info/RECORD")).unwrap();
    assert!(report["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains(record.as_str())));
    // The report names the files it changed; every other file is as it was.
    let named: BTreeMap<String, String> = report["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().trim_start_matches("./").to_string(),
                f["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let curand =
        before.keys().find(|p| p.ends_with("nvidia/curand/lib/libcurand.so.10")).expect("libcurand.so.10 installed");
    assert_eq!(named.get(curand).map(String::as_str), Some("rewritten"), "{named:?}");
    let mut untouched = 0;
    for (path, old) in &before {
        match named.get(path).map(String::as_str) {
            Some("removed") => assert!(!after.contains_key(path), "{path} still there"),
            Some("rewritten") => assert!(after[path].0 < old.0, "{path}: not smaller"),
            _ if path == record => assert_ne!(after.get(path), Some(old)),
            _ => {
                assert_eq!(after.get(path), Some(old), "{path} changed but the report does not say so");
                untouched += 1;
            }
        }
    }
    assert!(after.keys().all(|p| before.contains_key(p)), "new files in the venv");
    // The ROCm plug-in's libraries hold no code for sm_90 and stay.
    assert!(
        before
            .keys()
            .filter(|p| p.contains("jax_rocm7_plugin/") && p.ends_with(".so"))
            .all(|p| !named.contains_key(p) || named[p] == "kept" || named[p] == "untouched")
    );
    assert!(untouched > 1000, "{untouched}");

    assert_eq!(selected(&venv, "sm_90", &tmp.path().join("sel")), sm90_before, "sm_90 loads other bytes");
    let (ok_after, check_after) = run(Command::new(env!("CARGO_BIN_EXE_offload")).args(["check", "--gpu", "sm_90", v]));
    assert_eq!((ok_after, &check_after), (check_ok, &check_before), "offload check differs");
    let (_, pip_after) = run(Command::new(&pip).arg("check"));
    assert_eq!(pip_after, pip_before);
    // --no-deps left out only the plug-in's PJRT dependency.
    assert!(pip_after.lines().all(|l| l.contains("requires jax-rocm7-pjrt")), "{pip_after}");

    let total = |s: &BTreeMap<String, (u64, [u8; 16])>| s.values().map(|v| v.0).sum::<u64>();
    let (b, a) = (total(&before), total(&after));
    assert_eq!(report["input_size"].as_u64(), Some(b), "input_size");
    assert_eq!(report["output_size"].as_u64(), Some(a), "output_size");
    assert!(a < b, "{b} -> {a}");
    eprintln!(
        "venv: {b} -> {a} bytes ({:.0} %), {} files untouched; offload check: {}",
        100.0 * a as f64 / b as f64,
        untouched,
        check_after.lines().last().unwrap_or("")
    );
}
