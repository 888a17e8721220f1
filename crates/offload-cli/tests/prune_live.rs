//! `offload prune` on real HIP host programs, built by clang 19 without ROCm
//! (`-nogpulib -nogpuinc`, `prune_support/hip_min.h`) and linked with GNU
//! ld and lld as shared libraries, PIE and non-PIE executables, with RELA
//! and RELR, with and without `-fgpu-rdc` and `--offload-compress`. Each
//! program runs against `prune_support/hip_stub.c`, a stand-in for
//! libamdhip64.so that reads every registered fat binary the way the HIP
//! runtime does and prints a trace; after pruning, the trace must be the
//! same except for the dropped entries. The output must also satisfy
//! `llvm-readelf -lS` (no warnings) and LLVM's bundler must list each
//! rewritten fat binary as holding exactly the kept entries.

mod common;

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHS: [&str; 3] = ["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+", "--offload-arch=gfx90a:xnack-"];

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Flavour {
    pic: bool,
    rdc: bool,
    compress: bool,
}

#[derive(Clone, Copy, Debug)]
enum Output {
    Shared,
    Pie,
    NoPie,
}

struct Tools {
    clang: PathBuf,
    readelf: PathBuf,
    bundler: PathBuf,
    support: PathBuf,
    dir: tempfile::TempDir,
    objects: HashMap<Flavour, [PathBuf; 2]>,
}

fn check(cmd: &mut Command) -> std::process::Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

impl Tools {
    fn get() -> Option<Tools> {
        let clang = common::llvm_tool(19, "clang")?;
        let readelf = common::llvm_tool(19, "llvm-readelf")?;
        let bundler = common::llvm_tool(19, "clang-offload-bundler")?;
        common::llvm_tool(19, "ld.lld")?;
        for needed in ["/usr/bin/ld.bfd", "/usr/lib/x86_64-linux-gnu/libzstd.so.1"] {
            if !Path::new(needed).exists() {
                assert!(!common::llvm_required(), "OFFLOAD_REQUIRE_LLVM=1 but {needed} is missing");
                eprintln!("skipping: {needed} not installed");
                return None;
            }
        }
        let support = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/prune_support");
        let dir = tempfile::tempdir().unwrap();
        let stub = dir.path().join("libamdhip64.so");
        check(
            Command::new(&clang)
                .args(["-shared", "-fPIC", "-o", s(&stub)])
                .arg(support.join("hip_stub.c"))
                .arg("/usr/lib/x86_64-linux-gnu/libzstd.so.1"),
        );
        Some(Tools { clang, readelf, bundler, support, dir, objects: HashMap::new() })
    }

    fn hip_flags(&self, f: Flavour) -> Vec<String> {
        let mut v: Vec<String> = ARCHS.iter().map(|a| a.to_string()).collect();
        v.extend(["-nogpulib", "-nogpuinc", "-O1", "-Wno-unused-command-line-argument"].map(String::from));
        v.push(format!("-I{}", self.support.display()));
        if f.rdc {
            v.push("-fgpu-rdc".into());
        }
        if f.compress {
            v.push("--offload-compress".into());
        }
        v
    }

    fn objects(&mut self, f: Flavour) -> [PathBuf; 2] {
        if let Some(o) = self.objects.get(&f) {
            return o.clone();
        }
        let tag = format!("{}{}{}", f.pic as u8, f.rdc as u8, f.compress as u8);
        let objs = ["tu1", "tu2"].map(|tu| {
            let o = self.dir.path().join(format!("{tu}-{tag}.o"));
            let mut c = Command::new(&self.clang);
            c.args(["-x", "hip", "-c", if f.pic { "-fPIC" } else { "-fno-pic" }]).args(self.hip_flags(f));
            check(c.arg(self.support.join(format!("{tu}.hip"))).arg("-o").arg(&o));
            o
        });
        self.objects.insert(f, objs.clone());
        objs
    }

    /// Links a variant; returns (the file to prune, the program to run,
    /// the folder the pruned file goes to, its path there).
    fn link(&mut self, name: &str, f: Flavour, ld: &str, out: Output, relr: bool) -> (PathBuf, PathBuf, PathBuf) {
        let objs = self.objects(f);
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(dir.join("pruned")).unwrap();
        let mut c = Command::new(&self.clang);
        c.arg(format!("-fuse-ld={ld}"));
        if f.rdc {
            c.arg("--hip-link").args(self.hip_flags(f));
        }
        if relr {
            c.arg("-Wl,-z,pack-relative-relocs");
        }
        let (target, program) = match out {
            Output::Shared => {
                let lib = dir.join("libtwo.so");
                c.args(["-shared", "-o", s(&lib)]);
                (lib, dir.join("main"))
            }
            Output::Pie | Output::NoPie => {
                let exe = dir.join("prog");
                c.arg(if matches!(out, Output::Pie) { "-pie" } else { "-no-pie" });
                c.args(["-o", s(&exe)]).arg(self.support.join("main.c"));
                (exe.clone(), exe)
            }
        };
        c.args(&objs).arg(format!("-L{}", self.dir.path().display())).args(["-lamdhip64", "-lstdc++"]);
        check(&mut c);
        if matches!(out, Output::Shared) {
            check(
                Command::new(&self.clang)
                    .args(["-o", s(&program)])
                    .arg(self.support.join("main.c"))
                    .arg(format!("-L{}", dir.display()))
                    .arg(format!("-Wl,-rpath-link,{}", self.dir.path().display()))
                    .arg("-ltwo"),
            );
        }
        (target, program, dir)
    }

    fn trace(&self, program: &Path, lib_dir: &Path) -> String {
        let path = format!("{}:{}", lib_dir.display(), self.dir.path().display());
        let out = check(Command::new(program).env("LD_LIBRARY_PATH", path));
        String::from_utf8(out.stdout).unwrap()
    }
}

/// A folder where `libamdhip64.so` is Debian's real HIP runtime
/// (`apt-get install libamdhip64-5`), if it is installed.
fn real_runtime(t: &Tools) -> Option<PathBuf> {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    if !lib.exists() {
        eprintln!("note: libamdhip64-5 is not installed; the pruned programs run with the stub runtime only");
        return None;
    }
    let dir = t.dir.path().join("real-runtime");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(lib, dir.join("libamdhip64.so")).unwrap();
    Some(dir)
}

/// Trace lines that do not depend on which entries a bundle holds.
fn comparable(trace: &str, dropped: &[String]) -> Vec<String> {
    trace
        .lines()
        .filter(|l| !l.starts_with("  fatbin size") && !l.starts_with(" compressed v"))
        .filter(|l| !dropped.iter().any(|id| l.contains(&format!(" entry {id} "))))
        .map(String::from)
        .collect()
}

#[test]
fn pruned_programs_register_the_same_code_minus_the_dropped_entries() {
    let Some(mut t) = Tools::get() else { return };
    let plain = Flavour { pic: true, rdc: false, compress: false };
    let variants = [
        ("gnu-so-rela", plain, "bfd", Output::Shared, false, "gfx90a:xnack+"),
        ("lld-so-rela", plain, "lld", Output::Shared, false, "gfx906"),
        ("lld-so-relr", plain, "lld", Output::Shared, true, "gfx90a"),
        ("gnu-so-relr", plain, "bfd", Output::Shared, true, "gfx906,gfx90a:xnack-"),
        ("gnu-pie", plain, "bfd", Output::Pie, false, "gfx90a:xnack-"),
        ("lld-nopie", Flavour { pic: false, ..plain }, "lld", Output::NoPie, false, "gfx906"),
        ("gnu-so-compress", Flavour { compress: true, ..plain }, "bfd", Output::Shared, false, "gfx90a:xnack+"),
        ("gnu-so-rdc", Flavour { rdc: true, ..plain }, "bfd", Output::Shared, false, "gfx906"),
        ("lld-so-rdc-compress", Flavour { rdc: true, compress: true, ..plain }, "lld", Output::Shared, false, "gfx90a"),
        ("lld-pie-rdc-relr", Flavour { rdc: true, ..plain }, "lld", Output::Pie, true, "gfx90a:xnack+"),
    ];
    let real_runtime = real_runtime(&t);
    for (name, flavour, ld, output, relr, keep) in variants {
        let (target, program, dir) = t.link(name, flavour, ld, output, relr);
        let before = t.trace(&program, &dir);
        assert!(before.contains("host: 1 2") && before.contains("register magic 48495046"), "{name}: {before}");
        let pruned = dir.join("pruned").join(target.file_name().unwrap());
        let o = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args([
            "prune",
            "--json",
            "--keep",
            keep,
            s(&target),
            "-o",
            s(&pruned),
        ]));
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let units = report["units"].as_array().unwrap();
        let dropped: Vec<String> = units
            .iter()
            .flat_map(|u| u["dropped"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()))
            .collect();
        assert!(!dropped.is_empty(), "{name}: nothing dropped");
        let after = match output {
            Output::Shared => t.trace(&program, &dir.join("pruned")),
            _ => t.trace(&pruned, &dir),
        };
        // The same registrations and entries, minus the dropped ones.
        assert_eq!(comparable(&after, &[]), comparable(&before, &dropped), "{name}:\n{before}\n---\n{after}");
        assert!(!dropped.iter().any(|id| after.contains(&format!(" entry {id} "))), "{name}: {after}");

        if let Some(real) = &real_runtime {
            // Debian's libamdhip64.so.5 registers the pruned code (there is
            // no GPU here, so nothing is launched).
            let libs = match output {
                Output::Shared => format!("{}:{}", dir.join("pruned").display(), real.display()),
                _ => real.display().to_string(),
            };
            let run = if matches!(output, Output::Shared) { program.clone() } else { pruned.clone() };
            let o = check(Command::new(&run).env("LD_LIBRARY_PATH", libs));
            assert_eq!(String::from_utf8_lossy(&o.stdout), "host: 1 2\n", "{name} with the real runtime");
        }

        // The ELF structure reads without a warning.
        let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", s(&pruned)]));
        assert!(re.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&re.stderr));

        // LLVM's bundler lists exactly the kept entries of each rewritten unit.
        let bytes = std::fs::read(&pruned).unwrap();
        for (i, u) in units.iter().enumerate() {
            if u["dropped"].as_array().unwrap().is_empty() {
                continue;
            }
            let (at, len) = (u["offset"].as_u64().unwrap() as usize, u["new_size"].as_u64().unwrap() as usize);
            let piece = dir.join(format!("unit{i}"));
            std::fs::write(&piece, &bytes[at..at + len]).unwrap();
            let list = check(Command::new(&t.bundler).args(["-list", "-type=o", &format!("-input={}", s(&piece))]));
            let mut listed: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(String::from).collect();
            let mut kept: Vec<String> =
                u["kept"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
            listed.sort();
            kept.sort();
            assert_eq!(listed, kept, "{name}: unit {i}");
        }
    }
}
