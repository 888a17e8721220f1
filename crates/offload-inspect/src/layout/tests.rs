//! Maps of real HIP host binaries built by clang 19
//! (`offload-testkit/fixtures/prune/make.sh` says how), and of damaged copies.

use super::*;

pub fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}

fn word(data: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(data[at as usize..at as usize + 8].try_into().unwrap())
}

/// Two translation units: two bundles, two wrappers, each leading to its own.
fn two_units(map: &FileMap) {
    assert_eq!(map.units.len(), 2, "{map:?}");
    assert_eq!(map.wrappers.len(), 2);
    for (i, u) in map.units.iter().enumerate() {
        assert_eq!(u.kind, UnitKind::Bundle);
        assert_eq!(u.offset % 4096, 0, "bundles are 4096-aligned");
        assert!(u.used <= u.extent);
        assert_eq!(map.wrappers[i].target, Target::Unit(i));
        assert_eq!(map.wrappers[i].pointer, map.fatbin_addr + u.section_offset);
    }
    assert!(map.unreferenced().is_empty() && map.dangling().is_empty());
}

#[test]
fn gnu_ld_rela_stores_the_address_twice() {
    let data = fixture("gnu_rela.so");
    let map = FileMap::read(&data).unwrap();
    two_units(&map);
    for w in &map.wrappers {
        assert_eq!(w.storage, Storage::Relative { addend: w.pointer });
        // GNU ld writes the addend in place as well (docs/formats/host-references.md §1.2).
        assert_eq!(word(&data, w.offset + 8), w.pointer);
    }
}

#[test]
fn lld_relr_stores_the_address_in_place() {
    let data = fixture("lld_relr.so");
    let map = FileMap::read(&data).unwrap();
    two_units(&map);
    assert!(map.wrappers.iter().all(|w| w.storage == Storage::Relr));
}

#[test]
fn non_pie_executables_hold_absolute_addresses() {
    let data = fixture("nopie_gnu");
    let map = FileMap::read(&data).unwrap();
    two_units(&map);
    assert!(map.wrappers.iter().all(|w| w.storage == Storage::Absolute));
    assert!(map.fatbin_addr >= 0x400000);
}

#[test]
fn rdc_wrappers_share_one_compressed_bundle() {
    let data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    assert_eq!(map.units.len(), 1);
    assert_eq!(map.units[0].kind, UnitKind::Compressed { version: 2 });
    assert_eq!(map.wrappers.len(), 2);
    assert!(map.wrappers.iter().all(|w| w.target == Target::Unit(0)));
    // lld: R_X86_64_64 for the exported alias, RELATIVE for the protected name.
    let symbolic = map
        .wrappers
        .iter()
        .filter(|w| matches!(&w.storage, Storage::Symbolic { symbol, .. } if symbol.starts_with("__hip_fatbin_")));
    assert_eq!(symbolic.count(), 1, "{:?}", map.wrappers);
    assert_eq!(map.wrappers.iter().filter(|w| matches!(w.storage, Storage::Relative { .. })).count(), 1);
}

#[test]
fn relocatable_objects_point_through_a_section_symbol() {
    let data = fixture("tu1.o");
    let map = FileMap::read(&data).unwrap();
    assert!(map.relocatable);
    assert_eq!(map.units.len(), 1);
    assert_eq!(map.wrappers.len(), 1);
    assert_eq!(map.wrappers[0].target, Target::Unit(0));
    assert!(matches!(map.wrappers[0].storage, Storage::Symbolic { addend: 0, .. }));
}

#[test]
fn kpack_and_unknown_records_are_refused() {
    let data = fixture("nopie_gnu");
    let map = FileMap::read(&data).unwrap();
    let at = map.wrappers[1].offset as usize;
    let mut k = data.clone();
    k[at..at + 4].copy_from_slice(&HIPK.to_le_bytes());
    assert_eq!(FileMap::read(&k).unwrap_err(), LayoutError::Kpack { record: 1 });
    let mut v = data.clone();
    v[at + 4] = 2;
    assert!(matches!(FileMap::read(&v).unwrap_err(), LayoutError::Version { record: 1, version: 2 }));
    let mut m = data.clone();
    m[at] ^= 0x20;
    assert!(FileMap::read(&m).unwrap_err().to_string().contains("not HIPF"));
}

#[test]
fn pointers_into_the_middle_and_unreferenced_units_are_reported() {
    let data = fixture("nopie_gnu");
    let map = FileMap::read(&data).unwrap();
    let at = map.wrappers[1].offset + 8;
    let mut d = data.clone();
    d[at as usize..at as usize + 8].copy_from_slice(&(map.wrappers[1].pointer + 16).to_le_bytes());
    let bent = FileMap::read(&d).unwrap();
    assert_eq!(bent.wrappers[1].target, Target::InsideFatbin(map.units[1].section_offset + 16));
    assert_eq!(bent.dangling(), [1]);
    assert_eq!(bent.unreferenced(), [1]);
    d[at as usize..at as usize + 8].copy_from_slice(&8u64.to_le_bytes());
    assert_eq!(FileMap::read(&d).unwrap().wrappers[1].target, Target::Elsewhere);
}

#[test]
fn damaged_files_give_errors_not_panics() {
    for name in ["gnu_rela.so", "rdc_ccob_lld.so", "tu1.o"] {
        let data = fixture(name);
        for cut in (0..data.len()).step_by(97) {
            let _ = FileMap::read(&data[..cut]);
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut d = data.clone();
            let at = (seed % d.len() as u64) as usize;
            d[at] = (seed >> 32) as u8;
            let _ = FileMap::read(&d);
        }
    }
}

#[test]
fn non_hip_files_say_why() {
    assert!(matches!(FileMap::read(b"not elf"), Err(LayoutError::Elf(_))));
    let mut data = fixture("gnu_rela.so");
    data[18] = 183; // EM_AARCH64
    assert!(matches!(FileMap::read(&data), Err(LayoutError::Unsupported(_))));
}

#[test]
fn the_inspector_walks_past_long_zero_runs() {
    // A zero-mode output: fat binaries separated by megabytes of zeros.
    let b = offload_format::bundle::binary::write(
        &[
            (b"host-x86_64-unknown-linux-gnu-".as_slice(), b"".as_slice()),
            (b"hipv4-amdgcn-amd-amdhsa--gfx906", b"CODE"),
        ],
        std::num::NonZeroU64::new(4096).unwrap(),
    )
    .to_vec();
    let mut region = b.clone();
    for gap in [3usize << 20, 5000, 1 << 20] {
        region.resize(region.len() + gap, 0);
        region.extend_from_slice(&b);
    }
    region.resize(region.len() + (2 << 20), 0);
    let inv = crate::scan(&region, "f", &Default::default());
    assert_eq!(inv.units.len(), 4, "{:?}", inv.diagnostics);
    assert!(!inv.has_errors(), "{:?}", inv.diagnostics);
}

#[test]
fn section_headers_that_disagree_with_the_segments_are_refused() {
    let data = fixture("gnu_rela.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let index = (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(b".hip_fatbin")).unwrap();
    // Move the section's file offset by a page: the PT_LOAD still maps the
    // old bytes, so a rewrite by section offsets would miss what is loaded.
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let at = shoff + index * 64 + 24;
    let mut d = data.clone();
    let moved = file.sections[index].offset + 4096;
    d[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    assert!(matches!(FileMap::read(&d), Err(LayoutError::NotMapped { .. })));
    assert!(FileMap::read(&data).is_ok());
}

#[test]
fn a_program_header_table_at_the_end_of_the_address_space_is_no_panic() {
    // Found by the prune_zero fuzz target: e_phoff near usize::MAX.
    let mut d = fixture("gnu_rela.so");
    d[32..40].copy_from_slice(&(u64::MAX - 20).to_le_bytes());
    assert!(matches!(FileMap::read(&d), Err(LayoutError::NotMapped { .. })));
}

/// Applies word edits to a copy of `data`.
fn apply(data: &[u8], edits: &[WordEdit]) -> Vec<u8> {
    let mut out = data.to_vec();
    for e in edits {
        out[e.offset as usize..e.offset as usize + 8].copy_from_slice(&e.value.to_le_bytes());
    }
    out
}

#[test]
fn pointer_edits_move_every_storage_and_read_back() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu", "rdc_ccob_lld.so", "tu1.o"] {
        let data = fixture(name);
        let map = FileMap::read(&data).unwrap();
        let new: Vec<u64> = map.wrappers.iter().map(|w| w.pointer + 0x1000).collect();
        let edits = map.pointer_edits(&data, &new).unwrap();
        assert!(!edits.is_empty(), "{name}");
        let moved = FileMap::read(&apply(&data, &edits)).unwrap();
        let got: Vec<u64> = moved.wrappers.iter().map(|w| w.pointer).collect();
        assert_eq!(got, new, "{name}");
        for (w, old) in moved.wrappers.iter().zip(&map.wrappers) {
            // The storage stays what it was; a copy in place moves too.
            assert_eq!(std::mem::discriminant(&w.storage), std::mem::discriminant(&old.storage), "{name}");
            let in_place = word(&data, old.offset + 8);
            if in_place != 0 && !map.relocatable {
                assert_eq!(word(&apply(&data, &edits), old.offset + 8), w.pointer, "{name}");
            }
        }
        // Unchanged pointers need no edit at all.
        let same: Vec<u64> = map.wrappers.iter().map(|w| w.pointer).collect();
        assert!(map.pointer_edits(&data, &same).unwrap().is_empty(), "{name}");
        assert!(map.pointer_edits(&data, &new[1..]).is_err(), "{name}: one pointer per record");
    }
}
