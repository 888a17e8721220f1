use super::diff::{Entry, Key, Status, diff};

fn entry(file: &str, id: &str, size: u64, hash: u64) -> Entry {
    Entry {
        key: Key { file: file.into(), unit: 0, id: id.into(), repeat: 0 },
        target: id.rsplit("--").next().unwrap_or(id).into(),
        kind: "hipv4".into(),
        size,
        stored: size,
        hash,
    }
}

#[test]
fn identical_sides_have_no_changes() {
    let a = vec![entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx906", 10, 1)];
    let d = diff(a.clone(), a);
    assert!(d.total.identical());
    assert_eq!(d.total.unchanged, 1);
    assert_eq!(d.changes[0].status, Status::Unchanged);
}

#[test]
fn added_removed_and_changed_are_told_apart() {
    let a = vec![
        entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx906", 10, 1),
        entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx90a", 20, 2),
        entry("gone.so", "hipv4-amdgcn-amd-amdhsa--gfx906", 5, 3),
    ];
    let b = vec![
        entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx906", 12, 9),
        entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx90a", 20, 2),
        entry("x.so", "hipv4-amdgcn-amd-amdhsa--gfx942", 30, 4),
    ];
    let d = diff(a, b);
    assert!(!d.total.identical());
    assert_eq!((d.total.added, d.total.removed, d.total.changed, d.total.unchanged), (1, 1, 1, 1));
    assert_eq!((d.total.bytes_a, d.total.bytes_b), (35, 62));
    let gfx906 = &d.by_target["gfx906"];
    assert_eq!((gfx906.changed, gfx906.removed), (1, 1));
    assert_eq!(d.by_file["gone.so"].removed, 1);
    let changed = d.changes.iter().find(|c| c.status == Status::Changed).unwrap();
    assert_eq!((changed.size_a, changed.size_b, changed.delta()), (Some(10), Some(12), 2));
}

#[test]
fn same_size_other_bytes_is_a_change() {
    let a = vec![entry("x", "hipv4-amdgcn-amd-amdhsa--gfx906", 10, 1)];
    let b = vec![entry("x", "hipv4-amdgcn-amd-amdhsa--gfx906", 10, 2)];
    assert_eq!(diff(a, b).total.changed, 1);
}

mod on_scans {
    use super::super::diff::entries;
    use super::super::size::{stored_sizes, tally};
    use crate::keep::{Rules, parse_target};
    use crate::{Options, scan};
    use offload_format::bundle::compressed::{CompressOptions, compress};
    use std::num::NonZeroU64;

    fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(id, p)| (id.as_bytes(), *p)).collect();
        offload_format::bundle::binary::write(&e, NonZeroU64::new(8).unwrap()).to_vec()
    }

    fn hip() -> Vec<u8> {
        bundle(&[
            ("host-x86_64-unknown-linux--", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx906", &[7u8; 3000]),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &[9u8; 1000]),
        ])
    }

    #[test]
    fn plain_objects_are_stored_as_they_are() {
        let data = hip();
        let inv = scan(&data, "b", &Options::default());
        let t = tally(&inv, None);
        assert_eq!((t.host.objects, t.device().objects, t.device().bytes, t.device().stored), (1, 2, 4000, 4000));
        assert_eq!(t.targets[&("gfx906".to_string(), "hipv4".to_string())].bytes, 3000);
    }

    #[test]
    fn a_compressed_bundle_is_shared_out_in_proportion() {
        let ccob = compress(&hip(), &CompressOptions::default()).unwrap().bytes;
        let inv = scan(&ccob, "b", &Options::default());
        let stored = stored_sizes(&inv);
        let total: u64 = stored.iter().sum();
        assert!(total <= ccob.len() as u64 && total + 3 >= ccob.len() as u64, "{stored:?} of {}", ccob.len());
        let share = |id: &str| stored[inv.objects.iter().position(|o| o.id.ends_with(id)).unwrap()];
        assert!(share("gfx906").abs_diff(3 * share("gfx90a:xnack+")) <= 3, "{stored:?}");
    }

    #[test]
    fn containers_are_not_counted_twice() {
        let inner = hip();
        let outer = bundle(&[("host-x86_64-unknown-linux--", b""), ("hipv4-amdgcn-amd-amdhsa--gfx1030", &inner)]);
        let inv = scan(&outer, "b", &Options::default());
        assert!(inv.objects.iter().any(|o| o.container), "the fixture nests");
        let t = tally(&inv, None);
        assert_eq!(t.device().bytes, 4000, "the nested objects, not the entry holding them");
        assert!(!t.targets.contains_key(&("gfx1030".to_string(), "hipv4".to_string())));
    }

    #[test]
    fn keep_counts_what_prune_rules_drop() {
        let data = hip();
        let inv = scan(&data, "b", &Options::default());
        let rules = Rules { keep: vec![parse_target("gfx906").unwrap()], ..Default::default() };
        let t = tally(&inv, Some(&rules));
        assert_eq!((t.prunable.objects, t.prunable.bytes), (1, 1000));
    }

    #[test]
    fn a_corrupt_compressed_bundle_is_an_error_not_a_hash() {
        let mut ccob = compress(&hip(), &CompressOptions::default()).unwrap().bytes;
        // The hash of the decompressed bundle (version 2: bytes 16..24):
        // the header still lists, the decoded bytes fail their check.
        ccob[16] ^= 0xff;
        let inv = scan(&ccob, "b", &Options::default());
        assert!(!inv.objects.is_empty(), "listing reads the header only");
        assert!(entries(&inv, "").is_err(), "a stream that does not decode cannot be compared");
        let good = hip();
        let inv = scan(&good, "b", &Options::default());
        let e = entries(&inv, "").unwrap();
        assert_eq!(e.len(), 3);
        assert_ne!(e[1].hash, e[2].hash);
    }
}
