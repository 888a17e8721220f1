//! `offload replace` on real OpenMP offloading programs built by clang 19's
//! new driver (the builds of `prune_openmp.rs`: images for
//! x86_64-pc-linux-gnu, which libomptarget 19's host plugin runs, and
//! amdgcn-amd-amdhsa gfx90a): a GNU ld PIE (RELA), a non-PIE executable
//! (absolute words) and an lld RELR shared library. Their x86_64 image is
//! replaced by the one of a rebuild whose kernel computes another value
//! (same source file, `-DSCALE=3`, so the kernel keeps its name); run with
//! `OMP_TARGET_OFFLOAD=MANDATORY`, the program prints the new kernel's
//! result while its host code is unchanged; so does it with a smaller
//! image (the rebuild without `.comment`, through `llvm-objcopy-19`), whose
//! `ImageEnd` moves. `llvm-objdump-19
//! --offloading` still reads both images and `offload verify` is clean.
//! An amdgcn image for the x86_64 entry, and an x86_64 image whose kernel
//! has another name, are refused with exit 1, the output left alone.
//!
//! Needs clang 19, ld.lld 19, GNU ld and LLVM 19's OpenMP runtime
//! (/opt/omp19/lib, or OFFLOAD_OMP19_LIB). Ignored when missing unless
//! OFFLOAD_REQUIRE_LLVM=1.

use crate::common;

use offload_format::offload_binary::OffloadBinary;
use offload_inspect::layout::openmp::OpenMpMap;
use std::path::Path;
use std::process::{Command, Output};

/// The kernel sums `SCALE * i` for i in 1..=1000: 500500 times SCALE.
const SOURCE: &str = r#"#include <stdio.h>
long offload_sum(int n) {
  long sum = 0;
#pragma omp target map(tofrom : sum)
  for (int i = 1; i <= n; ++i)
    sum += SCALE * i;
  return sum;
}
#ifndef LIBRARY
int main(void) {
  printf("sum=%ld\n", offload_sum(1000));
  return 0;
}
#endif
"#;

const MAIN: &str = "#include <stdio.h>\nlong offload_sum(int);\nint main(void) {\n  printf(\"sum=%ld\\n\", offload_sum(1000));\n  return 0;\n}\n";

const FLAGS: [&str; 6] = [
    "-O1",
    "-fopenmp",
    "-fopenmp-targets=x86_64-pc-linux-gnu,amdgcn-amd-amdhsa",
    "-Xopenmp-target=amdgcn-amd-amdhsa",
    "-march=gfx90a",
    "-nogpulib",
];

fn check(cmd: &mut Command) -> Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Builds `source` (a path, so that both builds give the kernel the same
/// name: clang names it after the file's device and inode and the line)
/// with `-DSCALE=scale` into `dir`: `gnu_pie`, `nopie_gnu`,
/// `lib/libompsum.so`, and `main_so` linked against the library.
fn build(clang: &Path, omp: &Path, source: &Path, scale: u32, dir: &Path) {
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    let scale = format!("-DSCALE={scale}");
    let link = [format!("-L{}", omp.display()), "-lomptarget.devicertl".to_string()];
    for (name, extra) in [("gnu_pie", ["-fuse-ld=bfd", "-pie"]), ("nopie_gnu", ["-fuse-ld=bfd", "-no-pie"])] {
        check(
            Command::new(clang)
                .args(FLAGS)
                .arg(&scale)
                .args(extra)
                .arg(source)
                .arg("-o")
                .arg(dir.join(name))
                .args(&link),
        );
    }
    let lib = dir.join("lib/libompsum.so");
    let shared = ["-DLIBRARY", "-fPIC", "-shared", "-fuse-ld=lld", "-Wl,-z,pack-relative-relocs"];
    check(Command::new(clang).args(FLAGS).arg(&scale).args(shared).arg(source).arg("-o").arg(&lib).args(&link));
    std::fs::write(dir.join("main.c"), MAIN).unwrap();
    let lib_dir = format!("-L{}", dir.join("lib").display());
    let rpath = format!("-Wl,-rpath-link,{}", omp.display());
    check(
        Command::new(clang)
            .arg(dir.join("main.c"))
            .arg("-o")
            .arg(dir.join("main_so"))
            .args([&lib_dir, &rpath, "-lompsum"]),
    );
}

/// Image `index` (0: x86_64, 1: gfx90a) of an OpenMP host file.
fn image(file: &Path, index: usize) -> Vec<u8> {
    let data = std::fs::read(file).unwrap();
    let map = OpenMpMap::read(&data).unwrap();
    let im = &map.images[index];
    let binary = &data[im.offset as usize..][..im.size as usize];
    OffloadBinary::parse_all(binary).unwrap()[0].image().to_vec()
}

/// Runs `program` with the OpenMP runtime and `lib_dir` on the library
/// path, offloading mandatory; its stdout.
fn run(program: &Path, lib_dir: &Path, omp: &Path) -> String {
    let out = common::run(
        Command::new(program)
            .env("OMP_TARGET_OFFLOAD", "MANDATORY")
            .env("LIBOMPTARGET_INFO", "-1")
            .env("LD_LIBRARY_PATH", format!("{}:{}", lib_dir.display(), omp.display())),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", program.display());
    assert!(stderr.contains("Launching kernel __omp_offloading_"), "{}: ran on no device: {stderr}", program.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn replace(input: &Path, entry: &str, with: &Path, out: &Path) -> Output {
    let args = ["replace", "--json", "--entry", entry, "--with", p(with), p(input), "-o", p(out)];
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_omp19)),
    ignore = "needs LLVM 19 and LLVM 19's OpenMP runtime: run scripts/install-reference-llvm.sh"
)]
fn a_rebuilt_x86_64_image_replaces_the_old_one_and_the_program_runs_it() {
    let (clang, _lld, omp) =
        (common::llvm_tool(19, "clang"), common::llvm_tool(19, "ld.lld"), common::omp19_runtime(true));
    let objdump = common::llvm_tool(19, "llvm-objdump");
    let objcopy = common::llvm_tool(19, "llvm-objcopy");
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("sum.c");
    std::fs::write(&source, SOURCE).unwrap();
    let (old_dir, new_dir, out_dir) = (work.path().join("old"), work.path().join("new"), work.path().join("out"));
    build(&clang, &omp, &source, 1, &old_dir);
    build(&clang, &omp, &source, 3, &new_dir);
    std::fs::create_dir_all(out_dir.join("lib")).unwrap();
    for (target, program) in [("gnu_pie", "gnu_pie"), ("nopie_gnu", "nopie_gnu"), ("lib/libompsum.so", "main_so")] {
        let (input, output) = (old_dir.join(target), out_dir.join(target));
        let with = work.path().join(format!("x86-{}.so", target.replace('/', "-")));
        std::fs::write(&with, image(&new_dir.join(target), 0)).unwrap();
        assert_ne!(image(&input, 0), std::fs::read(&with).unwrap(), "{target}: the rebuild has other code");
        assert_eq!(run(&old_dir.join(program), &old_dir.join("lib"), &omp), "sum=500500\n", "{target}");
        assert_eq!(run(&new_dir.join(program), &new_dir.join("lib"), &omp), "sum=1501500\n", "{target}");

        let o = replace(&input, "x86_64-pc-linux-gnu", &with, &output);
        assert!(o.status.success(), "{target}: {}", String::from_utf8_lossy(&o.stderr));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (report["placement"].as_str(), report["format"].as_str()),
            (Some("in-place"), Some("offload-binary"))
        );
        eprintln!("{target}: x86_64 image {} -> {} bytes", report["old_object_size"], report["new_object_size"]);
        assert_eq!(std::fs::metadata(&output).unwrap().len(), std::fs::metadata(&input).unwrap().len());
        assert_eq!(image(&output, 0), std::fs::read(&with).unwrap(), "{target}");
        assert_eq!(image(&output, 1), image(&input, 1), "{target}: the gfx90a image is untouched");
        // The old host code now runs the new kernel.
        let exe = if program == "main_so" { old_dir.join("main_so") } else { output.clone() };
        assert_eq!(run(&exe, &out_dir.join("lib"), &omp), "sum=1501500\n", "{target}");
        let v = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(["verify", p(&output)]));
        assert!(v.status.success(), "{target}: {}", String::from_utf8_lossy(&v.stdout));
        {
            let d = check(Command::new(&objdump).arg("--offloading").arg(&output));
            let text = String::from_utf8_lossy(&d.stdout);
            assert!(text.contains("x86_64-pc-linux-gnu") && text.contains("gfx90a"), "{target}: {text}");
        }
        // A smaller image (no .comment): ImageEnd moves, the runtime loads
        // exactly the new image's bytes and runs it.
        let small = work.path().join(format!("small-{}.so", target.replace('/', "-")));
        check(Command::new(&objcopy).arg("--remove-section=.comment").arg(&with).arg(&small));
        let o = replace(&input, "x86_64-pc-linux-gnu", &small, &output);
        assert!(o.status.success(), "{target}: {}", String::from_utf8_lossy(&o.stderr));
        let new_len = std::fs::metadata(&small).unwrap().len();
        assert!(new_len < std::fs::metadata(&with).unwrap().len());
        let data = std::fs::read(&output).unwrap();
        let x86 = &OpenMpMap::read(&data).unwrap().images[0];
        assert_eq!(x86.end - x86.start, new_len, "{target}: ImageEnd follows the smaller image");
        assert_eq!(run(&exe, &out_dir.join("lib"), &omp), "sum=1501500\n", "{target}: the smaller image");
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_omp19)),
    ignore = "needs LLVM 19 and LLVM 19's OpenMP runtime: run scripts/install-reference-llvm.sh"
)]
fn an_image_for_another_machine_or_without_the_kernel_is_refused() {
    let (clang, _lld, omp) =
        (common::llvm_tool(19, "clang"), common::llvm_tool(19, "ld.lld"), common::omp19_runtime(true));
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("sum.c");
    std::fs::write(&source, SOURCE).unwrap();
    build(&clang, &omp, &source, 1, &work.path().join("old"));
    // Another file: the kernel gets another name.
    let other = work.path().join("other.c");
    std::fs::write(&other, format!("\n{SOURCE}")).unwrap();
    let exe = work.path().join("other_exe");
    let link = [format!("-L{}", omp.display()), "-lomptarget.devicertl".to_string()];
    check(Command::new(&clang).args(FLAGS).arg("-DSCALE=1").arg(&other).arg("-o").arg(&exe).args(&link));
    let input = work.path().join("old/gnu_pie");
    let (amd, renamed) = (work.path().join("amd.o"), work.path().join("renamed.so"));
    std::fs::write(&amd, image(&input, 1)).unwrap();
    std::fs::write(&renamed, image(&exe, 0)).unwrap();
    let out = work.path().join("out");
    std::fs::write(&out, b"keep me").unwrap();
    for (entry, with, says) in [
        ("x86_64-pc-linux-gnu", &amd, "ELF machine 224"),
        ("x86_64-pc-linux-gnu", &renamed, "__omp_offloading_"),
        ("gfx90a", &renamed, "ELF machine 62"),
        ("gfx908", &amd, "amdgcn-amd-amdhsa-gfx90a"),
    ] {
        let o = replace(&input, entry, with, &out);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{entry}: {stderr}");
        assert!(stderr.contains("error:") && stderr.contains(says), "{entry}: {stderr}");
        assert_eq!(std::fs::read(&out).unwrap(), b"keep me", "{entry}: the existing output is untouched");
    }
}
