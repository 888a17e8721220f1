//! Cut-mode pruning of the clang-built fixtures of `layout`'s tests.

use super::*;
use crate::layout::tests::fixture;

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), ..Default::default() }
}

/// Prunes and cuts `data`, checks the output, returns it and the cut.
fn cut_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, CutPlan) {
    let map = FileMap::read(data).unwrap();
    let pruned = plan(data, &map, rules).unwrap();
    let Cut::Planned(cut) = plan_cut(data, &map, &pruned).unwrap() else { panic!("too small to cut") };
    let out = cut.output_plan(data, &pruned).to_vec();
    verify_cut(&out, data, &map, &pruned, &cut).unwrap();
    (out, cut)
}

#[test]
fn every_layout_cuts_and_checks() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu"] {
        let data = fixture(name);
        let (out, cut) = cut_ok(&data, &keep(&["gfx906"]));
        eprintln!("{name}: {} -> {} removed {:#x}", data.len(), out.len(), cut.removed);
        assert_eq!(out.len() as u64, data.len() as u64 - cut.removed, "{name}");
        assert!(cut.removed >= 2 * 4096 && cut.removed % 4096 == 0, "{name}");
    }
}
