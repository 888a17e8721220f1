//! Helpers shared by the prune and replace tests (`prune_cli.rs`,
//! `replace_cli.rs`, `prune_live.rs`, `replace_live.rs`): running `offload`
//! on the clang-built fixtures of the library crate, and building the HIP
//! test programs of this folder (`tu1.hip`, `tu2.hip`, `main.c`) with
//! clang 19 or Debian's `hipcc`, to run against the stand-in runtime
//! `hip_stub.c` or Debian's real `libamdhip64.so.5`.
#![allow(dead_code)]

use crate::common;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `offload` binary under test.
pub fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

/// A clang-built HIP fixture of the library crate (`fixtures/prune/make.sh`).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune").join(name)
}

/// A command's standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A test path as a `&str` argument (test paths are UTF-8).
pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs a command that must succeed.
pub fn check(cmd: &mut Command) -> Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// FNV-1a 64, the hash `hip_stub.c` prints for each code object.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(1469598103934665603u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(1099511628211))
}

/// The position (as `offload list` counts, for `extract --index`) of the
/// code object for `target_id` in unit `unit` of `file`.
pub fn list_index(file: &Path, unit: u64, target_id: &str) -> String {
    let o = offload(&["list", "--json", p(file)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let at = rows.iter().position(|r| r["unit"] == unit && r["target_id"] == target_id);
    at.unwrap_or_else(|| panic!("{}: no {target_id} in unit {unit}", file.display())).to_string()
}

/// Trace lines of `hip_stub.c` that do not depend on the size of a fat
/// binary, without the lines of the `dropped` entries.
pub fn comparable(trace: &str, dropped: &[String]) -> Vec<String> {
    trace
        .lines()
        .filter(|l| !l.starts_with("  fatbin size") && !l.starts_with(" compressed v"))
        .filter(|l| !dropped.iter().any(|id| l.contains(&format!(" entry {id} "))))
        .map(String::from)
        .collect()
}

/// Which compiler builds a test program.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Compiler {
    /// clang 19 without ROCm (`-nogpulib -nogpuinc -nohipwrapperinc`,
    /// `hip_min.h`).
    Clang,
    /// Debian 12's `hipcc` 5.2.3 (clang 15, ROCm's headers and device
    /// libraries), linked against the real `-lamdhip64` as hipcc does.
    Hipcc,
}

/// What the link produces.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Layout {
    /// `libtwo.so`, loaded by a separate `main`.
    Shared,
    /// A position-independent executable.
    Pie,
    /// A position-dependent executable (objects built `-fno-pic`).
    NoPie,
}

/// How one test program is compiled and linked.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Recipe {
    /// The compiler driver.
    pub compiler: Compiler,
    /// What the link produces.
    pub layout: Layout,
    /// `-fuse-ld=`: `bfd` or `lld`.
    pub ld: &'static str,
    /// `-z pack-relative-relocs` (RELR).
    pub relr: bool,
    /// `-fgpu-rdc`: one device link, one fat binary.
    pub rdc: bool,
    /// `--offload-compress` (clang 19 only; hipcc 5.2's clang 15 has none).
    pub compress: bool,
}

impl Recipe {
    /// A clang 19 build with GNU ld, RELA, separate compilation.
    pub const fn clang(layout: Layout) -> Recipe {
        Recipe { compiler: Compiler::Clang, layout, ld: "bfd", relr: false, rdc: false, compress: false }
    }

    /// The same program built by Debian's hipcc.
    pub const fn hipcc(layout: Layout) -> Recipe {
        Recipe { compiler: Compiler::Hipcc, ..Recipe::clang(layout) }
    }
}

/// The offload targets of the clang 19 builds.
const CLANG_ARCHS: [&str; 3] = ["gfx906", "gfx90a:xnack+", "gfx90a:xnack-"];
/// The offload targets of the hipcc builds: two GPU families, as a package
/// built for several GPUs has.
const HIPCC_ARCHS: [&str; 3] = ["gfx906", "gfx90a:xnack+", "gfx1030"];

/// A program built by [`Programs::link`].
pub struct Linked {
    /// The file to prune or rewrite (the library or the executable).
    pub target: PathBuf,
    /// The program to run (`main` for a library, else the executable).
    pub program: PathBuf,
    /// The variant's own folder.
    pub dir: PathBuf,
}

/// The tools and the scratch folder the live tests build programs with.
pub struct Programs {
    /// clang 19.
    pub clang: PathBuf,
    /// `llvm-readelf` 19.
    pub readelf: PathBuf,
    /// LLVM 19's `clang-offload-bundler`.
    pub bundler: PathBuf,
    /// `llvm-strip` 19.
    pub strip: PathBuf,
    /// `llvm-objcopy` 19.
    pub objcopy: PathBuf,
    /// `real_corpus_helpers/comgr_lookup.c` built against Debian's comgr.
    pub comgr: Option<PathBuf>,
    /// Debian's hipcc, when the test asked for it.
    pub hipcc: Option<PathBuf>,
    /// This folder (the sources).
    pub support: PathBuf,
    /// Scratch; holds the stand-in `libamdhip64.so` (and `.so.5`).
    pub dir: tempfile::TempDir,
    objects: HashMap<(Compiler, bool, bool, bool), [PathBuf; 2]>,
}

/// Asserts that every file exists (the tests are ignored without the cfg
/// that build.rs sets when it found them).
fn present(files: &[&str], install: &str) {
    for needed in files {
        assert!(Path::new(needed).exists(), "needs {needed}; run {install}");
    }
}

impl Programs {
    /// The LLVM 19 tools, GNU ld and the stand-in runtime (built here), and
    /// the comgr lookup when build.rs found comgr (`has_comgr`).
    pub fn get() -> Programs {
        let clang = common::llvm_tool(19, "clang");
        let readelf = common::llvm_tool(19, "llvm-readelf");
        let bundler = common::llvm_tool(19, "clang-offload-bundler");
        let strip = common::llvm_tool(19, "llvm-strip");
        let objcopy = common::llvm_tool(19, "llvm-objcopy");
        common::llvm_tool(19, "ld.lld");
        present(&["/usr/bin/ld.bfd", "/usr/lib/x86_64-linux-gnu/libzstd.so.1"], "scripts/install-reference-llvm.sh");
        let support = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/prune_support");
        let dir = tempfile::tempdir().unwrap();
        let stub = dir.path().join("libamdhip64.so");
        check(
            Command::new(&clang)
                .args(["-shared", "-fPIC", "-o", p(&stub)])
                .arg(format!("-Wl,--version-script={}", p(&support.join("hip_stub.map"))))
                .arg(support.join("hip_stub.c"))
                .arg("/usr/lib/x86_64-linux-gnu/libzstd.so.1"),
        );
        // hipcc's programs need the runtime by its soname.
        std::os::unix::fs::symlink("libamdhip64.so", dir.path().join("libamdhip64.so.5")).unwrap();
        let comgr = cfg!(has_comgr).then(|| comgr_lookup(&clang, dir.path()));
        let objects = HashMap::new();
        Programs { clang, readelf, bundler, strip, objcopy, comgr, hipcc: None, support, dir, objects }
    }

    /// [`Programs::get`] with Debian's hipcc (`apt-get install hipcc`) too.
    pub fn with_hipcc() -> Programs {
        let hipcc = std::env::var_os("OFFLOAD_HIPCC").map_or_else(|| PathBuf::from("/usr/bin/hipcc"), PathBuf::from);
        present(&[p(&hipcc)], "scripts/install-test-deps.sh");
        let mut programs = Programs::get();
        programs.hipcc = Some(hipcc);
        programs
    }

    /// The offload targets `r` is built for.
    pub fn archs(r: Recipe) -> [&'static str; 3] {
        match r.compiler {
            Compiler::Clang => CLANG_ARCHS,
            Compiler::Hipcc => HIPCC_ARCHS,
        }
    }

    /// The compiler driver of `r`, with the HIP flags every step of it
    /// takes but the offload targets.
    pub fn driver(&self, r: Recipe) -> Command {
        let mut c = match r.compiler {
            Compiler::Clang => {
                let mut c = Command::new(&self.clang);
                // -nohipwrapperinc: once ROCm is installed in /usr (hipcc's
                // packages) clang finds it and puts its HIP wrappers of the
                // C++ headers first, which -nogpuinc leaves without the
                // declarations they use (`::malloc` in `<new>`).
                c.args(["-nogpulib", "-nogpuinc", "-nohipwrapperinc", "-O1", "-Wno-unused-command-line-argument"]);
                c
            }
            Compiler::Hipcc => {
                let mut c = Command::new(self.hipcc.as_ref().expect("Programs::with_hipcc"));
                // hipcc puts -std=c++11 first; tu1.hip's constexpr loop needs C++14.
                c.args(["-std=c++17", "-DOFFLOAD_TEST_ROCM_HEADERS"]);
                c
            }
        };
        c.arg(format!("-I{}", self.support.display()));
        if r.rdc {
            c.arg("-fgpu-rdc");
        }
        if r.compress {
            assert_eq!(r.compiler, Compiler::Clang, "hipcc 5.2 cannot compress bundles");
            c.arg("--offload-compress");
        }
        c
    }

    /// `tu1.o` and `tu2.o` for `r` (built once per compiler and flags).
    pub fn objects(&mut self, r: Recipe) -> [PathBuf; 2] {
        let pic = r.layout != Layout::NoPie;
        let key = (r.compiler, pic, r.rdc, r.compress);
        if let Some(o) = self.objects.get(&key) {
            return o.clone();
        }
        let tag = format!("{:?}-{}{}{}", r.compiler, pic as u8, r.rdc as u8, r.compress as u8);
        let objs = ["tu1", "tu2"].map(|tu| {
            let o = self.dir.path().join(format!("{tu}-{tag}.o"));
            let mut c = self.driver(r);
            c.args(Self::archs(r).map(|a| format!("--offload-arch={a}")));
            c.args(["-x", "hip", "-c", if pic { "-fPIC" } else { "-fno-pic" }]);
            check(c.arg(self.support.join(format!("{tu}.hip"))).arg("-o").arg(&o));
            o
        });
        self.objects.insert(key, objs.clone());
        objs
    }

    /// Links variant `name` of `r` in its own folder, with `extra` inputs
    /// (host C files or objects) added to the link.
    pub fn link(&mut self, name: &str, r: Recipe, extra: &[PathBuf]) -> Linked {
        let objs = self.objects(r);
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = self.driver(r);
        c.arg(format!("-fuse-ld={}", r.ld));
        // The device link of -fgpu-rdc happens here and needs the targets
        // again; hipcc without them asks the (absent) GPU for its own.
        if r.rdc || r.compiler == Compiler::Hipcc {
            c.args(Self::archs(r).map(|a| format!("--offload-arch={a}")));
        }
        if r.rdc && r.compiler == Compiler::Clang {
            c.arg("--hip-link");
        }
        if r.relr {
            c.arg("-Wl,-z,pack-relative-relocs");
        }
        let (target, program) = match r.layout {
            Layout::Shared => {
                let lib = dir.join("libtwo.so");
                c.args(["-shared", "-o", p(&lib)]);
                (lib, dir.join("main"))
            }
            Layout::Pie | Layout::NoPie => {
                let exe = dir.join("prog");
                let pie = r.layout == Layout::Pie;
                // hipcc would compile main.c as C++ for the GPU (`-x hip`
                // stays on), so it gets a host object of its own.
                let main = dir.join("main.o");
                check(
                    Command::new(&self.clang)
                        .args(["-c", if pie { "-fPIE" } else { "-fno-pic" }, "-o", p(&main)])
                        .arg(self.support.join("main.c")),
                );
                c.arg(if pie { "-pie" } else { "-no-pie" }).args(["-o", p(&exe)]).arg(main);
                (exe.clone(), exe)
            }
        };
        c.args(&objs).args(extra);
        if r.compiler == Compiler::Clang {
            // The stand-in runtime at link time; hipcc links Debian's real one.
            c.arg(format!("-L{}", self.dir.path().display())).args(["-lamdhip64", "-lstdc++"]);
        }
        check(&mut c);
        if r.layout == Layout::Shared {
            check(
                Command::new(&self.clang)
                    .args(["-o", p(&program)])
                    .arg(self.support.join("main.c"))
                    .arg(format!("-L{}", dir.display()))
                    .arg(format!("-Wl,-rpath-link,{}", self.dir.path().display()))
                    .arg("-ltwo"),
            );
        }
        Linked { target, program, dir }
    }

    /// Runs `program` (a library it needs lies in `lib_dir`) with `hip`
    /// (default: the stand-in) as the HIP runtime; its standard output.
    pub fn run(&self, program: &Path, lib_dir: &Path, hip: Option<&Path>) -> String {
        let runtime = hip.unwrap_or(self.dir.path());
        let path = format!("{}:{}", lib_dir.display(), runtime.display());
        let out = check(Command::new(program).env("LD_LIBRARY_PATH", path));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs variant `l` with its pruned or rewritten file replaced by
    /// `file` (a library in another folder, or an executable).
    pub fn run_with(&self, l: &Linked, layout: Layout, file: &Path, hip: Option<&Path>) -> String {
        match layout {
            Layout::Shared => self.run(&l.program, file.parent().unwrap(), hip),
            Layout::Pie | Layout::NoPie => self.run(file, &l.dir, hip),
        }
    }

    /// A folder where `libamdhip64.so` (and `.so.5`) is Debian's real HIP
    /// runtime, or `None` when build.rs did not find it (`has_hipcc`:
    /// `scripts/install-test-deps.sh` installs it with hipcc); the programs
    /// then run with the stand-in runtime only.
    pub fn real_runtime(&self) -> Option<PathBuf> {
        if !cfg!(has_hipcc) {
            return None;
        }
        let lib = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
        assert!(Path::new(lib).exists(), "needs {lib}; run scripts/install-test-deps.sh");
        let dir = self.dir.path().join("real-runtime");
        if !dir.exists() {
            std::fs::create_dir_all(&dir).unwrap();
            for name in ["libamdhip64.so", "libamdhip64.so.5"] {
                std::os::unix::fs::symlink(lib, dir.join(name)).unwrap();
            }
        }
        Some(dir)
    }
}

/// `real_corpus_helpers/comgr_lookup.c` built against Debian's comgr
/// (`libamd-comgr-dev`, `scripts/install-test-deps.sh`).
fn comgr_lookup(clang: &Path, dir: &Path) -> PathBuf {
    assert!(Path::new("/usr/include/amd_comgr.h").exists(), "needs libamd-comgr-dev; run scripts/install-test-deps.sh");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/real_corpus_helpers/comgr_lookup.c");
    let exe = dir.join("comgr_lookup");
    check(Command::new(clang).args(["-O1", "-o", p(&exe)]).arg(src).arg("-lamd_comgr"));
    exe
}
