//! End to end: real OpenMP programs built by clang 14 with OUR
//! clang-offload-wrapper (and clang-offload-bundler) in place of LLVM's,
//! through `-B<dir>`, then run on libomptarget 14's host plugin with
//! `OMP_TARGET_OFFLOAD=MANDATORY`. `LIBOMPTARGET_INFO=-1` must show each
//! kernel entering device 0: a right answer alone could come from a host
//! fallback.
//!
//! Set `OFFLOAD_E2E_BUNDLER=llvm14` to put LLVM 14's bundler in `<dir>`
//! instead of ours (to check the separate-compilation cases independently
//! of our bundler).

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const OFFLOAD_TRIPLE: &str = "x86_64-pc-linux-gnu";

const MAIN_C: &str = r#"#include <stdio.h>
int scaled(int n);
int main(void) {
  int sum = 0;
#pragma omp target map(tofrom: sum)
  {
    for (int i = 1; i <= 10; ++i)
      sum += i;
  }
  int s = scaled(7);
  printf("sum=%d scaled=%d\n", sum, s);
  return sum == 55 && s == 21 ? 0 : 1;
}
"#;

const LIB_C: &str = r#"#pragma omp declare target
int factor = 3;
#pragma omp end declare target
int scaled(int n) {
  int r = 0;
#pragma omp target map(from: r)
  { r = n * factor; }
  return r;
}
"#;

const SINGLE_C: &str = r#"#include <stdio.h>
int main(void) {
  int x = 0;
#pragma omp target map(tofrom: x)
  { x = 42; }
  printf("x=%d\n", x);
  return x == 42 ? 0 : 1;
}
"#;

struct Env {
    clang: PathBuf,
    lib: PathBuf,
    tools: tempfile::TempDir,
    work: tempfile::TempDir,
}

/// clang 14, libomptarget 14 and a `-B` directory holding our tools.
fn setup() -> Env {
    let clang = common::llvm_tool(14, "clang");
    let lib = common::omp14_lib();
    let tools = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_clang-offload-wrapper"), tools.path().join("clang-offload-wrapper"))
        .unwrap();
    let bundler = match std::env::var("OFFLOAD_E2E_BUNDLER").as_deref() {
        Ok("llvm14") => common::llvm_bin_dir(14).join("clang-offload-bundler"),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_clang-offload-bundler")),
    };
    std::os::unix::fs::symlink(bundler, tools.path().join("clang-offload-bundler")).unwrap();
    Env { clang, lib, tools, work: tempfile::tempdir().unwrap() }
}

impl Env {
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work.path().join(name);
        fs::write(&p, text).unwrap();
        p
    }

    fn clang(&self, args: &[&Path]) -> Command {
        let mut c = Command::new(&self.clang);
        c.current_dir(self.work.path())
            .arg("-fopenmp")
            .arg(format!("-fopenmp-targets={OFFLOAD_TRIPLE}"))
            .arg(format!("-B{}", self.tools.path().display()))
            .args(args);
        c
    }

    /// Runs clang; first with `-###` to check that it picks our tools from
    /// the `-B` directory (`tools` names the ones this step must run).
    fn build(&self, args: &[&Path], tools: &[&str]) {
        let plan = common::run(self.clang(args).arg("-###"));
        let plan = String::from_utf8_lossy(&plan.stderr);
        for tool in tools {
            let ours = format!("\"{}\"", self.tools.path().join(tool).display());
            assert!(plan.contains(&ours), "clang does not run {ours}:\n{plan}");
        }
        for tool in ["clang-offload-wrapper", "clang-offload-bundler"] {
            let theirs = format!("\"{}\"", common::llvm_bin_dir(14).join(tool).display());
            assert!(!plan.contains(&theirs), "clang runs LLVM's {tool}:\n{plan}");
        }
        let out = common::run(&mut self.clang(args));
        assert!(out.status.success(), "clang {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }

    fn link(&self, inputs: &[&Path], exe: &str) -> PathBuf {
        let exe = self.work.path().join(exe);
        let lib = format!("-L{}", self.lib.display());
        let rpath = format!("-Wl,-rpath,{}", self.lib.display());
        let mut args: Vec<&Path> = inputs.to_vec();
        args.extend([Path::new("-o"), &exe, Path::new(&lib), Path::new(&rpath)]);
        self.build(&args, &["clang-offload-wrapper"]);
        exe
    }

    /// Runs the program on the offload device; checks the answer and that
    /// `kernels` kernels entered device 0.
    fn run_on_device(&self, exe: &Path, answer: &str, kernels: usize) {
        let out = common::run(
            Command::new(exe)
                .env("OMP_TARGET_OFFLOAD", "MANDATORY")
                .env("LIBOMPTARGET_INFO", "-1")
                .env("LD_LIBRARY_PATH", &self.lib),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{} failed:\n{stdout}\n{stderr}", exe.display());
        assert_eq!(stdout.trim(), answer);
        let entered =
            stderr.lines().filter(|l| l.starts_with("Libomptarget device 0 info: Entering OpenMP kernel")).count();
        assert_eq!(entered, kernels, "kernels entering device 0:\n{stderr}");
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn one_step_build_runs_its_kernel_on_the_device() {
    let env = setup();
    let src = env.file("single.c", SINGLE_C);
    let exe = env.link(&[&src], "single");
    env.run_on_device(&exe, "x=42", 1);
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn several_translation_units_in_one_step() {
    let env = setup();
    let main = env.file("main.c", MAIN_C);
    let lib = env.file("lib.c", LIB_C);
    let exe = env.link(&[&main, &lib], "multi");
    env.run_on_device(&exe, "sum=55 scaled=21", 2);
}

/// Compiles both translation units to the intermediate form `flags`
/// produces (clang bundles host and device parts into one file with the
/// bundler), then builds the program from those files (clang unbundles
/// them, links the device image and wraps it).
fn separate(flags: &[&str], ext: &str) {
    let env = setup();
    let mut parts = Vec::new();
    for (name, text) in [("main", MAIN_C), ("lib", LIB_C)] {
        let src = env.file(&format!("{name}.c"), text);
        let out = env.work.path().join(format!("{name}.{ext}"));
        let mut args: Vec<&Path> = flags.iter().map(Path::new).collect();
        args.extend([src.as_path(), Path::new("-o"), &out]);
        env.build(&args, &["clang-offload-bundler"]);
        if ext == "o" {
            // As with LLVM's bundler, the bundled object is still an ELF
            // object that host tools can read.
            assert_eq!(fs::read(&out).unwrap().get(..4), Some(&b"\x7fELF"[..]), "{} is not ELF", out.display());
        }
        parts.push(out);
    }
    let refs: Vec<&Path> = parts.iter().map(PathBuf::as_path).collect();
    let exe = env.link(&refs, &format!("from-{ext}"));
    env.run_on_device(&exe, "sum=55 scaled=21", 2);
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn separate_compilation_through_objects() {
    separate(&["-c"], "o");
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn separate_compilation_through_preprocessed_source() {
    separate(&["-E"], "i");
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn separate_compilation_through_assembly() {
    separate(&["-S"], "s");
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn separate_compilation_through_llvm_text() {
    separate(&["-S", "-emit-llvm"], "ll");
}

#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn separate_compilation_through_bitcode() {
    separate(&["-c", "-emit-llvm"], "bc");
}
