//! Hostile input for every kind of file `prune` takes: damaged copies of
//! the CLI crate's fixtures give errors or checked outputs, never a panic.

use super::*;
use crate::prune::parse_target;

fn fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/../offload-cli/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

const FILES: [&str; 8] = [
    "cuda/kern_nocompress.fatbin",
    "cuda/concat.fatbin",
    "cuda/libsmall.so",
    "cuda/obj_lto.o",
    "objects/lib.a",
    "objects/fat-x86_64.o",
    "bundler/ccob-v2-zlib.ccob",
    "inspect/libfat.a",
];

/// Plans, writes and checks; the check must pass whenever planning did
/// (a plan the check then refuses would be a bug of the planner).
fn run(data: &[u8], rules: &Rules) -> Result<(), PruneError> {
    let (input, pruned) = plan_file(data, rules)?;
    let Some(out) = pruned.output_plan(data).try_to_vec() else { return Ok(()) };
    verify_file(&out, data, &input, &pruned).map_err(|e| panic!("planned, then refused by the check: {e}"))
}

fn rules() -> Rules {
    Rules {
        keep: ["sm_80", "compute_90", "gfx906"].iter().map(|t| parse_target(t).unwrap()).collect(),
        allow_empty: true,
        ..Default::default()
    }
}

#[test]
fn every_fixture_prunes_and_checks() {
    for name in FILES {
        let data = fixture(name);
        run(&data, &rules()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn damaged_inputs_never_panic() {
    let rules = rules();
    for name in FILES {
        let data = fixture(name);
        let step = (data.len() / 400).max(1);
        for at in (0..data.len()).step_by(step) {
            for value in [0x00, 0xff, data[at] ^ 0x80] {
                let mut bad = data.clone();
                bad[at] = value;
                let _ = run(&bad, &rules);
            }
        }
        for cut in (0..data.len()).step_by((data.len() / 50).max(1)) {
            let _ = run(&data[..cut], &rules);
        }
    }
}

#[test]
fn raw_files_shrink_and_archives_keep_their_size() {
    let rules = Rules { keep: vec![parse_target("gfx908").unwrap()], ..Default::default() };
    let data = fixture("bundler/ccob-v2-zlib.ccob");
    let (input, pruned) = plan_file(&data, &rules).unwrap();
    assert_eq!(input, Input::Bundle);
    assert!(pruned.output_plan(&data).len() < data.len() as u64);
    let data = fixture("objects/fat-x86_64.o");
    let (input, pruned) = plan_file(&data, &Rules { keep: vec!["gfx906".into()], ..Default::default() }).unwrap();
    assert_eq!(input, Input::FatObject);
    let out = pruned.output_plan(&data).to_vec();
    let ids: Vec<&[u8]> =
        offload_format::bundle::object::bundles(&out, fat_object::Format::Elf).unwrap().iter().map(|s| s.id).collect();
    assert_eq!(ids, [b"host-x86_64-unknown-linux-gnu-".as_slice(), b"hip-amdgcn-amd-amdhsa--gfx906"]);
    let data = fixture("objects/lib.a");
    let rules = Rules { drop: vec!["gfx908".into()], ..Default::default() };
    let (input, pruned) = plan_file(&data, &rules).unwrap();
    assert_eq!(input, Input::Archive { members: 3, untouched: Vec::new(), coff: Default::default() });
    assert_eq!(pruned.output_plan(&data).len(), data.len() as u64);
    assert_eq!(pruned.changed(), 1);
    // A member of OpenMP/new-driver images is reported, not rewritten.
    let data = fixture("inspect/libfat.a");
    let (input, _) = plan_file(&data, &Rules { keep: vec!["gfx906".into()], ..Default::default() }).unwrap();
    assert_eq!(input, Input::Archive { members: 1, untouched: vec!["newdrv.o".into()], coff: Default::default() });
}

#[test]
fn overlapping_and_touching_ranges_join() {
    assert_eq!(super::joined(vec![(50, 10), (0, 10), (5, 10), (15, 5), (58, 1)]), [(0, 20), (50, 10)]);
    assert_eq!(super::joined(vec![(0, 100), (10, 5)]), [(0, 100)]);
    assert!(super::joined(Vec::new()).is_empty());
}
