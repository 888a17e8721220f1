//! CUDA pruning on the nvcc-made fixtures of the CLI crate
//! (`offload-cli/tests/fixtures/cuda/COMMANDS.md`).

use super::*;
use crate::prune::files::{Input, plan_file, verify_file};
use crate::prune::parse_target;
use offload_format::cuda::fat_binaries;
use offload_inspect::select::Gpu;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::cli_fixture(&format!("cuda/{name}"))
}

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), ..Default::default() }
}

/// Prunes and checks; returns the output and, per fat binary, the kept IDs.
fn prune_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, Vec<Vec<String>>) {
    let (input, pruned) = plan_file(data, rules).unwrap();
    let out = pruned.output_plan(data).to_vec();
    verify_file(&out, data, &input, &pruned).unwrap();
    let kept =
        pruned.units.iter().map(|u| u.entries.iter().filter(|e| e.kept).map(|e| e.id.clone()).collect()).collect();
    (out, kept)
}

/// Every entry of every fat binary in `data`: (kind, arch, raw bytes).
fn entries(data: &[u8]) -> Vec<(String, String, Vec<u8>)> {
    let mut out = Vec::new();
    for fb in fat_binaries(data) {
        let (_, fb) = fb.unwrap();
        for e in fb.entries() {
            let e = e.unwrap();
            let raw = fb.data[e.offset..e.payload_offset() + e.stored.len()].to_vec();
            out.push((e.header.kind().name(), e.header.arch().to_string(), raw));
        }
    }
    out
}

#[test]
fn targets_name_cubins_ptx_and_lto_ir() {
    assert_eq!(parse_target("sm_90a").unwrap(), "sm_90a");
    assert_eq!(parse_target("compute_100f").unwrap(), "compute_100f");
    assert_eq!(parse_target("lto_80").unwrap(), "lto_80");
    assert_eq!(parse_target("nvptx64-nvidia-cuda--sm_80").unwrap(), "sm_80");
    assert!(parse_target("sm_x").is_err());
    assert!(parse_target("compute_").is_err());
}

#[test]
fn keep_sm_keeps_the_cubin_only_and_the_file_shrinks() {
    let data = fixture("kern_nocompress.fatbin");
    let (out, kept) = prune_ok(&data, &keep(&["sm_80"]));
    assert_eq!(kept, [["cuda-elf-sm_80"]]);
    let before = entries(&data);
    let after = entries(&out);
    assert_eq!(after.len(), 1);
    // The kept entry is byte-identical, header and payload.
    assert!(before.iter().any(|e| e == &after[0]));
    assert_eq!((after[0].0.as_str(), after[0].1.as_str()), ("elf", "sm_80"));
    // A standalone fat binary has no address: written without padding.
    assert_eq!(out.len(), 16 + after[0].2.len());
    assert_eq!(u64::from_le_bytes(out[8..16].try_into().unwrap()), after[0].2.len() as u64);
}

#[test]
fn keep_compute_keeps_the_ptx_only() {
    let data = fixture("kern_nocompress.fatbin");
    let (out, kept) = prune_ok(&data, &keep(&["compute_90"]));
    assert_eq!(kept, [["cuda-ptx-sm_90"]]);
    assert_eq!(entries(&out).iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["ptx"]);
}

#[test]
fn keep_gpu_keeps_what_the_driver_loads() {
    let data = fixture("kern_nocompress.fatbin");
    let gpu = |g: &str| Rules { keep_gpu: vec![Gpu::parse(g).unwrap()], ..Default::default() };
    // sm_86: no sm_86 cubin, sm_80 is the nearest compatible one.
    assert_eq!(prune_ok(&data, &gpu("sm_86")).1, [["cuda-elf-sm_80"]]);
    assert_eq!(prune_ok(&data, &gpu("sm_90")).1, [["cuda-elf-sm_90"]]);
    // sm_120: no cubin runs, the compute_90 PTX is JIT-compiled.
    assert_eq!(prune_ok(&data, &gpu("sm_120")).1, [["cuda-ptx-sm_90"]]);
}

#[test]
fn drop_removes_only_what_it_names() {
    let data = fixture("kern_nocompress.fatbin");
    let rules = Rules { drop: vec![parse_target("sm_75").unwrap()], ..Default::default() };
    assert_eq!(prune_ok(&data, &rules).1, [["cuda-elf-sm_80", "cuda-elf-sm_90", "cuda-ptx-sm_90"]]);
}

#[test]
fn a_unit_left_empty_is_refused_unless_allowed() {
    let data = fixture("kern_nocompress.fatbin");
    let err = plan_file(&data, &keep(&["sm_86"])).unwrap_err();
    assert!(matches!(err, PruneError::Empty { .. }), "{err}");
    let rules = Rules { allow_empty: true, ..keep(&["sm_86"]) };
    let (out, _) = prune_ok(&data, &rules);
    assert_eq!(out.len(), 16);
    assert!(entries(&out).is_empty());
}

#[test]
fn concatenated_entries_go_only_whole() {
    let data = fixture("concat.fatbin");
    let (out, kept) = prune_ok(&data, &keep(&["sm_86"]));
    assert_eq!(kept, [["cuda-concat-sm_75+sm_80+sm_86+sm_90"]]);
    assert_eq!(entries(&out).len(), 1);
    // Dropping one cubin of four cannot split the compressed stream.
    let rules = Rules { drop: vec![parse_target("sm_75").unwrap()], ..Default::default() };
    let (out, _) = prune_ok(&data, &rules);
    assert_eq!(out, data);
}

#[test]
fn shared_library_is_pruned_in_place() {
    let data = fixture("libsmall.so");
    let (input, pruned) = plan_file(&data, &keep(&["sm_90", "compute_90"])).unwrap();
    assert_eq!(input, Input::Cuda);
    let out = pruned.output_plan(&data).to_vec();
    verify_file(&out, &data, &input, &pruned).unwrap();
    assert_eq!(out.len(), data.len());
    // Only bytes inside the fat binaries changed; they still start where
    // the .nvFatBinSegment records point.
    for (i, (a, b)) in data.iter().zip(&out).enumerate() {
        if a != b {
            assert!(pruned.units.iter().any(|u| (u.unit.offset..u.unit.offset + u.unit.extent).contains(&(i as u64))));
        }
    }
    let dropped: Vec<&str> =
        pruned.units.iter().flat_map(|u| &u.entries).filter(|e| !e.kept).map(|e| e.id.as_str()).collect();
    assert_eq!(dropped, ["cuda-elf-sm_75"]);
    assert!(pruned.freed_bytes() > 3000);
}

#[test]
fn relocatable_fat_binaries_keep_lto_ir_by_name() {
    let data = fixture("obj_lto.o");
    let (out, kept) = prune_ok(&data, &keep(&["lto_80"]));
    assert_eq!(kept, [["cuda-nvvm-sm_80"]]);
    assert_eq!(out.len(), data.len());
}

#[test]
fn damaged_fat_binaries_are_errors() {
    let mut data = fixture("kern_nocompress.fatbin");
    // An entry whose payload size reaches past the end.
    data[16 + 8..16 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(plan_file(&data, &keep(&["sm_80"])).is_err());
    for cut in [0, 3, 15, 17, 80, 500] {
        let data = fixture("kern_nocompress.fatbin");
        let _ = plan_file(&data[..cut], &keep(&["sm_80"]));
    }
}

#[test]
fn a_record_pointing_inside_a_fat_binary_stops_the_prune() {
    let mut data = fixture("libsmall.so");
    let file = ElfFile::parse(&data).unwrap();
    let seg = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".nvFatBinSegment").unwrap();
    let at = file.sections[seg].offset as usize + 8;
    let pointer = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
    data[at..at + 8].copy_from_slice(&(pointer + 16).to_le_bytes());
    let err = plan_file(&data, &keep(&["sm_90"])).unwrap_err();
    assert!(matches!(err, PruneError::Dangling { record: 0, .. }), "{err}");
}

#[test]
fn relocations_inside_a_fat_binary_section_stop_the_prune() {
    let mut data = fixture("obj_lto.o");
    let file = ElfFile::parse(&data).unwrap();
    let name = |i: usize| file.section_name(i).unwrap().to_vec();
    let target = (1..file.sections.len()).find(|&i| name(i) == b"__nv_relfatbin").unwrap();
    let rela = (1..file.sections.len()).find(|&i| file.sections[i].sh_type == offload_format::elf::SHT_RELA).unwrap();
    // sh_info of the relocation section (ELF64: offset 44 in the header).
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let at = shoff + rela * 64 + 44;
    data[at..at + 4].copy_from_slice(&(target as u32).to_le_bytes());
    let err = plan_file(&data, &keep(&["sm_90"])).unwrap_err();
    assert!(err.to_string().contains("relocations apply inside"), "{err}");
}

#[test]
fn suffixes_count_in_names_and_follow_the_driver_for_gpus() {
    let data = fixture("suffix.fatbin");
    // sm_90 names no entry here: only sm_90a exists.
    assert!(matches!(plan_file(&data, &keep(&["sm_90"])).unwrap_err(), PruneError::Empty { .. }));
    assert_eq!(prune_ok(&data, &keep(&["sm_90a", "compute_120"])).1, [["cuda-elf-sm_90a", "cuda-ptx-sm_120"]]);
    // A family cubin (sm_100f) runs on sm_103.
    let rules = Rules { keep_gpu: vec![Gpu::parse("sm_103").unwrap()], ..Default::default() };
    assert_eq!(prune_ok(&data, &rules).1, [["cuda-elf-sm_100f"]]);
}
