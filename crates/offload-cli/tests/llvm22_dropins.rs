//! The drop-ins as LLVM 22's tools (issue 23): `llvm-offload-binary`,
//! `clang-offload-packager` as its deprecated alias, `clang-offload-bundler`
//! with LLVM 22's IDs and CCOB v3, and LLVM 19's behaviour under the `-19`
//! names or `OFFLOAD_LLVM_VERSION=19`.
//!
//! The first half is hermetic (golden files made by LLVM 22.1.8's own tools,
//! `crates/offload-format/tests/fixtures/llvm22/make.sh`). The second half
//! runs the real tools of `/usr/lib/llvm-22` side by side with ours; it is
//! skipped with a message when they are missing, and fails instead under
//! `OFFLOAD_REQUIRE_LLVM=1` (`scripts/install-reference-llvm.sh` installs
//! them).

use offload_format::offload_binary::{Compression, Image, OffloadKind, write_v3};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BUNDLER: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const PACKAGER: &str = env!("CARGO_BIN_EXE_clang-offload-packager");
const BINARY: &str = env!("CARGO_BIN_EXE_llvm-offload-binary");
const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");
const WRAPPER: &str = env!("CARGO_BIN_EXE_llvm-offload-wrapper");
const LLVM22: &str = "/usr/lib/llvm-22/bin";
const DEPRECATED: &str = "warning: 'clang-offload-packager' is deprecated. Use 'llvm-offload-binary' instead.\n";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/llvm22")
}

fn fixture(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

/// Runs `program` in `dir` with `args`; `release` sets OFFLOAD_LLVM_VERSION
/// (None: unset, the default release).
fn run_in(dir: &Path, program: &str, release: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).args(args).env_remove("OFFLOAD_LLVM_VERSION").env_remove("COMPRESSED_BUNDLE_FORMAT_VERSION");
    for var in ["OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE", "OFFLOAD_BUNDLER_COMPRESSION_LEVEL"] {
        cmd.env_remove(var);
    }
    if let Some(r) = release {
        cmd.env("OFFLOAD_LLVM_VERSION", r);
    }
    cmd.output().unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn ok(out: &Output) -> &Output {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The packages LLVM 22's `llvm-offload-binary` wrote for make.sh's
/// arguments, and ours for the same.
const PACKAGES: &[(&str, &[&str])] = &[
    ("pkg-hip.out", &["file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip"]),
    ("pkg-openmp.out", &["file=omp-sm70.o,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp"]),
    ("pkg-cuda.out", &["file=cuda-sm80.s,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda"]),
    ("pkg-sycl.out", &["file=sycl.spv,triple=spirv64-unknown-unknown,arch=,kind=sycl"]),
    (
        "pkg-all.out",
        &[
            "file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip,feature=+xnack",
            "file=omp-sm70.o,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp",
            "file=cuda-sm80.s,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda",
            "file=sycl.spv,triple=spirv64-unknown-unknown,arch=,kind=sycl",
        ],
    ),
];

fn package_args(images: &[&str]) -> Vec<String> {
    let mut args = vec!["-o".to_string(), "out.bin".to_string()];
    args.extend(images.iter().map(|i| format!("--image={i}")));
    args
}

#[test]
fn llvm_offload_binary_writes_llvm_22_goldens() {
    for (golden, images) in PACKAGES {
        let args = package_args(images);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(&run_in(&fixtures(), BINARY, None, &["--version"])).stdout.clone();
        assert!(String::from_utf8_lossy(&out).contains("compatible with LLVM 22.1.8"));
        let dir = tmp();
        for f in ["hip-gfx90a.o", "omp-sm70.o", "cuda-sm80.s", "sycl.spv"] {
            std::fs::copy(fixture(f), dir.path().join(f)).unwrap();
        }
        let out = ok(&run_in(dir.path(), BINARY, None, &args)).clone();
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
        let ours = std::fs::read(dir.path().join("out.bin")).unwrap();
        assert_eq!(ours, std::fs::read(fixture(golden)).unwrap(), "{golden}");
    }
}

/// HIP is 4 in LLVM 22's numbering and 3 in LLVM 19's (the offload-kind
/// field of the first entry, at byte 34).
#[test]
fn hip_kind_follows_the_release() {
    let dir = tmp();
    std::fs::copy(fixture("hip-gfx90a.o"), dir.path().join("hip-gfx90a.o")).unwrap();
    let image = "--image=file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip";
    let kind_of = |program: &str, release: Option<&str>| {
        let out = run_in(dir.path(), program, release, &["-o", "p.out", image]);
        ok(&out);
        let bytes = std::fs::read(dir.path().join("p.out")).unwrap();
        (u16::from_le_bytes([bytes[34], bytes[35]]), stderr(&out))
    };
    assert_eq!(kind_of(BINARY, None), (4, String::new()));
    assert_eq!(kind_of(PACKAGER, None), (4, DEPRECATED.to_string()));
    assert_eq!(kind_of(PACKAGER, Some("19")), (3, String::new()));
    assert_eq!(kind_of(BINARY, Some("19")), (3, String::new()));
    // The -19 name wins over the environment.
    let named = dir.path().join("clang-offload-packager-19");
    std::os::unix::fs::symlink(PACKAGER, &named).unwrap();
    assert_eq!(kind_of(named.to_str().unwrap(), Some("22")), (3, String::new()));
    // Extraction filters by the release's number: LLVM 22 does not take an
    // LLVM 19 HIP image for kind=hip, LLVM 19 does.
    let p19 = dir.path().join("p19.out");
    std::fs::rename(dir.path().join("p.out"), &p19).unwrap();
    ok(&run_in(dir.path(), BINARY, None, &["p19.out", "--image=kind=hip,file=x22"]));
    assert!(!dir.path().join("x22").exists());
    ok(&run_in(dir.path(), BINARY, Some("19"), &["p19.out", "--image=kind=hip,file=x19"]));
    assert_eq!(std::fs::read(dir.path().join("x19")).unwrap(), std::fs::read(fixture("hip-gfx90a.o")).unwrap());
    // LLVM 22 needs only 'file'; LLVM 19 'file' and 'triple'.
    let no_triple = run_in(dir.path(), BINARY, Some("19"), &["-o", "q.out", "--image=file=hip-gfx90a.o"]);
    assert!(stderr(&no_triple).ends_with("error: 'file' and 'triple' are required image arguments\n"));
    ok(&run_in(dir.path(), BINARY, None, &["-o", "q.out", "--image=file=hip-gfx90a.o"]));
    let no_file = run_in(dir.path(), BINARY, None, &["-o", "q.out", "--image=triple=x"]);
    assert!(stderr(&no_file).ends_with("error: 'file' is a required image arguments\n"), "{}", stderr(&no_file));
}

#[test]
fn bundler_compresses_as_llvm_22_and_19() {
    let dir = tmp();
    for f in ["host.o", "dev-gfx90a.o"] {
        std::fs::copy(fixture(f), dir.path().join(f)).unwrap();
    }
    let bundle = |release: Option<&str>, compress: bool| {
        let mut args = vec![
            "-type=o",
            "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx90a",
            "-input=host.o",
            "-input=dev-gfx90a.o",
            "-output=b.out",
        ];
        if compress {
            args.push("-compress");
        }
        ok(&run_in(dir.path(), BUNDLER, release, &args));
        std::fs::read(dir.path().join("b.out")).unwrap()
    };
    assert_eq!(bundle(None, true), std::fs::read(fixture("bundle-v3.ccob")).unwrap());
    assert_eq!(bundle(None, false), std::fs::read(fixture("bundle-plain.bin")).unwrap());
    let v19 = bundle(Some("19"), true);
    assert_eq!(&v19[..6], b"CCOB\x02\x00");
    let version = run_in(dir.path(), BUNDLER, Some("19"), &["--version"]);
    assert!(String::from_utf8_lossy(&version.stdout).contains("compatible with LLVM 19.1.7"));
}

/// The IDs each release writes, and LLVM 22's refusal of a three-field
/// host triple.
#[test]
fn bundler_ids_follow_the_release() {
    let dir = tmp();
    std::fs::write(dir.path().join("h"), b"HOST").unwrap();
    std::fs::write(dir.path().join("d"), b"DEV").unwrap();
    let ids = |release: Option<&str>, targets: &str| {
        let t = format!("-targets={targets}");
        let out = run_in(dir.path(), BUNDLER, release, &["-type=bc", &t, "-input=h", "-input=d", "-output=b"]);
        if !out.status.success() {
            return Err(stderr(&out));
        }
        let list = ok(&run_in(dir.path(), BUNDLER, release, &["-list", "-type=bc", "-input=b"])).stdout.clone();
        let mut ids: Vec<String> = String::from_utf8_lossy(&list).lines().map(String::from).collect();
        ids.sort();
        Ok(ids)
    };
    let host = "host-x86_64-unknown-linux-gnu";
    assert_eq!(
        ids(None, &format!("{host},hip-amdgcn-amd-amdhsa-unknown-gfx950")).unwrap(),
        ["hip-amdgcn-amd-amdhsa--gfx950", "host-x86_64-unknown-linux-gnu-"]
    );
    assert_eq!(
        ids(Some("19"), &format!("{host},hip-amdgcn-amd-amdhsa--gfx950")).unwrap(),
        ["hip-amdgcn-amd-amdhsa--gfx950-", "host-x86_64-unknown-linux-gnu-"]
    );
    assert_eq!(
        ids(None, &format!("{host},openmp-nvptx64-nvidia-cuda--sm_120a")).unwrap(),
        ["host-x86_64-unknown-linux-gnu-", "openmp-nvptx64-nvidia-cuda-unknown-sm_120a"]
    );
    let refused = ids(None, "host-x86_64-unknown-linux,hip-amdgcn-amd-amdhsa--gfx90a").unwrap_err();
    assert!(refused.contains("error: Targets need to follow the format '<offload kind>-<target triple>'"), "{refused}");
    assert!(ids(Some("19"), "host-x86_64-unknown-linux,hip-amdgcn-amd-amdhsa--gfx90a").is_ok());
}

/// A compressed version 3 OffloadBinary (LLVM main's layout) is listed by
/// the inspector, and what follows it is found at its size rounded to 8.
#[test]
fn inspector_reads_compressed_offload_binaries() {
    let dir = tmp();
    let image = vec![0x5au8; 3000];
    let img = |arch: &'static [u8]| Image {
        offload_kind: OffloadKind::Hip,
        strings: vec![(&b"triple"[..], &b"amdgcn-amd-amdhsa"[..]), (&b"arch"[..], arch)],
        image: &image,
        ..Default::default()
    };
    let mut file = write_v3(&[img(b"gfx90a")], Some(Compression::Zstd(3))).unwrap();
    assert!(file.len() < 300, "compressed to {}", file.len());
    file.resize(file.len().next_multiple_of(8), 0);
    file.extend(write_v3(&[img(b"gfx942")], Some(Compression::Zlib(6))).unwrap());
    std::fs::write(dir.path().join("v3.bin"), &file).unwrap();
    let out = ok(&run_in(dir.path(), OFFLOAD, None, &["list", "v3.bin"])).clone();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains("gfx90a") && l.contains("hip") && l.contains("3000")), "{text}");
    assert!(text.lines().any(|l| l.contains("gfx942") && l.contains("hip")), "{text}");
    let out = ok(&run_in(dir.path(), OFFLOAD, None, &["extract", "v3.bin", "--gpu", "gfx942", "-o", "x"])).clone();
    assert!(out.status.success());
}

// ---------------------------------------------------------------------------
// Against the real LLVM 22 tools.

/// The LLVM 22 tool folder, or None (with a loud message) when it is not
/// installed; under OFFLOAD_REQUIRE_LLVM=1 a missing LLVM 22 fails.
fn llvm22() -> Option<&'static Path> {
    let dir = Path::new(LLVM22);
    if dir.join("clang-offload-bundler").exists() && dir.join("llvm-offload-binary").exists() {
        return Some(dir);
    }
    assert!(
        std::env::var("OFFLOAD_REQUIRE_LLVM").as_deref() != Ok("1"),
        "OFFLOAD_REQUIRE_LLVM=1 but LLVM 22 is missing in {LLVM22} (scripts/install-reference-llvm.sh)"
    );
    eprintln!("SKIPPED: LLVM 22 is not installed in {LLVM22} (scripts/install-reference-llvm.sh installs it)");
    None
}

/// Everything a run leaves: exit status, stdout, stderr (program path
/// replaced by TOOL), and every file of the folder.
fn outcome(program: &str, args: &[String], inputs: &[(&str, Vec<u8>)], env: &[(&str, &str)]) -> String {
    let dir = tmp();
    for (name, bytes) in inputs {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let mut cmd = Command::new(program);
    cmd.current_dir(dir.path()).args(args).env_remove("OFFLOAD_LLVM_VERSION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let name = Path::new(program).file_name().unwrap().to_string_lossy().into_owned();
    let err = stderr(&out).replace(program, "TOOL").replace(&format!("{name}:"), "TOOL:");
    let mut files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut text = format!("{:?}\n{}\n{err}", out.status.code(), String::from_utf8_lossy(&out.stdout));
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        text.push_str(&format!("{}: {bytes:?}\n", f.file_name().unwrap().to_string_lossy()));
    }
    text
}

fn split(args: &str) -> Vec<String> {
    args.split_whitespace().map(String::from).collect()
}

/// Bundler cases (bundle, compress, list, unbundle) run by ours and by
/// LLVM 22's; every one must agree.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn bundler_agrees_with_llvm_22() {
    let Some(llvm) = llvm22() else { return };
    let reference = llvm.join("clang-offload-bundler");
    let reference = reference.to_str().unwrap();
    let h = "host-x86_64-unknown-linux-gnu";
    let mut inputs: Vec<(&str, Vec<u8>)> =
        vec![("h", b"HOST".to_vec()), ("d1", b"DEV1".to_vec()), ("d2", b"DEV2".to_vec())];
    let two = |t: &str| format!("-type=bc -targets={h},{t} -input=h -input=d1 -output=o");
    let mut cases: Vec<(String, Vec<(&str, &str)>)> = [
        "hip-amdgcn-amd-amdhsa--gfx90a",
        "hip-amdgcn-amd-amdhsa-unknown-gfx90a",
        "hip-amdgcn-amd-amdhsa-gnu-gfx90a",
        "hip-amdgcn-amd-amdhsa--gfx950",
        "hip-amdgcn-amd-amdhsa--gfx1250",
        "hip-amdgcn-amd-amdhsa--gfx1251",
        "hip-amdgcn-amd-amdhsa--gfx1153",
        "hip-amdgcn-amd-amdhsa--gfx940",
        "hip-amdgcn-amd-amdhsa--gfx9-4-generic",
        "hip-amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-",
        "hip-amdgcn-amd-amdhsa--fiji",
        "hip-amdgcn-amd-amdhsa",
        "hip-amdgcn-amd-amdhsa-",
        "hip-spirv64-amd-amdhsa--amdgcnspirv",
        "openmp-nvptx64-nvidia-cuda--sm_70",
        "openmp-nvptx64-nvidia-cuda--sm_120a",
        "openmp-x86_64-linux-gnu-",
        "openmp-nvptx64-cuda--",
        "sycl-spir64-unknown-unknown-",
        "host-x86_64-unknown-linux-gnu",
    ]
    .iter()
    .map(|t| (two(t), vec![]))
    .collect();
    cases.push((
        "-type=bc -targets=host-x86_64-unknown-linux,hip-amdgcn-amd-amdhsa--gfx90a -input=h -input=d1 -output=o"
            .to_string(),
        vec![],
    ));
    cases.push((
        format!("-type=bc -targets={h},hip-amdgcn-amd-amdhsa--gfx90a,hip-amdgcn-amd-amdhsa--gfx90a:xnack+ -input=h -input=d1 -input=d2 -output=o"),
        vec![],
    ));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a") + " -compress", vec![]));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a") + " -compress", vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", "2")]));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a") + " -compress", vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", "5")]));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a"), vec![("COMPRESSED_BUNDLE_FORMAT_VERSION", "x")]));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a"), vec![("OFFLOAD_BUNDLER_COMPRESS", "1")]));
    cases.push((two("hip-amdgcn-amd-amdhsa--gfx90a") + " -compress -verbose", vec![]));

    // A bundle written by LLVM 22 (hipv4 entries, generic and new
    // processors), and one written by LLVM 19, to list and unbundle.
    let make = |program: &str, targets: &str, inputs: &str| {
        let dir = tmp();
        for (n, b) in [("h", "HOST"), ("d1", "DEV1"), ("d2", "DEV2"), ("d3", "DEV3")] {
            std::fs::write(dir.path().join(n), b).unwrap();
        }
        let mut args = vec!["-type=bc".to_string(), format!("-targets={targets}"), "-output=b".into()];
        args.extend(inputs.split(' ').map(|i| format!("-input={i}")));
        ok(&Command::new(program).current_dir(dir.path()).args(&args).output().unwrap());
        std::fs::read(dir.path().join("b")).unwrap()
    };
    let b22 = make(
        reference,
        &format!(
            "{h},hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx9-4-generic,hipv4-amdgcn-amd-amdhsa--gfx950:xnack+"
        ),
        "h d1 d2 d3",
    );
    inputs.push(("b22", b22));
    if Path::new("/usr/lib/llvm-19/bin/clang-offload-bundler").exists() {
        let b19 = make(
            "/usr/lib/llvm-19/bin/clang-offload-bundler",
            &format!("{h},hipv4-amdgcn-amd-amdhsa-unknown-gfx90a,hip-amdgcn-amd-amdhsa--gfx950"),
            "h d1 d2",
        );
        inputs.push(("b19", b19));
    }
    for file in ["b22", "b19"] {
        if !inputs.iter().any(|(n, _)| *n == file) {
            continue;
        }
        cases.push((format!("-list -type=bc -input={file}"), vec![]));
        for t in [
            "hip-amdgcn-amd-amdhsa--gfx90a",
            "hip-amdgcn-amd-amdhsa--gfx9-4-generic",
            "hip-amdgcn-amd-amdhsa--gfx942",
            "hip-amdgcn-amd-amdhsa--gfx950",
            "hip-amdgcn-amd-amdhsa--gfx950:xnack+",
            "hip-amdgcn-amd-amdhsa-unknown-gfx90a",
            h,
        ] {
            cases.push((format!("-unbundle -type=bc -targets={t} -input={file} -output=x"), vec![]));
        }
    }
    let mut differ = Vec::new();
    for (args, env) in &cases {
        let args = split(args);
        let ours = outcome(BUNDLER, &args, &inputs, env);
        let theirs = outcome(reference, &args, &inputs, env);
        // -verbose prints a measured speed.
        let speed = |s: &str| s.lines().filter(|l| !l.contains(" speed: ")).collect::<Vec<_>>().join("\n");
        if speed(&ours) != speed(&theirs) {
            differ.push(format!("{args:?} {env:?}\nours:\n{ours}\nLLVM 22:\n{theirs}"));
        }
    }
    eprintln!("bundler: {} of {} cases agree with LLVM 22", cases.len() - differ.len(), cases.len());
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Packager cases run by our `llvm-offload-binary` and LLVM 22's, and by
/// both under the old name.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn llvm_offload_binary_agrees_with_llvm_22() {
    let Some(llvm) = llvm22() else { return };
    let mut inputs: Vec<(&str, Vec<u8>)> = Vec::new();
    for f in ["hip-gfx90a.o", "omp-sm70.o", "cuda-sm80.s", "sycl.spv", "pkg-all.out", "hip-rdc.o"] {
        inputs.push((f, std::fs::read(fixture(f)).unwrap()));
    }
    let cases = [
        "-o p --image=file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip",
        "-o p --image=file=sycl.spv,triple=spirv64-unknown-unknown,arch=,kind=sycl",
        "-o p --image=file=hip-gfx90a.o",
        "-o p --image=triple=x",
        "-o p --image=file=nonexist,triple=x",
        "-o p --image=file=hip-gfx90a.o,file=omp-sm70.o,triple=t,kind=hip",
        "-o p --image=file=hip-gfx90a.o,triple=t pkg-all.out",
        "",
        "--help",
        "--help-list",
        "-h",
        "--bogus",
        "pkg-all.out",
        "pkg-all.out --image=kind=hip",
        "pkg-all.out --image=kind=openmp,file=o.o --image=kind=cuda,file=c.s",
        "pkg-all.out --image=kind=sycl,file=s.spv",
        "pkg-all.out --image=triple=nvptx64-nvidia-cuda --archive",
        "pkg-all.out --image=triple=nvptx64-nvidia-cuda,file=lib.a --archive",
        "hip-rdc.o",
        "hip-rdc.o --image=kind=hip,file=dev.o",
        "hip-rdc.o --image=arch=gfx90a,file=lib.a --archive",
        "nonexist",
    ];
    // Ours under each name, in a folder of links, against LLVM 22's.
    let links = tmp();
    let mut pairs = Vec::new();
    for (name, reference) in
        [("llvm-offload-binary", "llvm-offload-binary"), ("clang-offload-packager", "clang-offload-packager")]
    {
        let link = links.path().join(name);
        std::os::unix::fs::symlink(BINARY, &link).unwrap();
        pairs.push((link.to_string_lossy().into_owned(), llvm.join(reference).to_string_lossy().into_owned()));
    }
    let (mut total, mut differ) = (0, Vec::new());
    for (ours_bin, reference) in &pairs {
        for args in cases {
            let args = split(args);
            total += 1;
            let ours = outcome(ours_bin, &args, &inputs, &[]);
            let theirs = outcome(reference, &args, &inputs, &[]);
            if ours != theirs {
                differ.push(format!("{reference} {args:?}\nours:\n{ours}\nLLVM 22:\n{theirs}"));
            }
        }
    }
    eprintln!("llvm-offload-binary: {} of {total} cases agree with LLVM 22", total - differ.len());
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// clang 22 builds and links a HIP program with the new offload driver and
/// -fgpu-rdc through our llvm-offload-binary and clang-offload-bundler
/// (host link only: the HIP runtime's registration functions are stubs).
/// With LLVM 19's numbering (HIP 3) the link fails, so the test can tell.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn clang_22_links_hip_rdc_through_ours() {
    let Some(llvm) = llvm22() else { return };
    let dir = tmp();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(BINARY, bin.join("llvm-offload-binary")).unwrap();
    std::os::unix::fs::symlink(BUNDLER, bin.join("clang-offload-bundler")).unwrap();
    std::fs::write(
        dir.path().join("a.hip"),
        "__attribute__((device)) int device_value = 3;\n\
         __attribute__((device)) int twice(int x) { return 2 * x + device_value; }\n\
         int main() { return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("stubs.c"),
        "void **__hipRegisterFatBinary(void *d) { return 0; }\n\
         void __hipUnregisterFatBinary(void **h) {}\n\
         void __hipRegisterFunction(void **h, const void *f, char *a, const char *b, unsigned t, void *x, void *y, void *z, void *w, int *s) {}\n\
         void __hipRegisterVar(void **h, void *v, char *a, const char *b, int e, unsigned long s, int c, int g) {}\n\
         void __hipRegisterManagedVar(void *h, void **p, void *i, const char *n, unsigned long s, unsigned a) {}\n\
         void __hipRegisterSurface(void) {}\n\
         void __hipRegisterTexture(void) {}\n",
    )
    .unwrap();
    let clang = llvm.join("clang");
    let cc = Command::new(&clang).current_dir(dir.path()).args(["-c", "stubs.c", "-o", "stubs.o"]).output().unwrap();
    ok(&cc);
    let build = |release: Option<&str>, output: &str| {
        let mut cmd = Command::new(&clang);
        cmd.current_dir(dir.path())
            .env_remove("OFFLOAD_LLVM_VERSION")
            .arg(format!("-B{}", bin.display()))
            .args([
                "-x",
                "hip",
                "-nogpulib",
                "-nogpuinc",
                "--offload-arch=gfx90a",
                "-fgpu-rdc",
                "--offload-new-driver",
                "-v",
            ])
            .args(["a.hip", "-x", "none", "stubs.o", "-o", output]);
        if let Some(r) = release {
            cmd.env("OFFLOAD_LLVM_VERSION", r);
        }
        cmd.output().unwrap()
    };
    let out = build(None, "a.out");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("{}/llvm-offload-binary\" -o", bin.display())), "ours was not used");
    let run = Command::new(dir.path().join("a.out")).output().unwrap();
    assert!(run.status.success());
    let listed = ok(&run_in(dir.path(), OFFLOAD, None, &["list", "a.out"])).stdout.clone();
    let listed = String::from_utf8_lossy(&listed);
    assert!(listed.lines().any(|l| l.contains("hip") && l.contains("gfx90a")), "{listed}");
    let old = build(Some("19"), "b.out");
    assert!(!old.status.success(), "clang 22 linked LLVM 19's HIP kind");
}

// ---------------------------------------------------------------------------
// llvm-offload-wrapper against LLVM 22's.

/// `llvm-dis` of LLVM 22 on a bitcode file, without the `; ModuleID` line
/// (it names the file).
fn disassemble(llvm: &Path, file: &Path) -> String {
    let out = Command::new(llvm.join("llvm-dis")).arg(file).arg("-o").arg("-").output().unwrap();
    assert!(out.status.success(), "llvm-dis {}: {}", file.display(), stderr(&out));
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.starts_with("; ModuleID")).collect::<Vec<_>>().join("\n")
}

/// An OffloadBinary holding one x86-64 image, as clang-linker-wrapper
/// hands it to the wrapping step.
fn offload_binary() -> Vec<u8> {
    offload_format::offload_binary::write(&offload_format::offload_binary::Image {
        offload_kind: OffloadKind::OpenMp,
        strings: vec![(b"triple", b"x86_64-pc-linux-gnu"), (b"arch", b"generic")],
        image: b"\x7fELF device image",
        ..Default::default()
    })
    .unwrap()
}

/// [`offload_binary`] with the image size field replaced.
fn lying_offload_binary(size: u64) -> Vec<u8> {
    let mut b = offload_binary();
    let entry = u64::from_le_bytes(b[16..24].try_into().unwrap()) as usize;
    b[entry + 32..entry + 40].copy_from_slice(&size.to_le_bytes());
    b
}

/// Every kind, several object formats and image sets (none, empty, all
/// zero, text with NULs, random bytes, an OffloadBinary, several): same exit status and
/// messages, and the same module once both are read back by LLVM 22.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn wrapper_modules_equal_llvm_22() {
    let Some(llvm) = llvm22() else { return };
    let reference = llvm.join("llvm-offload-wrapper");
    let dir = tmp();
    let d = dir.path();
    let mut random = vec![0u8; 5000];
    let mut x = 0x1234_5678u32;
    for b in &mut random {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    for (name, bytes) in [
        ("a", b"hello".to_vec()),
        ("b", b"world!".to_vec()),
        ("e", vec![]),
        ("z", vec![0; 9]),
        ("n", b"x\0y\0".to_vec()),
        ("r", random),
        ("ob", offload_binary()),
        ("ol", lying_offload_binary(1 << 40)),
        ("ow", lying_offload_binary(u64::MAX - 100)),
    ] {
        std::fs::write(d.join(name), bytes).unwrap();
    }
    let triples = [
        None,
        Some("x86_64-unknown-linux-gnu"),
        Some("x86_64-pc-windows-msvc"),
        Some("x86_64-apple-darwin"),
        Some("nvptx64-nvidia-cuda"),
        Some("amdgcn-amd-amdhsa"),
        Some("i386-pc-linux-gnu"),
        Some("aarch64-unknown-linux-gnu"),
    ];
    // "ob": LLVM 22 hands libomptarget the image inside an OffloadBinary;
    // "ol", "ow": one whose image size runs past its end, or wraps.
    let sets: [&[&str]; 11] = [
        &["a"],
        &["e"],
        &["z"],
        &["n"],
        &["r"],
        &["ob"],
        &["ol"],
        &["ow"],
        &["a", "b", "r"],
        &["e", "a"],
        &["ob", "a", "ob"],
    ];
    let mut compared = 0;
    for kind in ["openmp", "cuda", "hip"] {
        for triple in triples {
            for set in sets {
                let mut args = vec![format!("--kind={kind}")];
                if let Some(t) = triple {
                    args.push(format!("--triple={t}"));
                }
                let run = |program: &Path, out: &str| {
                    let mut a = args.clone();
                    a.extend(["-o".to_string(), out.to_string()]);
                    a.extend(set.iter().map(|s| s.to_string()));
                    Command::new(program).current_dir(d).args(&a).output().unwrap()
                };
                let theirs = run(&reference, "theirs.bc");
                let ours = run(Path::new(WRAPPER), "ours.bc");
                let what = format!("{args:?} {set:?}");
                assert_eq!(theirs.status.code(), ours.status.code(), "{what}");
                let clean = |o: &Output, p: &str| stderr(o).replace(p, "TOOL");
                assert_eq!(clean(&theirs, reference.to_str().unwrap()), clean(&ours, WRAPPER), "{what}");
                if !theirs.status.success() {
                    assert!(kind != "openmp" && set.len() > 1, "{what}");
                    continue;
                }
                assert_eq!(disassemble(llvm, &d.join("theirs.bc")), disassemble(llvm, &d.join("ours.bc")), "{what}");
                compared += 1;
            }
        }
    }
    // openmp: every set; cuda and hip: the single-image sets.
    assert_eq!(compared, triples.len() * (11 + 2 * 8));
}

/// Command-line errors: same messages and exit status as LLVM 22's, and
/// no output file left behind.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn wrapper_errors_equal_llvm_22() {
    let Some(llvm) = llvm22() else { return };
    let reference = llvm.join("llvm-offload-wrapper");
    let reference = reference.to_str().unwrap();
    let img = [("img", b"IMAGE".to_vec())];
    for case in [
        "--kind=cuda -o x.bc img img",
        "--kind=hip -o x.bc",
        "-o x.bc img",
        "--kind=openmp -o x.bc nosuch",
        "--kind=sycl -o x.bc img",
        "--kind=openmp img",
        "--kind=openmp -o nodir/x.bc img",
        "--kind=openmp -o x.bc .",
        "--kind=openmp -o - img",
        "--kind=openmp --kind=hip -o x.bc img",
        "--bogus",
        "--help",
        "--help-list",
    ] {
        let a = split(case);
        let theirs = outcome(reference, &a, &img, &[]);
        let ours = outcome(WRAPPER, &a, &img, &[]);
        // Written modules are compared by name here (their text in
        // wrapper_modules_equal_llvm_22); everything else byte for byte.
        let names = |t: &str| {
            t.lines()
                .map(|l| match l.split_once(": [") {
                    Some((name, _)) if name != "img" => format!("{name}: <module>"),
                    _ => l.to_string(),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&theirs), names(&ours), "{case}");
    }
}

/// The CUDA and HIP modules register the fat binary and walk the entry
/// table as LLVM 22's do: a program with kernel, variable, managed,
/// surface and texture entries, linked once with each module against a
/// stub runtime that prints every call, prints the same trace.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn wrapper_cuda_and_hip_modules_register_like_llvm_22() {
    let Some(llvm) = llvm22() else { return };
    let dir = tmp();
    let d = dir.path();
    std::fs::write(d.join("fatbin"), b"FATBIN-IMAGE").unwrap();
    for (kind, rt, entry_kind) in [("cuda", "cuda", 2), ("hip", "hip", 4)] {
        let stub = format!(
            r#"#include <stdio.h>
struct wrapper {{ int magic, version; const char *data; void *unused; }};
static int handle;
void **__{rt}RegisterFatBinary(struct wrapper *w) {{
  printf("fatbin %x %d %.12s\n", w->magic, w->version, w->data); return (void **)&handle; }}
void __cudaRegisterFatBinaryEnd(void **h) {{ printf("end %d\n", h == (void **)&handle); }}
void __{rt}UnregisterFatBinary(void **h) {{ printf("unregister %d\n", h == (void **)&handle); }}
int __{rt}RegisterFunction(void **h, const void *f, char *a, const char *b, int t, void *x, void *y, void *z, void *w, int *s) {{
  printf("function %s %s %d %d\n", a, b, t, x == 0 && s == 0); return 0; }}
void __{rt}RegisterVar(void **h, char *v, char *a, const char *b, int ext, unsigned long size, int c, int g) {{
  printf("var %s %s ext=%d size=%lu const=%d %d\n", v, a, ext, size, c, g); }}
void __{rt}RegisterManagedVar(void **h, char *aux, char *v, const char *n, unsigned long size, unsigned align) {{
  printf("managed %s %s %s size=%lu align=%u\n", aux, v, n, size, align); }}
void __{rt}RegisterSurface(void **h, char *v, char *a, const char *b, int dim, int ext) {{
  printf("surface %s %s dim=%d ext=%d\n", v, a, dim, ext); }}
void __{rt}RegisterTexture(void **h, char *v, char *a, const char *b, int dim, int norm, int ext) {{
  printf("texture %s %s dim=%d norm=%d ext=%d\n", v, a, dim, norm, ext); }}
"#
        );
        let k = entry_kind;
        let main = format!(
            r#"#include <stdint.h>
#include <stdio.h>
struct entry {{ uint64_t reserved; uint16_t version, kind; uint32_t flags; void *addr; const char *name; uint64_t size, data; void *aux; }};
static char kernel[] = "kernel-addr", var[] = "var-addr", managed[] = "managed-addr", aux[] = "aux-addr", surf[] = "surf-addr", tex[] = "tex-addr";
#define E __attribute__((used, section("llvm_offload_entries"), aligned(8))) static struct entry
E e1 = {{0, 1, {k}, 0, kernel, "kern", 0, 0, 0}};
E e2 = {{0, 1, {k}, 8 | 16, var, "gvar", 4, 0, 0}};
E e3 = {{0, 1, {k}, 1, managed, "mvar", 8, 16, aux}};
E e4 = {{0, 1, {k}, 2 | 8, surf, "surf", 0 + 1, 3, 0}};
E e5 = {{0, 1, {k}, 3 | 32, tex, "tex", 1, 2, 0}};
E e6 = {{0, 1, 1, 0, kernel, "openmp-entry", 0, 0, 0}};
int main(void) {{ printf("main\n"); return 0; }}
"#
        );
        std::fs::write(d.join(format!("stub_{kind}.c")), stub).unwrap();
        std::fs::write(d.join(format!("main_{kind}.c")), main).unwrap();
        let mut traces = Vec::new();
        for (who, tool) in [("theirs", llvm.join("llvm-offload-wrapper")), ("ours", PathBuf::from(WRAPPER))] {
            let bc = format!("{who}_{kind}.bc");
            let exe = format!("{who}_{kind}");
            ok(&Command::new(&tool)
                .current_dir(d)
                .args([&format!("--kind={kind}"), "-o", &bc, "fatbin"])
                .output()
                .unwrap());
            let link = Command::new(llvm.join("clang"))
                .current_dir(d)
                .args(["-fuse-ld=lld", "-o", &exe, &format!("main_{kind}.c"), &format!("stub_{kind}.c"), &bc])
                .output()
                .unwrap();
            ok(&link);
            let run = Command::new(d.join(&exe)).output().unwrap();
            ok(&run);
            traces.push(String::from_utf8_lossy(&run.stdout).into_owned());
        }
        assert_eq!(traces[0], traces[1], "{kind}");
        let t = &traces[1];
        let magic = if kind == "cuda" { "466243b1" } else { "48495046" };
        assert!(t.starts_with(&format!("fatbin {magic} 1 FATBIN-IMAGE\n")), "{t}");
        assert!(t.contains("function kern kern -1 1\n"), "{t}");
        assert!(t.contains("var var-addr gvar ext=1 size=4 const=1 0\n"), "{t}");
        assert!(t.contains("managed aux-addr managed-addr mvar size=8 align=16\n"), "{t}");
        assert!(!t.contains("openmp-entry"), "an entry of another kind was registered: {t}");
        assert_eq!(t.contains("end 1\n"), kind == "cuda", "{t}");
        assert_eq!(t.contains("surface surf-addr surf dim=3 ext=1\n"), kind == "hip", "{t}");
        assert_eq!(t.contains("texture tex-addr tex dim=2 norm=1 ext=0\n"), kind == "hip", "{t}");
        assert!(t.ends_with("main\nunregister 1\n"), "{t}");
    }
}

/// clang 22 compiling OpenMP offload code (amdgcn without device
/// libraries, and the x86-64 host as device) packs the device code with
/// the `llvm-offload-binary` found through `-B`: ours gives the same object
/// bytes as LLVM 22's own. (clang 22 links through clang-linker-wrapper,
/// which wraps in-process and never runs llvm-offload-wrapper.)
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22: run scripts/install-reference-llvm.sh")]
fn clang_22_builds_openmp_objects_through_ours() {
    let Some(llvm) = llvm22() else { return };
    let dir = tmp();
    let d = dir.path();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (name, exe) in [
        ("llvm-offload-binary", BINARY),
        ("clang-offload-packager", PACKAGER),
        ("clang-offload-bundler", BUNDLER),
        ("llvm-offload-wrapper", WRAPPER),
    ] {
        std::os::unix::fs::symlink(exe, bin.join(name)).unwrap();
    }
    std::fs::write(
        d.join("k.c"),
        "int twice(int v) {\n  int x = v;\n#pragma omp target map(tofrom: x)\n  x = 2 * x;\n  return x;\n}\n",
    )
    .unwrap();
    for targets in [&["--offload-arch=gfx90a", "-nogpulib"][..], &["-fopenmp-targets=x86_64-pc-linux-gnu"][..]] {
        let build = |ours: bool, out: &str| {
            let mut cmd = Command::new(llvm.join("clang"));
            cmd.current_dir(d).env_remove("OFFLOAD_LLVM_VERSION");
            if ours {
                cmd.arg(format!("-B{}", bin.display()));
            }
            cmd.args(["-fopenmp", "-c", "-v", "k.c", "-o", out]).args(targets);
            let o = cmd.output().unwrap();
            assert!(o.status.success(), "{targets:?}: {}", stderr(&o));
            stderr(&o)
        };
        let theirs = build(false, "theirs.o");
        let ours = build(true, "ours.o");
        assert!(theirs.contains(&format!("{LLVM22}/llvm-offload-binary\" -o")), "{theirs}");
        assert!(ours.contains(&format!("{}/llvm-offload-binary\" -o", bin.display())), "ours was not used: {ours}");
        let (a, b) = (std::fs::read(d.join("theirs.o")).unwrap(), std::fs::read(d.join("ours.o")).unwrap());
        assert!(a == b, "{targets:?}: the objects differ");
    }
}

/// LLVM 22's OpenMP runtime folder (`OFFLOAD_OMP22_LIB`, or /opt/omp22/lib
/// where scripts/install-omp22.sh puts it). Its tests are ignored without
/// `has_omp22`; inside one, a missing file is a failure.
fn omp22_lib() -> PathBuf {
    let dir = std::env::var_os("OFFLOAD_OMP22_LIB").map_or_else(|| PathBuf::from("/opt/omp22/lib"), PathBuf::from);
    for f in ["libomp.so", "libomp.so.5", "libomptarget.so", "libomptarget.so.22.1", "libLLVMOffload.so.22.1"] {
        assert!(dir.join(f).exists(), "{} is missing: run scripts/install-omp22.sh", dir.join(f).display());
    }
    dir
}

/// A `-B` folder whose drop-ins log their command line to `log` and run
/// ours, so that a test can tell which of them clang ran.
fn logging_tools(dir: &Path, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (name, exe) in [
        ("llvm-offload-binary", BINARY),
        ("clang-offload-packager", PACKAGER),
        ("clang-offload-bundler", BUNDLER),
        ("llvm-offload-wrapper", WRAPPER),
    ] {
        let script = bin.join(name);
        std::fs::write(
            &script,
            format!("#!/bin/sh\nprintf '%s\\n' \"{name} $*\" >> '{}'\nexec '{exe}' \"$@\"\n", log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// Runs an OpenMP program with LLVM 22's runtime, offloading mandatory;
/// returns its stdout after checking that the kernel ran on device 0.
fn run_on_libomptarget_22(exe: &Path, omp: &Path) -> String {
    let run = Command::new(exe)
        .env("LD_LIBRARY_PATH", omp)
        .env("OMP_TARGET_OFFLOAD", "MANDATORY")
        .env("LIBOMPTARGET_INFO", "-1")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let (out, err) = (String::from_utf8_lossy(&run.stdout).into_owned(), stderr(&run));
    assert!(run.status.success(), "{} failed:\n{out}\n{err}", exe.display());
    assert!(
        err.contains("device 0 info: Launching kernel __omp_offloading_"),
        "{}: no kernel ran:\n{err}",
        exe.display()
    );
    out
}

/// clang 22 builds and links an OpenMP program offloading to the x86-64
/// host device with our `llvm-offload-binary` (through `-B`), and LLVM 22's
/// libomptarget runs its kernel: same output, and the same executable
/// bytes, as with LLVM 22's own tool.
#[test]
#[cfg_attr(
    not(all(has_llvm22, has_omp22)),
    ignore = "needs LLVM 22 and its OpenMP runtime: run scripts/install-reference-llvm.sh and scripts/install-omp22.sh"
)]
fn clang_22_openmp_program_runs_on_libomptarget_22_through_ours() {
    let llvm = Path::new(LLVM22);
    let omp = omp22_lib();
    let dir = tmp();
    let d = dir.path();
    let log = d.join("tools.log");
    let bin = logging_tools(d, &log);
    std::fs::write(d.join("t.c"), offload_testkit::OPENMP_TARGET_PROGRAM).unwrap();
    let build = |ours: bool, exe: &str| {
        let mut cmd = Command::new(llvm.join("clang"));
        cmd.current_dir(d).env_remove("OFFLOAD_LLVM_VERSION");
        if ours {
            cmd.arg(format!("-B{}", bin.display()));
        }
        cmd.args(["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]).arg(format!("-L{}", omp.display()));
        ok(&cmd.args(["t.c", "-o", exe]).output().unwrap());
    };
    build(false, "theirs");
    assert!(!log.exists(), "LLVM's own build ran ours");
    build(true, "ours");
    let logged = std::fs::read_to_string(&log).expect("clang did not run our llvm-offload-binary");
    assert!(
        logged.lines().any(|l| l.starts_with("llvm-offload-binary ")
            && l.contains("triple=x86_64-pc-linux-gnu")
            && l.contains("kind=openmp")),
        "{logged}"
    );
    let theirs = run_on_libomptarget_22(&d.join("theirs"), &omp);
    let ours = run_on_libomptarget_22(&d.join("ours"), &omp);
    assert_eq!(theirs, "sum=500500 square15=225\n");
    assert_eq!(ours, theirs);
    assert!(std::fs::read(d.join("ours")).unwrap() == std::fs::read(d.join("theirs")).unwrap(), "the programs differ");
}

/// The registration module of `llvm-offload-wrapper --kind=openmp` works
/// as LLVM 22's: the x86-64 device image, linked as a shared object and
/// packed by `llvm-offload-binary`, is wrapped and linked into the host
/// program by hand (what clang-linker-wrapper does in-process), once with
/// LLVM 22's two tools and once with ours; libomptarget 22 registers the
/// image and runs the kernel in both.
#[test]
#[cfg_attr(
    not(all(has_llvm22, has_omp22)),
    ignore = "needs LLVM 22 and its OpenMP runtime: run scripts/install-reference-llvm.sh and scripts/install-omp22.sh"
)]
fn openmp_program_registered_by_our_wrapper_runs_on_libomptarget_22() {
    let llvm = Path::new(LLVM22);
    let omp = omp22_lib();
    let dir = tmp();
    let d = dir.path();
    std::fs::write(d.join("t.c"), offload_testkit::OPENMP_TARGET_PROGRAM).unwrap();
    let clang = |args: &[&str]| {
        ok(&Command::new(llvm.join("clang")).current_dir(d).args(args).output().unwrap());
    };
    let lib = format!("-L{}", omp.display());
    let offload = ["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"];
    clang(&[&offload[..], &["--offload-device-only", "-c", "t.c", "-o", "device.o"]].concat());
    clang(&["-shared", "-Wl,-Bsymbolic", "device.o", "-o", "device.so", &lib, "-lomp", "-lomptarget"]);
    clang(&[&offload[..], &["--offload-host-only", "-c", "t.c", "-o", "host.o"]].concat());
    let mut outputs = Vec::new();
    for (who, packer, wrapper) in [
        ("theirs", llvm.join("llvm-offload-binary"), llvm.join("llvm-offload-wrapper")),
        ("ours", PathBuf::from(BINARY), PathBuf::from(WRAPPER)),
    ] {
        let (image, module) = (format!("{who}.bin"), format!("{who}.bc"));
        let image_arg = "--image=file=device.so,triple=x86_64-pc-linux-gnu,arch=generic,kind=openmp";
        ok(&Command::new(&packer).current_dir(d).args(["-o", &image, image_arg]).output().unwrap());
        ok(&Command::new(&wrapper)
            .current_dir(d)
            .args(["--kind=openmp", "--triple=x86_64-pc-linux-gnu", &image, "-o", &module])
            .output()
            .unwrap());
        clang(&["-fopenmp", "host.o", &module, &lib, "-lomptarget", "-o", who]);
        outputs.push(run_on_libomptarget_22(&d.join(who), &omp));
    }
    assert_eq!(outputs[0], "sum=500500 square15=225\n");
    assert_eq!(outputs[1], outputs[0]);
    assert!(std::fs::read(d.join("ours.bin")).unwrap() == std::fs::read(d.join("theirs.bin")).unwrap());
    assert_eq!(disassemble(llvm, &d.join("ours.bc")), disassemble(llvm, &d.join("theirs.bc")));
}
