//! Live interoperability of `-type=o` and `-type=a` with LLVM 19's
//! clang-offload-bundler, on objects freshly built by clang 19 and GCC:
//! same bytes, same listings, each tool unbundling the other's output, fat
//! objects that link and run, archives built with llvm-ar, and the bundler
//! command lines clang 14 and 19 really run for `-c`.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const OURS: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const HOST: &str = "host-x86_64-unknown-linux-gnu";

fn tool(version: u32, name: &str) -> PathBuf {
    common::llvm_tool(version, name)
}

/// Runs a command that must succeed; returns its stdout.
fn must(cmd: &mut Command) -> Vec<u8> {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Runs a bundler; returns (exit code, stderr with argv0 replaced, stdout).
fn bundler(exe: &Path, dir: &Path, args: &[String]) -> (Option<i32>, String, Vec<u8>) {
    let out = common::run(Command::new(exe).args(args).current_dir(dir));
    let argv0 = exe.to_string_lossy();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).replace(argv0.as_ref(), "<argv0>"), out.stdout)
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

const C_SOURCE: &str = r#"
extern int printf(const char *, ...);
int counter = 41;
static int bump(int x) { return x + 1; }
__attribute__((weak)) int weak_fn(void) { return 7; }
__thread int tls_value = 3;
const char *greeting = "fat object says hi";
int main(void) { printf("%s %d %d %d\n", greeting, bump(counter), weak_fn(), tls_value); return 0; }
"#;

const CXX_SOURCE: &str = r#"
#include <cstdio>
#include <string>
#include <vector>
template <class T> struct Box { T v; explicit Box(T x) : v(x) {} virtual T get() const { return v; } virtual ~Box() {} };
inline int next_id() { static int id = 0; return ++id; }
thread_local int tls = 5;
int main() {
  std::vector<std::string> words{"alpha", "beta"};
  Box<int> b(next_id() + 41);
  Box<double> d(2.5);
  std::printf("%d %.1f %zu %s %d\n", b.get(), d.get(), words.size(), words[1].c_str(), tls);
}
"#;

const DEVICE_SOURCE: &str = "int devfn(int x) { return x * 3; }\nint dev_global = 42;\n";

/// Builds host objects with clang 19 and GCC; returns the files built.
/// `C_SOURCE` includes no header, so every cross target compiles it;
/// compilers or targets that are missing are skipped.
fn build_hosts(dir: &Path, clang: &Path) -> Vec<String> {
    fs::write(dir.join("prog.c"), C_SOURCE).unwrap();
    fs::write(dir.join("prog.cpp"), CXX_SOURCE).unwrap();
    let mut built = Vec::new();
    let mut try_build = |name: &str, cmd: &mut Command| {
        if cmd.current_dir(dir).output().is_ok_and(|o| o.status.success()) {
            built.push(name.to_string());
        }
    };
    let c = |args: &[&str]| {
        let mut cmd = Command::new(clang);
        cmd.args(args);
        cmd
    };
    try_build("c-clang.o", &mut c(&["-c", "-O1", "prog.c", "-o", "c-clang.o"]));
    try_build(
        "c-clang-g.o",
        &mut c(&["-c", "-g", "-ffunction-sections", "-fdata-sections", "prog.c", "-o", "c-clang-g.o"]),
    );
    try_build("cxx-clang.o", &mut c(&["-x", "c++", "-c", "-O2", "-g", "prog.cpp", "-o", "cxx-clang.o"]));
    try_build(
        "cxx-clang-fs.o",
        &mut c(&["-x", "c++", "-c", "-O0", "-ffunction-sections", "prog.cpp", "-o", "cxx-clang-fs.o"]),
    );
    try_build("c-gcc.o", Command::new("gcc").args(["-c", "-O2", "prog.c", "-o", "c-gcc.o"]));
    try_build("cxx-gcc.o", Command::new("g++").args(["-c", "-O2", "-g", "prog.cpp", "-o", "cxx-gcc.o"]));
    try_build("c-gcc-m32.o", Command::new("gcc").args(["-m32", "-c", "-O1", "prog.c", "-o", "c-gcc-m32.o"]));
    for target in [
        "i386-linux-gnu",
        "aarch64-linux-gnu",
        "powerpc64-linux-gnu",
        "powerpc64le-linux-gnu",
        "powerpc-linux-gnu",
        "mips-linux-gnu",
        "mips64el-linux-gnuabi64",
        "s390x-linux-gnu",
        "riscv64-linux-gnu",
        "armv7-linux-gnueabihf",
    ] {
        let name = format!("c-{target}.o");
        try_build(&name, &mut c(&[&format!("--target={target}"), "-c", "-O1", "-fno-pic", "prog.c", "-o", &name]));
    }
    built
}

fn build_device(dir: &Path, clang: &Path) -> (String, String) {
    fs::write(dir.join("dev.c"), DEVICE_SOURCE).unwrap();
    for (out, extra) in [("dev.o", None), ("dev.bc", Some("-emit-llvm"))] {
        let mut cmd = Command::new(clang);
        cmd.args(["--target=amdgcn-amd-amdhsa", "-mcpu=gfx906", "-nogpulib", "-O1", "-c", "dev.c", "-o", out]);
        cmd.args(extra);
        must(cmd.current_dir(dir));
    }
    ("dev.o".into(), "dev.bc".into())
}

/// Bundles, lists and unbundles every host object with both tools, in both
/// directions, and counts the byte-identical results.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn fat_objects_from_real_compilers_match_llvm19() {
    let (llvm, clang) = (tool(19, "clang-offload-bundler"), tool(19, "clang"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hosts = build_hosts(d, &clang);
    let (dev_o, dev_bc) = build_device(d, &clang);
    assert!(hosts.len() >= 8, "too few host objects built: {hosts:?}");
    let targets =
        format!("{HOST},hip-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx908:xnack+,openmp-x86_64-pc-linux-gnu");
    let (mut compared, mut identical_bundles, mut identical_hosts) = (0, 0, 0);
    for host in &hosts {
        let bundle = |exe: &Path, out: &str| {
            let args = strings(&[
                "-type=o",
                &format!("-targets={targets}"),
                &format!("-input={host}"),
                &format!("-input={dev_o}"),
                &format!("-input={dev_bc}"),
                "-input=prog.c",
                &format!("-output={out}"),
            ]);
            bundler(exe, d, &args)
        };
        let (lc, le, _) = bundle(&llvm, "llvm.fat");
        let (oc, oe, _) = bundle(Path::new(OURS), "ours.fat");
        assert_eq!((lc, &le), (oc, &oe), "{host}: bundling");
        compared += 1;
        let (lf, of) = (fs::read(d.join("llvm.fat")).unwrap(), fs::read(d.join("ours.fat")).unwrap());
        assert!(lf == of, "{host}: our fat object differs from LLVM 19's ({} vs {} bytes)", of.len(), lf.len());
        identical_bundles += 1;

        for fat in ["llvm.fat", "ours.fat"] {
            let list = strings(&["-type=o", "-list", &format!("-input={fat}")]);
            let (l, o) = (bundler(&llvm, d, &list), bundler(Path::new(OURS), d, &list));
            assert_eq!(l, o, "{host}: listing {fat}");
            // Each tool unbundles the other's object; request in a new order.
            let un = |exe: &Path, prefix: &str| {
                let mut args = strings(&[
                    "-type=o",
                    "-unbundle",
                    &format!("-input={fat}"),
                    &format!(
                        "-targets=openmp-x86_64-pc-linux-gnu,hip-amdgcn-amd-amdhsa--gfx908:xnack+,{HOST},hip-amdgcn-amd-amdhsa--gfx906"
                    ),
                ]);
                args.extend((0..4).map(|i| format!("-output={prefix}{i}")));
                bundler(exe, d, &args)
            };
            assert_eq!(un(&llvm, "l"), un(Path::new(OURS), "o"), "{host}: unbundling {fat}");
            for i in 0..4 {
                let (l, o) = (fs::read(d.join(format!("l{i}"))).unwrap(), fs::read(d.join(format!("o{i}"))).unwrap());
                assert!(l == o, "{host}: output {i} of unbundling {fat} differs");
            }
            assert_eq!(fs::read(d.join("o0")).unwrap(), fs::read(d.join("prog.c")).unwrap());
            assert_eq!(fs::read(d.join("o1")).unwrap(), fs::read(d.join(&dev_bc)).unwrap());
            assert_eq!(fs::read(d.join("o3")).unwrap(), fs::read(d.join(&dev_o)).unwrap());
            identical_hosts += usize::from(fat == "ours.fat");
        }
    }
    eprintln!(
        "objects compared: {compared}; byte-identical fat objects: {identical_bundles}; byte-identical host extractions: {identical_hosts}"
    );
}

/// The host code of our fat objects is the host object's: same disassembly,
/// relocations and symbols, and the program links and runs the same.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn our_fat_objects_link_and_run_like_the_host_object() {
    let (clang, objdump) = (tool(19, "clang"), tool(19, "llvm-objdump"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("prog.c"), C_SOURCE).unwrap();
    fs::write(d.join("prog.cpp"), CXX_SOURCE).unwrap();
    fs::write(d.join("dev"), b"device code").unwrap();
    // The system compiler drivers link, as in a real build; clang 19's
    // stand in where they are missing.
    let driver = |name: &str, fallback: &str| {
        if Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()) {
            PathBuf::from(name)
        } else {
            clang.with_file_name(fallback)
        }
    };
    let (cc, cxx) = (driver("cc", "clang"), driver("c++", "clang++"));
    let builds: [(&str, &[&str], &Path); 4] = [
        ("c", &["-c", "-O1", "prog.c", "-o", "c.o"], &cc),
        ("cxx", &["-x", "c++", "-c", "-O2", "prog.cpp", "-o", "cxx.o"], &cxx),
        ("cxxg", &["-x", "c++", "-c", "-O0", "-g", "-ffunction-sections", "prog.cpp", "-o", "cxxg.o"], &cxx),
        ("pie", &["-c", "-fPIE", "-O2", "prog.c", "-o", "pie.o"], &cc),
    ];
    for (name, args, linker) in builds {
        must(Command::new(&clang).args(args).current_dir(d));
        let obj = format!("{name}.o");
        let fat = format!("{name}.fat.o");
        must(Command::new(OURS).current_dir(d).args(strings(&[
            "-type=o",
            &format!("-targets={HOST},hip-amdgcn-amd-amdhsa--gfx906"),
            &format!("-input={obj}"),
            "-input=dev",
            &format!("-output={fat}"),
        ])));
        let dump =
            |f: &str| must(Command::new(&objdump).args(["-d", "-r", "-t", "--no-show-raw-insn", f]).current_dir(d));
        let strip_name = |b: Vec<u8>| String::from_utf8_lossy(&b).lines().skip(2).collect::<Vec<_>>().join("\n");
        assert_eq!(strip_name(dump(&obj)), strip_name(dump(&fat)), "{name}: host code changed");
        for (input, exe) in [(&obj, format!("{name}.plain")), (&fat, format!("{name}.fat"))] {
            must(Command::new(linker).args([input.as_str(), "-o", &exe]).current_dir(d));
        }
        let run = |exe: &str| must(&mut Command::new(d.join(exe)));
        let plain = run(&format!("{name}.plain"));
        assert!(!plain.is_empty());
        assert_eq!(plain, run(&format!("{name}.fat")), "{name}: the fat program prints something else");
        // The bundle sections are SHF_EXCLUDE: nothing of them reaches the program.
        let sections = must(Command::new(&objdump).args(["-h", &format!("{name}.fat")]).current_dir(d));
        assert!(!String::from_utf8_lossy(&sections).contains("__CLANG_OFFLOAD_BUNDLE__"), "{name}");
    }
}

/// Extended section numbering (more than 0xff00 sections).
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn extended_section_numbering_matches_llvm19() {
    let (llvm, mc) = (tool(19, "clang-offload-bundler"), tool(19, "llvm-mc"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (name, count) in [("near", 65_274usize), ("many", 66_000)] {
        let mut asm = String::new();
        for i in 0..count {
            asm.push_str(&format!(".section .t{i},\"ax\",@progbits\n.globl f{i}\nf{i}:\n ret\n"));
        }
        fs::write(d.join(format!("{name}.s")), asm).unwrap();
        must(
            Command::new(&mc)
                .args(["-filetype=obj", "-triple=x86_64-linux-gnu"])
                .arg(format!("{name}.s"))
                .arg("-o")
                .arg(format!("{name}.o"))
                .current_dir(d),
        );
        fs::write(d.join("dev"), b"x").unwrap();
        let targets = format!(
            "-targets={HOST},hip-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx908,hip-amdgcn-amd-amdhsa--gfx90a,hip-amdgcn-amd-amdhsa--gfx1030,hip-amdgcn-amd-amdhsa--gfx1100,hip-amdgcn-amd-amdhsa--gfx942"
        );
        let mut args = strings(&["-type=o", &targets, &format!("-input={name}.o")]);
        args.extend((0..6).map(|_| "-input=dev".to_string()));
        let mut l = args.clone();
        l.push("-output=l.fat".into());
        let mut o = args;
        o.push("-output=o.fat".into());
        assert_eq!(bundler(&llvm, d, &l).0, Some(0));
        assert_eq!(bundler(Path::new(OURS), d, &o).0, Some(0));
        assert!(fs::read(d.join("l.fat")).unwrap() == fs::read(d.join("o.fat")).unwrap(), "{name}: bundle differs");
        let un = |exe: &Path, out: &str| {
            bundler(
                exe,
                d,
                &strings(&[
                    "-type=o",
                    "-unbundle",
                    &format!("-targets={HOST}"),
                    "-input=l.fat",
                    &format!("-output={out}"),
                ]),
            )
        };
        assert_eq!(un(&llvm, "l.host").0, Some(0));
        assert_eq!(un(Path::new(OURS), "o.host").0, Some(0));
        assert!(fs::read(d.join("l.host")).unwrap() == fs::read(d.join("o.host")).unwrap(), "{name}: host differs");
    }
}

/// The bundler command lines clang runs for `-c` (found with `-###`), run
/// through both tools.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn clang_driver_command_lines_give_the_same_results() {
    let (llvm, clang) = (tool(19, "clang-offload-bundler"), tool(19, "clang"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("prog.c"), C_SOURCE).unwrap();
    must(Command::new(&clang).args(["-c", "-O1", "prog.c", "-o", "host.o"]).current_dir(d));
    let (dev_o, dev_bc) = build_device(d, &clang);
    fs::copy(d.join(&dev_o), d.join("h-gfx90a:xnack+-29398f.out")).unwrap();
    let cases: Vec<Vec<String>> = vec![
        // clang 19 -x hip -fgpu-rdc --offload-arch=gfx906 -c (host input last).
        strings(&[
            "-type=o",
            "-targets=hip-amdgcn-amd-amdhsa-gfx906,host-x86_64-pc-linux-gnu",
            "-output=out",
            &format!("-input={dev_bc}"),
            "-input=host.o",
        ]),
        // clang 19 -x hip --offload-arch=gfx906 --offload-arch=gfx90a:xnack+ -c (the .hipfb).
        strings(&[
            "-type=o",
            "-bundle-align=4096",
            "-targets=host-x86_64-unknown-linux,hipv4-amdgcn-amd-amdhsa--gfx906,hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "-input=/dev/null",
            &format!("-input={dev_o}"),
            "-input=h-gfx90a:xnack+-29398f.out",
            "-output=out",
        ]),
        // clang 14 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu -c, and its link step.
        strings(&[
            "-type=o",
            "-targets=openmp-x86_64-pc-linux-gnu,host-x86_64-pc-linux-gnu",
            "-outputs=out",
            &format!("-inputs={dev_o},host.o"),
        ]),
        strings(&[
            "-type=o",
            "-targets=hip-amdgcn-amd-amdhsa-gfx906,host-x86_64-pc-linux-gnu",
            "-outputs=out",
            &format!("-inputs={dev_bc},host.o"),
        ]),
    ];
    for args in cases {
        let l = bundler(&llvm, d, &args);
        let l_out = fs::read(d.join("out")).unwrap();
        let o = bundler(Path::new(OURS), d, &args);
        assert_eq!(l, o, "{args:?}");
        assert!(l_out == fs::read(d.join("out")).unwrap(), "{args:?}: outputs differ");
        // The link step of clang 14 unbundles with -allow-missing-bundles.
        let un = strings(&[
            "-type=o",
            "-targets=host-x86_64-pc-linux-gnu,openmp-x86_64-pc-linux-gnu,hip-amdgcn-amd-amdhsa-gfx906",
            "-inputs=out",
            "-outputs=u0,u1,u2",
            "-unbundle",
            "-allow-missing-bundles",
        ]);
        let l = bundler(&llvm, d, &un);
        let lu: Vec<Vec<u8>> = (0..3).map(|i| fs::read(d.join(format!("u{i}"))).unwrap()).collect();
        let o = bundler(Path::new(OURS), d, &un);
        assert_eq!(l, o, "{args:?} / unbundle");
        for (i, l) in lu.iter().enumerate() {
            assert!(*l == fs::read(d.join(format!("u{i}"))).unwrap(), "{args:?} / unbundle output {i}");
        }
    }
}

/// clang 14's OpenMP offloading (`-fopenmp-targets=x86_64-pc-linux-gnu`)
/// runs our bundler for `-c` and for the link, and the program offloads to
/// libomptarget's host device.
#[test]
#[cfg_attr(
    not(all(has_llvm14, has_omp14)),
    ignore = "needs LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn clang14_openmp_build_runs_with_our_bundler() {
    let clang = tool(14, "clang");
    let libdir = common::omp14_lib();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bin = d.join("bin");
    fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(OURS, bin.join("clang-offload-bundler")).unwrap();
    fs::write(
        d.join("omp.c"),
        "#include <stdio.h>\n#include <omp.h>\nint main(void) { int initial = -1, n = 0;\n\
         #pragma omp target map(from: initial, n)\n{ initial = omp_is_initial_device(); n = 6 * 7; }\n\
         printf(\"n=%d initial=%d\\n\", n, initial); return 0; }\n",
    )
    .unwrap();
    let b = format!("-B{}", bin.display());
    let omp = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"];
    let out = must(Command::new(&clang).arg(&b).args(omp).args(["-c", "omp.c", "-o", "omp.o", "-v"]).current_dir(d));
    let _ = out;
    let rpath = format!("-Wl,-rpath,{}", libdir.display());
    let link = common::run(
        Command::new(&clang)
            .arg(&b)
            .args(omp)
            .args(["omp.o", "-o", "omp", "-v"])
            .arg(format!("-L{}", libdir.display()))
            .arg(&rpath)
            .current_dir(d),
    );
    assert!(link.status.success(), "{}", String::from_utf8_lossy(&link.stderr));
    assert!(
        String::from_utf8_lossy(&link.stderr).contains(&format!("{}/clang-offload-bundler", bin.display())),
        "our bundler was not used"
    );
    let run = common::run(Command::new(d.join("omp")).env("LIBOMPTARGET_INFO", "-1").current_dir(d));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout} {}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("n=42 initial=0"), "the target region did not run on device 0: {stdout}");
}

/// Archives of fat objects made with llvm-ar, split by both tools.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn heterogeneous_archives_match_llvm19() {
    let (llvm, clang, ar) = (tool(19, "clang-offload-bundler"), tool(19, "clang"), tool(19, "llvm-ar"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("prog.c"), C_SOURCE).unwrap();
    must(Command::new(&clang).args(["-c", "-O1", "prog.c", "-o", "host.o"]).current_dir(d));
    let (dev_o, dev_bc) = build_device(d, &clang);
    fs::write(d.join("blob"), b"opaque device blob").unwrap();
    // Members: (name, -type, [(target, input)]).
    type Member<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);
    let members: Vec<Member> = vec![
        (
            "m1.o",
            "o",
            vec![
                (HOST, "host.o"),
                ("hip-amdgcn-amd-amdhsa--gfx906", &dev_bc),
                ("hip-amdgcn-amd-amdhsa--gfx908", &dev_o),
            ],
        ),
        (
            "a_member_with_a_rather_long_name.o",
            "o",
            vec![(HOST, "host.o"), ("hip-amdgcn-amd-amdhsa--gfx90a:xnack+", &dev_bc)],
        ),
        (
            "m3.o",
            "o",
            vec![
                (HOST, "host.o"),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack-", &dev_o),
                ("openmp-amdgcn-amd-amdhsa--gfx906", &dev_bc),
            ],
        ),
        (
            "m4.bc",
            "bc",
            vec![
                (HOST, "blob"),
                ("hip-amdgcn-amd-amdhsa--gfx906:sramecc+", &dev_bc),
                ("openmp-nvptx64-nvidia-cuda--sm_70", "blob"),
            ],
        ),
        ("plain.o", "", vec![]),
        ("m6.o", "o", vec![(HOST, "host.o"), ("openmp-x86_64-pc-linux-gnu", "host.o")]),
    ];
    let mut names = Vec::new();
    for (name, ty, entries) in &members {
        if ty.is_empty() {
            fs::copy(d.join("host.o"), d.join(name)).unwrap();
        } else {
            let targets: Vec<&str> = entries.iter().map(|e| e.0).collect();
            let mut args = strings(&[
                &format!("-type={ty}"),
                &format!("-targets={}", targets.join(",")),
                &format!("-output={name}"),
            ]);
            args.extend(entries.iter().map(|e| format!("-input={}", e.1)));
            assert_eq!(bundler(&llvm, d, &args).0, Some(0), "{name}");
        }
        names.push(name.to_string());
    }
    must(Command::new(&ar).arg("rc").arg("lib.a").args(&names).current_dir(d));
    // The same members in a thin archive (the archive names the files).
    must(Command::new(&ar).args(["rc", "--thin", "thin.a"]).args(&names).current_dir(d));
    let requests: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["hip-amdgcn-amd-amdhsa--gfx906"], vec![]),
        (
            vec![
                "hip-amdgcn-amd-amdhsa--gfx906:xnack+",
                "hip-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack-",
                "hip-amdgcn-amd-amdhsa--gfx908",
            ],
            vec![],
        ),
        (
            vec![
                "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
                "hip-amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack-",
                "hip-amdgcn-amd-amdhsa--gfx90a",
            ],
            vec!["-allow-missing-bundles"],
        ),
        (vec!["hip-amdgcn-amd-amdhsa--gfx90a"], vec![]),
        (vec!["openmp-amdgcn-amd-amdhsa--gfx906", "hipv4-amdgcn-amd-amdhsa--gfx906"], vec!["-hip-openmp-compatible"]),
        (vec!["openmp-nvptx64-nvidia-cuda--sm_70", HOST, "openmp-x86_64-pc-linux-gnu"], vec![]),
        (vec!["hip-amdgcn-amd-amdhsa--gfx1030", "hip-amdgcn-amd-amdhsa--gfx906"], vec!["-allow-missing-bundles"]),
        (vec!["hip-amdgcn-amd-amdhsa--gfx906"], vec!["-check-input-archive"]),
    ];
    let mut compared = 0;
    for (input, (targets, flags)) in ["lib.a", "thin.a"].into_iter().flat_map(|i| requests.iter().map(move |r| (i, r)))
    {
        let mut args =
            strings(&["-type=a", "-unbundle", &format!("-input={input}"), &format!("-targets={}", targets.join(","))]);
        args.extend(flags.iter().map(|f| f.to_string()));
        let mut l = args.clone();
        l.extend((0..targets.len()).map(|i| format!("-output=l{i}.a")));
        let mut o = args;
        o.extend((0..targets.len()).map(|i| format!("-output=o{i}.a")));
        let (lr, or) = (bundler(&llvm, d, &l), bundler(Path::new(OURS), d, &o));
        assert_eq!(lr, or, "{l:?}");
        if lr.0 != Some(0) {
            continue;
        }
        for i in 0..targets.len() {
            let (la, oa) = (fs::read(d.join(format!("l{i}.a"))).unwrap(), fs::read(d.join(format!("o{i}.a"))).unwrap());
            assert!(la == oa, "{l:?}: archive {i} differs from LLVM 19's");
            compared += 1;
        }
    }
    assert!(compared >= 20, "only {compared} archives compared");
    eprintln!("archives compared: {compared}, all byte-identical");
}

/// COFF hosts (MSVC and MinGW targets, C and C++ with COMDATs, CodeView),
/// and a COFF file whose bundle sections sit before COMDAT sections,
/// associative sections, a weak external and uninitialized data.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn coff_objects_match_llvm19() {
    let (llvm, clang, yaml2obj) = (tool(19, "clang-offload-bundler"), tool(19, "clang"), tool(19, "yaml2obj"));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("prog.c"), C_SOURCE).unwrap();
    fs::write(
        d.join("tpl.cpp"),
        "template <class T> T twice(T x) { return x + x; }\ninline int counter() { static int c; return ++c; }\n\
         struct Shape { virtual int area() const; virtual ~Shape() {} };\ninline int Shape::area() const { return 1; }\n\
         int (*keep)(int) = twice<int>;\nint use(Shape *s, int v) { return twice<long>(v) + counter() + s->area(); }\n\
         Shape *make() { return new Shape; }\nstatic int zeroed[1000];\nint *z() { return zeroed; }\n",
    )
    .unwrap();
    fs::write(d.join("dev"), b"DEV1").unwrap();
    let mut objects = Vec::new();
    for target in ["x86_64-pc-windows-msvc", "i686-pc-windows-msvc", "aarch64-pc-windows-msvc", "x86_64-w64-mingw32"] {
        for (src, opts) in [("prog.c", "-O1"), ("tpl.cpp", "-O2 -ffunction-sections -gcodeview"), ("tpl.cpp", "-O0 -g")]
        {
            let name = format!("{target}-{}-{}.o", objects.len(), src.replace('.', "_"));
            let ok = Command::new(&clang)
                .arg(format!("--target={target}"))
                .args(["-c", src, "-o", &name])
                .args(opts.split(' '))
                .current_dir(d)
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                objects.push(name);
            }
        }
    }
    let yaml = common::fixtures().join("objects/coff-mid.yaml");
    must(Command::new(&yaml2obj).arg(&yaml).arg("-o").arg(d.join("mid.o")));
    assert!(objects.len() >= 6, "too few COFF objects: {objects:?}");
    let targets = format!("-targets={HOST},hip-amdgcn-amd-amdhsa--gfx906");
    for obj in objects.iter().chain(std::iter::once(&"mid.o".to_string())) {
        let fat = if obj == "mid.o" {
            obj.clone()
        } else {
            let args = |out: &str| {
                strings(&["-type=o", &targets, &format!("-input={obj}"), "-input=dev", &format!("-output={out}")])
            };
            assert_eq!(bundler(&llvm, d, &args("l.fat")), bundler(Path::new(OURS), d, &args("o.fat")), "{obj}");
            assert!(
                fs::read(d.join("l.fat")).unwrap() == fs::read(d.join("o.fat")).unwrap(),
                "{obj}: fat COFF differs"
            );
            "l.fat".to_string()
        };
        let un = |exe: &Path, p: &str| {
            bundler(
                exe,
                d,
                &strings(&[
                    "-type=o",
                    "-unbundle",
                    &targets,
                    &format!("-input={fat}"),
                    &format!("-output={p}h"),
                    &format!("-output={p}d"),
                ]),
            )
        };
        assert_eq!(un(&llvm, "l"), un(Path::new(OURS), "o"), "{obj}");
        for out in ["h", "d"] {
            let (l, o) = (fs::read(d.join(format!("l{out}"))).unwrap(), fs::read(d.join(format!("o{out}"))).unwrap());
            assert!(l == o, "{obj}: unbundled {out} differs");
        }
    }
    eprintln!("COFF objects compared: {}", objects.len() + 1);
}
