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
//!
//! Every program is also pruned in cut mode (the file shrinks; one C++
//! exception is thrown and caught in `tu2.hip`, through the moved unwind
//! tables) and must then give the same trace, load with the real runtime,
//! read without warnings, list in LLVM's bundler, let Debian's comgr find
//! each kept target at its new offset (and nothing for dropped ones), and
//! still work after `llvm-strip-19`.

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
    strip: PathBuf,
    comgr: Option<PathBuf>,
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
        let strip = common::llvm_tool(19, "llvm-strip")?;
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
        let comgr = comgr_lookup(&clang, dir.path());
        Some(Tools { clang, readelf, bundler, strip, comgr, support, dir, objects: HashMap::new() })
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

/// `real_corpus_helpers/comgr_lookup.c` built against Debian's comgr
/// (`libamd-comgr-dev`), or `None` with a loud note (a failure under
/// `OFFLOAD_REQUIRE_LLVM=1`) when it is not installed.
fn comgr_lookup(clang: &Path, dir: &Path) -> Option<PathBuf> {
    if !Path::new("/usr/include/amd_comgr.h").exists() {
        assert!(!common::llvm_required(), "OFFLOAD_REQUIRE_LLVM=1 but libamd-comgr-dev is missing");
        eprintln!("skipping the comgr lookups of cut outputs: libamd-comgr-dev is not installed");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/real_corpus_helpers/comgr_lookup.c");
    let exe = dir.join("comgr_lookup");
    check(Command::new(clang).args(["-O1", "-o", s(&exe)]).arg(src).arg("-lamd_comgr"));
    Some(exe)
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

        let run = Run { name, target: &target, program: &program, dir: &dir, output, keep };
        cut_and_check(&t, &run, &before, real_runtime.as_deref());
    }
}

/// One linked variant, as `cut_and_check` needs it.
struct Run<'r> {
    name: &'r str,
    target: &'r Path,
    program: &'r Path,
    dir: &'r Path,
    output: Output,
    keep: &'r str,
}

/// The trace of the variant with the file to prune replaced by `file`.
fn trace_with(t: &Tools, run: &Run, file: &Path) -> String {
    match run.output {
        Output::Shared => t.trace(run.program, file.parent().unwrap()),
        _ => t.trace(file, run.dir),
    }
}

/// Prunes the variant in cut mode and checks the result every way the
/// zero-mode output is checked, plus comgr and llvm-strip.
fn cut_and_check(t: &Tools, run: &Run, before: &str, real_runtime: Option<&Path>) {
    let name = run.name;
    let cut_dir = run.dir.join("cut");
    std::fs::create_dir_all(&cut_dir).unwrap();
    let cut = cut_dir.join(run.target.file_name().unwrap());
    let args = ["prune", "--mode", "cut", "--json", "--keep", run.keep, s(run.target), "-o", s(&cut)];
    let o = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{name} (cut): {stderr}");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // tu1.hip's 32 KiB of noise per target leave enough pages to cut.
    assert_eq!(report["mode"], "cut", "{name}: {stderr}");
    assert!(stderr.contains("do not run GNU strip or objcopy"), "{name}: {stderr}");
    let (input_size, output_size) = (report["input_size"].as_u64().unwrap(), report["output_size"].as_u64().unwrap());
    assert_eq!(std::fs::metadata(&cut).unwrap().len(), output_size, "{name}");
    assert_eq!(std::fs::metadata(run.target).unwrap().len(), input_size, "{name}");
    // Whole pages leave: about the bytes the kept bundles no longer use,
    // less the page that takes the program header table.
    let removed = input_size - output_size;
    eprintln!("{name}: cut {input_size} -> {output_size} bytes");
    let freed = report["freed_bytes"].as_u64().unwrap();
    assert!(removed % 4096 == 0 && removed >= 2 * 4096, "{name}: {removed}");
    assert!(removed <= freed + 4096 && removed + 3 * 4096 >= freed, "{name}: removed {removed}, freed {freed}");
    let units = report["units"].as_array().unwrap();
    let dropped: Vec<String> = units
        .iter()
        .flat_map(|u| u["dropped"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()))
        .collect();

    // The stand-in runtime sees the same registrations minus the dropped
    // entries, and the exception in tu2 is still caught ("host: 1 2").
    let after = trace_with(t, run, &cut);
    assert_eq!(comparable(&after, &[]), comparable(before, &dropped), "{name} (cut):\n{before}\n---\n{after}");
    if let Some(real) = real_runtime {
        let libs = match run.output {
            Output::Shared => format!("{}:{}", cut_dir.display(), real.display()),
            _ => real.display().to_string(),
        };
        let exe = if matches!(run.output, Output::Shared) { run.program } else { cut.as_path() };
        let o = check(Command::new(exe).env("LD_LIBRARY_PATH", libs));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "host: 1 2\n", "{name} (cut) with the real runtime");
    }
    let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", s(&cut)]));
    assert!(re.stderr.is_empty(), "{name} (cut): {}", String::from_utf8_lossy(&re.stderr));

    let bytes = std::fs::read(&cut).unwrap();
    for (i, u) in units.iter().enumerate() {
        let (at, len) = (u["new_offset"].as_u64().unwrap() as usize, u["new_size"].as_u64().unwrap() as usize);
        let piece = run.dir.join(format!("cut-unit{i}"));
        std::fs::write(&piece, &bytes[at..at + len]).unwrap();
        let list = check(Command::new(&t.bundler).args(["-list", "-type=o", &format!("-input={}", s(&piece))]));
        let mut listed: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(String::from).collect();
        let mut kept: Vec<String> =
            u["kept"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
        listed.sort();
        kept.sort();
        assert_eq!(listed, kept, "{name} (cut): unit {i}");
        if u["format"] == "bundle" {
            comgr_finds_the_kept_entries(t, name, &bytes, at, u);
        }
    }

    // llvm-strip keeps a cut file working (GNU strip would not).
    let stripped_dir = run.dir.join("cut-stripped");
    std::fs::create_dir_all(&stripped_dir).unwrap();
    let stripped = stripped_dir.join(run.target.file_name().unwrap());
    check(Command::new(&t.strip).arg(s(&cut)).arg("-o").arg(&stripped));
    let again = trace_with(t, run, &stripped);
    assert_eq!(again, after, "{name}: the llvm-stripped cut output runs differently");
}

/// Debian's comgr, given the 4096-byte window the HIP runtime gives it at
/// the bundle's new offset, finds each kept target there (at the entry's
/// offset and size in the rewritten bundle) and nothing for dropped ones.
fn comgr_finds_the_kept_entries(t: &Tools, name: &str, file: &[u8], at: usize, unit: &Value) {
    let Some(comgr) = &t.comgr else { return };
    let window = &file[at..(at + 4096).min(file.len())];
    let path = t.dir.path().join("comgr-window");
    std::fs::write(&path, window).unwrap();
    let isa = |id: &str| id.split_once("--").map(|(_, target)| format!("amdgcn-amd-amdhsa--{target}"));
    let ids = |key: &str| -> Vec<String> {
        unit[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    // The bundle's own table: id -> (offset, size).
    let count = u64::from_le_bytes(window[24..32].try_into().unwrap()) as usize;
    let mut table = HashMap::new();
    let mut pos = 32;
    for _ in 0..count {
        let word = |k: usize| u64::from_le_bytes(window[pos + k * 8..pos + k * 8 + 8].try_into().unwrap());
        let (off, size, len) = (word(0), word(1), word(2) as usize);
        table.insert(String::from_utf8_lossy(&window[pos + 24..pos + 24 + len]).into_owned(), (off, size));
        pos += 24 + len;
    }
    for (id, kept) in ids("kept").into_iter().map(|i| (i, true)).chain(ids("dropped").into_iter().map(|i| (i, false))) {
        let Some(isa) = isa(&id).filter(|_| id.starts_with("hip")) else { continue };
        let o = check(Command::new(comgr).arg(&path).arg(&isa));
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let fields: Vec<u64> = line.split(' ').skip(1).map(|f| f.parse().unwrap()).collect();
        if kept {
            let (off, size) = table[&id];
            assert_eq!(fields, [off, size], "{name}: comgr on {isa}");
        } else {
            assert_eq!(fields, [0, 0], "{name}: comgr found the dropped {isa}");
        }
    }
}
