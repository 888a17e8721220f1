//! Maps of real OpenMP host binaries built by clang 19
//! (`offload-testkit/fixtures/prune/omp/make.sh`), and of damaged copies.

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/omp/{name}"))
}

use offload_testkit::OPENMP_PROGRAMS as FIXTURES;

/// Two images (x86_64, then amdgcn gfx90a) and one descriptor with one
/// record for each, in section order.
fn two_images(map: &OpenMpMap) {
    assert_eq!(map.images.len(), 2, "{map:?}");
    let names: Vec<(&str, &str)> = map.images.iter().map(|i| (i.triple.as_str(), i.arch.as_str())).collect();
    assert_eq!(names, [("x86_64-pc-linux-gnu", ""), ("amdgcn-amd-amdhsa", "gfx90a")]);
    assert_eq!(map.images[0].offset, map.section_offset);
    assert_eq!(map.images[1].offset, map.images[0].offset + map.images[0].size);
    for im in &map.images {
        assert_eq!(im.offload_kind, OffloadKind::OpenMp);
        // clang 19 points ImageStart at the image inside the binary.
        assert!(im.start > im.addr && im.end <= im.addr + im.size);
    }
    assert_eq!(map.descriptors.len(), 1);
    let d = &map.descriptors[0];
    assert_eq!(d.count, 2);
    assert_eq!(d.records.iter().map(|r| r.image).collect::<Vec<_>>(), [0, 1]);
    for (i, r) in d.records.iter().enumerate() {
        assert_eq!(r.fields[0].addr, d.table.value + i as u64 * IMAGE_RECORD_SIZE);
        assert_eq!(r.fields[0].value, map.images[i].start);
        assert_eq!(r.fields[1].value, map.images[i].end);
    }
    // Both records name the same host entry table.
    assert_eq!(d.records[0].fields[2].value, d.records[1].fields[2].value);
    assert!(map.unreferenced().is_empty());
}

#[test]
fn gnu_ld_pie_relocates_every_table_word_and_stores_it_in_place() {
    let data = fixture("gnu_pie");
    let map = OpenMpMap::read(&data).unwrap();
    two_images(&map);
    for r in &map.descriptors[0].records {
        for w in &r.fields {
            assert_eq!(w.storage, Storage::Relative { addend: w.value });
            assert!(w.rela_entry.is_some());
            assert_eq!(w.in_place, w.value, "GNU ld writes the addend in place too");
        }
    }
}

#[test]
fn lld_pie_relocates_every_table_word_and_leaves_zero_in_place() {
    let data = fixture("lld_pie");
    let map = OpenMpMap::read(&data).unwrap();
    two_images(&map);
    for w in map.descriptors[0].records.iter().flat_map(|r| &r.fields) {
        assert_eq!(w.storage, Storage::Relative { addend: w.value });
        assert_eq!(w.in_place, 0, "lld writes the address only in the addend");
    }
}

#[test]
fn lld_relr_library_stores_the_addresses_in_place() {
    let data = fixture("lld_relr.so");
    let map = OpenMpMap::read(&data).unwrap();
    two_images(&map);
    assert!(map.descriptors[0].records.iter().flat_map(|r| &r.fields).all(|w| w.storage == Storage::Relr));
}

#[test]
fn non_pie_executables_hold_absolute_addresses() {
    let data = fixture("nopie_gnu");
    let map = OpenMpMap::read(&data).unwrap();
    two_images(&map);
    let d = &map.descriptors[0];
    assert_eq!(d.table.storage, Storage::Absolute);
    assert!(d.records.iter().flat_map(|r| &r.fields).all(|w| w.storage == Storage::Absolute && w.in_place == w.value));
}

#[test]
fn other_files_are_refused_with_a_reason() {
    assert!(matches!(OpenMpMap::read(b"not elf"), Err(OpenMpError::Elf(_))));
    let hip = crate::layout::tests::fixture("gnu_rela.so");
    assert!(!is_openmp_host(&hip));
    assert_eq!(OpenMpMap::read(&hip), Err(OpenMpError::NoOffloading));
    assert!(FIXTURES.iter().all(|f| is_openmp_host(&fixture(f))));
    // An object's images are registered only when it is linked.
    let object = fixture("omp_x86.o");
    assert!(is_openmp_host(&object));
    let err = OpenMpMap::read(&object).unwrap_err();
    assert_eq!(err, OpenMpError::Relocatable);
    assert!(err.to_string().contains("prune the linked program"), "{err}");
}

#[test]
fn a_record_that_brackets_no_image_is_refused() {
    let data = fixture("nopie_gnu");
    let map = OpenMpMap::read(&data).unwrap();
    // Move record 1's ImageEnd: its start still leads to an image, so the
    // record is found but no longer understood.
    let w = &map.descriptors[0].records[1].fields[1];
    let mut d = data.clone();
    d[w.offset as usize..w.offset as usize + 8].copy_from_slice(&(w.value - 8).to_le_bytes());
    let err = OpenMpMap::read(&d).unwrap_err();
    assert!(matches!(err, OpenMpError::Table { .. }), "{err}");
    assert!(err.to_string().contains("record 1"), "{err}");
    // A count past the table's end is refused the same way.
    let mut d = data.clone();
    let at = map.descriptors[0].offset as usize;
    d[at..at + 4].copy_from_slice(&3u32.to_le_bytes());
    assert!(OpenMpMap::read(&d).is_err());
    // A huge count is refused before any record is read.
    d[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = OpenMpMap::read(&d).unwrap_err().to_string();
    assert!(err.contains("more records than the file holds"), "{err}");
}

#[test]
fn zeros_between_images_are_padding_and_garbage_is_an_error() {
    let data = fixture("gnu_pie");
    let map = OpenMpMap::read(&data).unwrap();
    let second = &map.images[1];
    let mut d = data.clone();
    d[second.offset as usize..(second.offset + second.size) as usize].fill(0);
    let m = OpenMpMap::read(&d);
    // The record still points into the zeroed image: refused, not guessed.
    assert!(matches!(m, Err(OpenMpError::Table { .. })), "{m:?}");
    d[second.offset as usize + 8] = 1;
    assert!(matches!(OpenMpMap::read(&d), Err(OpenMpError::BadImage { .. })));
}

#[test]
fn damaged_copies_never_panic() {
    for name in FIXTURES {
        let data = fixture(name);
        for (_, d) in offload_testkit::damage::damaged_copies(&data, 0x9e37_79b9_7f4a_7c15, 300) {
            let _ = OpenMpMap::read(&d);
        }
    }
}
