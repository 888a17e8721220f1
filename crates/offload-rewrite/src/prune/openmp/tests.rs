//! Zero-mode pruning of the clang-built OpenMP fixtures of
//! `layout::openmp`'s tests.

use super::*;
use offload_inspect::layout::openmp::IMAGE_RECORD_SIZE;
use offload_testkit::OPENMP_PROGRAMS as FIXTURES;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/omp/{name}"))
}
use crate::prune::parse_target;

fn rules(keep: &[&str], drop: &[&str]) -> Rules {
    let parse = |l: &[&str]| l.iter().map(|t| parse_target(t).unwrap()).collect();
    Rules { keep: parse(keep), drop: parse(drop), ..Default::default() }
}

/// Prunes `data`, checks the result, and returns it with the input's map.
fn prune_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, OpenMpMap, OpenMpPruned) {
    let map = OpenMpMap::read(data).unwrap();
    let pruned = plan(&map, rules).unwrap();
    let out = pruned.output_plan(data).to_vec();
    verify(&out, data, &map, &pruned).unwrap();
    (out, map, pruned)
}

fn word(data: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(data[at as usize..at as usize + 8].try_into().unwrap())
}

#[test]
fn triples_and_target_ids_name_images() {
    let r = rules(&["x86_64-pc-linux-gnu"], &[]);
    assert!(r.keeps_image("x86_64-pc-linux-gnu", "") && !r.keeps_image("amdgcn-amd-amdhsa", "gfx90a"));
    // The vendor is spelling: pc and unknown are the same target.
    assert!(rules(&["x86_64-unknown-linux-gnu"], &[]).keeps_image("x86_64-pc-linux-gnu", ""));
    let r = rules(&["gfx90a"], &[]);
    assert!(r.keeps_image("amdgcn-amd-amdhsa", "gfx90a") && r.keeps_image("amdgcn-amd-amdhsa", "gfx90a:xnack+"));
    assert!(!r.keeps_image("amdgcn-amd-amdhsa", "gfx906") && !r.keeps_image("x86_64-pc-linux-gnu", ""));
    let r = rules(&[], &["amdgcn-amd-amdhsa"]);
    assert!(r.keeps_image("x86_64-pc-linux-gnu", "") && !r.keeps_image("amdgcn-amd-amdhsa", "gfx942"));
    let r = rules(&[], &["gfx90a:xnack-"]);
    assert!(r.keeps_image("amdgcn-amd-amdhsa", "gfx90a") && !r.keeps_image("amdgcn-amd-amdhsa", "gfx90a:xnack-"));
    // CUDA architectures are matched by name.
    let r = Rules { keep: vec!["sm_80".into()], ..Default::default() };
    assert!(r.keeps_image("nvptx64-nvidia-cuda", "sm_80") && !r.keeps_image("nvptx64-nvidia-cuda", "sm_90"));
    // Generic targets and entry IDs are not triples.
    assert!(as_triple("gfx9-generic").is_none() && as_triple("amdgcn-amd-amdhsa--gfx90a").is_none());
    assert_eq!(parse_target("nvptx64-nvidia-cuda").unwrap(), "nvptx64-nvidia-cuda");
}

#[test]
fn dropping_the_last_image_only_lowers_the_count() {
    for name in FIXTURES {
        let data = fixture(name);
        let (out, map, pruned) = prune_ok(&data, &rules(&["x86_64-pc-linux-gnu"], &[]));
        assert_eq!(pruned.descriptors[0].new_count, 1, "{name}");
        assert_eq!(pruned.dropped_bytes(), map.images[1].size);
        let back = OpenMpMap::read(&out).unwrap();
        assert_eq!(back.images, map.images[..1]);
        assert_eq!(back.descriptors[0].records, map.descriptors[0].records[..1]);
        // The spare slot now repeats the kept record: no pointer leads into
        // the zeroed image.
        let d = &map.descriptors[0];
        let spare = d.table.value + IMAGE_RECORD_SIZE;
        let r1 = &d.records[1];
        assert_eq!(r1.fields[0].addr, spare);
        for (f, w) in r1.fields.iter().enumerate() {
            let kept = &d.records[0].fields[f];
            match w.storage {
                Storage::Relr | Storage::Absolute => assert_eq!(word(&out, w.offset), kept.value, "{name}"),
                Storage::Relative { .. } => {
                    assert_eq!(word(&out, w.rela_entry.unwrap() + 16), kept.value, "{name}");
                }
                Storage::Symbolic { .. } => unreachable!(),
            }
        }
    }
}

#[test]
fn dropping_the_first_image_moves_the_second_record_down() {
    for name in FIXTURES {
        let data = fixture(name);
        let (out, map, pruned) = prune_ok(&data, &rules(&[], &["x86_64-pc-linux-gnu"]));
        assert_eq!(pruned.dropped(), 1);
        let back = OpenMpMap::read(&out).unwrap();
        assert_eq!(back.images, map.images[1..]);
        let d = &back.descriptors[0];
        assert_eq!((d.count, d.records.len(), d.records[0].image), (1, 1, 0));
        assert_eq!(d.records[0].fields[0].value, map.images[1].start, "{name}");
        assert_eq!(d.records[0].fields[1].value, map.images[1].end, "{name}");
        // lld leaves zero in place; so does the rewrite (the addend rules).
        for (w, new) in map.descriptors[0].records[0].fields.iter().zip(&d.records[0].fields) {
            if matches!(w.storage, Storage::Relative { .. }) {
                assert_eq!(new.in_place, if w.in_place == 0 { 0 } else { new.value }, "{name}");
            }
        }
        // Only the table, its relocations, the count and the zeroed image
        // differ; the image's bytes are all zero.
        let im = &map.images[0];
        assert!(out[im.offset as usize..(im.offset + im.size) as usize].iter().all(|&b| b == 0));
        let changed = data.iter().zip(&out).filter(|(a, b)| a != b).count();
        assert!(changed < im.size as usize + 200, "{name}: {changed} bytes changed");
    }
}

#[test]
fn a_descriptor_left_without_images_is_refused_unless_allowed() {
    let data = fixture("gnu_pie");
    let map = OpenMpMap::read(&data).unwrap();
    let err = plan(&map, &rules(&["gfx942"], &[])).unwrap_err();
    assert!(matches!(err, OpenMpPruneError::Empty { .. }), "{err}");
    assert!(err.to_string().contains("x86_64-pc-linux-gnu, amdgcn-amd-amdhsa gfx90a"), "{err}");
    let allowed = Rules { allow_empty: true, ..rules(&["gfx942"], &[]) };
    let (out, _, pruned) = prune_ok(&data, &allowed);
    assert_eq!(pruned.descriptors[0].new_count, 0);
    let back = OpenMpMap::read(&out).unwrap();
    assert!(back.images.is_empty() && back.descriptors.is_empty());
    let gpu = offload_inspect::select::Gpu::parse("gfx90a").unwrap();
    let by_gpu = Rules { keep_gpu: vec![gpu], ..Default::default() };
    assert_eq!(plan(&map, &by_gpu), Err(OpenMpPruneError::KeepGpu));
}

#[test]
fn keeping_everything_changes_nothing_and_pruning_twice_is_pruning_once() {
    for name in FIXTURES {
        let data = fixture(name);
        let map = OpenMpMap::read(&data).unwrap();
        let all = plan(&map, &rules(&["x86_64-pc-linux-gnu", "gfx90a"], &[])).unwrap();
        assert!(all.edits.is_empty());
        assert_eq!(all.output_plan(&data).to_vec(), data);
        let (once, _, _) = prune_ok(&data, &rules(&["gfx90a"], &[]));
        let (twice, _, again) = prune_ok(&once, &rules(&["gfx90a"], &[]));
        assert!(again.edits.is_empty() && twice == once, "{name}");
    }
}

#[test]
fn the_check_catches_a_damaged_output() {
    let data = fixture("gnu_pie");
    let map = OpenMpMap::read(&data).unwrap();
    let pruned = plan(&map, &rules(&["gfx90a"], &[])).unwrap();
    let out = pruned.output_plan(&data).to_vec();
    verify(&out, &data, &map, &pruned).unwrap();
    let d = &map.descriptors[0];
    // A byte elsewhere, a zeroed byte, the count, a kept image byte.
    for at in [100, map.images[0].offset + 50, d.offset, map.images[1].offset + 200] {
        let mut bad = out.clone();
        bad[at as usize] ^= 1;
        assert!(matches!(verify(&bad, &data, &map, &pruned), Err(OpenMpPruneError::Verify(_))), "byte {at:#x}");
    }
}

#[test]
fn damaged_inputs_are_refused_or_pruned_into_outputs_that_pass_the_check() {
    for name in FIXTURES {
        let data = fixture(name);
        let mut pruned = 0;
        for (round, d) in offload_testkit::damage::damaged_copies(&data, 0x2545_f491_4f6c_dd1d, 300) {
            let Ok(map) = OpenMpMap::read(&d) else { continue };
            let Ok(p) = plan(&map, &rules(&[], &["x86_64-pc-linux-gnu"])) else { continue };
            let out = p.output_plan(&d).to_vec();
            verify(&out, &d, &map, &p).unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            pruned += 1;
        }
        assert!(pruned > 100, "{name}: only {pruned} mutated copies could be pruned");
    }
}

#[test]
fn images_registered_in_no_understood_way_are_kept_or_refused() {
    // Point record 1 past its image: the map refuses it. Then make the
    // table hold one record only: image 1 is unreferenced.
    let data = fixture("nopie_gnu");
    let map = OpenMpMap::read(&data).unwrap();
    let mut d = data.clone();
    let at = map.descriptors[0].offset as usize;
    d[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    let r1 = &map.descriptors[0].records[1].fields;
    for w in &r1[..2] {
        d[w.offset as usize..w.offset as usize + 8].fill(0);
    }
    let map = OpenMpMap::read(&d).unwrap();
    assert_eq!(map.unreferenced(), [1]);
    let err = plan(&map, &rules(&["x86_64-pc-linux-gnu"], &[])).unwrap_err();
    assert_eq!(err, OpenMpPruneError::Unregistered { offset: map.images[1].offset });
    // Keeping it is always safe.
    let kept = plan(&map, &Rules { allow_empty: true, ..rules(&["gfx90a"], &[]) }).unwrap();
    assert_eq!(kept.unreferenced, [1]);
    assert!(kept.images[1].kept && !kept.images[0].kept);
}

#[test]
fn records_that_bracket_the_whole_offload_binary_are_understood() {
    // Newer clang brackets the whole buffer when it is no OffloadBinary;
    // the map takes either convention.
    let data = fixture("nopie_gnu");
    let map = OpenMpMap::read(&data).unwrap();
    let mut d = data.clone();
    let r1 = &map.descriptors[0].records[1].fields;
    let im = &map.images[1];
    d[r1[0].offset as usize..r1[0].offset as usize + 8].copy_from_slice(&im.addr.to_le_bytes());
    d[r1[1].offset as usize..r1[1].offset as usize + 8].copy_from_slice(&(im.addr + im.size).to_le_bytes());
    let (_, map, _) = prune_ok(&d, &rules(&[], &["x86_64-pc-linux-gnu"]));
    assert_eq!(map.descriptors[0].records[1].image, 1);
}

#[test]
fn dropped_images_at_either_end_leave_the_section_extent() {
    for name in FIXTURES {
        let data = fixture(name);
        let map = OpenMpMap::read(&data).unwrap();
        let (x86, amd) = (&map.images[0], &map.images[1]);
        // The trailing amdgcn image: the section ends where x86_64's does.
        let (out, _, _) = prune_ok(&data, &rules(&["x86_64-pc-linux-gnu"], &[]));
        let after = OpenMpMap::read(&out).unwrap();
        assert_eq!((after.section_offset, after.section_size), (x86.offset, x86.size), "{name}");
        // The leading x86_64 image: the section starts at gfx90a's, same address.
        let (out, _, _) = prune_ok(&data, &rules(&["gfx90a"], &[]));
        let after = OpenMpMap::read(&out).unwrap();
        assert_eq!((after.section_offset, after.section_addr, after.section_size), (amd.offset, amd.addr, amd.size));
        assert_eq!(after.images.len(), 1);
        assert_eq!(out.len(), data.len(), "{name}: nothing moves");
    }
}
