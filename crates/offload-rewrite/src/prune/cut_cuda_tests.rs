//! Cut-mode pruning of linked CUDA shared libraries (nvcc 13.5; GNU ld with
//! RELA and RELR, lld): the same cutter as HIP's, on `.nv_fatbin`.

use super::files::{Input, plan_file};
use super::*;
fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}
use offload_format::elf::segments;
use offload_inspect::layout::FatbinSection;

const FIXTURES: [&str; 3] = ["cuda/libheavy.so", "cuda/libheavy_relr.so", "cuda/libheavy_lld.so"];

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), ..Default::default() }
}

/// Plans as the CLI does (zero-mode plan, then the CUDA map), cuts,
/// checks; the output, the input's map and the cut.
fn cut_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, FileMap, CutPlan) {
    let (input, pruned) = plan_file(data, rules).unwrap();
    assert_eq!(input, Input::Cuda);
    let map = cuda::linked_map(data, &pruned).unwrap();
    let Cut::Planned(cut) = plan_cut(data, &map, &pruned).unwrap() else { panic!("too small to cut") };
    let out = cut.output_plan(data, &pruned).to_vec();
    verify_cut(&out, data, &map, &pruned, &cut).unwrap();
    (out, map, cut)
}

#[test]
fn linked_cuda_libraries_cut_to_one_cubin() {
    for name in FIXTURES {
        let data = fixture(name);
        let (out, map, cut) = cut_ok(&data, &keep(&["sm_80"]));
        assert_eq!(map.section, FatbinSection::Cuda);
        assert_eq!(out.len() as u64, data.len() as u64 - cut.removed, "{name}");
        // Three of four entries left: at least two of the three pages
        // they held, rounded to whole pages.
        assert!(cut.removed >= 2 * 4096 && cut.removed % 4096 == 0, "{name}: {:#x}", cut.removed);
        let new = FileMap::read_cuda(&out).unwrap();
        assert_eq!(new.units.len(), 1, "{name}");
        assert_eq!(new.units[0].section_offset, 0, "{name}");
        assert_eq!(new.fatbin_size, new.units[0].used, "{name}: .nv_fatbin is exactly the packed fat binary");
        // The record leads to it; the entries are the input's sm_80 cubin.
        assert_eq!(new.wrappers.len(), 1);
        assert_eq!(new.wrappers[0].pointer, new.fatbin_addr, "{name}");
        let fatbin = offload_format::cuda::FatBinary::parse(&out[new.units[0].offset as usize..], 0).unwrap();
        let archs: Vec<String> = fatbin.entries().map(|e| e.unwrap().header.arch().to_string()).collect();
        assert_eq!(archs, ["sm_80"], "{name}");
        segments::check_loads(&segments::read(&out).unwrap().1, out.len() as u64).unwrap();
    }
}

#[test]
fn relocatable_device_code_and_objects_are_not_cut() {
    // An rdc object: its map is refused (objects are not mapped for CUDA).
    let obj = offload_testkit::cli_fixture("cuda/obj_lto.o");
    let (_, pruned) = plan_file(&obj, &keep(&["sm_90"])).unwrap();
    let e = cuda::linked_map(&obj, &pruned).unwrap_err().to_string();
    assert!(e.contains("__nv_relfatbin"), "{e}");
    let obj = offload_testkit::cli_fixture("cuda/obj_sm80.o");
    let (_, pruned) = plan_file(&obj, &Rules::default()).unwrap();
    assert!(cuda::linked_map(&obj, &pruned).is_err());
}

#[test]
fn the_check_catches_damage_to_a_cut_cuda_output() {
    let data = fixture(FIXTURES[0]);
    let rules = keep(&["sm_90"]);
    let (_, pruned) = plan_file(&data, &rules).unwrap();
    let (out, map, cut) = cut_ok(&data, &rules);
    let wrapper = FileMap::read_cuda(&out).unwrap().wrappers[0].offset + 8;
    for at in [wrapper, cut.unit_offsets[0] + 100, cut.phdr_offset + 2 * 56 + 9] {
        let mut bad = out.clone();
        bad[at as usize] ^= 0x10;
        assert!(verify_cut(&bad, &data, &map, &pruned, &cut).is_err(), "damage at {at:#x} passed");
    }
}

#[test]
fn damaged_cuda_inputs_give_errors_not_panics() {
    for name in FIXTURES {
        let data = fixture(name);
        let tail = data.len() - 0x600;
        for at in (0..0x900).step_by(7).chain((tail..data.len()).step_by(5)) {
            let mut d = data.clone();
            d[at] ^= 0x5a;
            let Ok((Input::Cuda, pruned)) = plan_file(&d, &keep(&["sm_80"])) else { continue };
            let Ok(map) = cuda::linked_map(&d, &pruned) else { continue };
            if let Ok(Cut::Planned(cut)) = plan_cut(&d, &map, &pruned) {
                let out = cut.output_plan(&d, &pruned).to_vec();
                let _ = verify_cut(&out, &d, &map, &pruned, &cut);
            }
        }
    }
}
