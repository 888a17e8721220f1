//! `prune` on COFF objects built by clang 22 for x86_64-pc-windows-msvc
//! (crates/offload-cli/tests/fixtures/pe, scripts/make-pe-fixtures.sh).

use super::*;
use crate::prune::cut_file::plan_file_cut;
use crate::prune::files::{Input, plan_file, verify_file, zero_output_plan};
use crate::prune::{Rules, parse_target};
use offload_format::coff::{ObjectView, SectionChecksum};

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/pe/", $name))
    };
}

fn keep(target: &str) -> Rules {
    Rules { keep: vec![parse_target(target).unwrap()], ..Default::default() }
}

fn kept(pruned: &Pruned) -> Vec<String> {
    pruned.units.iter().flat_map(|u| u.entries.iter().filter(|e| e.kept).map(|e| e.id.clone())).collect()
}

/// The checksum stored in the definition of section `name`, and the one
/// its bytes give.
fn checksums(data: &[u8], name: &[u8]) -> (u32, u32) {
    let v = ObjectView::read(data).unwrap();
    let s = v.sections.iter().find(|s| s.name == name).unwrap();
    let def = v.symbols.iter().find(|d| d.name == name && d.aux == 1).unwrap();
    let (o, l) = s.raw_range().unwrap();
    let stored = u32_le(data, def.offset + 18 + 8).unwrap();
    (stored, SectionChecksum::of(&data[o as usize..(o + l) as usize]))
}

/// The entry IDs `prune` reads from `data` (all kept with no rule).
fn ids(data: &[u8]) -> Vec<String> {
    let (_, p) = plan_file(data, &Rules { allow_empty: true, ..Default::default() }).unwrap();
    p.units.iter().flat_map(|u| u.entries.iter().map(|e| e.id.clone())).collect()
}

#[test]
fn clang_writes_the_checksum_this_crate_computes() {
    for (data, name) in [
        (&fixture!("hip.obj")[..], &b".hip_fatbin"[..]),
        (fixture!("cuda.obj"), b".nv_fatbin"),
        (fixture!("cuda_rdc.obj"), b"__nv_relfatbin"),
    ] {
        let (stored, computed) = checksums(data, name);
        assert_ne!(stored, 0);
        assert_eq!(stored, computed, "{}", String::from_utf8_lossy(name));
    }
}

#[test]
fn zero_mode_rewrites_the_fat_binary_and_its_checksum_only() {
    for (data, name, target, want) in [
        (&fixture!("hip.obj")[..], &b".hip_fatbin"[..], "gfx90a", vec!["hipv4-amdgcn-amd-amdhsa--gfx90a"]),
        (fixture!("cuda.obj"), b".nv_fatbin", "sm_89", vec!["cuda-elf-sm_89"]),
        (fixture!("cuda_rdc.obj"), b"__nv_relfatbin", "sm_89", vec!["cuda-elf-sm_89"]),
    ] {
        let (input, pruned) = plan_file(data, &keep(target)).unwrap();
        assert!(matches!(input, Input::Coff(_)), "{input:?}");
        let device: Vec<String> = kept(&pruned).into_iter().filter(|id| !id.starts_with("host")).collect();
        assert_eq!(device, want);
        let out = zero_output_plan(data, &input, &pruned).to_vec();
        assert_eq!(out.len(), data.len());
        verify_file(&out, data, &input, &pruned).unwrap();
        let (stored, computed) = checksums(&out, name);
        assert_eq!(stored, computed);
        assert_ne!(stored, checksums(data, name).0, "the section changed, so does its checksum");
        // The plain output (checksum not rewritten) fails the check.
        let stale = pruned.output_plan(data).to_vec();
        assert!(verify_file(&stale, data, &input, &pruned).is_err());
        let read_back: Vec<String> = ids(&out).into_iter().filter(|id| !id.starts_with("host")).collect();
        assert_eq!(read_back, want);
    }
}

#[test]
fn cut_mode_shortens_the_section_and_moves_what_follows() {
    for (data, name, target) in [
        (&fixture!("hip.obj")[..], &b".hip_fatbin"[..], "gfx90a"),
        (fixture!("cuda.obj"), b".nv_fatbin", "sm_80"),
        (fixture!("cuda_rdc.obj"), b"__nv_relfatbin", "sm_80"),
    ] {
        let (input, pruned) = plan_file(data, &keep(target)).unwrap();
        let cut = plan_file_cut(data, &input, &pruned).unwrap().unwrap();
        let out = cut.output_plan(data, &pruned).to_vec();
        assert!(out.len() < data.len() - 1000, "{} -> {}", data.len(), out.len());
        cut.verify(&out, data, &pruned).unwrap();
        let (stored, computed) = checksums(&out, name);
        assert_eq!(stored, computed);
        let v = ObjectView::read(&out).unwrap();
        let s = v.sections.iter().find(|s| s.name == name).unwrap();
        let def = v.symbols.iter().find(|d| d.name == name && d.aux == 1).unwrap();
        assert_eq!(u32_le(&out, def.offset + 18), Some(s.raw_size), "the definition's length follows");
        assert_eq!(kept(&plan_file(&out, &Rules::default()).unwrap().1), kept(&pruned));
        // A flipped byte of the output is caught.
        let mut bad = out.clone();
        let at = s.raw_offset as usize + 64;
        bad[at] ^= 1;
        assert!(cut.verify(&bad, data, &pruned).is_err());
    }
}

#[test]
fn cut_refuses_a_reference_into_the_middle_of_a_fat_binary() {
    let mut data = fixture!("hip.obj").to_vec();
    let v = ObjectView::read(&data).unwrap();
    let records = v.sections.iter().find(|s| s.name == b".hipFatBinSegment").unwrap();
    let (&(va, _, _), raw) = (records.relocations.first().unwrap(), records.raw_offset as usize);
    // The record's address field holds the addend of the relocation
    // through .hip_fatbin's symbol: make it point 16 bytes in.
    data[raw + va as usize] = 16;
    let (input, pruned) = plan_file(&data, &keep("gfx90a")).unwrap();
    let err = plan_file_cut(&data, &input, &pruned).unwrap_err();
    assert!(err.to_string().contains("not at its start"), "{err}");
    // Zero mode moves nothing and still applies.
    let out = zero_output_plan(&data, &input, &pruned).to_vec();
    verify_file(&out, &data, &input, &pruned).unwrap();
}

#[test]
fn archives_of_coff_objects_prune_member_by_member() {
    let data = fixture!("kernels.lib");
    let rules =
        Rules { keep: vec![parse_target("sm_89").unwrap(), parse_target("gfx90a").unwrap()], ..Default::default() };
    let (input, pruned) = plan_file(data, &rules).unwrap();
    assert!(matches!(input, Input::Archive { members: 2, .. }), "{input:?}");
    let device: Vec<String> = kept(&pruned).into_iter().filter(|id| !id.starts_with("host")).collect();
    assert_eq!(device, ["cuda-elf-sm_89", "hipv4-amdgcn-amd-amdhsa--gfx90a"]);
    let out = zero_output_plan(data, &input, &pruned).to_vec();
    assert_eq!(out.len(), data.len());
    verify_file(&out, data, &input, &pruned).unwrap();
    // Each member's section checksums follow its rewritten section.
    let Input::Archive { coff, .. } = &input else { unreachable!() };
    assert_eq!(coff.checksums.len(), 2);
    for &(at, len, field) in &coff.checksums {
        let stored = u32_le(&out, field as usize).unwrap();
        assert_eq!(stored, SectionChecksum::of(&out[at as usize..(at + len) as usize]));
    }
    assert!(verify_file(&pruned.output_plan(data).to_vec(), data, &input, &pruned).is_err());
}

#[test]
fn a_hip_rdc_fat_object_loses_its_dropped_sections() {
    let data = fixture!("hip_rdc.obj");
    let (input, pruned) = plan_file(data, &keep("gfx90a")).unwrap();
    assert_eq!(input, Input::FatObject);
    let out = pruned.output_plan(data).to_vec();
    assert!(out.len() < data.len());
    verify_file(&out, data, &input, &pruned).unwrap();
    let names: Vec<Vec<u8>> = ObjectView::read(&out).unwrap().sections.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&b"__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a".to_vec()));
    assert!(!names.iter().any(|n| n.ends_with(b"gfx1100")));
}

/// Hostile objects: every 32-bit field of the headers, section table and
/// symbol table of a HIP and a CUDA object set to 0, all-ones and 2^31, one
/// at a time; planning, writing and checking either mode gives a result
/// or an error, never a panic, and whatever passes its check is written.
#[test]
fn damaged_objects_give_errors_not_panics() {
    for data in [&fixture!("hip.obj")[..], fixture!("cuda_rdc.obj")] {
        let v = ObjectView::read(data).unwrap();
        let symbols = v.symbol_table as usize..data.len().min(v.symbol_table as usize + 18 * 40);
        let offsets = (0..0x200usize).step_by(2).chain(symbols.step_by(2));
        for at in offsets {
            for value in [0u32, u32::MAX, 1 << 31] {
                let mut bad = data.to_vec();
                let Some(field) = bad.get_mut(at..at + 4) else { continue };
                field.copy_from_slice(&value.to_le_bytes());
                let Ok((input, pruned)) = plan_file(&bad, &Rules { allow_empty: true, ..keep("sm_80") }) else {
                    continue;
                };
                let out = zero_output_plan(&bad, &input, &pruned).to_vec();
                let _ = verify_file(&out, &bad, &input, &pruned);
                if let Ok(Some(cut)) = plan_file_cut(&bad, &input, &pruned) {
                    let out = cut.output_plan(&bad, &pruned).to_vec();
                    let _ = cut.verify(&out, &bad, &pruned);
                }
            }
        }
    }
}
