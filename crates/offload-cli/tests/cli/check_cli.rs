//! `offload check`: on the HIP fixtures (built for gfx906, gfx90a:xnack+
//! and gfx90a:xnack-, see `offload-testkit/fixtures/prune/make.sh`),
//! on a program that loads one of them through its RPATH (compared with
//! what glibc's own loader resolves, `LD_TRACE_LOADED_OBJECTS=1`), on the
//! GPUs of a sysfs tree, on standalone code objects and host-only files,
//! and on the real corpus's wheels, unpacked by nobody (expected sets from
//! `offload select --json` and `offload list --json` per member).

use crate::common;
use crate::inspect_support;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn prune_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune").join(name)
}

fn offload(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_offload"));
    cmd.args(args);
    for var in ["HSA_XNACK", "HSA_OVERRIDE_GFX_VERSION", "OFFLOAD_SYSFS_ROOT", "LD_LIBRARY_PATH"] {
        cmd.env_remove(var);
    }
    cmd.output().unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn report(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}{}", text(&o.stdout), text(&o.stderr)))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Per GPU, the file names (last path component, or member) that do not load.
fn failing(v: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for gpu in v["gpus"].as_array().unwrap() {
        out.insert(gpu.as_str().unwrap().to_string(), BTreeSet::new());
    }
    for f in v["files"].as_array().unwrap() {
        if f["role"] != "fat" {
            continue;
        }
        let name = f["member"].as_str().unwrap_or_else(|| f["file"].as_str().unwrap());
        let short = name.rsplit('/').next().unwrap().to_string();
        for l in f["loads"].as_array().unwrap() {
            if l["ok"] == false {
                out.get_mut(l["gpu"].as_str().unwrap()).unwrap().insert(short.clone());
            }
        }
    }
    out
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn folder_of_hip_libraries_names_exactly_those_lacking_the_gpu() {
    // The HIP fixtures only: the fixture folder's subfolders hold other
    // offload kinds (OpenMP programs) with their own tests.
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(prune_fixture("")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, tmp.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let dir = tmp.path().to_path_buf();
    let o = offload(&[
        "check",
        "--no-deps",
        "--json",
        "--gpu",
        "gfx906",
        "--gpu",
        "gfx1030",
        "--gpu",
        "gfx90a:xnack+",
        p(&dir),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v = report(&o);
    let all = set(&["gnu_rela.so", "lld_relr.so", "nopie_gnu", "rdc_ccob_lld.so", "tu1.o", "tu12_r.o"]);
    let f = failing(&v);
    assert_eq!(f["gfx906"], BTreeSet::new());
    assert_eq!(f["gfx1030"], all);
    assert_eq!(f["gfx90a:xnack+"], BTreeSet::new());
    assert_eq!(v["ok"], false);
    assert_eq!(v["summary"]["fat_files"], 6);
    // Two fat binaries in each of the three files built from two TUs
    // without -fgpu-rdc, and in the `ld -r` object of both TUs.
    assert_eq!(v["summary"]["units"], 10);
    let per: Vec<(&str, u64, u64)> = v["summary"]["per_gpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (g["gpu"].as_str().unwrap(), g["failing_files"].as_u64().unwrap(), g["failing_units"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(per, [("gfx906", 0, 0), ("gfx1030", 6, 10), ("gfx90a:xnack+", 0, 0)]);
    let unit = &v["files"][0]["units"][0];
    assert_eq!(unit["loads"][0]["object"], "hipv4-amdgcn-amd-amdhsa--gfx906");
    assert_eq!(unit["loads"][1]["object"], Value::Null);
    assert_eq!(unit["loads"][1]["reason"], "no code object for gfx1030 (holds gfx906, gfx90a:xnack+, gfx90a:xnack-)");

    // The text: failures only, then one summary line per GPU.
    let o = offload(&["check", "--no-deps", "--gpu", "gfx906", "--gpu", "gfx1030", p(&dir)]);
    let out = text(&o.stdout);
    assert!(out.contains("gfx906: 6 GPU libraries, 10 fat binaries: all load\n"), "{out}");
    assert!(
        out.contains(
            "gfx1030: 6 GPU libraries, 10 fat binaries: 6 libraries lack gfx1030 code: gnu_rela.so, lld_relr.so, \
             nopie_gnu, rdc_ccob_lld.so, tu1.o, tu12_r.o (they hold gfx906, gfx90a:xnack+, gfx90a:xnack-)\n"
        ),
        "{out}"
    );
    assert!(!out.lines().any(|l| l.contains(" gfx906 ") && l.contains(" no ")), "{out}");
    // Everything loads: exit 0.
    let o = offload(&["check", "--no-deps", "--gpu", "gfx906", p(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
}

/// What glibc's loader resolves for `program`: (name, path) for every
/// library it lists with `=>`, and the names it does not find.
fn glibc_resolution(program: &Path) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let o = Command::new(program).env("LD_TRACE_LOADED_OBJECTS", "1").env_remove("LD_LIBRARY_PATH").output().unwrap();
    let (mut found, mut missing) = (BTreeMap::new(), BTreeSet::new());
    for line in text(&o.stdout).lines() {
        let Some((name, rest)) = line.trim().split_once(" => ") else { continue };
        if rest.starts_with("not found") {
            missing.insert(name.to_string());
        } else {
            let path = rest.split(" (").next().unwrap().to_string();
            found.insert(name.to_string(), fs::canonicalize(&path).unwrap().display().to_string());
        }
    }
    (found, missing)
}

/// A program linked against a copy of a HIP fixture library and a stub
/// libamdhip64.so in `$ORIGIN/../lib`, with DT_RPATH (`new_dtags` false) or
/// DT_RUNPATH.
fn program(dir: &Path, new_dtags: bool) -> PathBuf {
    let cc = common::llvm_tool(19, "clang");
    let lib = dir.join("lib");
    fs::create_dir_all(&lib).unwrap();
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::copy(prune_fixture("gnu_rela.so"), lib.join("libhipfix.so")).unwrap();
    fs::write(dir.join("stub.c"), "int hip_stub_marker;\n").unwrap();
    fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(&cc).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    };
    run(&["-shared", "-fPIC", "-o", p(&lib.join("libamdhip64.so")), p(&dir.join("stub.c"))]);
    let dtags = if new_dtags { "-Wl,--enable-new-dtags" } else { "-Wl,--disable-new-dtags" };
    let prog = dir.join("bin/prog");
    run(&[
        "-fuse-ld=bfd",
        "-o",
        p(&prog),
        p(&dir.join("main.c")),
        &format!("-L{}", lib.display()),
        "-Wl,--no-as-needed",
        "-lhipfix",
        "-Wl,--allow-shlib-undefined",
        dtags,
        "-Wl,-rpath,$ORIGIN/../lib",
    ]);
    prog
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn programs_are_followed_as_the_loader_follows_them() {
    let tmp = tempfile::tempdir().unwrap();
    // DT_RPATH: libhipfix.so's own dependency libamdhip64.so is found
    // through the program's RPATH (the loader chain).
    let prog = program(&tmp.path().join("rpath"), false);
    let o = offload(&["check", "--json", "--gpu", "gfx1030", p(&prog)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v = report(&o);
    let (glibc, glibc_missing) = glibc_resolution(&prog);
    let ours: BTreeMap<String, String> = v["libraries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                fs::canonicalize(l["path"].as_str().unwrap()).unwrap().display().to_string(),
            )
        })
        .collect();
    assert!(glibc_missing.is_empty(), "{glibc_missing:?}");
    for (name, path) in &glibc {
        assert_eq!(ours.get(name), Some(path), "{name}: ours {ours:?}");
    }
    assert!(glibc.contains_key("libamdhip64.so") && glibc.contains_key("libhipfix.so"), "{glibc:?}");
    let hipfix = v["libraries"].as_array().unwrap().iter().find(|l| l["name"] == "libhipfix.so").unwrap();
    assert_eq!(hipfix["via"], "rpath");
    assert_eq!(failing(&v)["gfx1030"], set(&["libhipfix.so"]));
    let fat = &v["files"].as_array().unwrap()[0];
    assert_eq!(fat["needed_by"][0], p(&prog));
    assert_eq!(v["missing"], serde_json::json!([]));
    let o = offload(&["check", "--gpu", "gfx906", p(&prog)]);
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));

    // DT_RUNPATH applies to the program's own dependencies only: glibc does
    // not find libamdhip64.so, and neither does check (exit 1, even for a
    // GPU every fat binary loads on).
    let prog = program(&tmp.path().join("runpath"), true);
    let (glibc, glibc_missing) = glibc_resolution(&prog);
    if let Some(system) = glibc.get("libamdhip64.so") {
        // A libamdhip64.so in a system folder (Debian's libamdhip64-dev
        // installs one, as CI does for hipcc): glibc takes that one, not
        // the one RUNPATH cannot reach, and so must check.
        assert!(!system.contains("runpath"), "{system}");
        let o = offload(&["check", "--json", "--gpu", "gfx906", p(&prog)]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let v = report(&o);
        let hip = v["libraries"].as_array().unwrap().iter().find(|l| l["name"] == "libamdhip64.so").unwrap();
        assert_eq!(&fs::canonicalize(hip["path"].as_str().unwrap()).unwrap().display().to_string(), system);
        assert_eq!(v["missing"], serde_json::json!([]));
        return;
    }
    assert_eq!(glibc_missing, set(&["libamdhip64.so"]));
    let o = offload(&["check", "--json", "--gpu", "gfx906", p(&prog)]);
    assert_eq!(o.status.code(), Some(1));
    let v = report(&o);
    assert_eq!(v["missing"][0]["name"], "libamdhip64.so");
    assert_eq!(v["missing"][0]["needed_by"], serde_json::json!([p(&prog), "libhipfix.so"]));
    let o = offload(&["check", "--gpu", "gfx906", p(&prog)]);
    assert!(text(&o.stderr).contains("error: libamdhip64.so: needed by "), "{}", text(&o.stderr));
    // --no-deps: the program alone (host-only) is fine.
    assert_eq!(offload(&["check", "--no-deps", "--gpu", "gfx906", p(&prog)]).status.code(), Some(0));
}

fn kfd(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/kfd").join(name)
}

/// A sysfs tree with a CPU node and one node per model (as `gpus_cli` writes them).
fn sysfs(models: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let nodes = root.path().join("sys/class/kfd/kfd/topology/nodes");
    for (n, model) in std::iter::once("cpu").chain(models.iter().copied()).enumerate() {
        let dir = nodes.join(n.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::copy(kfd(&format!("{model}.properties")), dir.join("properties")).unwrap();
    }
    let params = root.path().join("sys/module/amdgpu/parameters");
    fs::create_dir_all(&params).unwrap();
    fs::write(params.join("noretry"), "0\n").unwrap();
    root
}

#[test]
fn every_local_gpu_is_checked_and_none_means_exit_2() {
    // An MI50 (gfx906) twice and an RX 6800 (gfx1030): two distinct GPUs.
    let root = sysfs(&["mi50", "mi50", "rx6800"]);
    let lib = prune_fixture("gnu_rela.so");
    let o = offload(&["check", "--no-deps", "--json", "--sysfs-root", p(root.path()), p(&lib)]);
    let v = report(&o);
    let gpus: Vec<&str> = v["gpus"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    assert!(gpus[0].starts_with("gfx906") && gpus[1] == "gfx1030", "{gpus:?}");
    let f = failing(&v);
    assert_eq!((f[gpus[0]].len(), f[gpus[1]].len()), (0, 1), "{f:?}");
    assert_eq!(o.status.code(), Some(1));
    let empty = sysfs(&[]);
    let o = offload(&["check", "--sysfs-root", p(empty.path()), p(&lib)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("no GPU found on this machine; name one with --gpu"), "{}", text(&o.stderr));
}

#[test]
fn standalone_code_objects_serve_gpus_and_host_files_are_only_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // gfx1030 (EF_AMDGPU_MACH 0x36) and gfx906 with xnack any (0x52f).
    fs::write(d.join("kernels-gfx1030.hsaco"), inspect_support::elf(0x36, "")).unwrap();
    fs::write(d.join("kernels-gfx906.co"), inspect_support::elf(0x52f, "")).unwrap();
    fs::copy(std::env::current_exe().unwrap(), d.join("host-only")).unwrap();
    let o = offload(&["check", "--json", "--gpu", "gfx1030", p(d)]);
    assert_eq!(o.status.code(), Some(0), "standalone code objects are not failures: {}", text(&o.stderr));
    let v = report(&o);
    let files = v["files"].as_array().unwrap();
    let serves: BTreeMap<&str, (bool, &str)> = files
        .iter()
        .map(|f| {
            let name = f["file"].as_str().unwrap().rsplit('/').next().unwrap();
            (name, (f["loads"][0]["ok"].as_bool().unwrap(), f["targets"][0].as_str().unwrap()))
        })
        .collect();
    assert_eq!(serves["kernels-gfx1030.hsaco"], (true, "gfx1030"));
    assert_eq!(serves["kernels-gfx906.co"], (false, "gfx906"));
    assert!(files.iter().all(|f| f["role"] == "standalone"));
    assert_eq!(v["summary"]["host_files"], 1, "the host-only file is counted");
    assert_eq!(files.len(), 2, "and not reported");
    assert_eq!(v["summary"]["per_gpu"][0]["standalone_served"], 1);
    let o = offload(&["check", "-v", "--gpu", "gfx1030", p(d)]);
    let out = text(&o.stdout);
    assert!(out.contains("also: 1 host-only file, 2 standalone code objects (1 serve gfx1030)"), "{out}");
    assert!(out.lines().any(|l| l.contains("kernels-gfx1030.hsaco") && l.trim_end().ends_with("gfx1030")), "{out}");
}

// The real corpus: wheels checked without unpacking.

fn corpus() -> PathBuf {
    let dir = std::env::var_os("OFFLOAD_CORPUS_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus")
    });
    assert!(
        dir.join("packages").is_dir(),
        "needs the real corpus in {}; run scripts/fetch-real-corpus.sh",
        dir.display()
    );
    dir
}

fn json(args: &[&str]) -> Vec<Value> {
    let o = offload(args);
    serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().cloned().unwrap()
}

/// The members of a package with a fat binary in which `offload select`
/// picks nothing for `gpu`: every unit `list` shows with device code,
/// minus those `select` picks an object in.
fn expected_failing(package: &Path, listed: &[Value], gpu: &str) -> BTreeSet<String> {
    // `member data.tar.xz member usr/lib/librocrand.so.1.1 section .hip_fatbin`: the innermost member.
    let member = |r: &Value| {
        let location = r["location"].as_str().unwrap();
        let inner = location.split(" section ").next().unwrap().rsplit("member ").next().unwrap();
        inner.trim().rsplit('/').next().unwrap().to_string()
    };
    let mut units: BTreeMap<(String, u64), bool> = BTreeMap::new();
    for r in listed {
        if r["offload_kind"] != "host" {
            units.insert((member(r), r["unit"].as_u64().unwrap()), false);
        }
    }
    for r in json(&["select", "--json", "--gpu", gpu, p(package)]) {
        if r["selected"] == true {
            units.insert((member(&r), r["unit"].as_u64().unwrap()), true);
        }
    }
    units.into_iter().filter(|(_, ok)| !ok).map(|((m, _), _)| m).collect()
}

#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn real_wheels_name_exactly_the_members_lacking_the_gpu() {
    let corpus = corpus();
    let mut checked = 0;
    for entry in fs::read_dir(corpus.join("packages")).unwrap() {
        for package in fs::read_dir(entry.unwrap().path()).unwrap() {
            let package = package.unwrap().path();
            let listed = json(&["list", "--json", p(&package)]);
            for gpu in ["gfx1030", "gfx1010"] {
                let o = offload(&["check", "--json", "--gpu", gpu, p(&package)]);
                let v = report(&o);
                let ours = failing(&v).remove(gpu).unwrap();
                let want = expected_failing(&package, &listed, gpu);
                assert_eq!(ours, want, "{} on {gpu}", package.display());
                assert_eq!(
                    o.status.code(),
                    Some(if want.is_empty() { 0 } else { 1 }),
                    "{}: {}",
                    package.display(),
                    text(&o.stderr)
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "{checked} package checks");
}

#[test]
fn unreadable_and_hostile_inputs_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.so");
    let o = offload(&["check", "--gpu", "gfx1030", p(&missing)]);
    // A file that cannot be read is an I/O error (docs/reference/offload.md).
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stdout), "gfx1030: no fat binaries found\nalso: 0 host-only files, 1 file not read\n");
    // An ELF header followed by junk: a message, no crash.
    let mut junk = b"\x7fELF\x02\x01\x01".to_vec();
    junk.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let bad = tmp.path().join("bad.so");
    fs::write(&bad, junk).unwrap();
    let o = offload(&["check", "--gpu", "gfx1030", p(&bad)]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
    // A host-only program: nothing to load, nothing wrong.
    let o = offload(&["check", "--gpu", "gfx1030", "/bin/sh"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// Two fat binaries in one section (libtwo.so's `.hip_fatbin`): `check
/// --json` gives each unit the index `list` and `select` use, and a yes/no
/// per GPU, so the two can be told apart (issue 28).
#[test]
fn json_units_carry_the_list_index_and_a_yes_or_no_per_gpu() {
    let lib = common::fixtures().join("inspect/libtwo.so");
    let o = offload(&["check", "--json", "--gpu", "gfx90a:xnack+", "--gpu", "gfx906", p(&lib)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v = report(&o);
    let files = v["files"].as_array().unwrap();
    let fat: Vec<&Value> = files.iter().filter(|f| f["role"] == "fat").collect();
    assert_eq!(fat.len(), 1);
    // (unit, location, [(gpu, loads)])
    type Unit = (u64, String, Vec<(String, bool)>);
    let units: Vec<Unit> = fat[0]["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            let loads = u["loads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| (l["gpu"].as_str().unwrap().to_string(), l["ok"].as_bool().unwrap()))
                .collect();
            (u["unit"].as_u64().unwrap(), u["location"].as_str().unwrap().to_string(), loads)
        })
        .collect();
    let yes_no = |a: bool, b: bool| vec![("gfx90a:xnack+".to_string(), a), ("gfx906".to_string(), b)];
    assert_eq!(
        units,
        [
            (0, "section .hip_fatbin #0".to_string(), yes_no(false, true)),
            (1, "section .hip_fatbin #1".to_string(), yes_no(true, false)),
        ]
    );
    // The same indices as `offload list --json`.
    let listed: BTreeSet<(u64, String)> =
        serde_json::from_slice::<Value>(&offload(&["list", "--json", p(&lib)]).stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["unit"].as_u64().unwrap(), r["location"].as_str().unwrap().to_string()))
            .collect();
    let checked: BTreeSet<(u64, String)> = units.iter().map(|(u, l, _)| (*u, l.clone())).collect();
    assert_eq!(listed, checked);
}
