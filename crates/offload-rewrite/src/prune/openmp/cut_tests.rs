//! Cut-mode pruning of the clang-built OpenMP fixtures.

use super::*;
use offload_testkit::OPENMP_PROGRAMS as FIXTURES;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/omp/{name}"))
}
use crate::prune::parse_target;
use offload_format::elf::segments;

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), ..Default::default() }
}

/// Cuts `data`, checks the output; the output, the map and the plan.
fn cut_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, OpenMpMap, OpenMpPruned, CutPlan) {
    let map = OpenMpMap::read(data).unwrap();
    let planned = plan_cut(data, &map, rules).unwrap();
    let Cut::Planned(cut) = planned.cut else { panic!("too small to cut") };
    let out = output_plan(&cut, data, &planned.pruned).to_vec();
    verify_cut(&out, data, &map, &planned.pruned, &cut).unwrap();
    (out, map, planned.pruned, cut)
}

#[test]
fn every_layout_cuts_the_dropped_image_out() {
    for name in FIXTURES {
        let data = fixture(name);
        // The x86_64 image (15.7 KiB) goes, gfx90a stays.
        let (out, map, pruned, cut) = cut_ok(&data, &keep(&["gfx90a"]));
        assert_eq!(out.len() as u64, data.len() as u64 - cut.removed, "{name}");
        assert!(cut.removed >= 2 * 4096 && cut.removed % 4096 == 0, "{name}");
        let new = OpenMpMap::read(&out).unwrap();
        assert_eq!(new.images.len(), 1, "{name}");
        let kept = &map.images[1];
        assert_eq!((new.images[0].arch.as_str(), new.images[0].offset), ("gfx90a", map.section_offset), "{name}");
        assert_eq!(new.section_size, kept.size, "{name}: the section is the kept image, nothing else");
        // The record brackets the inner image at its new place.
        let record = &new.descriptors[0].records[0];
        assert_eq!(record.fields[0].value - new.section_addr, kept.start - kept.addr, "{name}");
        assert_eq!(record.fields[1].value - record.fields[0].value, kept.end - kept.start, "{name}");
        assert_eq!(new.descriptors[0].count, 1);
        assert_eq!(pruned.descriptors[0].new_count, 1);
        segments::check_loads(&segments::read(&out).unwrap().1, out.len() as u64).unwrap();
    }
}

#[test]
fn dropping_the_small_image_is_not_worth_a_cut() {
    // gfx90a's 6.8 KiB image leaves less than two pages once aligned.
    let data = fixture("lld_pie");
    let map = OpenMpMap::read(&data).unwrap();
    let planned = plan_cut(&data, &map, &keep(&["x86_64-pc-linux-gnu"])).unwrap();
    assert!(matches!(planned.cut, Cut::TooSmall { minimum: 8192, .. }), "{:?}", planned.cut);
    assert!(planned.output_plan(&data).is_none());
}

#[test]
fn a_descriptor_left_empty_is_refused() {
    let data = fixture("gnu_pie");
    let map = OpenMpMap::read(&data).unwrap();
    let rules = Rules {
        drop: vec![parse_target("gfx90a").unwrap(), parse_target("x86_64-pc-linux-gnu").unwrap()],
        allow_empty: true,
        ..Default::default()
    };
    let e = plan_cut(&data, &map, &rules).unwrap_err().to_string();
    assert!(e.contains("would register no image"), "{e}");
}

#[test]
fn the_check_catches_damage_to_a_cut_openmp_output() {
    let data = fixture("gnu_pie");
    let (out, map, pruned, cut) = cut_ok(&data, &keep(&["gfx90a"]));
    let new = OpenMpMap::read(&out).unwrap();
    let record = &new.descriptors[0].records[0];
    let damage = [
        ("the image", cut.unit_offsets[1] + 0x200),
        ("ImageStart in place", record.fields[0].offset),
        ("the count", new.descriptors[0].offset),
        ("a PT_LOAD", cut.phdr_offset + 2 * 56 + 9),
    ];
    for (what, at) in damage {
        let mut bad = out.clone();
        bad[at as usize] ^= 0x10;
        assert!(verify_cut(&bad, &data, &map, &pruned, &cut).is_err(), "{what} damaged, the check passed");
    }
}

#[test]
fn damaged_openmp_inputs_give_errors_not_panics() {
    for name in FIXTURES {
        let data = fixture(name);
        let tail = data.len() - 0x600;
        for at in (0..0x800).step_by(5).chain((tail..data.len()).step_by(5)) {
            let mut d = data.clone();
            d[at] ^= 0x5a;
            let Ok(map) = OpenMpMap::read(&d) else { continue };
            let Ok(planned) = plan_cut(&d, &map, &keep(&["gfx90a"])) else { continue };
            if let Cut::Planned(cut) = &planned.cut {
                let out = output_plan(cut, &d, &planned.pruned).to_vec();
                let _ = verify_cut(&out, &d, &map, &planned.pruned, cut);
            }
        }
    }
}
