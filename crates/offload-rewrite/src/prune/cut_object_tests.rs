//! Cut mode on relocatable objects and archives: clang-19 HIP objects
//! (one fat binary; two after `ld -r`, the second compressed), nvcc and
//! clang CUDA objects, and archives made of them.

use super::cut_archive::plan_archive_cut;
use super::cut_file::{FileCut, plan_file_cut};
use super::cut_object::{plan_object_cut, verify_object_cut};
use super::files::{Input, plan_file};
use super::*;
use offload_format::elf::ElfFile;

fn hip_fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}

fn cli_fixture(path: &str) -> Vec<u8> {
    let full = format!("{}/../offload-cli/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn keep(targets: &[&str]) -> Rules {
    Rules { keep: targets.iter().map(|t| parse_target(t).unwrap()).collect(), allow_empty: true, ..Default::default() }
}

/// Prunes and cuts `data`, checks the output and returns it with the cut.
fn cut_ok(data: &[u8], rules: &Rules) -> (Vec<u8>, FileCut, Input) {
    let (input, pruned) = plan_file(data, rules).unwrap();
    let cut = plan_file_cut(data, &input, &pruned).unwrap().expect("an object or archive");
    let out = cut.output_plan(data, &pruned).to_vec();
    cut.verify(&out, data, &pruned).unwrap();
    (out, cut, input)
}

fn section(file: &ElfFile, name: &str) -> offload_format::elf::SectionHeader {
    let i = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == name.as_bytes()).unwrap();
    file.sections[i]
}

/// The (offset, addend) of every RELA entry of `section`.
fn addends(data: &[u8], section_name: &str) -> Vec<u64> {
    let file = ElfFile::parse(data).unwrap();
    let sh = section(&file, section_name);
    let bytes = &data[sh.offset as usize..(sh.offset + sh.size) as usize];
    bytes.chunks_exact(24).map(|r| u64::from_le_bytes(r[16..24].try_into().unwrap())).collect()
}

#[test]
fn a_hip_object_shrinks_by_the_dropped_pages_and_still_maps() {
    let data = hip_fixture("tu1.o");
    let (out, cut, input) = cut_ok(&data, &keep(&["gfx90a"]));
    let FileCut::Object(cut) = cut else { panic!("not an object cut") };
    assert!(matches!(input, Input::Hip(_)));
    // gfx906 (3168 bytes at a 4096-aligned offset) leaves: one page.
    assert_eq!(cut.removed(), 4096);
    assert_eq!(out.len(), data.len() - 4096);
    let (old, new) = (ElfFile::parse(&data).unwrap(), ElfFile::parse(&out).unwrap());
    assert_eq!(section(&new, ".hip_fatbin").size, cut.sections[0].new_size);
    assert!(section(&new, ".hip_fatbin").size < section(&old, ".hip_fatbin").size);
    for (a, b) in old.sections.iter().zip(&new.sections) {
        assert_eq!(a.offset % a.align.max(1), b.offset % a.align.max(1), "alignment kept");
    }
    let map = offload_inspect::layout::FileMap::read(&out).unwrap();
    assert_eq!(map.wrappers.len(), 1);
    assert_eq!(map.wrappers[0].target, offload_inspect::layout::Target::Unit(0));
    let (_, again) = plan_file(&out, &Rules::default()).unwrap();
    let ids: Vec<&str> = again.units[0].entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "host-x86_64-unknown-linux--",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
        ]
    );
}

#[test]
fn a_second_fat_binary_moves_with_its_relocation_addend() {
    let data = hip_fixture("tu12_r.o");
    assert_eq!(addends(&data, ".rela.hipFatBinSegment"), [0, 0x6000]);
    let (out, cut, _) = cut_ok(&data, &keep(&["gfx90a:xnack-"]));
    let FileCut::Object(cut) = cut else { panic!("not an object cut") };
    let moves: Vec<(u64, u64)> = cut.sections[0].moves.iter().map(|m| (m.1, m.2)).collect();
    assert_eq!(moves.len(), 2);
    assert_eq!(moves[0], (0, 0));
    assert!(moves[1].1 < 0x6000 && moves[1].1.is_multiple_of(4096), "{moves:x?}");
    assert_eq!(addends(&out, ".rela.hipFatBinSegment"), [0, moves[1].1]);
    let map = offload_inspect::layout::FileMap::read(&out).unwrap();
    let targets: Vec<_> = map.wrappers.iter().map(|w| w.target).collect();
    assert_eq!(targets, [offload_inspect::layout::Target::Unit(0), offload_inspect::layout::Target::Unit(1)]);
    assert!(matches!(map.units[1].kind, offload_inspect::layout::UnitKind::Compressed { version: 2 }));
    assert_eq!(out.len() as u64, data.len() as u64 - cut.removed());
}

#[test]
fn cuda_objects_of_nvcc_and_clang_shrink() {
    for (name, kept) in
        [("cuda/obj_sm80.o", "sm_80"), ("cuda/obj_lto.o", "sm_90"), ("cuda/clang_rdc_sm70.o", "compute_70")]
    {
        let data = cli_fixture(name);
        let (input, pruned) = plan_file(&data, &keep(&[kept])).unwrap();
        assert_eq!(input, Input::Cuda, "{name}");
        let (out, cut, _) = cut_ok(&data, &keep(&[kept]));
        let FileCut::Object(cut) = cut else { panic!("not an object cut") };
        // Cut by the freed bytes, rounded down to the alignment (8 here).
        let freed = pruned.freed_bytes();
        assert!(cut.removed() <= freed && freed - cut.removed() < 8, "{name}: {} of {freed}", cut.removed());
        assert_eq!(out.len() as u64, data.len() as u64 - cut.removed(), "{name}");
        let (_, again) = plan_file(&out, &Rules::default()).unwrap();
        let ids: Vec<&str> = again.units[0].entries.iter().map(|e| e.id.as_str()).collect();
        let wanted: Vec<&str> = pruned.units[0].entries.iter().filter(|e| e.kept).map(|e| e.id.as_str()).collect();
        assert_eq!(ids, wanted, "{name}");
    }
}

#[test]
fn what_the_cut_does_not_understand_is_refused() {
    let data = hip_fixture("tu1.o");
    let file = ElfFile::parse(&data).unwrap();
    let fat = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".hip_fatbin").unwrap();
    let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
    let rules = keep(&["gfx90a"]);
    // Zero mode refuses these files already; the cut's own checks are
    // tried with the plan of the intact file.
    let (_, pruned) = plan_file(&data, &rules).unwrap();
    let refused = |bad: &[u8]| plan_object_cut(bad, 0, &pruned.units).unwrap_err();
    // Relocations applied inside .hip_fatbin: .rela.hipFatBinSegment's
    // sh_info pointed at it.
    let rela = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".rela.hipFatBinSegment").unwrap();
    let mut bad = data.clone();
    bad[shoff + rela * 64 + 44..shoff + rela * 64 + 48].copy_from_slice(&(fat as u32).to_le_bytes());
    let e = refused(&bad).to_string();
    assert!(e.contains("inside a fat binary section"), "{e}");
    // A symbol inside the section but not at a fat binary's start: nvcc's
    // fatbinData moved 8 bytes in.
    let cuda = cli_fixture("cuda/obj_sm80.o");
    let cfile = ElfFile::parse(&cuda).unwrap();
    let symtab = section(&cfile, ".symtab");
    let names = cfile.string_table(symtab.link as usize).unwrap();
    let sym = (0..symtab.size / 24)
        .map(|i| (symtab.offset + i * 24) as usize)
        .find(|&at| {
            let name = u32::from_le_bytes(cuda[at..at + 4].try_into().unwrap());
            offload_format::elf::c_string(names, name) == Some(b"fatbinData".as_slice())
        })
        .unwrap();
    let mut bad = cuda.clone();
    bad[sym + 8..sym + 16].copy_from_slice(&8u64.to_le_bytes());
    let (input, pruned) = plan_file(&bad, &keep(&["sm_75"])).unwrap();
    let e = plan_file_cut(&bad, &input, &pruned).unwrap_err();
    assert!(matches!(e, PruneError::CutRefused(_)), "{e}");
    assert!(e.to_string().contains("at no fat binary's start"), "{e}");
    // A relocation leading into the middle of the bundle.
    let mut bad = data.clone();
    let at = section(&file, ".rela.hipFatBinSegment").offset as usize + 16;
    bad[at..at + 8].copy_from_slice(&16u64.to_le_bytes());
    assert!(refused(&bad).to_string().contains("at no fat binary's start"));
    // REL relocations (implicit addends) through the section.
    let mut bad = data.clone();
    let rela = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".rela.hipFatBinSegment").unwrap();
    bad[shoff + rela * 64 + 4..shoff + rela * 64 + 8].copy_from_slice(&offload_format::elf::SHT_REL.to_le_bytes());
    assert!(matches!(refused(&bad), PruneError::CutRefused(_)));
}

#[test]
fn the_check_catches_a_wrong_output() {
    let data = hip_fixture("tu12_r.o");
    let rules = keep(&["gfx906"]);
    let (_, pruned) = plan_file(&data, &rules).unwrap();
    let cut = plan_object_cut(&data, 0, &pruned.units).unwrap();
    let good = cut.output_plan(&data, 0, &pruned.units).to_vec();
    verify_object_cut(&good, 0, &data, 0, &pruned.units, &cut).unwrap();
    let file = ElfFile::parse(&good).unwrap();
    let text = section(&file, ".text").offset as usize;
    let rela = section(&file, ".rela.hipFatBinSegment").offset as usize;
    let fat = section(&file, ".hip_fatbin");
    for at in [text + 3, rela + 24 + 16, fat.offset as usize + 100, (fat.offset + fat.size) as usize - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        assert!(verify_object_cut(&bad, 0, &data, 0, &pruned.units, &cut).is_err(), "flip at {at:#x}");
    }
    assert!(verify_object_cut(&good[..good.len() - 1], 0, &data, 0, &pruned.units, &cut).is_err());
}

/// A GNU archive of a HIP object, a CUDA object and a text file.
fn archive() -> Vec<u8> {
    let members = vec![
        ("tu12_r.o".to_string(), hip_fixture("tu12_r.o")),
        ("readme.txt".to_string(), b"odd sized text\n\n".to_vec()),
        ("obj_sm80.o".to_string(), cli_fixture("cuda/obj_sm80.o")),
        ("a-member-with-a-long-name.o".to_string(), hip_fixture("tu1.o")),
    ];
    offload_format::bundle::archive::write_gnu_archive(members).unwrap()
}

#[test]
fn archives_cut_every_member_and_move_the_symbol_table_offsets() {
    let data = archive();
    let rules = keep(&["gfx90a:xnack+", "sm_75"]);
    let (out, cut, input) = cut_ok(&data, &rules);
    assert!(matches!(input, Input::Archive { members: 3, .. }));
    let FileCut::Archive(cut) = cut else { panic!("not an archive cut") };
    assert!(out.len() < data.len());
    assert_eq!(out.len() as u64, cut.output_len);
    let names = |d: &[u8]| -> Vec<(String, Vec<u8>)> {
        let a = object::read::archive::ArchiveFile::parse(d).unwrap();
        a.members()
            .map(|m| {
                let m = m.unwrap();
                (String::from_utf8_lossy(m.name()).into_owned(), m.data(d).unwrap().to_vec())
            })
            .collect()
    };
    let (before, after) = (names(&data), names(&out));
    assert_eq!(before.iter().map(|m| &m.0).collect::<Vec<_>>(), after.iter().map(|m| &m.0).collect::<Vec<_>>());
    // Each member is what cutting it alone gives.
    for ((name, old), (_, new)) in before.iter().zip(&after) {
        if name == "readme.txt" {
            assert_eq!(old, new);
            continue;
        }
        let (alone, _, _) = cut_ok(old, &rules);
        assert_eq!(&alone, new, "{name}");
        assert!(new.len() < old.len(), "{name}");
    }
    let symbols = |d: &[u8]| -> Vec<(Vec<u8>, u64)> {
        let a = object::read::archive::ArchiveFile::parse(d).unwrap();
        a.symbols().unwrap().unwrap().map(|s| s.unwrap()).map(|s| (s.name().to_vec(), s.offset().0)).collect()
    };
    let (old_syms, new_syms) = (symbols(&data), symbols(&out));
    assert!(!old_syms.is_empty());
    assert_eq!(old_syms.iter().map(|s| &s.0).collect::<Vec<_>>(), new_syms.iter().map(|s| &s.0).collect::<Vec<_>>());
    assert_ne!(old_syms, new_syms, "later members moved");
    // Every symbol still names its member: reading the member at the new
    // offset gives the same name.
    let a = object::read::archive::ArchiveFile::parse(&out[..]).unwrap();
    let b = object::read::archive::ArchiveFile::parse(&data[..]).unwrap();
    for ((_, o), (_, n)) in old_syms.iter().zip(&new_syms) {
        let (mo, mn) =
            (b.member(object::read::archive::ArchiveOffset(*o)), a.member(object::read::archive::ArchiveOffset(*n)));
        assert_eq!(mo.unwrap().name(), mn.unwrap().name());
    }
}

#[test]
fn an_archive_check_catches_a_wrong_symbol_offset() {
    let data = archive();
    let rules = keep(&["gfx906"]);
    let (_, pruned) = plan_file(&data, &rules).unwrap();
    let cut = plan_archive_cut(&data, &pruned).unwrap();
    let good = cut.output_plan(&data, &pruned).to_vec();
    super::cut_archive::verify_archive_cut(&good, &data, &pruned, &cut).unwrap();
    // The GNU table: a count, then big-endian offsets from byte 68 + 4.
    let mut bad = good.clone();
    bad[68 + 4 + 3] ^= 2;
    assert!(super::cut_archive::verify_archive_cut(&bad, &data, &pruned, &cut).is_err());
    let mut bad = good.clone();
    let last = bad.len() - 200;
    bad[last] ^= 1;
    assert!(super::cut_archive::verify_archive_cut(&bad, &data, &pruned, &cut).is_err());
}

#[test]
fn damaged_objects_and_archives_never_panic() {
    let rules = keep(&["gfx90a", "sm_80"]);
    for data in [hip_fixture("tu12_r.o"), cli_fixture("cuda/obj_lto.o"), archive()] {
        let step = (data.len() / 300).max(1);
        let try_cut = |bad: &[u8]| {
            let Ok((input, pruned)) = plan_file(bad, &rules) else { return };
            let Ok(Some(cut)) = plan_file_cut(bad, &input, &pruned) else { return };
            let out = cut.output_plan(bad, &pruned).to_vec();
            cut.verify(&out, bad, &pruned).unwrap_or_else(|e| panic!("planned, then refused by the check: {e}"));
        };
        for at in (0..data.len()).step_by(step) {
            for value in [0x00, 0xff, data[at] ^ 0x80] {
                let mut bad = data.clone();
                bad[at] = value;
                try_cut(&bad);
            }
        }
        for end in (0..data.len()).step_by((data.len() / 40).max(1)) {
            try_cut(&data[..end]);
        }
    }
}
