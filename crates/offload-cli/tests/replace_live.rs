//! `offload replace` on real HIP host programs built by clang 19 without
//! ROCm (as in `prune_live.rs`: `-nogpulib -nogpuinc`,
//! `prune_support/hip_min.h`), linked with GNU ld and lld as shared
//! libraries, PIE and non-PIE executables, with RELA and RELR, with and
//! without `-fgpu-rdc` and `--offload-compress`. In each, unit 0's
//! gfx90a:xnack+ code object is replaced twice: by a rebuilt, instrumented
//! object of about the same size (in place) and by one with 80 KB more data
//! (the fat binaries move to a new segment). Then:
//! * the program runs against `prune_support/hip_stub.c`, which reads each
//!   registered fat binary as the HIP runtime does: its trace must be the
//!   old one with the new object's size and hash in that entry's line;
//! * Debian's comgr (`amd_comgr_lookup_code_object`) picks the new object
//!   for gfx90a:xnack+ in the rewritten bundle;
//! * Debian's real `libamdhip64.so.5` registers the code (no GPU here);
//! * `llvm-readelf -lS` reads the output without a warning, and the output
//!   still runs after `llvm-strip`.
//!
//! One library has 100 MiB of `.bss`: its new segment is placed above it
//! without padding the file (address no longer equal to offset, which only
//! executables need).

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHS: [&str; 3] = ["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+", "--offload-arch=gfx90a:xnack-"];

/// The instrumented rebuild of `tu1.hip`'s device code: the same kernel
/// and variable, a call counter, and with `-DBIG=N` N bytes more data.
/// The instrumented kernel that replaces `add_one` of `tu1.hip`: the rest
/// of that file (its device globals, `noise` included) stays, since a
/// replacement must define every global the old object defined.
const INSTRUMENTED_KERNEL: &str = r#"__device__ int calls;
#ifdef BIG
__device__ char padding[BIG] = {1};
#endif
__global__ void add_one(int *p) {
  calls += 1;
#ifdef BIG
  p[1] = padding[p[2]];
#endif
  p[0] += scale + (int)noise.v[p[1] & 8191];
}
"#;

/// `tu1.hip` with its kernel swapped for [`INSTRUMENTED_KERNEL`].
fn instrumented_source(support: &Path) -> String {
    let original = std::fs::read_to_string(support.join("tu1.hip")).unwrap();
    let kernel = original.lines().find(|l| l.starts_with("__global__ void add_one")).expect("tu1.hip's kernel");
    original.replacen(kernel, INSTRUMENTED_KERNEL.trim_end(), 1)
}

struct Tools {
    clang: PathBuf,
    readelf: PathBuf,
    strip: PathBuf,
    objcopy: PathBuf,
    support: PathBuf,
    dir: tempfile::TempDir,
}

fn check(cmd: &mut Command) -> std::process::Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(1469598103934665603u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(1099511628211))
}

fn offload(args: &[&str]) -> std::process::Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

impl Tools {
    fn get() -> Option<Tools> {
        let clang = common::llvm_tool(19, "clang")?;
        let readelf = common::llvm_tool(19, "llvm-readelf")?;
        let strip = common::llvm_tool(19, "llvm-strip")?;
        let objcopy = common::llvm_tool(19, "llvm-objcopy")?;
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
        check(
            Command::new(&clang)
                .args(["-shared", "-fPIC", "-o", s(&dir.path().join("libamdhip64.so"))])
                .arg(support.join("hip_stub.c"))
                .arg("/usr/lib/x86_64-linux-gnu/libzstd.so.1"),
        );
        Some(Tools { clang, readelf, strip, objcopy, support, dir })
    }

    fn hip_flags(&self, rdc: bool, compress: bool) -> Vec<String> {
        let mut v: Vec<String> = ARCHS.iter().map(|a| a.to_string()).collect();
        v.extend(["-nogpulib", "-nogpuinc", "-O1", "-Wno-unused-command-line-argument"].map(String::from));
        v.push(format!("-I{}", self.support.display()));
        if rdc {
            v.push("-fgpu-rdc".into());
        }
        if compress {
            v.push("--offload-compress".into());
        }
        v
    }

    /// Builds a variant in its own folder; returns (the file to rewrite,
    /// the program to run, the folder).
    fn build(
        &self,
        name: &str,
        ld: &str,
        kind: &str,
        rdc: bool,
        compress: bool,
        relr: bool,
    ) -> (PathBuf, PathBuf, PathBuf) {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let pic = kind != "nopie";
        let objs: Vec<PathBuf> = ["tu1", "tu2"]
            .iter()
            .map(|tu| {
                let o = dir.join(format!("{tu}.o"));
                let mut c = Command::new(&self.clang);
                c.args(["-x", "hip", "-c", if pic { "-fPIC" } else { "-fno-pic" }]).args(self.hip_flags(rdc, compress));
                check(c.arg(self.support.join(format!("{tu}.hip"))).arg("-o").arg(&o));
                o
            })
            .collect();
        let mut c = Command::new(&self.clang);
        c.arg(format!("-fuse-ld={ld}"));
        if rdc {
            c.arg("--hip-link").args(self.hip_flags(rdc, compress));
        }
        if relr {
            c.arg("-Wl,-z,pack-relative-relocs");
        }
        let (target, program) = if kind == "so" {
            let lib = dir.join("libtwo.so");
            c.args(["-shared", "-o", s(&lib)]);
            (lib, dir.join("main"))
        } else {
            let exe = dir.join("prog");
            c.arg(if kind == "pie" { "-pie" } else { "-no-pie" })
                .args(["-o", s(&exe)])
                .arg(self.support.join("main.c"));
            (exe.clone(), exe)
        };
        c.args(&objs).arg(format!("-L{}", self.dir.path().display())).args(["-lamdhip64", "-lstdc++"]);
        if name.contains("bigbss") {
            // 100 MiB of .bss: the new segment goes above it without padding.
            let bss = dir.join("bss.c");
            std::fs::write(&bss, "char big_bss[100 << 20];\nchar *touch_bss(void) { return big_bss; }\n").unwrap();
            c.arg("-fPIC").arg(&bss);
        }
        check(&mut c);
        if kind == "so" {
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

    /// Runs `program` (a library it needs lies in `lib_dir`) with `hip`
    /// (default: the stub) as the HIP runtime.
    fn run(&self, program: &Path, lib_dir: &Path, hip: Option<&Path>) -> String {
        let runtime = hip.unwrap_or(self.dir.path());
        let path = format!("{}:{}", lib_dir.display(), runtime.display());
        let out = check(Command::new(program).env("LD_LIBRARY_PATH", path));
        String::from_utf8(out.stdout).unwrap()
    }

    /// A rebuilt gfx90a:xnack+ object for unit 0 of `target`: the
    /// instrumented source for separately compiled code; for -fgpu-rdc
    /// (one object linked from both files) the old object with a new
    /// non-allocated section, as a debug-info-only rebuild would be.
    fn new_object(&self, dir: &Path, old: &Path, rdc: bool, big: bool) -> Vec<u8> {
        let out = dir.join(if big { "big.co" } else { "small.co" });
        if rdc {
            let pad = dir.join("pad");
            // Incompressible, so that a compressed bundle must grow too.
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let bytes: Vec<u8> = (0..if big { 80_000 } else { 64 })
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            std::fs::write(&pad, bytes).unwrap();
            check(Command::new(&self.objcopy).arg(format!("--add-section=.pad={}", s(&pad))).arg(old).arg(&out));
        } else {
            let src = dir.join("instrumented.hip");
            std::fs::write(&src, instrumented_source(&self.support)).unwrap();
            let mut c = Command::new(&self.clang);
            c.args(["-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "--offload-arch=gfx90a:xnack+"]);
            c.args(["-nogpulib", "-nogpuinc", "-O1", "-c"]).arg(format!("-I{}", self.support.display()));
            if big {
                c.arg("-DBIG=80000");
            }
            check(c.arg(&src).arg("-o").arg(&out));
        }
        std::fs::read(&out).unwrap()
    }
}

/// Debian's comgr behind `real_corpus_helpers/comgr_lookup.c`, if installed.
fn comgr(t: &Tools) -> Option<PathBuf> {
    if !Path::new("/usr/include/amd_comgr.h").is_file() {
        eprintln!("note: comgr is not installed (libamd-comgr-dev); the comgr lookup is skipped");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/real_corpus_helpers/comgr_lookup.c");
    let exe = t.dir.path().join("comgr_lookup");
    check(Command::new("cc").args(["-O1", "-o", s(&exe), s(&src), "-lamd_comgr"]));
    Some(exe)
}

/// Debian's real HIP runtime in a folder as `libamdhip64.so`, if installed.
fn real_runtime(t: &Tools) -> Option<PathBuf> {
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    if !lib.exists() {
        eprintln!("note: libamdhip64-5 is not installed; the programs run with the stub runtime only");
        return None;
    }
    let dir = t.dir.path().join("real-runtime");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(lib, dir.join("libamdhip64.so")).unwrap();
    Some(dir)
}

/// Trace lines that do not depend on the size of a fat binary.
fn comparable(trace: &str) -> Vec<String> {
    trace
        .lines()
        .filter(|l| !l.starts_with("  fatbin size") && !l.starts_with(" compressed v"))
        .map(String::from)
        .collect()
}

#[test]
fn replaced_code_objects_are_what_the_runtime_reads() {
    let Some(t) = Tools::get() else { return };
    let comgr = comgr(&t);
    let real = real_runtime(&t);
    let variants = [
        ("gnu-so-rela", "bfd", "so", false, false, false),
        ("lld-so-relr", "lld", "so", false, false, true),
        ("gnu-pie", "bfd", "pie", false, false, false),
        ("lld-nopie", "lld", "nopie", false, false, false),
        ("gnu-so-compress", "bfd", "so", false, true, false),
        ("gnu-so-rdc", "bfd", "so", true, false, false),
        ("lld-so-rdc-compress", "lld", "so", true, true, false),
        ("lld-so-bigbss", "lld", "so", false, false, false),
    ];
    for (name, ld, kind, rdc, compress, relr) in variants {
        let (target, program, dir) = t.build(name, ld, kind, rdc, compress, relr);
        let before = t.run(&program, &dir, None);
        assert!(before.contains("host: 1 2"), "{name}: {before}");
        // Index 2 of `offload list`: unit 0's gfx90a:xnack+ object.
        let old_path = dir.join("old.co");
        check(Command::new(env!("CARGO_BIN_EXE_offload")).args([
            "extract",
            "--index",
            "2",
            s(&target),
            "-o",
            s(&old_path),
        ]));
        let old = std::fs::read(&old_path).unwrap();
        for big in [false, true] {
            let new = t.new_object(&dir, &old_path, rdc, big);
            let tag = if big { "big" } else { "small" };
            let out_dir = dir.join(tag);
            std::fs::create_dir_all(&out_dir).unwrap();
            let out = out_dir.join(target.file_name().unwrap());
            let with = dir.join(format!("{tag}.co"));
            let o = offload(&[
                "replace",
                "--json",
                "--entry",
                "gfx90a:xnack+",
                "--unit",
                "0",
                "--with",
                s(&with),
                s(&target),
                "-o",
                s(&out),
            ]);
            assert!(o.status.success(), "{name} {tag}: {}", String::from_utf8_lossy(&o.stderr));
            let report: Value = serde_json::from_slice(&o.stdout).unwrap();
            let placement = report["placement"].as_str().unwrap().to_string();
            // The instrumented object's extra data is zeros, which
            // compress away: a compressed bundle may still fit in place.
            if big && (rdc || !compress) {
                assert_eq!(placement, "new-segment", "{name}: {report}");
            } else if !big && !compress {
                assert_eq!(placement, "in-place", "{name}: {report}");
            }
            let what = format!("{name} {tag} ({placement})");

            // The stub runtime sees the new object in that entry, all else the same.
            let after = if kind == "so" { t.run(&program, &out_dir, None) } else { t.run(&out, &dir, None) };
            let old_line = format!("size {} fnv {:016x}", old.len(), fnv(&old));
            let new_line = format!("size {} fnv {:016x}", new.len(), fnv(&new));
            assert_eq!(before.matches(&old_line).count(), 1, "{what}: {before}");
            let expected = before.replace(&old_line, &new_line);
            assert_eq!(comparable(&after), comparable(&expected), "{what}:\n{before}\n---\n{after}");

            // Debian's real runtime registers the code.
            if let Some(real) = &real {
                let ran =
                    if kind == "so" { t.run(&program, &out_dir, Some(real)) } else { t.run(&out, &dir, Some(real)) };
                assert_eq!(ran, "host: 1 2\n", "{what} with the real runtime");
            }

            // comgr picks the new object for gfx90a:xnack+.
            let bytes = std::fs::read(&out).unwrap();
            let map = offload_format::layout::FileMap::read(&bytes).unwrap();
            let unit = map.units[0];
            if let (Some(comgr), false) = (&comgr, compress) {
                let bundle = &bytes[unit.offset as usize..(unit.offset + unit.used) as usize];
                let file = out_dir.join("unit0.bundle");
                std::fs::write(&file, bundle).unwrap();
                let o = check(Command::new(comgr).args([s(&file), "amdgcn-amd-amdhsa--gfx90a:xnack+"]));
                let answer = String::from_utf8_lossy(&o.stdout).to_string();
                let fields: Vec<usize> = answer.split_whitespace().skip(1).map(|f| f.parse().unwrap()).collect();
                let [offset, size] = fields[..] else { panic!("{what}: comgr said {answer}") };
                assert_eq!(&bundle[offset..offset + size], new.as_slice(), "{what}: comgr's choice");
            }

            // The ELF structure reads without a warning.
            let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", s(&out)]));
            assert!(re.stderr.is_empty(), "{what}: {}", String::from_utf8_lossy(&re.stderr));

            // llvm-strip keeps the output working.
            let stripped_dir = out_dir.join("stripped");
            std::fs::create_dir_all(&stripped_dir).unwrap();
            let stripped = stripped_dir.join(target.file_name().unwrap());
            check(Command::new(&t.strip).arg(&out).arg("-o").arg(&stripped));
            let again = if kind == "so" { t.run(&program, &stripped_dir, None) } else { t.run(&stripped, &dir, None) };
            assert_eq!(comparable(&again), comparable(&expected), "{what} after llvm-strip");
            eprintln!("{what}: file {} -> {} bytes", std::fs::metadata(&target).unwrap().len(), bytes.len());
        }
    }
}
