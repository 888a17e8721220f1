//! `offload` on AMD's kpack-split fixtures
//! (`crates/offload-format/tests/fixtures/kpack/`), run as a program:
//! every answer of AMD's loader (`loader-answers.txt`) through
//! `extract --gpu` (same bytes by MD5, or a refusal naming the loader's
//! error), `check --gpu` on the installed tree, `list` of an archive and
//! of a split library, and `verify` of a damaged archive.

use md5::{Digest, Md5};
use offload_testkit::files_under;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/kpack")
}

/// The fixtures under their real names (`%3A` back to `:`).
fn copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["installed", "site"] {
        offload_testkit::copy_with_real_names(&fixtures().join(sub), &dir.path().join(sub));
    }
    dir
}

fn offload(cwd: &Path, args: &[&str]) -> Output {
    Command::new(OFFLOAD)
        .args(args)
        .current_dir(cwd)
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One run of AMD's loader: binary, agent, and per record the MD5 served
/// or the error name.
type Case = (String, String, Vec<Result<String, String>>);

#[test]
fn extract_gpu_gives_every_loader_answer() {
    let dir = copy();
    let answers = std::fs::read_to_string(fixtures().join("loader-answers.txt")).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for line in answers.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("$ loader ") {
            cases.push((String::new(), w[3].to_string(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("binary: ") {
            cases.last_mut().unwrap().0 = rest.to_string();
        } else if let Some(rest) = line.trim_start().strip_prefix("RESULT ") {
            let a: Vec<&str> = rest.split_once(": ").unwrap().1.split_whitespace().collect();
            let r = if a[1] == "bytes" { Ok(a[3].to_string()) } else { Err(a[0].to_string()) };
            cases.last_mut().unwrap().2.push(r);
        }
    }
    assert_eq!(cases.len(), 99);
    let (mut served, mut refused) = (0, 0);
    for (binary, agent, want) in cases.iter().filter(|c| !c.2.is_empty()) {
        let what = format!("{binary} on {agent}");
        let out_dir = tempfile::tempdir().unwrap();
        let out = offload(
            dir.path(),
            &["extract", "--gpu", agent, "--output-dir", &out_dir.path().to_string_lossy(), "--json", binary],
        );
        let stderr = text(&out.stderr);
        let mut written: Vec<(String, String)> = Vec::new();
        for f in files_under(out_dir.path()) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let md5: String = Md5::digest(std::fs::read(&f).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
            written.push((name, md5));
        }
        let all_served = want.iter().all(Result::is_ok);
        if all_served {
            assert!(out.status.success(), "{what}: {stderr}");
            let mut got: Vec<&str> = written.iter().map(|(_, m)| m.as_str()).collect();
            let mut expected: Vec<&str> = want.iter().map(|r| r.as_ref().unwrap().as_str()).collect();
            got.sort();
            expected.sort();
            assert_eq!(got, expected, "{what}");
            served += want.len();
        } else {
            // A record the loader refuses: no file written, the error named.
            assert!(!out.status.success(), "{what}");
            assert!(written.is_empty(), "{what}");
            for r in want {
                match r {
                    Err(name) => {
                        assert!(stderr.contains(name.as_str()), "{what}: {stderr}");
                        refused += 1;
                    }
                    Ok(_) => served += 1,
                }
            }
        }
    }
    assert_eq!((served, refused), (47, 61));
}

#[test]
fn check_passes_with_archives_and_fails_naming_the_paths_without() {
    let dir = copy();
    let stage = dir.path().join("installed/stage");
    let ok = offload(&stage, &["check", "--gpu", "gfx1100", "lib"]);
    assert_eq!(ok.status.code(), Some(0), "{}{}", text(&ok.stdout), text(&ok.stderr));
    assert!(text(&ok.stdout).contains("all load"), "{}", text(&ok.stdout));
    let bad = offload(&stage, &["check", "--gpu", "gfx1201", "lib"]);
    assert_eq!(bad.status.code(), Some(1));
    let stdout = text(&bad.stdout);
    assert!(stdout.contains("KPACK_ERROR_ARCHIVE_NOT_FOUND"), "{stdout}");
    assert!(stdout.contains(".kpack/kpdemo_lib_gfx1201.kpack"), "{stdout}");
    assert!(stdout.contains(".kpack/kpdemo_lib_gfx12-generic.kpack"), "{stdout}");
    // ROCM_KPACK_DISABLE: the runtime loads nothing.
    let off = Command::new(OFFLOAD)
        .args(["check", "--gpu", "gfx1100", "lib"])
        .current_dir(&stage)
        .env("ROCM_KPACK_DISABLE", "1")
        .output()
        .unwrap();
    assert_eq!(off.status.code(), Some(1));
    assert!(text(&off.stdout).contains("KPACK_ERROR_NOT_IMPLEMENTED"), "{}", text(&off.stdout));
}

#[test]
fn list_select_and_verify_see_archives_and_split_libraries() {
    let dir = copy();
    let stage = dir.path().join("installed/stage");
    let out = offload(&stage, &["list", ".kpack/kpdemo_lib_gfx11-generic.kpack"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("file key kpdemo/stage/lib/libkp_generic.so#0 target gfx11-generic"), "{stdout}");
    assert!(stdout.contains("kpack-archive"), "{stdout}");
    let out = offload(&stage, &["list", "lib/libkp_multi.so"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Two fat binaries, each in gfx90a and gfx1100 archives.
    assert_eq!(text(&out.stdout).lines().count(), 1 + 4, "{}", text(&out.stdout));
    // The first-compatible order of the July 2026 loader.
    let fall = offload(&stage, &["select", "--gpu", "gfx90a:xnack+", "lib/libkp_plain.so"]);
    assert!(fall.status.success());
    let first = offload(&stage, &["select", "--gpu", "gfx90a:xnack+", "--kpack-order", "first", "lib/libkp_plain.so"]);
    assert_eq!(first.status.code(), Some(1));
    assert!(text(&first.stderr).contains("KPACK_ERROR_KERNEL_NOT_FOUND"), "{}", text(&first.stderr));
    // verify: the tree is clean; a library moved away from its archives
    // and a damaged archive are errors.
    let out = offload(&stage, &["verify", "."]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    std::fs::copy(stage.join("lib/libkp_plain.so"), dir.path().join("moved.so")).unwrap();
    let out = offload(dir.path(), &["verify", "moved.so"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("no kpack archive found"), "{}", text(&out.stdout));
    let archive = stage.join(".kpack/kpdemo_lib_gfx1100.kpack");
    let mut bytes = std::fs::read(&archive).unwrap();
    let past_end = bytes.len() as u64 * 2;
    bytes[8..16].copy_from_slice(&past_end.to_le_bytes());
    std::fs::write(&archive, &bytes).unwrap();
    let out = offload(&stage, &["verify", ".kpack/kpdemo_lib_gfx1100.kpack"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains(":0x8: error"), "{}", text(&out.stdout));
    // An archive no library reaches.
    std::fs::copy(stage.join(".kpack/kpdemo_lib_gfx90a.kpack"), stage.join(".kpack/other_gfx90a.kpack")).unwrap();
    let out = offload(&stage, &["verify", "."]);
    assert!(text(&out.stdout).contains("other_gfx90a.kpack: warning"), "{}", text(&out.stdout));
}

/// `offload split --kpack` of the fat fixtures as a folder: `extract
/// --gpu` on the split tree gives, for every GPU, the bytes `extract --gpu`
/// gives on the fat tree; `join` gives back each uncompressed original
/// byte for byte; files that cannot be split and bad outputs are refused.
#[test]
fn split_then_extract_and_join_give_the_fat_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fat = d.join("fat/lib");
    std::fs::create_dir_all(&fat).unwrap();
    for e in files_under(&fixtures().join("fat")) {
        std::fs::copy(&e, fat.join(e.file_name().unwrap())).unwrap();
    }
    let out = offload(d, &["split", "--kpack", "fat", "-o", "split"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("7 host binaries"), "{}", text(&out.stdout));
    assert!(d.join("split/.kpack/fat_gfx942:sramecc+:xnack-.kpack").is_file());
    assert!(d.join("split/.kpack/fat_gfx11-generic.kpack").is_file());
    let mut compared = 0;
    for lib in ["generic", "multi", "plain", "xnack", "xnack2", "zstd", "zstd19"] {
        for gpu in ["gfx90a", "gfx90a:xnack+", "gfx1100", "gfx1101", "gfx942:sramecc+:xnack-"] {
            let one = |root: &str, o: &str| {
                std::fs::create_dir_all(d.join(o)).unwrap();
                let out =
                    offload(d, &["extract", "--gpu", gpu, "--output-dir", o, &format!("{root}/lib/libkp_{lib}.so")]);
                let mut files: Vec<Vec<u8>> =
                    files_under(&d.join(o)).iter().map(|p| std::fs::read(p).unwrap()).collect();
                files.sort();
                let _ = std::fs::remove_dir_all(d.join(o));
                (out.status.code(), files)
            };
            let (a, b) = (one("fat", "xa"), one("split", "xb"));
            assert_eq!(a.1, b.1, "{lib} {gpu}");
            assert_eq!(a.0 == Some(0), b.0 == Some(0), "{lib} {gpu}");
            compared += a.1.len();
        }
    }
    assert!(compared >= 20, "{compared}");
    for lib in ["generic", "multi", "plain", "xnack", "xnack2"] {
        let out = offload(d, &["join", &format!("split/lib/libkp_{lib}.so"), "-o", "joined.so"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            std::fs::read(d.join("joined.so")).unwrap() == std::fs::read(fat.join(format!("libkp_{lib}.so"))).unwrap()
        );
    }
    // A compressed-bundle library has no join record; AMD's split neither.
    let out = offload(d, &["join", "split/lib/libkp_zstd.so", "-o", "joined2.so"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!d.join("joined2.so").exists());
    let amd = fixtures().join("installed/stage/lib/libkp_plain.so");
    assert_eq!(offload(d, &["join", amd.to_str().unwrap(), "-o", "j3.so"]).status.code(), Some(1));
    // Nothing to split, an output in the way, no mode.
    let hostonly = fixtures().join("installed/stage/lib/libkp_hostonly.so");
    let out = offload(d, &["split", "--kpack", hostonly.to_str().unwrap(), "-o", "h"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!d.join("h").exists());
    assert_eq!(offload(d, &["split", "--kpack", "fat", "-o", "split"]).status.code(), Some(2));
    assert_eq!(offload(d, &["split", "fat", "-o", "other"]).status.code(), Some(2));
}

#[test]
fn split_wheel_writes_a_host_wheel_and_device_wheels() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = fixtures().join("fat-wheel/kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl");
    let out = offload(dir.path(), &["split", "--kpack", wheel.to_str().unwrap(), "-o", "w"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("w"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl",
            "kpdemo_device_gfx1100-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl",
            "kpdemo_device_gfx90a-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl"
        ]
    );
}

/// The system's dynamic loader maps every library `split --kpack` writes
/// and applies its relocations: a stand-in `libamdhip64.so.5` (built with
/// LLVM 22's clang) prints what `__hipRegisterFatBinary` receives, which
/// must be each `HIPK` record, its index, and the marker it points at.
#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22's clang: run scripts/install-reference-llvm.sh")]
fn the_dynamic_loader_maps_split_libraries_and_their_markers() {
    let clang = Path::new(option_env!("OFFLOAD_LLVM22_BIN").unwrap_or("/usr/lib/llvm-22/bin")).join("clang");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("stub.c"),
        r#"#include <stdio.h>
#include <stdint.h>
#include <stddef.h>
typedef struct { uint32_t magic, version; const char* binary; uint64_t reserved1; } W;
static void* handles[16];
void** __hipRegisterFatBinary(const void* d) {
  const W* w = d;
  printf("magic=%08x version=%u co_index=%lu marker=%.40s\n", w->magic, w->version, (unsigned long)w->reserved1, w->binary + 2);
  return handles;
}
void __hipRegisterFunction(void) {}
void __hipRegisterVar(void) {}
void __hipUnregisterFatBinary(void** m) {}
int __hipPopCallConfiguration(void) { return 0; }
int hipLaunchKernel(void) { return 0; }
"#,
    )
    .unwrap();
    std::fs::write(d.join("v.map"), "hip_4.2 { global: *; };\n").unwrap();
    std::fs::write(
        d.join("main.c"),
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char** v) { for (int i = 1; i < c; i++) \
         { void* h = dlopen(v[i], RTLD_NOW); printf(\"%s\\n\", h ? \"loaded\" : dlerror()); } return 0; }\n",
    )
    .unwrap();
    let cc = |args: &[&str]| {
        let out = Command::new(&clang).args(args).current_dir(d).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    cc(&[
        "-shared",
        "-fPIC",
        "-o",
        "libamdhip64.so.5",
        "stub.c",
        "-Wl,--version-script=v.map",
        "-Wl,-soname,libamdhip64.so.5",
    ]);
    cc(&["-o", "main", "main.c", "-ldl"]);
    let out = offload(d, &["split", "--kpack", fixtures().join("fat").to_str().unwrap(), "-o", "split"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    for (lib, records) in [("plain", 1), ("multi", 2), ("generic", 1), ("xnack", 1), ("zstd", 1), ("zstd19", 1)] {
        let path = d.join(format!("split/libkp_{lib}.so"));
        let out = Command::new(d.join("main")).arg(&path).env("LD_LIBRARY_PATH", d).output().unwrap();
        let stdout = text(&out.stdout);
        assert!(stdout.ends_with("loaded\n"), "{lib}: {stdout}{}", text(&out.stderr));
        for i in 0..records {
            let want = format!("magic=4b504948 version=1 co_index={i} marker=kpack_search_paths");
            assert!(stdout.contains(&want), "{lib}: {stdout}");
        }
        assert_eq!(stdout.matches("magic=").count(), records, "{lib}: {stdout}");
    }
}

/// The frames of an archive written with the `zstd-per-kernel` scheme: the
/// blob at 64 is a `u32` count, then per ordinal a `u32` length and the
/// frame (docs/formats/kpack.md, "Blob schemes"). (offset, length) each.
fn frames(archive: &[u8]) -> Vec<(usize, usize)> {
    let u32_at = |at: usize| u32::from_le_bytes(archive[at..at + 4].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    let mut at = 68;
    for _ in 0..u32_at(64) {
        let len = u32_at(at);
        out.push((at + 4, len));
        at += 4 + len;
    }
    out
}

/// Resolving one library for one GPU decodes only the frame the loader
/// serves: with every other frame of every archive destroyed (its bytes,
/// zstd magic included, overwritten), `list`, `select` and `extract --gpu`
/// still answer, and give the same bytes as on the intact tree; `verify
/// --deep`-style decoding of everything (`extract --all`) does fail, so
/// the damage is real.
#[test]
fn resolving_decodes_only_the_selected_frame() {
    let dir = copy();
    let stage = dir.path().join("installed/stage");
    let md5 = |b: &[u8]| -> String { Md5::digest(b).iter().map(|b| format!("{b:02x}")).collect() };
    let extract = |gpu: &str, lib: &str, out: &str| -> (Option<i32>, Vec<String>) {
        std::fs::create_dir_all(stage.join(out)).unwrap();
        let o = offload(&stage, &["extract", "--gpu", gpu, "--output-dir", out, lib]);
        let mut sums: Vec<String> =
            files_under(&stage.join(out)).iter().map(|p| md5(&std::fs::read(p).unwrap())).collect();
        sums.sort();
        std::fs::remove_dir_all(stage.join(out)).unwrap();
        (o.status.code(), sums)
    };
    for (lib, gpu) in
        [("lib/libkp_multi.so", "gfx90a"), ("lib/libkp_generic.so", "gfx1101"), ("lib/libkp_plain.so", "gfx1100")]
    {
        let (code, served) = extract(gpu, lib, "intact");
        assert_eq!(code, Some(0), "{lib} {gpu}");
        assert!(!served.is_empty(), "{lib} {gpu}");
        // Destroy every frame that does not decode to a served code object.
        let mut destroyed = 0;
        for archive in files_under(&stage.join(".kpack")) {
            let mut bytes = std::fs::read(&archive).unwrap();
            for (at, len) in frames(&bytes) {
                let decoded = zstd::stream::decode_all(&bytes[at..at + len]).unwrap_or_default();
                if !served.contains(&md5(&decoded)) {
                    bytes[at..at + len].fill(0xa5);
                    destroyed += 1;
                }
            }
            std::fs::write(&archive, &bytes).unwrap();
        }
        assert!(destroyed > 10, "{destroyed}");
        assert_eq!(extract(gpu, lib, "damaged"), (Some(0), served.clone()), "{lib} {gpu}");
        for cmd in ["list", "select"] {
            let args: Vec<&str> = if cmd == "list" { vec![cmd, lib] } else { vec![cmd, "--gpu", gpu, lib] };
            let o = offload(&stage, &args);
            assert_eq!(o.status.code(), Some(0), "{cmd} {lib} {gpu}: {}", text(&o.stderr));
        }
        // The damage is real: decoding every entry fails.
        let o = offload(&stage, &["extract", "--all", "--output-dir", "all", lib]);
        assert_ne!(o.status.code(), Some(0), "{lib}");
        let _ = std::fs::remove_dir_all(stage.join("all"));
        // Restore the archives for the next case.
        offload_testkit::copy_with_real_names(&fixtures().join("installed"), &dir.path().join("installed"));
    }
}

/// `check` on AMD's split wheels (the `.whl` files, not unpacked): the
/// host wheel given with its device wheels answers as the installed
/// `site-packages` does; a host wheel alone, or without the GPU's device
/// wheel, fails naming the archives looked for.
#[test]
fn check_on_split_wheels_answers_like_the_installed_tree() {
    let wheels = fixtures().join("split-wheels");
    let host = "kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let d90a = "amd_kpdemo_device_gfx90a-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let d1100 = "amd_kpdemo_device_gfx1100-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let dir = copy();
    let site = dir.path().join("site");
    // (GPU, wheels, exit status, the loader's error when 1). A bare gfx90a
    // finds no entry for libkp_xnack2.so, built for gfx90a:xnack± only.
    for (gpu, with, code, error) in [
        ("gfx90a:xnack+", vec![host, d90a], 0, ""),
        ("gfx90a:xnack-", vec![host, d90a, d1100], 0, ""),
        ("gfx1100", vec![host, d1100], 0, ""),
        ("gfx1100", vec![host, d90a, d1100], 0, ""),
        ("gfx90a", vec![host, d90a, d1100], 1, "KPACK_ERROR_KERNEL_NOT_FOUND"),
        ("gfx1100", vec![host, d90a], 1, "KPACK_ERROR_ARCHIVE_NOT_FOUND"),
        ("gfx90a:xnack+", vec![host], 1, "KPACK_ERROR_ARCHIVE_NOT_FOUND"),
        ("gfx1201", vec![host, d90a, d1100], 1, "KPACK_ERROR_ARCHIVE_NOT_FOUND"),
    ] {
        let mut args = vec!["check", "--gpu", gpu];
        args.extend(&with);
        let out = offload(&wheels, &args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(code), "{gpu} {with:?}: {stdout}{}", text(&out.stderr));
        assert!(!stdout.contains("no fat binaries"), "{gpu} {with:?}: {stdout}");
        if code == 0 {
            assert!(stdout.contains("all load"), "{gpu} {with:?}: {stdout}");
        } else {
            assert!(stdout.contains(error), "{gpu} {with:?}: {stdout}");
            assert!(stdout.contains(&format!("kpdemo/.kpack/kpdemo_{gpu}.kpack")), "{gpu} {with:?}: {stdout}");
        }
        // The installed tree holds all three wheels: it answers as they do
        // together.
        if with.len() == 3 {
            let installed = offload(&site, &["check", "--gpu", gpu, "kpdemo"]);
            assert_eq!(installed.status.code(), Some(code), "{gpu}: {}", text(&installed.stdout));
        }
    }
    // select on the wheels gives the installed tree's choices.
    let out = offload(&wheels, &["select", "--gpu", "gfx1100", host, d1100]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let chosen = stdout.lines().filter(|l| l.starts_with(host) && l.contains(" selected ")).count();
    assert_eq!(chosen, 4, "{stdout}");
}

/// A HIP DLL (clang 22, `lld-link`; tests/fixtures/pe) split into kpack
/// form: the image keeps its sections and RVAs, `.hip_fat` becomes
/// `.kpackrf`, and `list`, `select` and `extract --gpu` on the split DLL
/// give the fat DLL's code objects byte for byte.
#[test]
fn split_of_a_hip_dll_reads_back_and_serves_the_fat_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("fat/bin")).unwrap();
    let dll = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pe/hip_kernels.dll");
    std::fs::copy(&dll, d.join("fat/bin/hip_kernels.dll")).unwrap();
    let out = offload(d, &["split", "--kpack", "fat", "-o", "split"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("1 host binaries"), "{}", text(&out.stdout));
    for t in ["gfx90a", "gfx1100"] {
        assert!(d.join(format!("split/.kpack/fat_{t}.kpack")).is_file(), "{t}");
    }
    let fat = std::fs::read(d.join("fat/bin/hip_kernels.dll")).unwrap();
    let split = std::fs::read(d.join("split/bin/hip_kernels.dll")).unwrap();
    assert!(split.len() < fat.len(), "{} {}", split.len(), fat.len());
    assert!(split.windows(8).any(|w| w == b".kpackrf"));
    assert!(!split.windows(8).any(|w| w == b".hip_fat"));
    let out = offload(d, &["list", "split/bin/hip_kernels.dll"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("key bin/hip_kernels.dll#0 target gfx90a"), "{listed}");
    assert_eq!(listed.lines().count(), 1 + 2, "{listed}");
    for gpu in ["gfx90a", "gfx1100", "gfx90a:xnack+"] {
        let one = |root: &str, o: &str| {
            std::fs::create_dir_all(d.join(o)).unwrap();
            let out = offload(d, &["extract", "--gpu", gpu, "--output-dir", o, &format!("{root}/bin/hip_kernels.dll")]);
            let files: Vec<Vec<u8>> = files_under(&d.join(o)).iter().map(|p| std::fs::read(p).unwrap()).collect();
            let _ = std::fs::remove_dir_all(d.join(o));
            (out.status.code(), files)
        };
        let (a, b) = (one("fat", "xa"), one("split", "xb"));
        assert_eq!(a.0, Some(0), "{gpu}");
        assert_eq!(a, b, "{gpu}");
        assert_eq!(b.1.len(), 1, "{gpu}");
    }
    let out = offload(d, &["select", "--gpu", "gfx1201", "split/bin/hip_kernels.dll"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("KPACK_ERROR_ARCHIVE_NOT_FOUND"), "{}", text(&out.stderr));
}

/// Unpacks `wheels` into `site` as `pip` installs them: each member at its
/// path, a `<name>.data/purelib/` or `platlib/` member without those two
/// folders.
fn install(wheels: &[PathBuf], site: &Path) {
    for wheel in wheels {
        let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
        for i in 0..zip.len() {
            let mut member = zip.by_index(i).unwrap();
            let name = member.name().to_string();
            let parts: Vec<&str> = name.splitn(3, '/').collect();
            let installed = match parts.as_slice() {
                [top, "purelib" | "platlib", rest] if top.ends_with(".data") => rest.to_string(),
                _ => name.clone(),
            };
            if name.ends_with('/') {
                continue;
            }
            let dest = site.join(installed);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            let mut out = std::fs::File::create(dest).unwrap();
            std::io::copy(&mut member, &mut out).unwrap();
        }
    }
}

/// `wheel` rewritten with every member under `kpdemo/` moved into
/// `<dist>.data/platlib/` (the wheel format's other place for files that
/// go to `site-packages`).
fn into_data_layout(wheel: &Path, out: &Path) {
    use std::io::{Read, Write};
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel).unwrap()).unwrap();
    let file_name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let mut fields = file_name.split('-');
    let dist = format!("{}-{}", fields.next().unwrap(), fields.next().unwrap());
    let mut w = zip::ZipWriter::new(std::fs::File::create(out).unwrap());
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).unwrap();
        let name = member.name().to_string();
        let mut bytes = Vec::new();
        member.read_to_end(&mut bytes).unwrap();
        let name = if name.starts_with("kpdemo/") { format!("{dist}.data/platlib/{name}") } else { name };
        w.start_file(name, zip::write::SimpleFileOptions::default()).unwrap();
        w.write_all(&bytes).unwrap();
    }
    w.finish().unwrap();
}

/// MD5s of the files of `dir` extracted from the `libkp_*` libraries,
/// sorted.
fn md5s(dir: &Path) -> Vec<String> {
    let mut sums: Vec<String> = files_under(dir)
        .iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("libkp_"))
        .map(|p| Md5::digest(std::fs::read(p).unwrap()).iter().map(|b| format!("{b:02x}")).collect())
        .collect();
    sums.sort();
    sums
}

/// Every reading command on split wheels (not unpacked) answers as on the
/// `site-packages` they install: AMD's split wheels, the same device
/// wheels with their archives under `.data/platlib/`, and our own split
/// of the fat wheel. For GPUs served, served in part and not served:
/// `check`'s exit status, the bytes `extract --gpu` writes for the host
/// wheel's libraries (MD5 by MD5), the rows `select --gpu` chooses, and a
/// clean `verify` that finds the libraries' code objects.
#[test]
fn split_wheels_answer_as_their_installed_tree() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let amd = fixtures().join("split-wheels");
    let host = amd.join("kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl");
    let amd_devices: Vec<PathBuf> = ["gfx90a", "gfx1100"]
        .iter()
        .map(|t| amd.join(format!("amd_kpdemo_device_{t}-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl")))
        .collect();
    // AMD's device wheels in the `.data/platlib/` layout.
    std::fs::create_dir_all(d.join("data")).unwrap();
    let data_devices: Vec<PathBuf> = amd_devices
        .iter()
        .map(|w| {
            let out = d.join("data").join(w.file_name().unwrap());
            into_data_layout(w, &out);
            out
        })
        .collect();
    // Ours, from the fat wheel.
    let fat = fixtures().join("fat-wheel/kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl");
    let out = offload(d, &["split", "--kpack", &fat.to_string_lossy(), "-o", "ours"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ours: Vec<PathBuf> = {
        let mut w = files_under(&d.join("ours"));
        w.sort();
        w
    };
    assert_eq!(ours.len(), 3, "{ours:?}");
    let ours_host = ours.iter().find(|p| p.file_name().unwrap().to_string_lossy().starts_with("kpdemo-")).unwrap();
    let ours_devices: Vec<PathBuf> = ours.iter().filter(|p| *p != ours_host).cloned().collect();

    let sets =
        [("amd", host.clone(), amd_devices), ("data", host, data_devices), ("ours", ours_host.clone(), ours_devices)];
    for (name, host, devices) in &sets {
        let site = d.join(format!("site-{name}"));
        let mut all = vec![host.clone()];
        all.extend(devices.iter().cloned());
        install(&all, &site);
        let libs = site.join("kpdemo/lib");
        let wheel_args: Vec<String> = all.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let lib_arg = libs.to_string_lossy().into_owned();
        let (mut answers, mut extracted) = (0, 0);
        for gpu in ["gfx90a", "gfx90a:xnack+", "gfx1100", "gfx1201"] {
            let what = format!("{name} {gpu}");
            // check
            let mut args = vec!["check", "--gpu", gpu];
            args.extend(wheel_args.iter().map(String::as_str));
            let on_wheels = offload(d, &args);
            let on_site = offload(d, &["check", "--gpu", gpu, &site.to_string_lossy()]);
            assert_eq!(on_wheels.status.code(), on_site.status.code(), "{what}: {}", text(&on_wheels.stdout));
            assert!(matches!(on_site.status.code(), Some(0 | 1)), "{what}: {}", text(&on_site.stderr));
            if on_site.status.code() == Some(0) {
                answers += 1;
            }
            // extract --gpu: the host wheel's libraries, with the device
            // wheels beside it, against the installed libraries.
            let (from_wheels, from_site) = (d.join(format!("x-{name}-{gpu}-w")), d.join(format!("x-{name}-{gpu}-s")));
            std::fs::create_dir_all(&from_wheels).unwrap();
            std::fs::create_dir_all(&from_site).unwrap();
            let mut args = vec!["extract", "--gpu", gpu, "--output-dir"];
            let out_w = from_wheels.to_string_lossy().into_owned();
            args.push(&out_w);
            args.push(&wheel_args[0]);
            for w in &wheel_args[1..] {
                args.extend(["--with", w.as_str()]);
            }
            let x_wheels = offload(d, &args);
            let out_s = from_site.to_string_lossy().into_owned();
            let mut x_site = Vec::new();
            for lib in ["libkp_plain.so", "libkp_multi.so", "libkp_xnack2.so"] {
                let lib = libs.join(lib).to_string_lossy().into_owned();
                x_site.push(offload(d, &["extract", "--gpu", gpu, "--output-dir", &out_s, &lib]));
            }
            // The installed folder also holds standalone Tensile code
            // objects: only the libraries' bytes are compared.
            assert!(matches!(x_wheels.status.code(), Some(0 | 1)), "{what}: {}", text(&x_wheels.stderr));
            for x in &x_site {
                assert!(matches!(x.status.code(), Some(0 | 1)), "{what}: {}", text(&x.stderr));
            }
            let sums = md5s(&from_wheels);
            assert_eq!(sums, md5s(&from_site), "{what}");
            extracted += sums.len();
            // select --gpu: as many chosen rows for the libraries.
            let mut args = vec!["select", "--gpu", gpu];
            args.extend(wheel_args.iter().map(String::as_str));
            let s_wheels = text(&offload(d, &args).stdout);
            let s_site = text(&offload(d, &["select", "--gpu", gpu, &lib_arg]).stdout);
            let host_path = host.to_string_lossy().into_owned();
            let chosen = |s: &str, wheel: bool| {
                s.lines()
                    .filter(|l| !wheel || l.starts_with(&host_path))
                    .filter(|l| l.contains(" key lib/libkp_") && l.contains(" selected "))
                    .count()
            };
            assert_eq!(chosen(&s_wheels, true), chosen(&s_site, false), "{what}: {s_wheels}\n{s_site}");
        }
        // gfx90a:xnack+ and gfx1100 load everywhere; gfx90a (bare) and
        // gfx1201 do not.
        assert_eq!(answers, 2, "{name}");
        // 3 (gfx90a: the two libraries built for it) + 4 (gfx90a:xnack+)
        // + 4 (gfx1100) + 0 (gfx1201).
        assert_eq!(extracted, 11, "{name}");
        // verify finds the libraries' code objects through the device
        // wheels and no archive left unreached.
        let mut args = vec!["verify"];
        args.extend(wheel_args.iter().map(String::as_str));
        let v = offload(d, &args);
        let stdout = text(&v.stdout);
        assert_eq!(v.status.code(), Some(0), "{name}: {stdout}{}", text(&v.stderr));
        assert!(!stdout.contains(": warning: "), "{name}: {stdout}");
        let host_line = stdout.lines().find(|l| l.contains(&*host.file_name().unwrap().to_string_lossy())).unwrap();
        assert!(host_line.contains("OK: 9 code objects"), "{name}: {host_line}");
    }
}

/// `verify` on a device wheel given without its host wheel: each archive
/// is reported as reached by no library of the wheels given.
#[test]
fn verify_names_device_archives_no_wheel_given_reaches() {
    let wheels = fixtures().join("split-wheels");
    let d90a = "amd_kpdemo_device_gfx90a-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let out = offload(&wheels, &["verify", d90a]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let warned =
        stdout.lines().filter(|l| l.contains("warning: member kpdemo/.kpack/") && l.contains("dead weight")).count();
    assert_eq!(warned, 3, "{stdout}");
}
