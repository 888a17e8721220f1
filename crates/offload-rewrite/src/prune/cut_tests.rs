//! Cut-mode pruning of the clang-built fixtures of `layout`'s tests.

use super::*;
use offload_format::elf::segments;
fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}

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

fn section<'d>(file: &offload_format::elf::ElfFile<'d>, name: &str) -> (usize, offload_format::elf::SectionHeader) {
    let i = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == name.as_bytes()).unwrap();
    (i, file.sections[i])
}

#[test]
fn the_cut_keeps_addresses_and_moves_the_program_headers_into_the_hole() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu"] {
        let data = fixture(name);
        let (out, cut) = cut_ok(&data, &keep(&["gfx90a:xnack-"]));
        let (old_phoff, old_segments) = segments::read(&data).unwrap();
        let (phoff, new_segments) = segments::read(&out).unwrap();
        assert_ne!(phoff, old_phoff, "{name}");
        assert_eq!(phoff, cut.phdr_offset);
        assert_eq!(new_segments.len(), old_segments.len() + 1, "{name}: one PT_LOAD more");
        // The table sits right after the packed fat binaries, at the
        // distance from its address that the first PT_LOAD has.
        let first = new_segments.iter().find(|s| s.kind == segments::PT_LOAD).unwrap();
        let holder = new_segments
            .iter()
            .find(|s| s.kind == segments::PT_LOAD && phoff >= s.offset && phoff < s.offset + s.filesz)
            .unwrap();
        assert_eq!(holder.vaddr - holder.offset, first.vaddr - first.offset, "{name}");
        assert_eq!(phoff, (cut.fatbin_offset + cut.fatbin_size).next_multiple_of(8), "{name}");
        segments::check_loads(&new_segments, out.len() as u64).unwrap();
        // Unwind data moved in the file but not in memory, with its bytes.
        let (old, new) =
            (offload_format::elf::ElfFile::parse(&data).unwrap(), offload_format::elf::ElfFile::parse(&out).unwrap());
        let (i, eh_old) = section(&old, ".eh_frame");
        let (_, eh_new) = section(&new, ".eh_frame");
        assert_eq!((eh_new.addr, eh_new.offset), (eh_old.addr, eh_old.offset - cut.removed), "{name}");
        assert_eq!(new.section_data(i).unwrap(), old.section_data(i).unwrap(), "{name}");
        // The map of the output: packed 4096-aligned units, kept entries only.
        let map = FileMap::read(&out).unwrap();
        assert_eq!(map.units[0].section_offset, 0);
        assert!(map.units.iter().all(|u| u.section_offset % 4096 == 0 && u.extent - u.used < 4096), "{name}");
    }
}

#[test]
fn small_savings_fall_back_and_objects_are_refused() {
    // One small compressed bundle: nothing like two pages to gain.
    let data = fixture("rdc_ccob_lld.so");
    let map = FileMap::read(&data).unwrap();
    let pruned = plan(&data, &map, &keep(&["gfx906"])).unwrap();
    let Cut::TooSmall { saves, minimum } = plan_cut(&data, &map, &pruned).unwrap() else { panic!("cut") };
    assert!(saves < minimum && minimum == 8192);
    let data = fixture("tu1.o");
    let map = FileMap::read(&data).unwrap();
    let pruned = plan(&data, &map, &keep(&["gfx906"])).unwrap();
    let e = plan_cut(&data, &map, &pruned).unwrap_err().to_string();
    assert!(e.contains("a relocatable object"), "{e}");
}

/// Plans a cut of a damaged copy; the error text.
fn refusal(data: &[u8]) -> String {
    let map = FileMap::read(data).unwrap();
    let pruned = plan(data, &map, &keep(&["gfx906"])).unwrap();
    let e = plan_cut(data, &map, &pruned).unwrap_err();
    assert!(
        matches!(
            e,
            PruneError::CutRefused(_) | PruneError::CutRead(_) | PruneError::CutElf(_) | PruneError::CutSegments(_)
        ),
        "{e}"
    );
    e.to_string()
}

fn put(data: &mut [u8], at: u64, value: u64) {
    data[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn references_into_the_fat_binary_section_are_refused() {
    let data = fixture("gnu_rela.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let (_, fat) = section(&file, ".hip_fatbin");
    let inside = fat.addr + 16;
    // A symbol inside .hip_fatbin, at no fat binary's start.
    let (_, dynsym) = section(&file, ".dynsym");
    let mut d = data.clone();
    let sym = (1..dynsym.size / 24).map(|i| dynsym.offset + i * 24).find(|&at| d[at as usize + 6] != 0).unwrap();
    put(&mut d, sym + 8, inside);
    // Refused as a symbol, or first as a relocation naming it.
    let e = refusal(&d);
    assert!(e.contains("symbol '") && e.contains(".hip_fatbin"), "{e}");
    // A RELATIVE relocation that is not a wrapper's, into the section.
    let (_, rela) = section(&file, ".rela.dyn");
    let wrappers: Vec<u64> = FileMap::read(&data).unwrap().wrappers.iter().map(|w| w.addr + 8).collect();
    let entry = (0..rela.size / 24)
        .map(|i| rela.offset + i * 24)
        .find(|&at| word(&data, at + 8) == 8 && !wrappers.contains(&word(&data, at)))
        .unwrap();
    let mut d = data.clone();
    put(&mut d, entry + 16, inside);
    assert!(refusal(&d).contains("relocation of type 8"));
    // An unknown relocation type on a wrapper's pointer word.
    let entry =
        (0..rela.size / 24).map(|i| rela.offset + i * 24).find(|&at| wrappers.contains(&word(&data, at))).unwrap();
    let mut d = data.clone();
    put(&mut d, entry + 8, 37); // R_X86_64_IRELATIVE
    assert!(FileMap::read(&d).is_err() || refusal(&d).contains("relocation"));
    // A dynamic tag (DT_INIT) pointing into the section.
    let (_, dynamic) = section(&file, ".dynamic");
    let tag = (0..dynamic.size / 16).map(|i| dynamic.offset + i * 16).find(|&at| word(&data, at) == 12).unwrap();
    let mut d = data.clone();
    put(&mut d, tag + 8, inside);
    assert!(refusal(&d).contains("dynamic tag 0xc"));
}

fn word(data: &[u8], at: u64) -> u64 {
    u64::from_le_bytes(data[at as usize..at as usize + 8].try_into().unwrap())
}

#[test]
fn the_check_catches_damage_to_a_cut_output() {
    let data = fixture("gnu_rela.so");
    let map = FileMap::read(&data).unwrap();
    let pruned = plan(&data, &map, &keep(&["gfx906"])).unwrap();
    let Cut::Planned(cut) = plan_cut(&data, &map, &pruned).unwrap() else { panic!("too small") };
    let out = cut.output_plan(&data, &pruned).to_vec();
    let new = offload_format::elf::ElfFile::parse(&out).unwrap();
    let (_, eh) = section(&new, ".eh_frame");
    let (_, text) = section(&new, ".text");
    let wrapper = FileMap::read(&out).unwrap().wrappers[1].offset + 8;
    let damage: [(&str, u64); 5] = [
        ("unwind data", eh.offset + 3),
        ("code", text.offset + 1),
        ("a wrapper pointer", wrapper),
        ("a PT_LOAD's file offset", cut.phdr_offset + 3 * 56 + 9),
        ("the packed fat binaries", cut.unit_offsets[1] + 40),
    ];
    for (what, at) in damage {
        let mut bad = out.clone();
        bad[at as usize] ^= 0x10;
        assert!(verify_cut(&bad, &data, &map, &pruned, &cut).is_err(), "{what} damaged, check passed");
    }
    assert!(verify_cut(&out[..out.len() - 1], &data, &map, &pruned, &cut).is_err());
}

#[test]
fn damaged_inputs_give_errors_not_panics() {
    for name in ["gnu_rela.so", "lld_relr.so", "nopie_gnu"] {
        let data = fixture(name);
        let tail = data.len() - 0x700;
        let positions = (0..0x400).step_by(3).chain((tail..data.len()).step_by(5));
        for at in positions {
            let mut d = data.clone();
            d[at] ^= 0x5a;
            let Ok(map) = FileMap::read(&d) else { continue };
            let Ok(pruned) = plan(&d, &map, &keep(&["gfx906"])) else { continue };
            if let Ok(Cut::Planned(cut)) = plan_cut(&d, &map, &pruned) {
                // Whatever was planned is checked; a pass must be a sound file.
                let out = cut.output_plan(&d, &pruned).to_vec();
                let _ = verify_cut(&out, &d, &map, &pruned, &cut);
            }
        }
    }
}

#[test]
fn sections_the_segments_do_not_map_are_refused() {
    // Found by the prune_cut fuzz target: a .text longer than the
    // segment that maps it (there, 16 GiB; here, still inside the file).
    let data = fixture("lld_relr.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let (i, text) = section(&file, ".text");
    let shoff = word(&data, 40);
    let mut d = data.clone();
    put(&mut d, shoff + i as u64 * 64 + 32, text.size + 0x800);
    let e = refusal(&d);
    assert!(e.contains("section .text is not where the program headers map it"), "{e}");
}

#[test]
fn program_headers_the_loads_do_not_map_are_refused() {
    // Found by the prune_cut fuzz target: a GNU_EH_FRAME whose address
    // and offset disagree with the PT_LOAD holding them.
    let data = fixture("gnu_rela.so");
    let (phoff, old) = segments::read(&data).unwrap();
    let j = old.iter().position(|s| s.kind == 0x6474_e550).unwrap();
    let mut d = data.clone();
    put(&mut d, phoff + j as u64 * 56 + 16, 0x2c30);
    let e = refusal(&d);
    assert!(e.contains(&format!("program header {j} (type 0x6474e550) is not where")), "{e}");
}

#[test]
fn overlapping_segments_in_the_input_are_refused() {
    // Found by the prune_cut fuzz target: a PT_LOAD with a huge p_memsz.
    let data = fixture("lld_relr.so");
    let (phoff, old) = segments::read(&data).unwrap();
    let j = old.iter().enumerate().filter(|(_, s)| s.kind == segments::PT_LOAD).nth(1).unwrap().0;
    let mut d = data.clone();
    put(&mut d, phoff + j as u64 * 56 + 40, 0x4000_0000_0000_0540);
    let e = refusal(&d);
    assert!(e.contains("the input's PT_LOAD 1 and 2"), "{e}");
}

#[test]
fn sections_past_the_end_of_the_file_are_refused() {
    // Found by the prune_cut fuzz target: a .comment past the end.
    let data = fixture("lld_relr.so");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let (i, _) = section(&file, ".comment");
    let mut d = data.clone();
    put(&mut d, word(&data, 40) + i as u64 * 64 + 24, data.len() as u64);
    let e = refusal(&d);
    assert!(e.contains(&format!("section contents at offset {:#x}: ", data.len())), "{e}");
    assert!(e.contains("bytes needed, 0 available"), "{e}");
}
