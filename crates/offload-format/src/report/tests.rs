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
