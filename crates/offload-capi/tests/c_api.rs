//! The C API from C: `examples/list.c` and `tests/c/capi_check.c` are
//! compiled with the system `cc` against the built `liboffload.so`, run on
//! the repository's samples and the inspector's fixtures, and compared with
//! `offload list --json` / `offload extract` (the binary next to this test,
//! built by `cargo test --workspace`), with the library itself, and with a
//! checked-in golden listing. Under valgrind they must show no leak and no
//! memory error.
//!
//! `cc`, valgrind or the `offload` binary missing: those checks are skipped
//! with a message, or fail when `OFFLOAD_REQUIRE_LLVM=1` (as CI runs).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn on_path(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file())
}

/// `target/<profile>`, where cargo puts `liboffload.so` and the binaries.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf()
}

/// The folder of the `liboffload.so` that cargo built for this test run:
/// the crate lists `rlib` among its crate types, so its integration tests
/// depend on the library and one rustc run writes the `cdylib` too (into
/// `target/<profile>/deps`, and `target/<profile>` after `cargo build`).
fn lib_dir() -> PathBuf {
    let dir = target_dir();
    for d in [dir.join("deps"), dir.clone()] {
        if d.join("liboffload.so").is_file() {
            return d;
        }
    }
    panic!("liboffload.so is not in {} or its deps/ folder: run `cargo build -p offload-capi` first", dir.display())
}

/// Compiles a C program against the library (the tests that call this
/// are ignored without `cc`).
fn compile(source: &str, name: &str, dir: &Path) -> PathBuf {
    let cc = on_path("cc").expect("build.rs found cc on PATH");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dir.join(name);
    let lib = lib_dir();
    assert!(lib.join("liboffload.so").is_file(), "liboffload.so not found in {}", lib.display());
    let status = Command::new(cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", "-o"])
        .arg(&out)
        .arg(crate_dir.join(source))
        .arg(format!("-I{}", crate_dir.join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg("-loffload")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .expect("cc runs");
    assert!(status.success(), "cc failed on {source}");
    out
}

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program).args(args).current_dir(repo()).output().expect("the C program runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The files the C programs are run on: the samples and the inspector's
/// fixtures (a shared library with one bundle, one with two compressed
/// bundles, an archive of fat objects and OffloadBinaries).
const FILES: &[&str] = &[
    "samples/hip-gfx906-gfx90a.bc",
    "samples/hip-gfx906-gfx90a.compressed.bc",
    "crates/offload-cli/tests/fixtures/inspect/libscale.so",
    "crates/offload-cli/tests/fixtures/inspect/libtwo.so",
    "crates/offload-cli/tests/fixtures/inspect/libfat.a",
];

/// The lines `list.c` prints for a `list --json` array.
fn expected_lines(json: &Value) -> Vec<String> {
    let records = json.as_array().expect("a JSON array");
    records
        .iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or_default().to_string();
            let tid = if s("target_id").is_empty() { "-".to_string() } else { s("target_id") };
            let offset = o["offset"].as_u64().map_or_else(|| "-".to_string(), |v| format!("{v:#x}"));
            format!("{}\t{}\t{}\t{}\t{}", s("id"), tid, o["size"], offset, s("location"))
        })
        .collect()
}

fn list_lines(list: &Path, file: &str) -> Vec<String> {
    let out = run(list, &[file]);
    assert!(out.status.success(), "list.c failed on {file}: {}", text(&out.stderr));
    text(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn list_example_matches_offload_list_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = compile("examples/list.c", "list", dir.path());

    // Always: the golden listing checked in with the inspector's fixtures.
    let golden =
        std::fs::read_to_string(repo().join("crates/offload-cli/tests/fixtures/inspect/libscale.so.list.json"))
            .expect("golden listing");
    let golden: Value = serde_json::from_str(&golden).expect("golden JSON");
    let lines = list_lines(&list, "crates/offload-cli/tests/fixtures/inspect/libscale.so");
    assert_eq!(lines, expected_lines(&golden));
    assert!(lines.len() >= 2, "libscale.so holds a host entry and device code");

    // Every file, against the library's own records (the objects
    // `offload list --json` prints).
    for file in FILES {
        let expected = expected_lines(&library_records(file));
        assert!(!expected.is_empty(), "{file} has code objects");
        assert_eq!(list_lines(&list, file), expected, "list.c vs the library's records on {file}");
    }
}

#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn list_example_on_a_file_without_code_objects_prints_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = compile("examples/list.c", "list", dir.path());
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, b"no offload code here\n").expect("write");
    let out = run(&list, &[plain.to_str().expect("UTF-8 path")]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let out = run(&list, &["/nonexistent/file.bc"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("'/nonexistent/file.bc': No such file or directory"), "{}", text(&out.stderr));
}

/// A package that cannot be read fully is an error, not an empty listing:
/// list.c says so and exits 1 (a wheel or .deb cut short).
#[test]
fn list_example_reports_a_damaged_package() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = compile("examples/list.c", "list", dir.path());
    let deb = std::fs::read(repo().join("crates/offload-cli/tests/fixtures/packages/hip-sample_1.0_amd64.deb"))
        .expect("fixture");
    // Intact: its members' code objects, located by member as `offload list` does.
    let out = run(&list, &["crates/offload-cli/tests/fixtures/packages/hip-sample_1.0_amd64.deb"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert!(lines.len() >= 2 && lines.iter().all(|l| l.contains("\tmember ")), "{lines:?}");
    let cut = dir.path().join("cut.deb");
    std::fs::write(&cut, &deb[..deb.len() / 2]).expect("write");
    let out = run(&list, &[cut.to_str().expect("UTF-8 path")]);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    assert!(text(&out.stderr).contains(": error: "), "{}", text(&out.stderr));
}

/// A wheel (a zip package) lists the code objects of its members, as
/// `offload list` lists them: 13 entries in three libraries of the kpack
/// demo wheel, two fat binaries in one section told apart by `#N`.
#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn list_example_lists_a_wheel_by_member() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = compile("examples/list.c", "list", dir.path());
    let wheel = "crates/offload-format/tests/fixtures/kpack/fat-wheel/kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let out = run(&list, &[wheel]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 13, "{lines:?}");
    assert!(lines.iter().all(|l| l.contains("\tmember kpdemo/lib/libkp_")), "{lines:?}");
    assert!(lines.iter().any(|l| l.ends_with("member kpdemo/lib/libkp_multi.so section .hip_fatbin #1")), "{lines:?}");
    let xnack_minus: Vec<&String> = lines.iter().filter(|l| l.contains("\tgfx90a:xnack-\t")).collect();
    assert_eq!(xnack_minus.len(), 1, "{lines:?}");
    assert!(xnack_minus[0].starts_with("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-\tgfx90a:xnack-\t29624\t-\t"));
}

/// The records of `file`'s code objects, as `offload list --json` prints
/// them, from the library.
fn library_records(file: &str) -> Value {
    let data = std::fs::read(repo().join(file)).expect("read input");
    // Archive members are located by the archive's file name, as `list` does.
    let name = Path::new(file).file_name().and_then(|n| n.to_str()).expect("a file name");
    let inv = offload_inspect::scan(&data, name, &offload_inspect::Options::default());
    let records: Vec<offload_inspect::record::CodeObjectRecord> = inv
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| offload_inspect::record::CodeObjectRecord::new(Some(file), i, o, &data, None))
        .collect();
    serde_json::to_value(&records).expect("records serialise")
}

/// The bytes of code object `index` of `file`, from the library.
fn library_bytes(file: &str, index: usize) -> Vec<u8> {
    let data = std::fs::read(repo().join(file)).expect("read input");
    let inv = offload_inspect::scan(&data, "x", &offload_inspect::Options::default());
    let object = inv.objects.get(index).expect("index in range");
    inv.bytes(object).expect("bytes").into_owned()
}

#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn select_and_copy_match_offload_extract() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = compile("tests/c/capi_check.c", "capi_check", dir.path());
    let cases = [
        ("samples/hip-gfx906-gfx90a.bc", "gfx90a:xnack+", vec![2]),
        ("samples/hip-gfx906-gfx90a.compressed.bc", "gfx906", vec![1]),
        ("crates/offload-cli/tests/fixtures/inspect/libscale.so", "gfx906", vec![1]),
        ("crates/offload-cli/tests/fixtures/inspect/libfat.a", "gfx906", vec![1, 4]),
    ];
    for (n, (file, gpu, chosen)) in cases.iter().enumerate() {
        let out_dir = dir.path().join(format!("case{n}"));
        std::fs::create_dir(&out_dir).expect("mkdir");
        let out = run(&check, &["select", file, gpu, "hip", out_dir.to_str().expect("UTF-8")]);
        assert!(out.status.success(), "capi_check select {file} {gpu}: {}", text(&out.stderr));
        let got: Vec<usize> = text(&out.stdout).lines().filter_map(|l| l.split('\t').next()?.parse().ok()).collect();
        assert_eq!(&got, chosen, "{file} on {gpu}");
        for &i in chosen {
            let bytes = std::fs::read(out_dir.join(format!("{i}.bin"))).expect("copied code object");
            assert!(!bytes.is_empty());
            assert_eq!(bytes, library_bytes(file, i), "{file} #{i} vs the library (offload extract's bytes)");
        }
    }

    // No gfx906 code in the second fat binary: offload select's message.
    let out = run(&check, &["select", "crates/offload-cli/tests/fixtures/inspect/libtwo.so", "gfx906", "hip", "/tmp"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("no code object in the fat binary at section .hip_fatbin #1 loads on gfx906 (hip runtime) (1 chosen elsewhere)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn decompress_gives_the_uncompressed_bundle() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = compile("tests/c/capi_check.c", "capi_check", dir.path());
    let out_file = dir.path().join("bundle.bc");
    let out =
        run(&check, &["decompress", "samples/hip-gfx906-gfx90a.compressed.bc", out_file.to_str().expect("UTF-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "3 code objects, 0 diagnostics\n");
    let data = std::fs::read(repo().join("samples/hip-gfx906-gfx90a.compressed.bc")).expect("sample");
    let blob = offload_format::bundle::compressed::read_single_blob(&data).expect("a CCOB");
    let expected = offload_format::bundle::compressed::decompress(&blob).expect("decompresses");
    let got = std::fs::read(&out_file).expect("output");
    assert_eq!(got, expected);
    assert!(got.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
}

#[test]
#[cfg_attr(not(has_cc), ignore = "needs cc: run scripts/install-test-deps.sh")]
fn errors_have_status_and_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let check = compile("tests/c/capi_check.c", "capi_check", dir.path());
    let out = run(&check, &["errors", "/nonexistent/x.so"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let expected = [
        "2\t'/nonexistent/x.so': No such file or directory",
        "1\tpath is NULL",
        "1\tout is NULL",
        "1\tunknown scan flags 0x2a",
        "junk: 0 code objects",
        "1\tcode object index 0 is out of range (the inventory holds 0)",
        "4\tno hip code objects found",
    ];
    let got = text(&out.stdout);
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(&lines[..expected.len()], &expected);
    let rest = &lines[expected.len()..];
    assert!(rest[0].starts_with("1\tgpu: ") && rest[0].contains("gfx90a:xnack"), "{}", rest[0]);
    assert_eq!(rest[1], "1\tunknown runtime 7 (0: hip, 1: openmp)");
    assert_eq!(rest[2], "1\tcode object index 3 is out of range (the inventory holds 0)");
    assert_eq!(rest[3], "3\tnot a compressed bundle (no CCOB header)");
    assert!(rest[4].starts_with("3\tFailed to decompress input: "), "{}", rest[4]);
    assert_eq!(rest.len(), 5);
}

#[test]
#[cfg_attr(not(all(has_cc, has_valgrind)), ignore = "needs cc and valgrind: run scripts/install-test-deps.sh")]
fn no_leaks_or_memory_errors_under_valgrind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let list = compile("examples/list.c", "list", dir.path());
    let check = compile("tests/c/capi_check.c", "capi_check", dir.path());
    let valgrind = on_path("valgrind").expect("build.rs found valgrind on PATH");
    let out_dir = dir.path().to_str().expect("UTF-8").to_string();
    let decompressed = dir.path().join("d.bc");
    let runs: Vec<(&Path, Vec<&str>)> = vec![
        (&list, vec!["samples/hip-gfx906-gfx90a.bc"]),
        (&list, vec!["crates/offload-cli/tests/fixtures/inspect/libtwo.so"]),
        (&list, vec!["crates/offload-cli/tests/fixtures/inspect/libfat.a"]),
        (&check, vec!["select", "samples/hip-gfx906-gfx90a.compressed.bc", "gfx906", "hip", &out_dir]),
        (&check, vec!["decompress", "samples/hip-gfx906-gfx90a.compressed.bc", decompressed.to_str().expect("UTF-8")]),
        (&check, vec!["errors", "/nonexistent/x.so"]),
    ];
    for (program, args) in runs {
        let out = Command::new(&valgrind)
            .args(["--leak-check=full", "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99"])
            .arg(program)
            .args(&args)
            .current_dir(repo())
            .output()
            .expect("valgrind runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "valgrind {} {args:?}: exit {:?}\n{}",
            program.display(),
            out.status.code(),
            text(&out.stderr)
        );
        assert!(text(&out.stderr).contains("ERROR SUMMARY: 0 errors"), "{}", text(&out.stderr));
    }
}
