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
