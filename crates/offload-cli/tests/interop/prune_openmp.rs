//! `offload prune` on real OpenMP offloading programs built by clang 19's
//! new driver with two device images (x86_64-pc-linux-gnu, which
//! libomptarget 19's host plugin runs, and amdgcn-amd-amdhsa gfx90a, which
//! no plugin here can run): GNU ld and lld PIEs (RELA, with and without
//! the address in place), a non-PIE executable and an lld RELR shared
//! library. Each runs its target region on device 0 before
//! and after the amdgcn image is pruned, and fails with
//! `OMP_TARGET_OFFLOAD=MANDATORY` once the x86_64 image is pruned too,
//! which shows the image really left (docs/formats/host-references.md §6.8.4).
//!
//! Needs clang 19, ld.lld 19, GNU ld and LLVM 19's OpenMP runtime
//! (/opt/omp19/lib as `scripts/install-reference-llvm.sh` installs it, or
//! OFFLOAD_OMP19_LIB). Ignored when missing unless OFFLOAD_REQUIRE_LLVM=1.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MAIN: &str = "#include <stdio.h>\nlong offload_sum(int);\nint main(void) {\n  long s = offload_sum(1000);\n  printf(\"sum=%ld\\n\", s);\n  return s == 500500 ? 0 : 1;\n}\n";

fn source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune/omp/omp.c")
}

fn check(cmd: &mut Command) -> Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn offload(args: &[&str], input: &Path) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args).arg(input))
}

/// One build: the file to prune, and how to run the program with a
/// (pruned) copy of it in place of the original.
struct Variant {
    name: &'static str,
    target: PathBuf,
    /// For a library: the program linked against it.
    program: Option<PathBuf>,
}

impl Variant {
    /// Runs with `file` standing for the target; returns (success, stdout,
    /// stderr).
    fn run(&self, file: &Path, omp: &Path) -> (bool, String, String) {
        let (exe, lib_dir) = match &self.program {
            Some(p) => {
                // The library is found by name in the folder of `file`.
                let named = file.parent().unwrap().join(self.target.file_name().unwrap());
                if named != file {
                    std::fs::copy(file, &named).unwrap();
                }
                (p.clone(), format!("{}:{}", named.parent().unwrap().display(), omp.display()))
            }
            None => (file.to_path_buf(), omp.display().to_string()),
        };
        let out = common::run(
            Command::new(exe)
                .env("OMP_TARGET_OFFLOAD", "MANDATORY")
                .env("LIBOMPTARGET_INFO", "-1")
                .env("LD_LIBRARY_PATH", lib_dir),
        );
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }
}

fn build(clang: &Path, omp: &Path, dir: &Path) -> Vec<Variant> {
    build_from(clang, omp, dir, &source())
}

/// The four builds of `source`.
fn build_from(clang: &Path, omp: &Path, dir: &Path, source: &Path) -> Vec<Variant> {
    let flags = [
        "-O1",
        "-fopenmp",
        "-fopenmp-targets=x86_64-pc-linux-gnu,amdgcn-amd-amdhsa",
        "-Xopenmp-target=amdgcn-amd-amdhsa",
        "-march=gfx90a",
        "-nogpulib",
    ];
    let link = [format!("-L{}", omp.display()), "-lomptarget.devicertl".to_string()];
    let mut out = Vec::new();
    let executables = [
        ("gnu_pie", ["-fuse-ld=bfd", "-pie"]),
        ("lld_pie", ["-fuse-ld=lld", "-pie"]),
        ("nopie_gnu", ["-fuse-ld=bfd", "-no-pie"]),
    ];
    for (name, extra) in executables {
        let exe = dir.join(name);
        check(Command::new(clang).args(flags).args(extra).arg(source).arg("-o").arg(&exe).args(&link));
        out.push(Variant { name, target: exe, program: None });
    }
    let lib_dir = dir.join("lib");
    std::fs::create_dir_all(&lib_dir).unwrap();
    let lib = lib_dir.join("libompsum.so");
    check(
        Command::new(clang)
            .args(flags)
            .args(["-DLIBRARY", "-fPIC", "-shared", "-fuse-ld=lld", "-Wl,-z,pack-relative-relocs"])
            .arg(source)
            .arg("-o")
            .arg(&lib)
            .args(&link),
    );
    std::fs::write(dir.join("main.c"), MAIN).unwrap();
    let main = dir.join("main_so");
    check(
        Command::new(clang)
            .arg(dir.join("main.c"))
            .arg("-o")
            .arg(&main)
            .arg(format!("-L{}", lib_dir.display()))
            .arg(format!("-Wl,-rpath-link,{}", omp.display()))
            .arg("-lompsum"),
    );
    out.push(Variant { name: "lld_relr.so", target: lib, program: Some(main) });
    out
}

fn ran_on_device_0(v: &Variant, (ok, stdout, stderr): (bool, String, String)) {
    assert!(ok, "{}: failed:\n{stdout}\n{stderr}", v.name);
    assert_eq!(stdout, "sum=500500\n", "{}", v.name);
    assert!(stderr.contains("device 0 info: Launching kernel __omp_offloading_"), "{}: {stderr}", v.name);
}

/// The images `offload list --json` reports, as (triple, target id).
fn listed(file: &Path) -> Vec<(String, String)> {
    let out = offload(&["list", "--json"], file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap_or_else(|| panic!("unexpected list output: {v}"))
        .iter()
        .map(|o| (o["triple"].as_str().unwrap_or("").to_string(), o["target_id"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_omp19)),
    ignore = "needs LLVM 19 and LLVM 19's OpenMP runtime: run scripts/install-reference-llvm.sh"
)]
fn pruned_openmp_programs_run_on_the_host_plugin_until_its_image_is_dropped() {
    let (clang, _lld, omp) =
        (common::llvm_tool(19, "clang"), common::llvm_tool(19, "ld.lld"), common::omp19_runtime(true));
    let work = tempfile::tempdir().unwrap();
    for v in build(&clang, &omp, work.path()) {
        let name = v.name;
        ran_on_device_0(&v, v.run(&v.target, &omp));
        assert_eq!(listed(&v.target).len(), 2, "{name}");
        let pruned_dir = work.path().join(format!("pruned-{name}"));
        std::fs::create_dir_all(&pruned_dir).unwrap();
        let out_file =
            |tag: &str| pruned_dir.join(format!("{tag}-{}", v.target.file_name().unwrap().to_str().unwrap()));

        // Keep the host-offload image: same run, one image listed, verify clean.
        let host = out_file("host");
        let r = offload(
            &["prune", "--mode", "zero", "--keep", "x86_64-pc-linux-gnu", "-o", host.to_str().unwrap()],
            &v.target,
        );
        assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(std::fs::metadata(&host).unwrap().len(), std::fs::metadata(&v.target).unwrap().len());
        ran_on_device_0(&v, v.run(&host, &omp));
        assert_eq!(listed(&host), [("x86_64-pc-linux-gnu".to_string(), String::new())], "{name}");
        // llvm-objdump reads the zero-mode output: the dropped image left
        // the section's extent.
        {
            let objdump = common::llvm_tool(19, "llvm-objdump");
            let want = [("x86_64-pc-linux-gnu".to_string(), String::new())];
            assert_eq!(objdump_offloading(&objdump, &host), want, "{name}");
        }
        let verify = offload(&["verify"], &host);
        assert!(verify.status.success(), "{name}: {}", String::from_utf8_lossy(&verify.stdout));
        {
            let r = check(Command::new(common::llvm_tool(19, "llvm-readelf")).arg("-lS").arg(&host));
            assert!(!String::from_utf8_lossy(&r.stderr).contains("warning"), "{name}");
        }

        // Keep only amdgcn: no plugin here runs it, MANDATORY fails.
        let amd = out_file("amd");
        let r = offload(
            &["prune", "--mode", "zero", "--drop", "x86_64-pc-linux-gnu", "-o", amd.to_str().unwrap()],
            &v.target,
        );
        assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(listed(&amd), [("amdgcn-amd-amdhsa".to_string(), "gfx90a".to_string())], "{name}");
        {
            let objdump = common::llvm_tool(19, "llvm-objdump");
            let want = [("amdgcn-amd-amdhsa".to_string(), "gfx90a".to_string())];
            assert_eq!(objdump_offloading(&objdump, &amd), want, "{name}");
        }
        let (ok, stdout, stderr) = v.run(&amd, &omp);
        assert!(!ok && !stdout.contains("sum=500500"), "{name}: ran without its host image:\n{stdout}");
        assert!(stderr.contains("offloading is mandatory"), "{name}: {stderr}");

        // Both: refused without --allow-empty (nothing written), then no image at all.
        let none = out_file("none");
        let args = ["prune", "--drop", "x86_64-pc-linux-gnu,gfx90a", "-o", none.to_str().unwrap()];
        let r = offload(&args, &v.target);
        assert_eq!(r.status.code(), Some(1), "{name}");
        assert!(String::from_utf8_lossy(&r.stderr).contains("--allow-empty"), "{name}");
        assert!(!none.exists(), "{name}: a refused prune wrote its output");
        let r = offload(&[&args[..], &["--allow-empty"]].concat(), &v.target);
        assert!(r.status.success(), "{name}: {}", String::from_utf8_lossy(&r.stderr));
        let (ok, _, stderr) = v.run(&none, &omp);
        assert!(!ok && stderr.contains("Found 0 image(s)"), "{name}: {stderr}");
    }
}

/// Without LLVM: the committed clang 19 fixture through the CLI.
#[test]
fn the_cli_prunes_the_committed_fixture_and_refuses_what_it_cannot_do() {
    let input = source().with_file_name("gnu_pie");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pruned");
    let o = out.to_str().unwrap();
    let r = offload(&["prune", "--keep", "x86_64-pc-linux-gnu", "--json", "-o", o], &input);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["format"], "openmp");
    assert_eq!(v["dry_run"], false);
    let fates: Vec<(&str, bool)> = v["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["triple"].as_str().unwrap(), i["kept"].as_bool().unwrap()))
        .collect();
    assert_eq!(fates, [("x86_64-pc-linux-gnu", true), ("amdgcn-amd-amdhsa", false)]);
    assert_eq!(
        (v["descriptors"][0]["old_count"].as_u64(), v["descriptors"][0]["new_count"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(listed(&out), [("x86_64-pc-linux-gnu".to_string(), String::new())]);
    // The output keeps the input's mode: a pruned program stays executable.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o111, 0o111);

    // Dry runs write nothing; what cannot be done is refused with a reason.
    let dry = offload(&["prune", "--drop", "gfx90a", "--dry-run"], &input);
    assert!(dry.status.success() && String::from_utf8_lossy(&dry.stdout).contains("would drop 1 of 2 OpenMP images"));
    for (args, says) in [
        (&["prune", "--keep-gpu", "gfx90a", "-o", o][..], "--keep-gpu"),
        // --keep alone matching no image: what the file holds, not --allow-empty.
        (
            &["prune", "--keep", "gfx942", "-o", o][..],
            "matches none of its device code: it holds gfx90a, x86_64-pc-linux-gnu",
        ),
        (&["prune", "--keep", "sm_89", "-o", o][..], "--keep sm_89 matches none of its device code: it holds"),
        // Rules that empty the descriptor otherwise: --allow-empty is the way out.
        (&["prune", "--drop", "x86_64-pc-linux-gnu,gfx90a", "-o", o][..], "use --allow-empty"),
    ] {
        let before = std::fs::read(&out).unwrap();
        let r = offload(args, &input);
        assert_eq!(r.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&r.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
        assert_eq!(std::fs::read(&out).unwrap(), before, "{args:?} touched the existing output");
    }
}

/// Without LLVM: cut mode on the committed fixture, keeping the gfx90a
/// image (the x86_64 one is 15.7 KiB: pages to cut).
#[test]
fn the_cli_cuts_the_committed_fixture() {
    let input = source().with_file_name("lld_pie");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cut");
    let r = offload(&["prune", "--mode", "cut", "--keep", "gfx90a", "--json", "-o", out.to_str().unwrap()], &input);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    assert!(stderr.contains("do not run GNU strip"), "{stderr}");
    let v: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["mode"], "cut");
    let len = std::fs::metadata(&out).unwrap().len();
    assert_eq!(v["output_size"].as_u64(), Some(len));
    assert_eq!(v["input_size"].as_u64(), Some(std::fs::metadata(&input).unwrap().len()));
    assert!(len + 2 * 4096 <= v["input_size"].as_u64().unwrap(), "{v}");
    // The kept image now starts the section; the dropped one has no place.
    let images = v["images"].as_array().unwrap();
    assert_eq!(images[0]["new_offset"], Value::Null);
    assert_eq!(images[1]["new_offset"], images[0]["offset"]);
    assert_eq!(listed(&out), [("amdgcn-amd-amdhsa".to_string(), "gfx90a".to_string())]);
    // Keeping x86_64 drops only 6.8 KiB: written in zero mode, with a note.
    let zero = dir.path().join("zero");
    let r = offload(&["prune", "--mode", "cut", "--keep", "x86_64-pc-linux-gnu", "-o", zero.to_str().unwrap()], &input);
    assert!(r.status.success() && String::from_utf8_lossy(&r.stderr).contains("written in zero mode"));
    assert_eq!(std::fs::metadata(&zero).unwrap().len(), std::fs::metadata(&input).unwrap().len());
}

/// `omp.c` plus 32 KiB of data only the amdgcn image holds (`__AMDGCN__`
/// is defined for that device compilation alone), so that dropping that
/// image frees pages to cut.
fn big_amdgcn_source(dir: &Path) -> PathBuf {
    let table: Vec<String> = (0..32768u32).map(|i| (i * 7919 % 251).to_string()).collect();
    let text = format!(
        "#pragma omp declare target\n#ifdef __AMDGCN__\nunsigned char amd_only[32768] = {{{}}};\n#endif\n#pragma omp end declare target\n\
         #include <stdio.h>\nlong offload_sum(int n) {{\n  long sum = 0;\n#pragma omp target map(tofrom : sum)\n  {{\n\
         for (int i = 1; i <= n; ++i)\n      sum += i;\n#ifdef __AMDGCN__\n    sum += amd_only[n & 32767] - amd_only[n & 32767];\n#endif\n  }}\n\
         return sum;\n}}\n#ifndef LIBRARY\nint main(void) {{\n  long sum = offload_sum(1000);\n  printf(\"sum=%ld\\n\", sum);\n\
         return sum == 500500 ? 0 : 1;\n}}\n#endif\n",
        table.join(",")
    );
    let path = dir.join("omp_big.c");
    std::fs::write(&path, text).unwrap();
    path
}

/// The llvm-objdump-19 --offloading listing as (triple, arch) pairs.
fn objdump_offloading(objdump: &Path, file: &Path) -> Vec<(String, String)> {
    let out = check(Command::new(objdump).arg("--offloading").arg(file));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.stderr.is_empty(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let field = |line: &str, key: &str| line.strip_prefix(key).map(|v| v.trim().to_string());
    let archs: Vec<String> = text.lines().filter_map(|l| field(l, "arch")).collect();
    let triples: Vec<String> = text.lines().filter_map(|l| field(l, "triple")).collect();
    triples.into_iter().zip(archs).collect()
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_omp19)),
    ignore = "needs LLVM 19 and LLVM 19's OpenMP runtime: run scripts/install-reference-llvm.sh"
)]
fn cut_openmp_programs_run_on_the_host_plugin_until_its_image_is_dropped() {
    let (clang, _lld, omp) =
        (common::llvm_tool(19, "clang"), common::llvm_tool(19, "ld.lld"), common::omp19_runtime(true));
    let tools = ["llvm-objdump", "llvm-readelf", "llvm-strip"].map(|t| common::llvm_tool(19, t));
    let [objdump, readelf, strip] = tools;
    let work = tempfile::tempdir().unwrap();
    let source = big_amdgcn_source(work.path());
    for v in build_from(&clang, &omp, work.path(), &source) {
        let name = v.name;
        ran_on_device_0(&v, v.run(&v.target, &omp));
        let dir = work.path().join(format!("cut-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let file_name = v.target.file_name().unwrap().to_str().unwrap().to_string();
        let input_len = std::fs::metadata(&v.target).unwrap().len();
        for (tag, keep, runs) in [("host", "x86_64-pc-linux-gnu", true), ("amd", "gfx90a", false)] {
            let out = dir.join(format!("{tag}-{file_name}"));
            let args = ["prune", "--mode", "cut", "--json", "--keep", keep, "-o", out.to_str().unwrap()];
            let r = offload(&args, &v.target);
            let stderr = String::from_utf8_lossy(&r.stderr);
            assert!(r.status.success(), "{name} {tag}: {stderr}");
            let report: Value = serde_json::from_slice(&r.stdout).unwrap();
            assert_eq!(report["mode"], "cut", "{name} {tag}: {stderr}");
            let len = std::fs::metadata(&out).unwrap().len();
            let dropped = report["dropped_bytes"].as_u64().unwrap();
            assert!(
                len < input_len && input_len - len <= dropped && dropped - (input_len - len) < 3 * 4096,
                "{name} {tag}"
            );
            eprintln!("{name} {tag}: cut {input_len} -> {len} bytes ({dropped} dropped)");
            let want = if runs { ("x86_64-pc-linux-gnu", "") } else { ("amdgcn-amd-amdhsa", "gfx90a") };
            assert_eq!(objdump_offloading(&objdump, &out), [(want.0.to_string(), want.1.to_string())], "{name} {tag}");
            let re = check(Command::new(&readelf).args(["-lS", "--dyn-relocations"]).arg(&out));
            assert!(re.stderr.is_empty(), "{name} {tag}: {}", String::from_utf8_lossy(&re.stderr));
            let result = v.run(&out, &omp);
            if runs {
                ran_on_device_0(&v, result);
                // llvm-strip keeps the cut file working.
                let stripped = dir.join("stripped").join(&file_name);
                std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
                check(Command::new(&strip).arg(&out).arg("-o").arg(&stripped));
                ran_on_device_0(&v, v.run(&stripped, &omp));
            } else {
                let (ok, stdout, stderr) = result;
                assert!(!ok && !stdout.contains("sum=500500"), "{name}: ran without its host image:\n{stdout}");
                assert!(stderr.contains("offloading is mandatory"), "{name}: {stderr}");
            }
        }
    }
}
