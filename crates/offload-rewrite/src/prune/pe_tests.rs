//! Zero mode on PE images built here (scripts/make-pe-fixtures.sh).

use super::*;
use crate::prune::files::{plan_file, verify_file};
use crate::prune::{Rules, parse_target};

const HIP_DLL: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/pe/hip_kernels.dll"));
const CUDA_DLL: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/pe/cuda_kernels.dll"));

fn keep(target: &str) -> Rules {
    Rules { keep: vec![parse_target(target).unwrap()], ..Default::default() }
}

fn kept(pruned: &Pruned) -> Vec<String> {
    pruned.units.iter().flat_map(|u| &u.entries).filter(|e| e.kept).map(|e| e.id.clone()).collect()
}

#[test]
fn zero_mode_on_a_hip_dll_keeps_gfx90a_and_fixes_the_checksum() {
    let (input, pruned) = plan_file(HIP_DLL, &keep("gfx90a")).unwrap();
    let Input::Pe(pe) = &input else { panic!("{input:?}") };
    assert!(pe.checksum.is_some(), "the fixture is linked with /release");
    assert_eq!(pruned.changed(), 1);
    let ids = kept(&pruned);
    assert!(ids.iter().any(|i| i.ends_with("gfx90a")) && !ids.iter().any(|i| i.contains("gfx1100")), "{ids:?}");
    let out = output_plan(HIP_DLL, pe, &pruned).to_vec();
    assert_eq!(out.len(), HIP_DLL.len());
    verify_file(&out, HIP_DLL, &input, &pruned).unwrap();
    let image = PeImage::parse(&out).unwrap();
    assert_eq!(image.checksum, pe::checksum(&out, image.checksum_offset));
    assert_ne!(image.checksum, PeImage::parse(HIP_DLL).unwrap().checksum);
    // The plan without the checksum fix fails the check.
    let stale = pruned.output_plan(HIP_DLL).to_vec();
    assert!(verify_file(&stale, HIP_DLL, &input, &pruned).is_err());
    // So does a change outside the fat binaries.
    let mut other = out.clone();
    other[0x200] ^= 1;
    assert!(verify_file(&other, HIP_DLL, &input, &pruned).is_err());
}

#[test]
fn zero_mode_on_a_cuda_dll_keeps_sm_89() {
    let (input, pruned) = plan_file(CUDA_DLL, &keep("sm_89")).unwrap();
    let Input::Pe(pe) = &input else { panic!("{input:?}") };
    assert_eq!(pe.checksum, None);
    assert_eq!(kept(&pruned), ["cuda-elf-sm_89"]);
    let out = output_plan(CUDA_DLL, pe, &pruned).to_vec();
    verify_file(&out, CUDA_DLL, &input, &pruned).unwrap();
    assert_eq!(PeImage::parse(&out).unwrap().checksum, 0);
}

#[test]
fn a_record_pointing_inside_a_fat_binary_is_refused() {
    let image = PeImage::parse(HIP_DLL).unwrap();
    let record = image.records(b".hipFatB", HIP_RECORD).unwrap()[0];
    let mut b = HIP_DLL.to_vec();
    let moved = record.address + 16;
    b[record.offset + 8..record.offset + 16].copy_from_slice(&moved.to_le_bytes());
    assert!(matches!(plan_file(&b, &keep("gfx90a")), Err(PruneError::Dangling { .. })));
}

#[test]
fn patch_replaces_bytes_across_pieces() {
    let data = [1u8, 2, 3, 4, 5, 6];
    let mut plan = Plan::borrowed(&data[..3]);
    plan.zeros(2);
    plan.borrow(&data[3..]);
    let out = patch(plan, 2, &[9, 9, 9]).to_vec();
    assert_eq!(out, [1, 2, 9, 9, 9, 4, 5, 6]);
}

#[test]
fn cut_mode_shrinks_the_dlls_and_passes_its_check() {
    for (dll, target, kept_id) in [(HIP_DLL, "gfx90a", "gfx90a"), (CUDA_DLL, "sm_89", "sm_89")] {
        let (input, pruned) = plan_file(dll, &keep(target)).unwrap();
        let Input::Pe(pe) = &input else { panic!() };
        let cut = plan_pe_cut(dll, pe, &pruned).unwrap();
        let out = cut.output_plan(dll, &pruned).to_vec();
        assert!(out.len() < dll.len(), "{target}: {} -> {}", dll.len(), out.len());
        assert_eq!(out.len() as u64, dll.len() as u64 - cut.saved());
        cut.verify(&out, dll, &pruned).unwrap();
        // Read back: the output holds exactly the kept entries.
        let (_, again) = plan_file(&out, &Rules::default()).unwrap();
        assert_eq!(kept(&again), kept(&pruned), "{target}");
        assert!(kept(&again).iter().all(|id| id.ends_with(kept_id) || id.starts_with("host-")), "{target}");
        // A damaged output fails the check.
        let mut bad = out.clone();
        let at = cut.unit_offsets[0] as usize + 200;
        bad[at] ^= 0xff;
        assert!(cut.verify(&bad, dll, &pruned).is_err(), "{target}");
    }
}

/// `dll` with a certificate table appended and data directory 4 pointing
/// at it, the checksum recomputed when it was set: what a signing tool
/// leaves (a WIN_CERTIFICATE: length, revision 0x0200, type 2 = PKCS#7
/// signed data, then the signature bytes, padded to 8).
pub(crate) fn signed(dll: &[u8]) -> Vec<u8> {
    let mut out = dll.to_vec();
    let image = PeImage::parse(dll).unwrap();
    let at = out.len().next_multiple_of(8);
    out.resize(at, 0);
    let blob = b"not a real PKCS#7 signature, but where one would be";
    let len = (8 + blob.len()).next_multiple_of(8);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&0x0200u16.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(blob);
    out.resize(at + len, 0);
    let dir = image.directories_offset + 8 * pe::DIR_SECURITY;
    out[dir..dir + 4].copy_from_slice(&(at as u32).to_le_bytes());
    out[dir + 4..dir + 8].copy_from_slice(&(len as u32).to_le_bytes());
    if image.checksum != 0 {
        let sum = pe::checksum(&out, image.checksum_offset);
        out[image.checksum_offset..image.checksum_offset + 4].copy_from_slice(&sum.to_le_bytes());
    }
    out
}

#[test]
fn a_signed_image_loses_its_certificate_table_in_both_modes() {
    for (dll, target) in [(HIP_DLL, "gfx90a"), (CUDA_DLL, "sm_89")] {
        let data = signed(dll);
        let (input, pruned) = plan_file(&data, &keep(target)).unwrap();
        let Input::Pe(pe) = &input else { panic!("{input:?}") };
        let cert = pe.certificate.expect("the certificate table is found");
        assert_eq!(cert.offset + cert.size, data.len() as u64);
        // Zero mode: the input's bytes up to the certificate table, but
        // for the fat binaries, the directory and the checksum.
        let out = output_plan(&data, pe, &pruned).to_vec();
        assert_eq!(out.len() as u64, cert.offset);
        verify_file(&out, &data, &input, &pruned).unwrap();
        let image = PeImage::parse(&out).unwrap();
        let d = image.directories[pe::DIR_SECURITY];
        assert_eq!((d.rva, d.size), (0, 0));
        if pe.checksum.is_some() {
            assert_eq!(image.checksum, pe::checksum(&out, image.checksum_offset));
        }
        // Keeping the table (the old behaviour) fails the check.
        let kept_table = pruned.output_plan(&data).to_vec();
        assert!(verify_file(&kept_table, &data, &input, &pruned).is_err());
        // Cut mode drops it too.
        let cut = plan_pe_cut(&data, pe, &pruned).unwrap();
        let out = cut.output_plan(&data, &pruned).to_vec();
        cut.verify(&out, &data, &pruned).unwrap();
        assert_eq!(PeImage::parse(&out).unwrap().directories[pe::DIR_SECURITY].size, 0);
        assert!((out.len() as u64) < cert.offset);
    }
}

#[test]
fn a_certificate_table_before_the_end_is_refused() {
    let mut data = signed(HIP_DLL);
    data.extend_from_slice(&[0; 16]);
    let err = plan_file(&data, &keep("gfx90a")).unwrap_err();
    assert!(err.to_string().contains("certificate table"), "{err}");
}

#[test]
fn a_section_lying_inside_a_fat_binary_section_refuses_the_cut() {
    // Found by the `pe_image` fuzz target: a section whose file bytes lie
    // inside `.hip_fat` would lose them to the cut. The planner refuses;
    // zero mode (which moves nothing) still applies.
    let image = offload_format::coff::pe::PeImage::parse(HIP_DLL).unwrap();
    let fat = image.sections.iter().find(|s| s.name.starts_with(b".hip_fat")).unwrap();
    let other = image.sections.iter().find(|s| !s.name.starts_with(b".hip") && s.raw_size > 0).unwrap();
    let mut dll = HIP_DLL.to_vec();
    let inside = fat.raw_offset + fat.raw_size / 2;
    dll[other.header_offset + 20..other.header_offset + 24].copy_from_slice(&inside.to_le_bytes());
    let (input, pruned) = plan_file(&dll, &keep("gfx90a")).unwrap();
    let Input::Pe(pe) = &input else { panic!() };
    let Err(err) = plan_pe_cut(&dll, pe, &pruned) else { panic!("the cut is refused") };
    assert!(err.to_string().contains("two sections share file bytes"), "{err}");
}
