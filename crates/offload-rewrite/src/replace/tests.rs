//! `replace` on the HIP host binaries of `tests/fixtures/prune` (built by
//! clang 19, see `make.sh`): each unit holds gfx906, gfx90a:xnack+ and
//! gfx90a:xnack- code objects; unit 0 defines `add_one` and `scale`,
//! unit 1 `twice` and `thrice`.

use super::*;
use offload_format::bundle::binary;
fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}
use crate::prune::{Contents, read_contents};
use offload_inspect::layout::{Storage, UnitKind};

/// The code object of the entry ending in `target` in unit `unit`.
fn object(data: &[u8], unit: usize, target: &str) -> Vec<u8> {
    let map = FileMap::read(data).unwrap();
    let pick = |list: &[binary::BinaryEntry]| {
        list.iter().find(|e| e.id.ends_with(target.as_bytes())).map(|e| e.payload.to_vec()).unwrap()
    };
    match read_contents(data, &map.units[unit]).unwrap() {
        Contents::Bundle(list) => pick(&list),
        Contents::Compressed { inner, .. } => pick(&binary::read(&inner).unwrap().unwrap()),
    }
}

/// `old` with `extra` bytes after its end: still the same ELF file, as a
/// rebuilt object with more code would be, but larger.
fn grown(old: &[u8], extra: usize) -> Vec<u8> {
    let mut v = old.to_vec();
    v.extend((0..extra).map(|i| (i * 7 + 1) as u8));
    v
}

/// The bytes of the object at entry `entry` of unit `unit` of `data`.
fn entry_bytes(data: &[u8], unit: usize, entry: usize) -> Vec<u8> {
    let (_, _, units) = units_of(data).unwrap();
    match read_contents(data, &units[unit]).unwrap() {
        Contents::Bundle(list) => list[entry].payload.to_vec(),
        Contents::Compressed { inner, .. } => binary::read(&inner).unwrap().unwrap()[entry].payload.to_vec(),
    }
}

fn replace_and_check(data: &[u8], new: &[u8], wanted: &str, unit: Option<usize>) -> (Vec<u8>, Placement, usize) {
    let r = plan(data, new, wanted, unit).unwrap();
    let out = r.output().to_vec();
    verify(&out, data, &r, new).unwrap();
    // What the plan calls zeros (a writer punches them out) is zeros.
    for &(at, len) in &r.zeroed {
        assert!(out[at as usize..(at + len) as usize].iter().all(|&b| b == 0), "{at:#x}+{len}");
    }
    if let Placement::NewSegment { .. } = r.placement {
        let map = FileMap::read(data).unwrap();
        assert!(r.zeroed.contains(&(map.fatbin_offset, map.fatbin_size)), "{:?}", r.zeroed);
    }
    assert_eq!(entry_bytes(&out, r.unit_index, r.entry_index), new);
    (out, r.placement, r.unit_index)
}

#[test]
fn a_small_change_is_written_in_place() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu"] {
        let data = fixture(name);
        let new = grown(&object(&data, 0, "gfx90a:xnack+"), 100);
        let (out, placement, _) = replace_and_check(&data, &new, "gfx90a:xnack+", Some(0));
        assert_eq!(placement, Placement::InPlace, "{name}");
        assert_eq!(out.len(), data.len());
        // Unit 1 untouched, its objects the same.
        assert_eq!(entry_bytes(&out, 1, 2), entry_bytes(&data, 1, 2));
    }
}

#[test]
fn a_larger_object_moves_the_fat_binaries_to_a_new_segment() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu"] {
        let data = fixture(name);
        let new = grown(&object(&data, 0, "gfx90a:xnack+"), 70_000);
        let (out, placement, _) = replace_and_check(&data, &new, "amdgcn-amd-amdhsa--gfx90a:xnack+", Some(0));
        let Placement::NewSegment { offset, addr, segment_offset } = placement else { panic!("{name}: {placement:?}") };
        assert!(segment_offset >= data.len() as u64 && offset > segment_offset, "{name}");
        let map = FileMap::read(&out).unwrap();
        assert_eq!((map.fatbin_offset, map.fatbin_addr), (offset, addr), "{name}");
        // Every wrapper leads to the moved units.
        for (i, w) in map.wrappers.iter().enumerate() {
            assert_eq!(w.target, Target::Unit(i), "{name}");
            assert_eq!(w.pointer, addr + map.units[i].section_offset, "{name}");
        }
        // The program header table moved into the new segment.
        assert_eq!(u64::from_le_bytes(out[32..40].try_into().unwrap()), segment_offset);
        // The inspector finds the new object and nothing wrong.
        let inv = offload_inspect::scan(&out, name, &Default::default());
        assert!(!inv.has_errors(), "{name}: {:?}", inv.diagnostics);
        assert!(inv.objects.iter().any(|o| o.size == new.len() as u64), "{name}");
        assert_eq!(inv.objects.iter().filter(|o| o.target_id.starts_with("gfx")).count(), 6, "{name}");
    }
}

#[test]
fn rdc_symbols_and_compressed_bundles_follow_the_move() {
    let data = fixture("rdc_ccob_lld.so");
    let old = object(&data, 0, "gfx90a:xnack-");
    // Incompressible bytes: the compressed bundle must grow past its place.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut new = old.clone();
    new.extend((0..200_000).map(|_| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as u8
    }));
    let (out, placement, _) = replace_and_check(&data, &new, "gfx90a:xnack-", None);
    let Placement::NewSegment { addr, .. } = placement else { panic!("{placement:?}") };
    let map = FileMap::read(&out).unwrap();
    assert_eq!(map.units[0].kind, UnitKind::Compressed { version: 2 });
    for w in &map.wrappers {
        assert_eq!(w.target, Target::Unit(0));
        if let Storage::Symbolic { value, .. } = w.storage {
            assert_eq!(value, addr, "the __hip_fatbin_ symbol moved with the section");
        }
    }
    // A small change fits in the old extent after recompression.
    let (_, placement, _) = replace_and_check(&data, &grown(&old, 16), "gfx90a:xnack-", None);
    assert!(matches!(placement, Placement::InPlace | Placement::NewSegment { .. }));
}

#[test]
fn relocatable_objects_are_rewritten_in_place_only() {
    let data = fixture("tu1.o");
    let old = object(&data, 0, "gfx906");
    let (_, placement, _) = replace_and_check(&data, &grown(&old, 10), "gfx906", None);
    assert_eq!(placement, Placement::InPlace);
    let e = plan(&data, &grown(&old, 70_000), "gfx906", None).unwrap_err();
    assert!(matches!(e, ReplaceError::DoesNotFit { .. }), "{e}");
}

#[test]
fn raw_bundles_are_rebuilt_whole() {
    for name in ["gnu_rela.so", "rdc_ccob_lld.so"] {
        let data = fixture(name);
        let map = FileMap::read(&data).unwrap();
        let u = map.units[0];
        let raw = data[u.offset as usize..(u.offset + u.used) as usize].to_vec();
        let new = grown(&object(&data, 0, "gfx906"), 5000);
        let (out, placement, _) = replace_and_check(&raw, &new, "hipv4-amdgcn-amd-amdhsa--gfx906", None);
        assert_eq!(placement, Placement::Rewritten);
        assert!(out.len() > raw.len(), "{name}");
    }
}

#[test]
fn objects_for_another_target_are_refused() {
    let data = fixture("gnu_rela.so");
    let err = |new: &[u8], wanted: &str| plan(&data, new, wanted, Some(0)).unwrap_err().to_string();
    let e = err(&object(&data, 0, "gfx906"), "gfx90a:xnack+");
    assert!(e.contains("built for gfx906") && e.contains("gfx90a"), "{e}");
    let e = err(&object(&data, 0, "gfx90a:xnack-"), "gfx90a:xnack+");
    assert!(e.contains("xnack off") && e.contains("xnack on"), "{e}");
    let e = err(b"not an object", "gfx906");
    assert!(e.contains("not an ELF"), "{e}");
    let mut cuda = object(&data, 0, "gfx906");
    cuda[18..20].copy_from_slice(&190u16.to_le_bytes());
    let e = err(&cuda, "gfx906");
    assert!(e.contains("NVIDIA"), "{e}");
    let mut osabi = object(&data, 0, "gfx906");
    osabi[7] = 0;
    assert!(err(&osabi, "gfx906").contains("OSABI"));
}

#[test]
fn missing_kernels_and_variables_are_named() {
    let data = fixture("gnu_rela.so");
    // Unit 1's object (twice, thrice) in unit 0 (add_one, scale).
    let e = plan(&data, &object(&data, 1, "gfx90a:xnack+"), "gfx90a:xnack+", Some(0)).unwrap_err();
    let ReplaceError::MissingSymbols { missing } = &e else { panic!("{e}") };
    assert!(missing.contains(&"_Z7add_onePi.kd".to_string()) && missing.contains(&"scale".to_string()), "{e}");
    assert!(!missing.iter().any(|m| m.contains("twice") || m.starts_with("__hip_cuid_")), "{e}");
}

#[test]
fn entries_are_found_by_id_or_target_and_ambiguity_is_an_error() {
    let data = fixture("gnu_rela.so");
    let new = object(&data, 1, "gfx906");
    let e = plan(&data, &new, "gfx906", None).unwrap_err();
    assert!(matches!(e, ReplaceError::Ambiguous { count: 2, .. }), "{e}");
    assert!(e.to_string().contains("unit 0 at offset") && e.to_string().contains("--unit"), "{e}");
    let e = plan(&data, &new, "gfx1100", None).unwrap_err();
    assert!(matches!(e, ReplaceError::NoEntry { .. }) && e.to_string().contains("gfx90a:xnack-"), "{e}");
    let e = plan(&data, &new, "gfx906", Some(7)).unwrap_err();
    assert!(matches!(e, ReplaceError::NoUnit { unit: 7, count: 2 }), "{e}");
    // The same object back in its place: found by its full ID.
    let (out, placement, unit) = replace_and_check(&data, &new, "hipv4-amdgcn-amd-amdhsa--gfx906", Some(1));
    assert_eq!((placement, unit), (Placement::InPlace, 1));
    assert_eq!(out, data, "putting an object back changes nothing");
    assert!(entry_matches("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", "gfx90a:xnack-:sramecc+"));
    assert!(!entry_matches("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "gfx90a"));
    assert!(entry_matches("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "hip-amdgcn-amd-amdhsa--gfx90a:xnack-"));
    assert!(entry_matches("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "amdgcn-amd-amdhsa--gfx90a:xnack-"));
    assert!(!entry_matches("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", "hipv4-amdgcn-amd-amdpal--gfx90a:xnack-"));
    assert!(!entry_matches("host-x86_64-unknown-linux-gnu-", "gfx90a"));
}

#[test]
fn cuda_entries_are_not_supported_yet() {
    let old = object(&fixture("gnu_rela.so"), 0, "gfx906");
    let raw = binary::write(
        &[(b"hip-nvptx64-nvidia-cuda--sm_80".as_slice(), old.as_slice())],
        std::num::NonZeroU64::new(4096).unwrap(),
    )
    .to_vec();
    let e = plan(&raw, &old, "sm_80", None).unwrap_err();
    assert!(matches!(e, ReplaceError::NotSupported(_)) && e.to_string().contains("not supported yet"), "{e}");
}

#[test]
fn damaged_inputs_give_errors_not_panics() {
    // Mutations aimed at what the rewriter reads: the ELF and program
    // headers, the section headers, and anywhere (tables, bundles).
    for name in ["lld_relr.so", "gnu_rela.so", "nopie_gnu", "rdc_ccob_lld.so"] {
        let data = fixture(name);
        let wanted = "gfx90a:xnack+";
        let small = grown(&object(&data, 0, wanted), 10);
        let large = grown(&small, 70_000);
        let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..300 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut d = data.clone();
            let at = match i % 3 {
                0 => (seed % 0x400) as usize,
                1 => shoff + (seed % (data.len() - shoff) as u64) as usize,
                _ => (seed % d.len() as u64) as usize,
            };
            d[at] = (seed >> 32) as u8;
            if i % 7 == 0 {
                // A whole word: offsets and addresses far out of range.
                let at = at.min(d.len() - 8) & !7;
                d[at..at + 8].copy_from_slice(&(seed | 1 << 63).to_le_bytes());
            }
            let new = if i % 2 == 0 { &small } else { &large };
            if let Ok(r) = plan(&d, new, wanted, Some(0)) {
                // Bounded: MAX_GAP zeros at most before the new segment.
                assert!(r.output().len() <= d.len() as u64 + (64 << 20) + (1 << 20));
                let Some(out) = r.output().try_to_vec() else { continue };
                let _ = verify(&out, &d, &r, new);
            }
        }
        for cut in (0..data.len()).step_by(211) {
            let _ = plan(&data[..cut], &small, wanted, Some(0));
        }
        // A damaged new object is refused or checked, never a panic.
        for at in (0..small.len()).step_by(13) {
            let mut o = small.clone();
            o[at] ^= 0xa5;
            let _ = plan(&data, &o, wanted, Some(0));
            let _ = plan(&data, &small[..at], wanted, Some(0));
        }
    }
}

/// `data` with 100 MiB more `.bss` in its last PT_LOAD.
fn with_large_bss(data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    let phoff = u64::from_le_bytes(d[32..40].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes([d[56], d[57]]) as usize;
    let last = (0..count).rev().find(|i| d[phoff + i * 56] == 1).unwrap();
    let at = phoff + last * 56 + 40;
    let memsz = u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    d[at..at + 8].copy_from_slice(&(memsz + (100 << 20)).to_le_bytes());
    d
}

#[test]
fn a_large_bss_moves_a_library_above_it_and_refuses_an_executable() {
    let data = with_large_bss(&fixture("lld_relr.so"));
    let new = grown(&object(&data, 0, "gfx90a:xnack+"), 70_000);
    let (out, placement, _) = replace_and_check(&data, &new, "gfx90a:xnack+", Some(0));
    let Placement::NewSegment { addr, offset, .. } = placement else { panic!("{placement:?}") };
    assert!(addr >= 100 << 20 && offset < 1 << 20, "no padding for a library: {addr:#x} {offset:#x}");
    assert!(out.len() < data.len() + (1 << 20), "no 100 MiB of padding");
    let exe = with_large_bss(&fixture("nopie_gnu"));
    let new = grown(&object(&exe, 0, "gfx90a:xnack+"), 70_000);
    let e = plan(&exe, &new, "gfx90a:xnack+", Some(0)).unwrap_err();
    assert!(e.to_string().contains("64 MiB of padding"), "{e}");
}

#[test]
fn unsound_program_headers_are_refused_before_a_move() {
    // Found by the `replace` fuzz target: a PT_LOAD running past the end
    // of the file was carried into the output, which then failed its check.
    let mut data = fixture("rdc_ccob_lld.so");
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let load = (0..8).find(|i| data[phoff + i * 56] == 1).unwrap();
    let at = phoff + load * 56 + 32;
    data[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let new = grown(&object(&data, 0, "gfx906"), 70_000);
    let e = plan(&data, &new, "gfx906", None).unwrap_err();
    assert!(e.to_string().contains("runs past the end of the file"), "{e}");
}

#[test]
fn other_references_into_the_fat_binaries_are_refused_before_a_move() {
    // Found by the `replace` fuzz target: a relocation outside the wrapper
    // records pointing into .hip_fatbin (GNU ld also stores its addend in
    // place, so following it would change another section).
    let data = fixture("gnu_rela.so");
    let map = FileMap::read(&data).unwrap();
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let rela = (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(b".rela.dyn".as_slice())).unwrap();
    let sh = file.sections[rela];
    let wrappers: Vec<u64> = map.wrappers.iter().map(|w| w.addr + 8).collect();
    let mut d = data.clone();
    let entry = (0..sh.size / 24)
        .map(|i| (sh.offset + i * 24) as usize)
        .find(|&at| {
            let r_offset = u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
            d[at + 8] == 8 && !wrappers.contains(&r_offset)
        })
        .unwrap();
    d[entry + 16..entry + 24].copy_from_slice(&(map.fatbin_addr + 16).to_le_bytes());
    let new = grown(&object(&d, 0, "gfx906"), 70_000);
    let e = plan(&d, &new, "gfx906", Some(0)).unwrap_err();
    assert!(e.to_string().contains("is not a wrapper record's pointer"), "{e}");
    // In place nothing moves, so nothing else needs following.
    assert!(plan(&d, &grown(&object(&d, 0, "gfx906"), 8), "gfx906", Some(0)).is_ok());
}

#[test]
fn sections_laid_over_rewritten_bytes_are_refused_before_a_move() {
    // Found by the `replace` fuzz target: a damaged section header put an
    // allocated section over the ELF header, which a move rewrites.
    let data = fixture("lld_relr.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let rodata = (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(b".rodata".as_slice())).unwrap();
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let mut d = data.clone();
    d[shoff + rodata * 64 + 24..shoff + rodata * 64 + 32].copy_from_slice(&16u64.to_le_bytes());
    let new = grown(&object(&d, 0, "gfx906"), 70_000);
    let e = plan(&d, &new, "gfx906", Some(0)).unwrap_err();
    assert!(e.to_string().contains("overlaps bytes the move rewrites at 0x20"), "{e}");
}

#[test]
fn a_wrapper_symbol_of_another_section_is_refused_before_a_move() {
    // Found by the `replace` fuzz target: the -fgpu-rdc alias given another
    // section index kept its value when the section moved.
    let mut data = fixture("rdc_ccob_lld.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let dynsym =
        (1..file.sections.len()).find(|&i| file.sections[i].sh_type == offload_format::elf::SHT_DYNSYM).unwrap();
    let sh = file.sections[dynsym];
    let strings = file.string_table(sh.link as usize).unwrap();
    let at = (0..sh.size / 24)
        .map(|i| (sh.offset + i * 24) as usize)
        .find(|&at| {
            let name = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
            offload_format::elf::c_string(strings, name).is_some_and(|n| n.starts_with(b"__hip_fatbin_"))
        })
        .unwrap();
    data[at + 6..at + 8].copy_from_slice(&1u16.to_le_bytes());
    let new = grown(&object(&data, 0, "gfx906"), 70_000);
    let e = plan(&data, &new, "gfx906", None).unwrap_err();
    assert!(e.to_string().contains("which is not defined in .hip_fatbin"), "{e}");
}

#[test]
fn a_wrapper_symbol_table_of_another_type_still_moves() {
    // Found by the `replace` fuzz target: .dynsym's type damaged; the file
    // map still reads the -fgpu-rdc alias through the relocation's link.
    let mut data = fixture("rdc_ccob_lld.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let dynsym =
        (1..file.sections.len()).find(|&i| file.sections[i].sh_type == offload_format::elf::SHT_DYNSYM).unwrap();
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    data[shoff + dynsym * 64 + 4..shoff + dynsym * 64 + 8].copy_from_slice(&1u32.to_le_bytes());
    let new = grown(&object(&data, 0, "gfx906"), 70_000);
    if let Ok(r) = plan(&data, &new, "gfx906", None) {
        verify(&r.output().to_vec(), &data, &r, &new).unwrap();
    }
}
