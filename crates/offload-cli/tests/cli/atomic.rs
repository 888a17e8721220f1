//! Output atomicity of every binary: a run writes all of its outputs or
//! changes nothing; the same path may be input and output; an output folder
//! that cannot be written, an output that is a folder, a symbolic link, and
//! `-` for standard output all behave.

// Tests set resource limits and signals through libc.
#![allow(unsafe_code)]

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BUNDLER: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const PACKAGER: &str = env!("CARGO_BIN_EXE_clang-offload-packager");
const WRAPPER: &str = env!("CARGO_BIN_EXE_clang-offload-wrapper");

const HOST: &str = "host-x86_64-unknown-linux-gnu";
const G906: &str = "hip-amdgcn-amd-amdhsa--gfx906";
const G908: &str = "hip-amdgcn-amd-amdhsa--gfx908";

fn run(bin: &str, dir: &Path, args: &[&str]) -> Output {
    common::run(Command::new(bin).current_dir(dir).args(args))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every name in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A folder with a three-entry binary bundle `b.bc` made by our bundler
/// from `h`, `d6`, `d8`.
fn bundle_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("h"), b"HOST").unwrap();
    fs::write(dir.path().join("d6"), b"DEVICE 906").unwrap();
    fs::write(dir.path().join("d8"), b"DEVICE 908").unwrap();
    let o = run(
        BUNDLER,
        dir.path(),
        &["-type=bc", &format!("-targets={HOST},{G906},{G908}"), "-input=h", "-input=d6", "-input=d8", "-output=b.bc"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

fn unbundle_args<'a>(outputs: &'a [&'a str]) -> Vec<String> {
    let targets = [HOST, G906, G908];
    let mut a = vec!["-unbundle".to_string(), "-type=bc".into(), "-input=b.bc".into()];
    a.push(format!("-targets={}", targets[..outputs.len()].join(",")));
    a.extend(outputs.iter().map(|o| format!("-output={o}")));
    a
}

fn unbundle(dir: &Path, outputs: &[&str]) -> Output {
    let args = unbundle_args(outputs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(BUNDLER, dir, &args)
}

// ------------------------------------------------------------ bundler

/// Unbundling three outputs where the third cannot be created: the first
/// two (one existing, one new) are left as they were.
#[test]
fn bundler_multi_output_is_all_or_nothing() {
    let dir = bundle_dir();
    let d = dir.path();
    fs::write(d.join("out0"), b"old 0").unwrap();
    let before = names(d);
    let o = unbundle(d, &["out0", "out1", "missing-dir/out2"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: 'missing-dir/out2': No such file or directory"), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("out0")).unwrap(), b"old 0");
    assert_eq!(names(d), before, "a file was created or a temporary file left");
    // The same run with a writable third output writes all three.
    fs::create_dir(d.join("missing-dir")).unwrap();
    let o = unbundle(d, &["out0", "out1", "missing-dir/out2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("out0")).unwrap(), b"HOST");
    assert_eq!(fs::read(d.join("out1")).unwrap(), b"DEVICE 906");
    assert_eq!(fs::read(d.join("missing-dir/out2")).unwrap(), b"DEVICE 908");
}

/// A failing run prints nothing on standard output either.
#[test]
fn bundler_stdout_is_written_only_with_everything_else() {
    let dir = bundle_dir();
    let d = dir.path();
    let o = unbundle(d, &["-", "no/such/dir"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let o = unbundle(d, &["-", "out1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"HOST");
    assert_eq!(fs::read(d.join("out1")).unwrap(), b"DEVICE 906");
    // Bundling to standard output gives the bytes bundling to a file gives.
    let bundle_to = |out: &str| {
        run(
            BUNDLER,
            d,
            &["-type=bc", &format!("-targets={HOST},{G906}"), "-input=h", "-input=d6", &format!("-output={out}")],
        )
    };
    let o = bundle_to("-");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(bundle_to("file.bc").status.success());
    assert_eq!(o.stdout, fs::read(d.join("file.bc")).unwrap());
}

/// The input is also an output: it is replaced only after it has been
/// read, in both directions.
#[test]
fn bundler_same_path_as_input_and_output() {
    let dir = bundle_dir();
    let d = dir.path();
    let original = fs::read(d.join("b.bc")).unwrap();
    let o = unbundle(d, &["b.bc", "out1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("b.bc")).unwrap(), b"HOST");
    assert_eq!(fs::read(d.join("out1")).unwrap(), b"DEVICE 906");
    // Bundling into the host input.
    fs::write(d.join("b.bc"), &original).unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    fs::write(d.join("h"), &big).unwrap();
    let o = run(BUNDLER, d, &["-type=bc", &format!("-targets={HOST},{G906}"), "-input=h", "-input=d6", "-output=h"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(BUNDLER, d, &["-unbundle", "-type=bc", &format!("-targets={HOST}"), "-input=h", "-output=back"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("back")).unwrap(), big);
    assert_eq!(names(d), ["b.bc", "back", "d6", "d8", "h", "out1"]);
}

#[test]
fn bundler_output_that_is_a_directory() {
    let dir = bundle_dir();
    let d = dir.path();
    fs::create_dir(d.join("out1")).unwrap();
    fs::write(d.join("out1/inside"), b"x").unwrap();
    fs::write(d.join("out0"), b"old").unwrap();
    let o = unbundle(d, &["out0", "out1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: 'out1': Is a directory"), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("out0")).unwrap(), b"old");
    assert_eq!(names(&d.join("out1")), ["inside"]);
}

/// A link as output: the file it points to is replaced and the link stays;
/// a dangling link gets its target created.
#[test]
fn bundler_output_that_is_a_symbolic_link() {
    let dir = bundle_dir();
    let d = dir.path();
    fs::create_dir(d.join("real")).unwrap();
    fs::write(d.join("real/host.bin"), b"old").unwrap();
    std::os::unix::fs::symlink("real/host.bin", d.join("link")).unwrap();
    std::os::unix::fs::symlink("real/new.bin", d.join("dangling")).unwrap();
    let o = unbundle(d, &["link", "dangling"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(fs::symlink_metadata(d.join("link")).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(d.join("real/host.bin")).unwrap(), b"HOST");
    assert_eq!(fs::read(d.join("real/new.bin")).unwrap(), b"DEVICE 906");
    assert_eq!(names(&d.join("real")), ["host.bin", "new.bin"]);
}

/// Existing outputs keep their permission bits.
#[test]
fn bundler_keeps_the_mode_of_replaced_outputs() {
    let dir = bundle_dir();
    let d = dir.path();
    fs::write(d.join("out0"), b"old").unwrap();
    fs::set_permissions(d.join("out0"), fs::Permissions::from_mode(0o640)).unwrap();
    let o = unbundle(d, &["out0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::metadata(d.join("out0")).unwrap().permissions().mode() & 0o777, 0o640);
}

// --------------------------------------------------- unwritable folders

/// Runs `bin` as an unprivileged user when the tests run as root (root may
/// write anywhere); `None` when that is impossible here.
fn run_unprivileged(bin: &str, dir: &Path, args: &[&str]) -> Option<Output> {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args(args);
    // SAFETY: getuid is always safe.
    if unsafe { libc::getuid() } == 0 {
        // SAFETY: setgid/setuid between fork and exec are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.output().ok()
}

/// An output folder without write permission: nothing is written, the
/// existing output stays, the message names the output.
#[test]
fn unwritable_output_folder_for_every_binary() {
    let dir = bundle_dir();
    let d = dir.path();
    fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    let ro = d.join("ro");
    fs::create_dir(&ro).unwrap();
    fs::write(ro.join("out"), b"old").unwrap();
    fs::set_permissions(ro.join("out"), fs::Permissions::from_mode(0o666)).unwrap();
    for f in ["b.bc", "h", "d6", "d8"] {
        fs::set_permissions(d.join(f), fs::Permissions::from_mode(0o644)).unwrap();
    }
    fs::write(d.join("pkg.out"), fs::read(common::fixtures().join("packager/inputs/pkg.out")).unwrap()).unwrap();
    fs::set_permissions(d.join("pkg.out"), fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    let cases: [(&str, Vec<&str>); 4] = [
        (
            BUNDLER,
            vec!["-unbundle", "-type=bc", "-targets=host-x86_64-unknown-linux-gnu", "-input=b.bc", "-output=ro/out"],
        ),
        (BUNDLER, vec!["-type=bc", "-targets=host-x86_64-unknown-linux-gnu", "-input=h", "-output=ro/out"]),
        (PACKAGER, vec!["pkg.out", "--image=file=ro/out,kind=openmp"]),
        (WRAPPER, vec!["-target=x86_64-pc-linux-gnu", "-o", "ro/out", "h"]),
    ];
    for (bin, args) in cases {
        // Root can drop to nobody and anyone else is unprivileged already:
        // failing to start is a failure, not a reason to skip.
        let o = run_unprivileged(bin, d, &args).expect("the tool starts as an unprivileged user");
        assert_eq!(o.status.code(), Some(1), "{bin} {args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error: ") && stderr(&o).contains("Permission denied"), "{}", stderr(&o));
        assert_eq!(fs::read(ro.join("out")).unwrap(), b"old");
        assert_eq!(names(&ro), ["out"]);
    }
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
}

// ------------------------------------------------------------ packager

fn packager_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a.bin"), b"image A").unwrap();
    fs::write(d.join("b.bin"), b"image B!").unwrap();
    let o = run(
        PACKAGER,
        d,
        &[
            "-o",
            "p.out",
            "--image=file=a.bin,triple=x86_64-unknown-linux-gnu,arch=generic,kind=openmp",
            "--image=file=b.bin,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

#[test]
fn packager_extraction_is_all_or_nothing() {
    let dir = packager_dir();
    let d = dir.path();
    fs::write(d.join("x"), b"old").unwrap();
    let before = names(d);
    let o = run(PACKAGER, d, &["p.out", "--image=file=x,kind=openmp", "--image=file=nodir/y,kind=hip"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(fs::read(d.join("x")).unwrap(), b"old");
    assert_eq!(names(d), before);
    let o = run(PACKAGER, d, &["p.out", "--image=file=x,kind=openmp", "--image=file=y,kind=hip"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("x")).unwrap(), b"image A");
    assert_eq!(fs::read(d.join("y")).unwrap(), b"image B!");
}

#[test]
fn packager_same_path_directory_link_and_stdout() {
    let dir = packager_dir();
    let d = dir.path();
    // Packaging an input into itself.
    let o = run(PACKAGER, d, &["-o", "a.bin", "--image=file=a.bin,triple=t,arch=a,kind=openmp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(PACKAGER, d, &["a.bin", "--image=file=back,kind=openmp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("back")).unwrap(), b"image A");
    // Extracting over the package itself.
    let o = run(PACKAGER, d, &["p.out", "--image=file=p.out,kind=hip"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("p.out")).unwrap(), b"image B!");
    // A folder as output.
    let dir = packager_dir();
    let d = dir.path();
    fs::create_dir(d.join("out")).unwrap();
    let o = run(PACKAGER, d, &["p.out", "--image=file=out,kind=hip"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: Is a directory"), "{}", stderr(&o));
    assert!(names(&d.join("out")).is_empty());
    // A link as output.
    fs::write(d.join("target"), b"old").unwrap();
    std::os::unix::fs::symlink("target", d.join("link")).unwrap();
    let o = run(PACKAGER, d, &["p.out", "--image=file=link,kind=hip"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("target")).unwrap(), b"image B!");
    assert!(fs::symlink_metadata(d.join("link")).unwrap().file_type().is_symlink());
    // Standard output, for packaging and for extraction.
    let o = run(PACKAGER, d, &["p.out", "--image=file=-,kind=openmp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, b"image A");
    let o = run(PACKAGER, d, &["-o", "-", "--image=file=a.bin,triple=t,kind=openmp"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.starts_with(&[0x10, 0xff, 0x10, 0xad]));
}

// ------------------------------------------------------------- wrapper

#[test]
fn wrapper_same_path_directory_link_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let image: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(d.join("img"), &image).unwrap();
    let wrap = |out: &str, input: &str| run(WRAPPER, d, &["-target=x86_64-pc-linux-gnu", "-o", out, input]);
    let o = wrap("ref.bc", "img");
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = fs::read(d.join("ref.bc")).unwrap();
    // The image is also the output: the module holds the old image.
    let o = wrap("img", "img");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("img")).unwrap(), reference);
    // A folder as output: an error, nothing written.
    fs::create_dir(d.join("dir")).unwrap();
    let o = wrap("dir", "ref.bc");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error: 'dir': Is a directory"), "{}", stderr(&o));
    assert!(names(&d.join("dir")).is_empty());
    // A link as output.
    fs::write(d.join("target"), b"old").unwrap();
    std::os::unix::fs::symlink("target", d.join("link")).unwrap();
    fs::write(d.join("img"), &image).unwrap();
    let o = wrap("link", "img");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("target")).unwrap(), reference);
    // Standard output.
    let o = wrap("-", "img");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, reference);
    // A missing input: nothing is written, the existing output stays.
    let o = wrap("target", "no-such-input");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(fs::read(d.join("target")).unwrap(), reference);
    assert_eq!(names(d), ["dir", "img", "link", "ref.bc", "target"]);
}

// ------------------------------------------------------------ offload

const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");

/// `offload extract --all`: when one output cannot be written (a folder
/// has its name), none is; the input itself may be the output.
#[test]
fn offload_extract_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/hip-gfx906-gfx90a.bc");
    fs::copy(&sample, d.join("s.bc")).unwrap();
    fs::create_dir(d.join("out")).unwrap();
    fs::create_dir(d.join("out/s.bc-2-hip-amdgcn-amd-amdhsa--gfx90a_xnack+.co")).unwrap();
    fs::write(d.join("out/s.bc-1-hip-amdgcn-amd-amdhsa--gfx906.co"), b"old").unwrap();
    let o = run(OFFLOAD, d, &["extract", "--all", "--output-dir", "out", "s.bc"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("error: ") && stderr(&o).contains("Is a directory"), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("out/s.bc-1-hip-amdgcn-amd-amdhsa--gfx906.co")).unwrap(), b"old");
    assert_eq!(
        names(&d.join("out")),
        ["s.bc-1-hip-amdgcn-amd-amdhsa--gfx906.co", "s.bc-2-hip-amdgcn-amd-amdhsa--gfx90a_xnack+.co"]
    );
    fs::remove_dir(d.join("out/s.bc-2-hip-amdgcn-amd-amdhsa--gfx90a_xnack+.co")).unwrap();
    let o = run(OFFLOAD, d, &["extract", "--all", "--output-dir", "out", "s.bc"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&d.join("out")).len(), 3);
    assert_ne!(fs::read(d.join("out/s.bc-1-hip-amdgcn-amd-amdhsa--gfx906.co")).unwrap(), b"old");
    // Extracting a code object over the file it comes from.
    let gfx906 = fs::read(d.join("out/s.bc-1-hip-amdgcn-amd-amdhsa--gfx906.co")).unwrap();
    let o = run(OFFLOAD, d, &["extract", "--index", "1", "-o", "s.bc", "s.bc"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(fs::read(d.join("s.bc")).unwrap(), gfx906);
}
