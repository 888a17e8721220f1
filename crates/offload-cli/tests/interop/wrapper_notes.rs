//! `clang-offload-wrapper -add-omp-offload-notes` against LLVM 14's: the
//! wrapped modules are the same (llvm-dis 14 prints the image bytes, so the
//! noted images are byte-identical), llvm-readelf 14 reads our notes, and
//! non-ELF images get LLVM 14's warning.

use crate::common;
use crate::wrapper_common::ours;

use offload_format::wrapper::omp_notes;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An ELF file of our own, in the given class and byte order, with a few
/// sections of different alignments.
fn elf_yaml(bits: u32, encoding: &str) -> String {
    let machine = if bits == 64 { "EM_X86_64" } else { "EM_386" };
    format!(
        "--- !ELF
FileHeader:
  Class: ELFCLASS{bits}
  Data:  ELFDATA2{encoding}
  Type:  ET_REL
  Machine: {machine}
Sections:
  - Name: .text
    Type: SHT_PROGBITS
    Flags: [ SHF_ALLOC, SHF_EXECINSTR ]
    AddressAlign: 16
    Content: C3C3C3
  - Name: .data.rel
    Type: SHT_PROGBITS
    Flags: [ SHF_ALLOC, SHF_WRITE ]
    AddressAlign: 8
    Content: 0102030405
  - Name: .bss
    Type: SHT_NOBITS
    Flags: [ SHF_ALLOC, SHF_WRITE ]
    AddressAlign: 4
    Size: 64
"
    )
}

fn wrap(tool: &Path, image: &Path, out: &Path) -> String {
    let o = common::run(
        Command::new(tool).args(["-add-omp-offload-notes", "-target=x86_64-pc-linux-gnu", "-o"]).arg(out).arg(image),
    );
    assert!(o.status.success(), "{} failed: {}", tool.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stderr).unwrap()
}

fn dis(bc: &Path) -> String {
    let o = common::run(Command::new(common::llvm_tool(14, "llvm-dis")).stdin(File::open(bc).unwrap()));
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}

/// Wraps `image` with LLVM 14 and with ours; the two modules must print the
/// same and ours must not warn where LLVM 14 does not.
fn same_as_llvm14(tmp: &Path, image: &Path) {
    let (theirs, mine) = (tmp.join("theirs.bc"), tmp.join("ours.bc"));
    let warn14 = wrap(&common::llvm_tool(14, "clang-offload-wrapper"), image, &theirs);
    let warn = wrap(Path::new(ours()), image, &mine);
    assert_eq!(warn.is_empty(), warn14.is_empty(), "{}: ours: {warn:?}, LLVM 14: {warn14:?}", image.display());
    let (a, b) = (dis(&theirs), dis(&mine));
    assert!(a.contains("LLVMOMPOFFLOAD"), "LLVM 14 added no notes to {}", image.display());
    assert_eq!(b, a, "wrapped {} differs from LLVM 14's", image.display());
}

#[test]
#[cfg_attr(not(all(has_llvm14, has_llvm19)), ignore = "needs LLVM 14 and 19: run scripts/install-reference-llvm.sh")]
fn notes_and_images_are_byte_identical_to_llvm14s() {
    let tmp = tempfile::tempdir().unwrap();
    let yaml2obj = common::llvm_tool(19, "yaml2obj");
    let readelf = common::llvm_tool(14, "llvm-readelf");
    for (bits, encoding) in [(64, "LSB"), (64, "MSB"), (32, "LSB"), (32, "MSB")] {
        let yaml = tmp.path().join("in.yaml");
        fs::write(&yaml, elf_yaml(bits, encoding)).unwrap();
        let image: PathBuf = tmp.path().join(format!("elf{bits}{encoding}"));
        let o = common::run(Command::new(&yaml2obj).arg(&yaml).arg("-o").arg(&image));
        assert!(o.status.success(), "yaml2obj: {}", String::from_utf8_lossy(&o.stderr));
        same_as_llvm14(tmp.path(), &image);
        // llvm-readelf 14 reads the three notes of ours.
        let noted = omp_notes::add_notes(&fs::read(&image).unwrap(), "14.0.6").unwrap();
        let path = tmp.path().join("noted");
        fs::write(&path, noted).unwrap();
        let o = common::run(Command::new(&readelf).arg("--notes").arg(&path));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{text}");
        for want in ["Version: 1.0", "Producer: LLVM", "Producer version: 14.0.6", "NT_LLVM_OPENMP_OFFLOAD_VERSION"] {
            assert!(text.contains(want), "{bits}{encoding}: no {want:?} in\n{text}");
        }
        assert_eq!(text.matches("LLVMOMPOFFLOAD").count(), 3, "{text}");
    }
}

#[test]
#[cfg_attr(not(all(has_llvm14, has_llvm19)), ignore = "needs LLVM 14 and 19: run scripts/install-reference-llvm.sh")]
fn shared_libraries_with_symbols_are_noted_like_llvm14s() {
    // The symbol string table is rebuilt as llvm-objcopy 14 rebuilds it.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("k.c");
    fs::write(&src, "int kernel_counter;\nint add_one(int x) { return x + kernel_counter + 1; }\n").unwrap();
    let lib = tmp.path().join("libk.so");
    let o = common::run(
        Command::new(common::llvm_tool(14, "clang")).args(["-shared", "-fPIC", "-nostdlib", "-o"]).arg(&lib).arg(&src),
    );
    assert!(o.status.success(), "clang 14: {}", String::from_utf8_lossy(&o.stderr));
    same_as_llvm14(tmp.path(), &lib);
    // An AMDGPU code object as device links make them.
    let obj = tmp.path().join("k.o");
    let o = common::run(
        Command::new(common::llvm_tool(19, "clang"))
            .args(["--target=amdgcn-amd-amdhsa", "-mcpu=gfx906", "-nogpulib", "-O2", "-c", "-o"])
            .arg(&obj)
            .arg(&src),
    );
    assert!(o.status.success(), "clang 19: {}", String::from_utf8_lossy(&o.stderr));
    let hsaco = tmp.path().join("k.hsaco");
    let o = common::run(Command::new(common::llvm_tool(19, "ld.lld")).arg("-shared").arg(&obj).arg("-o").arg(&hsaco));
    assert!(o.status.success(), "ld.lld 19: {}", String::from_utf8_lossy(&o.stderr));
    same_as_llvm14(tmp.path(), &hsaco);
}

#[test]
#[cfg_attr(not(has_llvm14), ignore = "needs LLVM 14: run scripts/install-reference-llvm.sh")]
fn a_non_elf_image_is_wrapped_unchanged_with_llvm14s_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let image = tmp.path().join("image.tgt");
    fs::write(&image, "Content of device file\n").unwrap();
    let (theirs, mine) = (tmp.path().join("theirs.bc"), tmp.path().join("ours.bc"));
    let warn14 = wrap(&common::llvm_tool(14, "clang-offload-wrapper"), &image, &theirs);
    let warn = wrap(Path::new(ours()), &image, &mine);
    let tail = |w: &str| w.split_once(": warning: ").map(|(_, t)| t.to_string()).unwrap_or_default();
    assert_eq!(tail(&warn), tail(&warn14));
    assert!(warn.ends_with("is not an ELF image, so notes cannot be added to it.\n"), "{warn}");
    assert_eq!(dis(&mine), dis(&theirs));
}
