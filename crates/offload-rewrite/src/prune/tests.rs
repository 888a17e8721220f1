//! Zero-mode pruning of the clang-built fixtures of `layout`'s tests.

use super::*;
fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), ..Default::default() }
}

/// Prunes `data`, checks the result, and returns it with its plan.
fn prune_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, FileMap, Vec<UnitChange<'static>>) {
    let map = FileMap::read(data).unwrap();
    let pruned = plan(data, &map, rules).unwrap();
    let out = pruned.output_plan(data).to_vec();
    verify(&out, data, &map, &pruned).unwrap();
    let changes = pruned.units.iter().map(|u| UnitChange { replacement: None, ..u.clone() }).collect();
    (out, map, changes)
}

/// Ranges of the file that may differ: the extents of rewritten units.
fn only_extents_differ(a: &[u8], b: &[u8], changes: &[UnitChange]) {
    assert_eq!(a.len(), b.len());
    let inside = |i: usize| {
        changes.iter().any(|c| (c.unit.offset as usize..(c.unit.offset + c.unit.extent) as usize).contains(&i))
    };
    for i in 0..a.len() {
        if a[i] != b[i] {
            assert!(inside(i), "byte {i:#x} outside every fat binary changed");
        }
    }
}

fn kept_ids<'c>(c: &'c UnitChange) -> Vec<&'c str> {
    c.entries.iter().filter(|e| e.kept).map(|e| e.id.as_str()).collect()
}

#[test]
fn bundles_keep_the_host_and_every_compatible_entry() {
    let data = fixture("gnu_rela.so");
    let (out, _, changes) = prune_ok(&data, &keep(&["gfx90a"]));
    only_extents_differ(&data, &out, &changes);
    for c in &changes {
        assert_eq!(
            kept_ids(c),
            [
                "host-x86_64-unknown-linux--",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
            ]
        );
        // The kept bundle is laid out as LLVM's bundler would write it:
        // payloads 4096-aligned from the start, the last one ending it.
        let start = c.unit.offset as usize;
        let entries = binary::read(&out[start..start + c.new_used as usize]).unwrap().unwrap();
        assert!(entries.iter().all(|e| e.offset % 4096 == 0));
        assert!(entries.windows(2).all(|w| w[0].offset <= w[1].offset));
        assert_eq!(entries.last().map(|e| e.offset + e.payload.len() as u64), Some(c.new_used));
        assert!(out[start + c.new_used as usize..start + c.unit.extent as usize].iter().all(|&b| b == 0));
    }
    assert!(changes.iter().all(|c| c.dropped_bytes() > 0 && c.freed_bytes() >= 4096));
}

#[test]
fn every_pointer_storage_prunes_alike() {
    for name in ["lld_relr.so", "nopie_gnu", "tu1.o"] {
        let data = fixture(name);
        let (out, _, changes) = prune_ok(&data, &keep(&["gfx90a:xnack-"]));
        only_extents_differ(&data, &out, &changes);
        for c in &changes {
            assert_eq!(
                kept_ids(c),
                ["host-x86_64-unknown-linux--", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"],
                "{name}"
            );
        }
    }
}

#[test]
fn compressed_bundles_are_rebuilt_and_recompressed_in_place() {
    let data = fixture("rdc_ccob_lld.so");
    let (out, map, changes) = prune_ok(&data, &keep(&["gfx906"]));
    only_extents_differ(&data, &out, &changes);
    let c = &changes[0];
    assert_eq!(c.new_version, Some(2));
    assert!(c.new_used < c.unit.used);
    let u = map.units[0];
    let blob = compressed::read_blob(&out[u.offset as usize..]).unwrap();
    assert_eq!(blob.len as u64, c.new_used);
    let inner = compressed::decompress(&blob).unwrap();
    let ids: Vec<&[u8]> = binary::read(&inner).unwrap().unwrap().iter().map(|e| e.id).collect();
    assert_eq!(ids, [b"host-x86_64-unknown-linux--".as_slice(), b"hipv4-amdgcn-amd-amdhsa--gfx906"]);
}

#[test]
fn a_unit_left_without_device_code_is_refused_unless_allowed() {
    let data = fixture("gnu_rela.so");
    let map = FileMap::read(&data).unwrap();
    let err = plan(&data, &map, &keep(&["gfx942"])).unwrap_err();
    assert!(matches!(err, PruneError::Empty { .. }), "{err}");
    assert!(err.to_string().contains("--allow-empty"));
    let rules = Rules { allow_empty: true, ..keep(&["gfx942"]) };
    let (_, _, changes) = prune_ok(&data, &rules);
    assert!(changes.iter().all(|c| kept_ids(c) == ["host-x86_64-unknown-linux--"]));
}

#[test]
fn nothing_to_drop_changes_nothing_and_pruning_twice_is_pruning_once() {
    let data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    let all = plan(&data, &map, &keep(&["gfx906", "gfx90a"])).unwrap();
    assert_eq!(all.changed(), 0);
    assert_eq!(all.output_plan(&data).to_vec(), data);
    let (once, _, _) = prune_ok(&data, &keep(&["gfx90a:xnack+"]));
    let map2 = FileMap::read(&once).unwrap();
    let again = plan(&once, &map2, &keep(&["gfx90a:xnack+"])).unwrap();
    assert_eq!(again.changed(), 0);
}

#[test]
fn the_check_catches_a_damaged_output() {
    let data = fixture("gnu_rela.so");
    let map = FileMap::read(&data).unwrap();
    let pruned = plan(&data, &map, &keep(&["gfx906"])).unwrap();
    let out = pruned.output_plan(&data).to_vec();
    verify(&out, &data, &map, &pruned).unwrap();
    // A byte outside the fat binaries, a freed byte, a kept payload byte.
    let u = pruned.units[0].unit;
    let freed = (u.offset + pruned.units[0].new_used + 10) as usize;
    for at in [100usize, freed, (u.offset + 4096 + 10) as usize] {
        let mut bad = out.clone();
        bad[at] ^= 1;
        assert!(
            matches!(verify(&bad, &data, &map, &pruned), Err(PruneError::Verify(_) | PruneError::VerifyRead(_))),
            "byte {at:#x}"
        );
    }
}

#[test]
fn the_check_catches_a_damaged_recompressed_unit() {
    let data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    let pruned = plan(&data, &map, &keep(&["gfx906"])).unwrap();
    let out = pruned.output_plan(&data).to_vec();
    verify(&out, &data, &map, &pruned).unwrap();
    // A header byte (the hash), a byte of the zstd frame, a byte of the
    // frame's last block: each is found without decompressing the input.
    let u = pruned.units[0].unit;
    let used = pruned.units[0].new_used;
    for at in [u.offset + 20, u.offset + 40, u.offset + used - 2] {
        let mut bad = out.clone();
        bad[at as usize] ^= 1;
        assert!(
            matches!(verify(&bad, &data, &map, &pruned), Err(PruneError::Verify(_) | PruneError::VerifyRead(_))),
            "byte {at:#x}"
        );
    }
}

#[test]
fn the_round_trip_catches_a_bad_recompression() {
    let bundle =
        binary::write(&[(b"host-x".as_slice(), b"".as_slice()), (b"hip-y", b"payload")], NonZeroU64::MIN).to_vec();
    let list = binary::read(&bundle).unwrap().unwrap();
    let kept: Vec<(&[u8], &[u8])> = list.iter().map(|e| (e.id, e.payload)).collect();
    let opts = compressed::CompressOptions { method: compressed::Method::Zstd, level: 3, version: 2, threads: 0 };
    let good = compressed::compress(&bundle, &opts).unwrap();
    let mut piece = Vec::new();
    rebuild::round_trip(&good.bytes, &bundle, good.hash, &kept, &mut piece).unwrap();
    // Another hash, other contents, fewer entries than kept: all refused.
    assert!(rebuild::round_trip(&good.bytes, &bundle, good.hash ^ 1, &kept, &mut piece).is_err());
    let other = compressed::compress(&bundle[..bundle.len() - 1], &opts).unwrap();
    assert!(rebuild::round_trip(&other.bytes, &bundle, other.hash, &kept, &mut piece).is_err());
    assert!(rebuild::round_trip(&good.bytes, &bundle, good.hash, &kept[..1], &mut piece).is_err());
}

#[test]
fn a_compressed_bundle_whose_hash_is_wrong_is_not_rewritten() {
    // The stored hash is checked before the kept entries are recompressed
    // under a new, correct one (which would hide the damage).
    let mut data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    let at = map.units[0].offset as usize;
    let stored = compressed::read_blob(&data[at..]).unwrap().header.hash;
    let field = at + data[at..].windows(8).position(|w| w == stored.to_le_bytes()).unwrap();
    data[field] ^= 1;
    let map = FileMap::read(&data).unwrap();
    let Err(e) = plan(&data, &map, &keep(&["gfx906"])) else { panic!("a wrong hash is refused") };
    let e = e.to_string();
    assert!(e.contains("hash"), "{e}");
}

#[test]
fn dangling_wrappers_stop_the_prune() {
    let data = fixture("nopie_gnu");
    let map = FileMap::read(&data).unwrap();
    let at = (map.wrappers[0].offset + 8) as usize;
    let mut d = data.clone();
    d[at..at + 8].copy_from_slice(&(map.wrappers[0].pointer + 8).to_le_bytes());
    let map = FileMap::read(&d).unwrap();
    assert!(matches!(plan(&d, &map, &keep(&["gfx906"])), Err(PruneError::Dangling { record: 0, .. })));
}

#[test]
fn version_1_compressed_bundles_come_back_as_version_2() {
    // The rdc fixture with its compressed bundle rewritten as version 1,
    // which records no total size (the HIP runtime cannot size it).
    let mut data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    let u = map.units[0];
    let at = u.offset as usize;
    let blob = compressed::read_blob(&data[at..]).unwrap();
    let (hash, size, payload) = (blob.header.hash, blob.header.uncompressed_size, blob.data.to_vec());
    let mut v1 = b"CCOB".to_vec();
    v1.extend_from_slice(&1u16.to_le_bytes());
    v1.extend_from_slice(&1u16.to_le_bytes()); // zstd
    v1.extend_from_slice(&(size as u32).to_le_bytes());
    v1.extend_from_slice(&hash.to_le_bytes());
    v1.extend_from_slice(&payload);
    data[at..at + u.used as usize].fill(0);
    data[at..at + v1.len()].copy_from_slice(&v1);
    let map = FileMap::read(&data).unwrap();
    assert_eq!(map.units[0].kind, UnitKind::Compressed { version: 1 });
    assert_eq!(map.units[0].used, v1.len() as u64, "a v1 zstd frame knows its own length");
    let (out, _, changes) = prune_ok(&data, &keep(&["gfx906"]));
    assert_eq!(changes[0].new_version, Some(2));
    let back = compressed::read_blob(&out[at..]).unwrap();
    assert_eq!(back.header.version, 2);
    assert_eq!(back.header.total_size, Some(changes[0].new_used));
}

#[test]
fn damaged_inputs_are_refused_or_pruned_into_outputs_that_pass_the_check() {
    for name in ["gnu_rela.so", "rdc_ccob_lld.so", "tu1.o"] {
        let data = fixture(name);
        let mut pruned = 0;
        for (round, d) in offload_testkit::damage::damaged_copies(&data, 0x2545_f491_4f6c_dd1d, 400) {
            let Ok(map) = FileMap::read(&d) else { continue };
            let Ok(p) = plan(&d, &map, &keep(&["gfx90a"])) else { continue };
            let out = p.output_plan(&d).to_vec();
            verify(&out, &d, &map, &p).unwrap_or_else(|e| panic!("{name} round {round}: {e}"));
            pruned += 1;
        }
        assert!(pruned > 100, "{name}: only {pruned} mutated copies could be pruned");
    }
}
