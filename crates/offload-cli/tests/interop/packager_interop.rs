//! Live differential tests against LLVM 19's clang-offload-packager,
//! clang and llvm-objdump (ignored when they are missing, unless
//! OFFLOAD_REQUIRE_LLVM=1).

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ours() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clang-offload-packager"));
    cmd.arg0("clang-offload-packager");
    cmd
}

fn theirs(tool: &Path) -> Command {
    let mut cmd = Command::new(tool);
    cmd.arg0("clang-offload-packager");
    cmd
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn text(&mut self, max: usize, alphabet: &[u8]) -> String {
        let n = self.below(max + 1);
        (0..n).map(|_| alphabet[self.below(alphabet.len())] as char).collect()
    }
}

const KEY_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-:/";
const VALUE_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-:/=";

/// Writes a random image file into `dir` and returns its name. Some start
/// with the bitcode magic (image kind inference) unless `plain`.
fn random_image_with(rng: &mut Rng, dir: &Path, n: usize, plain: bool) -> String {
    let ext = ["o", "bc", "cubin", "fatbin", "s", "spv", "bin", "O", ""][rng.below(9)];
    let name = if ext.is_empty() { format!("image{n}") } else { format!("image{n}.{ext}") };
    let len = [0, 1, 7, 8, 9, 63, 64, 200][rng.below(8)];
    let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
    if len >= 4 && rng.below(5) == 0 && !plain {
        bytes[..4].copy_from_slice(b"BC\xC0\xDE");
    }
    fs::write(dir.join(&name), bytes).unwrap();
    name
}

fn random_image(rng: &mut Rng, dir: &Path, n: usize) -> String {
    random_image_with(rng, dir, n, false)
}

/// A random `--image` value with 1 to 70 keys (file and triple included).
fn random_spec(rng: &mut Rng, files: &[String]) -> String {
    let total = 1 + rng.below(70);
    let mut parts = Vec::new();
    for f in files {
        parts.push(format!("file={f}"));
    }
    parts.push(format!("triple={}", rng.text(30, VALUE_CHARS)));
    let mut keys: Vec<String> = Vec::new();
    while parts.len() < total.max(files.len() + 1) {
        let piece = match rng.below(20) {
            // a repeated key
            0 if !keys.is_empty() => format!("{}={}", keys[rng.below(keys.len())], rng.text(5, VALUE_CHARS)),
            1 => format!("kind={}", ["openmp", "cuda", "hip", "sycl", "OpenMP", ""][rng.below(6)]),
            2 => format!("={}", rng.text(5, VALUE_CHARS)),
            3 => rng.text(12, KEY_CHARS), // no '='
            4 => format!("arch={}", ["sm_70", "gfx90a", "generic", ""][rng.below(4)]),
            _ => {
                // Keys over 64 bytes take LLVM's long-input hash path.
                let max = if rng.below(4) == 0 { 200 } else { 40 };
                let k = rng.text(max, KEY_CHARS);
                keys.push(k.clone());
                format!("{k}={}", rng.text(40, VALUE_CHARS))
            }
        };
        if piece.split('=').next() == Some("file") {
            continue;
        }
        parts.push(piece);
    }
    // Shuffle so that file and triple are not always first.
    for i in (1..parts.len()).rev() {
        let j = rng.below(i + 1);
        parts.swap(i, j);
    }
    parts.join(",")
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn random_key_sets_give_llvm_19_bytes() {
    let llvm = common::llvm_tool(19, "clang-offload-packager");
    let seed = std::env::var("OFFLOAD_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_0f1d);
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let sets = 60;
    let mut images_compared = 0;
    for set in 0..sets {
        let mut args = vec!["-o".to_string(), "out".to_string()];
        for i in 0..1 + rng.below(3) {
            let files: Vec<String> = (0..1 + usize::from(rng.below(6) == 0))
                .map(|k| random_image(&mut rng, dir.path(), i * 2 + k))
                .collect();
            images_compared += files.len();
            args.push(format!("--image={}", random_spec(&mut rng, &files)));
        }
        let a = common::run(theirs(&llvm).current_dir(dir.path()).args(&args));
        assert!(a.status.success(), "set {set}: LLVM failed: {args:?}: {}", String::from_utf8_lossy(&a.stderr));
        let want = fs::read(dir.path().join("out")).unwrap();
        let b = common::run(ours().current_dir(dir.path()).args(&args));
        assert!(b.status.success(), "set {set}: {args:?}: {}", String::from_utf8_lossy(&b.stderr));
        let got = fs::read(dir.path().join("out")).unwrap();
        assert!(got == want, "set {set} (seed {seed:#x}) differs from LLVM 19: {args:?}");
    }
    eprintln!("{sets} random key sets ({images_compared} images) byte-identical to LLVM 19");
}

/// Every file under `dir` except `keep`, by name.
fn outputs(dir: &Path, keep: &[&str]) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .filter(|(n, _)| !keep.contains(&n.as_str()))
        .map(|(n, p)| (n, fs::read(p).unwrap()))
        .collect()
}

fn fresh_dir_with(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (n, b) in files {
        fs::write(d.path().join(n), b).unwrap();
    }
    d
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn extraction_gives_the_same_files_both_ways() {
    let llvm = common::llvm_tool(19, "clang-offload-packager");
    let mut rng = Rng(0x00e7_7ac7);
    let mut compared = 0;
    for round in 0..8 {
        // A package of 2 to 5 images, made by LLVM on even rounds and by us
        // on odd ones.
        let src = tempfile::tempdir().unwrap();
        let mut args = vec!["-o".to_string(), "pkg.bin".to_string()];
        let mut originals = Vec::new();
        for i in 0..2 + rng.below(4) {
            // LLVM warns about members that look like bitcode but are not
            // when it writes an archive; see docs/compatibility.md
            // notes.
            let name = random_image_with(&mut rng, src.path(), i, true);
            originals.push(fs::read(src.path().join(&name)).unwrap());
            let kind = ["openmp", "cuda", "hip"][rng.below(3)];
            let arch = ["sm_70", "gfx90a", "generic"][rng.below(3)];
            args.push(format!("--image=file={name},triple=t{},arch={arch},kind={kind},extra={i}", rng.below(2)));
        }
        let mut maker = if round % 2 == 0 { theirs(&llvm) } else { ours() };
        assert!(common::run(maker.current_dir(src.path()).args(&args)).status.success());
        let pkg = fs::read(src.path().join("pkg.bin")).unwrap();
        let filters = [
            "--image=",
            "--image=kind=hip",
            "--image=kind=openmp",
            "--image=triple=t0",
            "--image=arch=gfx90a,triple=t1",
            "--image=extra=1,file=one.out",
            "--image=kind=cuda,file=last.out",
            "--image=kind=openmp,file=omp.a",
        ];
        for filter in filters {
            let mut extra: Vec<&str> = vec![filter];
            if filter.ends_with(".a") {
                extra.push("--archive");
            }
            let a = fresh_dir_with(&[("pkg.bin", &pkg)]);
            let b = fresh_dir_with(&[("pkg.bin", &pkg)]);
            let ra = common::run(theirs(&llvm).current_dir(a.path()).arg("pkg.bin").args(&extra));
            let rb = common::run(ours().current_dir(b.path()).arg("pkg.bin").args(&extra));
            assert_eq!(ra.status.code(), rb.status.code(), "{filter}");
            assert_eq!(String::from_utf8_lossy(&ra.stderr), String::from_utf8_lossy(&rb.stderr), "{filter}");
            let (fa, fb) = (outputs(a.path(), &["pkg.bin"]), outputs(b.path(), &["pkg.bin"]));
            assert_eq!(fa, fb, "round {round}, {filter}");
            compared += 1;
        }
        // `--image=` extracts every original image.
        let d = fresh_dir_with(&[("pkg.bin", &pkg)]);
        assert!(common::run(ours().current_dir(d.path()).args(["pkg.bin", "--image="])).status.success());
        let mut got: Vec<Vec<u8>> = outputs(d.path(), &["pkg.bin"]).into_values().collect();
        let mut want = originals.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }
    eprintln!("{compared} extractions identical to LLVM 19's (names, bytes, messages)");
}

fn clang_embed(clang: &Path, dir: &Path, pkg: &str, out: &str) -> PathBuf {
    fs::write(dir.join("host.c"), "int host_function(int x) { return x + 1; }\n").unwrap();
    let r = common::run(
        Command::new(clang)
            .current_dir(dir)
            .args(["-c", "host.c", "-Xclang"])
            .arg(format!("-fembed-offload-object={pkg}"))
            .args(["-o", out]),
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    dir.join(out)
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn llvm_objdump_reads_our_packages_in_host_objects_like_llvms() {
    let (llvm, clang, objdump) = (
        common::llvm_tool(19, "clang-offload-packager"),
        common::llvm_tool(19, "clang"),
        common::llvm_tool(19, "llvm-objdump"),
    );
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.bin"), "hello").unwrap();
    fs::write(dir.path().join("b.o"), "ABCDEFGHIJKLMNOP").unwrap();
    let mut rng = Rng(0x0bd0);
    let mut specs = vec![vec![
        "--image=file=a.bin,triple=x86_64-unknown-linux-gnu,arch=generic,kind=openmp".to_string(),
        "--image=file=b.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip,feature=+xnack,feature=-sramecc".to_string(),
    ]];
    for _ in 0..4 {
        let name = random_image(&mut rng, dir.path(), 0);
        specs.push(vec![format!("--image={}", random_spec(&mut rng, &[name]))]);
    }
    for spec in &specs {
        assert!(
            common::run(theirs(&llvm).current_dir(dir.path()).args(["-o", "theirs.out"]).args(spec)).status.success()
        );
        assert!(common::run(ours().current_dir(dir.path()).args(["-o", "ours.out"]).args(spec)).status.success());
        let a = clang_embed(&clang, dir.path(), "theirs.out", "theirs.o");
        let b = clang_embed(&clang, dir.path(), "ours.out", "ours.o");
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "host objects differ for {spec:?}");
        let da = common::run(Command::new(&objdump).current_dir(dir.path()).args(["--offloading", "theirs.o"]));
        let db = common::run(Command::new(&objdump).current_dir(dir.path()).args(["--offloading", "ours.o"]));
        assert!(da.status.success() && db.status.success());
        let text_a = String::from_utf8_lossy(&da.stdout).replace("theirs.o", "host.o");
        let text_b = String::from_utf8_lossy(&db.stdout).replace("ours.o", "host.o");
        assert!(text_a.contains("OFFLOADING IMAGE [0]:"), "{text_a}");
        assert_eq!(text_a, text_b);
        // And our extraction from the object equals LLVM's.
        let ea = common::run(theirs(&llvm).current_dir(dir.path()).args(["ours.o", "--image=file=x_theirs"]));
        let eb = common::run(ours().current_dir(dir.path()).args(["theirs.o", "--image=file=x_ours"]));
        assert_eq!(ea.status.code(), eb.status.code());
        assert_eq!(fs::read(dir.path().join("x_theirs")).ok(), fs::read(dir.path().join("x_ours")).ok());
    }
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn command_line_messages_match_llvm_19() {
    let llvm = common::llvm_tool(19, "clang-offload-packager");
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.bin"), "hello").unwrap();
    let cases: &[&[&str]] = &[
        &["--help"],
        &["--help-list"],
        &["-h"],
        &["-help"],
        &["--foo"],
        &["-imag=x"],
        &["-o"],
        &["--image"],
        &["x", "y"],
        &["-o", "o", "a.bin"],
        &["-o=", "--image=file=a.bin,triple=t"],
        &["", "--image="],
        &["-o", "o", "-o", "p", "--image=file=a.bin,triple=t"],
        &["--archive"],
        &["--archive=2"],
        &["a.bin", "--image="],
    ];
    for args in cases {
        let a = common::run(theirs(&llvm).current_dir(dir.path()).args(*args));
        let b = common::run(ours().current_dir(dir.path()).args(*args));
        assert_eq!(a.status.code(), b.status.code(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&a.stdout), String::from_utf8_lossy(&b.stdout), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&a.stderr), String::from_utf8_lossy(&b.stderr), "{args:?}");
    }
    let a = common::run(theirs(&llvm).arg("--version"));
    let b = common::run(ours().arg("--version"));
    assert_eq!(a.status.code(), b.status.code());
    assert!(String::from_utf8_lossy(&b.stdout).starts_with("clang-offload-packager version 19"));
    // One line each: no stray second line (issue 28).
    assert_eq!(a.stdout.iter().filter(|&&c| c == b'\n').count(), b.stdout.iter().filter(|&&c| c == b'\n').count());
    assert_eq!(String::from_utf8_lossy(&b.stdout).lines().count(), 1, "{}", String::from_utf8_lossy(&b.stdout));
}
