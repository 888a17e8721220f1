//! The PE reader on images built here with lld-link 22
//! (scripts/make-pe-fixtures.sh) and on hostile variants of them.

use super::*;

const HIP_DLL: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/pe/hip_kernels.dll"));
const APP: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/pe/app.exe"));
const HIPF: u32 = 0x4849_5046;

fn put32(data: &mut [u8], at: usize, v: u32) {
    data[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn reads_the_headers_and_sections() {
    let pe = PeImage::parse(HIP_DLL).unwrap();
    assert!(pe.is_64 && pe.is_dll());
    assert_eq!(pe.machine, 0x8664);
    assert_eq!(pe.image_base, 0x1_8000_0000);
    let names: Vec<&[u8]> = pe.sections.iter().map(|s| s.name()).collect();
    assert!(names.contains(&&b".hip_fat"[..]) && names.contains(&&b".hipFatB"[..]), "{names:?}");
    let fat = pe.section(b".hip_fat").unwrap();
    assert!(pe.section_data(fat).starts_with(b"__CLANG_OFFLOAD_BUNDLE__"));
    assert!(!PeImage::parse(APP).unwrap().is_dll());
}

#[test]
fn the_checksum_is_the_one_lld_link_wrote() {
    // hip_kernels.dll is linked with /release, which sets the checksum.
    let pe = PeImage::parse(HIP_DLL).unwrap();
    assert_ne!(pe.checksum, 0);
    assert_eq!(checksum(HIP_DLL, pe.checksum_offset), pe.checksum);
    // The same, fed in odd pieces and zero runs.
    let mut c = Checksum::new(pe.checksum_offset);
    let (a, rest) = HIP_DLL.split_at(1001);
    let (b, rest) = rest.split_at(3);
    c.update(a);
    c.update(b);
    let zeros = rest.iter().take_while(|&&x| x == 0).count();
    c.zeros(zeros as u64);
    c.update(&rest[zeros..]);
    assert_eq!(c.finish(), pe.checksum);
    // One changed byte changes it.
    let mut other = HIP_DLL.to_vec();
    let at = pe.section(b".hip_fat").unwrap().raw_offset as usize + 100;
    other[at] ^= 1;
    assert_ne!(checksum(&other, pe.checksum_offset), pe.checksum);
}

#[test]
fn reads_imports() {
    let dll = PeImage::parse(HIP_DLL).unwrap().imports().unwrap();
    assert_eq!(dll, [Import { dll: "amdhip64_6.dll".into(), delay: false }]);
    let app = PeImage::parse(APP).unwrap().imports().unwrap();
    assert_eq!(app, [Import { dll: "hip_kernels.dll".into(), delay: true }]);
}

#[test]
fn records_resolve_through_base_relocations() {
    let pe = PeImage::parse(HIP_DLL).unwrap();
    let records = pe.records(b".hipFatB", HIPF).unwrap();
    assert_eq!(records.len(), 1);
    let fat = pe.section(b".hip_fat").unwrap();
    assert_eq!(records[0].target, Some(fat.virtual_address));
    assert!(records[0].relocated);
    assert!(pe.base_relocations().unwrap().iter().any(|&(_, k)| k == REL_BASED_DIR64));
}

#[test]
fn hostile_images_are_errors_not_panics() {
    let pe = PeImage::parse(HIP_DLL).unwrap();
    // Truncated anywhere in the headers.
    for len in [0, 2, 0x3c, 0x40, 0x80, pe.optional_offset + 10, pe.sections[0].header_offset + 20] {
        assert!(PeImage::parse(&HIP_DLL[..len]).is_err(), "{len}");
    }
    // e_lfanew far past the end.
    let mut far = HIP_DLL.to_vec();
    put32(&mut far, 0x3c, u32::MAX);
    assert!(matches!(PeImage::parse(&far), Err(PeError::NotPe(_))));
    // A section whose raw data lies outside the file.
    let mut outside = HIP_DLL.to_vec();
    put32(&mut outside, pe.sections[1].header_offset + 20, u32::MAX - 8);
    assert!(PeImage::parse(&outside).is_err());
    // A base relocation block with an odd size, one with a size past the
    // table, one smaller than its header.
    let reloc = pe.directory(DIR_BASERELOC).unwrap();
    let at = pe.rva_to_offset(reloc.rva).unwrap();
    for size in [9, 0x10_0000, 4] {
        let mut b = HIP_DLL.to_vec();
        put32(&mut b, at + 4, size);
        assert!(PeImage::parse(&b).unwrap().base_relocations().is_err(), "{size}");
        assert!(PeImage::parse(&b).unwrap().records(b".hipFatB", HIPF).is_err());
    }
    // An import table pointing outside the file; an import descriptor
    // naming nothing.
    let dir = pe.directories_offset + 8 * DIR_IMPORT;
    let mut b = HIP_DLL.to_vec();
    put32(&mut b, dir, 0x7fff_0000);
    assert!(PeImage::parse(&b).unwrap().imports().is_err());
    let desc = pe.rva_to_offset(pe.directory(DIR_IMPORT).unwrap().rva).unwrap();
    let mut b = HIP_DLL.to_vec();
    put32(&mut b, desc + 12, 0x7fff_0000);
    assert!(PeImage::parse(&b).unwrap().imports().is_err());
}

#[test]
fn import_descriptors_that_never_end_are_bounded() {
    // Every descriptor of a table that runs to the end of the file names
    // the same DLL: the list stays one name long and the walk stops at the
    // end of the file.
    let pe = PeImage::parse(HIP_DLL).unwrap();
    let desc = pe.rva_to_offset(pe.directory(DIR_IMPORT).unwrap().rva).unwrap();
    let mut b = HIP_DLL.to_vec();
    let first: Vec<u8> = b[desc..desc + 20].to_vec();
    let mut at = desc;
    while at + 20 <= b.len() {
        b[at..at + 20].copy_from_slice(&first);
        at += 20;
    }
    let r = PeImage::parse(&b).map(|p| p.imports());
    // The section table may be overwritten too: either way no panic, and
    // no endless list.
    if let Ok(Ok(list)) = r {
        assert!(list.len() <= 1);
    }
}
