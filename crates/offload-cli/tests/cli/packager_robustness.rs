//! Hostile input for clang-offload-packager's extraction: truncated,
//! corrupted and lying containers and packages must give a clean error (or
//! nothing), never a panic, a crash or a partly written output.

use crate::common;

use offload_format::offload_binary::{Binaries, OffloadBinary, container};
use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Command;

fn input(name: &str) -> Vec<u8> {
    fs::read(common::fixtures().join("packager/inputs").join(name)).unwrap()
}

/// Scans and parses like the packager does; returns the number of images
/// found or the error text.
fn extract(data: &[u8]) -> Result<usize, String> {
    let scan = container::scan(data, "input");
    let mut n = 0;
    for p in &scan.packages {
        for b in Binaries::new(&p.data) {
            let b = b.map_err(|e| e.to_string())?;
            assert!(b.image().len() <= p.data.len());
            n += 1;
        }
    }
    match scan.error {
        Some(e) => Err(e.to_string()),
        None => Ok(n),
    }
}

#[test]
fn every_truncation_and_byte_flip_of_every_container_is_handled() {
    for (name, images) in
        [("pkg.out", 2), ("host.o", 2), ("merged.o", 3), ("host.bc", 2), ("host.obj", 2), ("lib.a", 3)]
    {
        let data = input(name);
        assert_eq!(extract(&data), Ok(images), "{name}");
        let mut outcomes = [0usize; 2];
        for len in 0..data.len() {
            outcomes[usize::from(extract(&data[..len]).is_ok())] += 1;
        }
        for at in 0..data.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut d = data.clone();
                d[at] ^= x;
                outcomes[usize::from(extract(&d).is_ok())] += 1;
            }
        }
        // Both outcomes occur: the corruptions are not all ignored.
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{name}: {outcomes:?}");
    }
}

fn packager() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clang-offload-packager"));
    cmd.arg0("clang-offload-packager");
    cmd
}

/// Offsets LLVM 19 trusts and crashes on (SIGSEGV): ours reports them.
#[test]
fn lying_offsets_give_an_error_and_no_output() {
    let pkg = input("pkg.out");
    let dir = tempfile::tempdir().unwrap();
    // (field offset, value, message fragment)
    let lies = [
        (0x40usize, 0x10_0000u64, "the image at 0x98 with size 0x100000"),
        (0x38, 0xffff_ffff_ffff_fff0, "The end of the file was unexpectedly encountered"),
        (0x30, 0x1000_0000_0000, "the string records"),
        (0x48, 0xa0_0000, "a key string"),
        (0x50, 0xfff, "a value string"),
    ];
    for (at, value, message) in lies {
        let mut d = pkg.clone();
        d[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let path = dir.path().join("lie.out");
        fs::write(&path, &d).unwrap();
        let out = common::run(packager().current_dir(dir.path()).args(["lie.out", "--image=", "--image=file=x"]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with("clang-offload-packager: error: "), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
        let written: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(written, ["lie.out"]);
    }
}

#[test]
fn unknown_versions_are_refused_as_llvm_refuses_them() {
    // Versions 1 to 3 are read (docs/formats/offload-binary.md); 4 is not a
    // version any LLVM writes.
    let mut pkg = input("pkg.out");
    pkg[4] = 4;
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("v4.out"), &pkg).unwrap();
    let out = common::run(packager().current_dir(dir.path()).args(["v4.out", "--image="]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "clang-offload-packager: error: Invalid data was encountered while parsing the file\n"
    );
}

/// A failed extraction writes nothing, even for the `--image` arguments
/// that came before the failing one (LLVM writes those).
#[test]
fn failed_extraction_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("pkg.out"), input("pkg.out")).unwrap();
    let out = common::run(packager().current_dir(dir.path()).args([
        "pkg.out",
        "--image=kind=openmp",
        "--image=kind=hip",
        "--archive",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "clang-offload-packager: error: Image must have a 'file' argument.\n"
    );
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn extraction_round_trips_what_packaging_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let images: Vec<(String, Vec<u8>)> = (0..5)
        .map(|i| (format!("img{i}.{}", ["o", "bc", "cubin", "s", "bin"][i]), (0..i * 37).map(|b| b as u8).collect()))
        .collect();
    let mut args = vec!["-o".to_string(), "p.out".to_string()];
    for (i, (name, bytes)) in images.iter().enumerate() {
        fs::write(dir.path().join(name), bytes).unwrap();
        args.push(format!("--image=file={name},triple=t{i},arch=a{i},kind=openmp,k{i}=v{i}"));
    }
    assert!(common::run(packager().current_dir(dir.path()).args(&args)).status.success());
    let pkg = fs::read(dir.path().join("p.out")).unwrap();
    let bins = OffloadBinary::parse_all(&pkg).unwrap();
    assert_eq!(bins.len(), images.len());
    for (i, (name, bytes)) in images.iter().enumerate() {
        assert_eq!(bins[i].image(), &bytes[..]);
        let out = common::run(
            packager().current_dir(dir.path()).args(["p.out".to_string(), format!("--image=k{i}=v{i},file=x{i}")]),
        );
        assert!(out.status.success());
        assert_eq!(&fs::read(dir.path().join(format!("x{i}"))).unwrap(), bytes, "{name}");
    }
    // Generated names: <stem>-<triple>-<arch>.<n>.<kind name>.
    assert!(common::run(packager().current_dir(dir.path()).args(["p.out", "--image=kind=openmp"])).status.success());
    for (i, (_, bytes)) in images.iter().enumerate() {
        let kind = ["o", "bc", "cubin", "s", ""][i];
        assert_eq!(&fs::read(dir.path().join(format!("p-t{i}-a{i}.{i}.{kind}"))).unwrap(), bytes);
    }
}
