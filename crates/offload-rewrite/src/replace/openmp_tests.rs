//! OpenMP `replace` on the clang 19 fixtures of `layout::openmp`'s tests
//! (`tests/fixtures/prune/omp/make.sh`): each storage of the table words
//! (GNU ld RELA with the address in place, lld RELA, lld RELR, absolute in
//! a non-PIE executable), a smaller x86_64 image written in place with its
//! `ImageEnd` following, the gfx90a image named by target ID, and the
//! refusals.

use super::super::{InputKind, Placement, ReplaceError, plan, verify};
use offload_inspect::layout::openmp::OpenMpMap;
use offload_testkit::OPENMP_PROGRAMS as FIXTURES;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/omp/{name}"))
}
use offload_format::offload_binary::OffloadBinary;

fn image(data: &[u8], index: usize) -> Vec<u8> {
    let map = OpenMpMap::read(data).unwrap();
    let im = &map.images[index];
    let binary = &data[im.offset as usize..][..im.size as usize];
    OffloadBinary::parse_all(binary).unwrap()[0].image().to_vec()
}

/// The x86_64 image of gnu_pie without its `.comment` section: 152 bytes
/// smaller, the same symbols.
fn small() -> Vec<u8> {
    fixture("x86_image_small.so")
}

#[test]
fn a_smaller_x86_image_is_written_in_place_whatever_stores_the_table_words() {
    let new = small();
    for name in FIXTURES {
        let data = fixture(name);
        let replaced = plan(&data, &new, "x86_64-pc-linux-gnu", None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((replaced.input, replaced.placement), (InputKind::OpenMp, Placement::InPlace), "{name}");
        assert_eq!(replaced.entry_id, "x86_64-pc-linux-gnu-");
        assert!(replaced.object.symbols.iter().any(|s| s.contains("offload_sum")), "{:?}", replaced.object);
        let out = replaced.output().to_vec();
        verify(&out, &data, &replaced, &new).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.len(), data.len(), "{name}: written in place");
        let (before, after) = (OpenMpMap::read(&data).unwrap(), OpenMpMap::read(&out).unwrap());
        let (old, im) = (&before.images[0], &after.images[0]);
        assert!(new.len() < (old.end - old.start) as usize);
        assert_eq!(im.end - im.start, new.len() as u64, "{name}: ImageEnd follows the new image");
        assert_eq!((im.offset, im.size), (old.offset, old.size), "{name}: the OffloadBinary keeps its place and size");
        assert_eq!(image(&out, 0), new, "{name}");
        assert_eq!(image(&out, 1), image(&data, 1), "{name}: the amdgcn image is untouched");
        // The tail of the old image is zero, reported as such.
        let &[(at, len)] = replaced.zeroed.as_slice() else { panic!("{:?}", replaced.zeroed) };
        assert_eq!(len, old.end - old.start - new.len() as u64);
        assert!(out[at as usize..(at + len) as usize].iter().all(|&b| b == 0));
        // The records register the same images, the x86_64 one ending earlier.
        let regs = |m: &OpenMpMap| m.descriptors.iter().map(|d| d.records.len()).collect::<Vec<_>>();
        assert_eq!(regs(&before), regs(&after));
    }
}

#[test]
fn the_amdgcn_image_is_named_by_target_id_and_must_match_it() {
    let data = fixture("gnu_pie");
    let old = image(&data, 1);
    // Other code: the first byte of .text flipped.
    let elf = offload_format::elf::ElfFile::parse(&old).unwrap();
    let text = (1..elf.sections.len()).find(|&i| elf.section_name(i).unwrap() == b".text").unwrap();
    let mut changed = old.clone();
    changed[elf.sections[text].offset as usize] ^= 1;
    for wanted in ["gfx90a", "amdgcn-amd-amdhsa-gfx90a", "amdgcn-amd-amdhsa--gfx90a"] {
        let r = plan(&data, &changed, wanted, None).unwrap_or_else(|e| panic!("{wanted}: {e}"));
        assert_eq!((r.unit_index, r.object.processor.as_str()), (1, "gfx90a"));
        let out = r.output().to_vec();
        verify(&out, &data, &r, &changed).unwrap();
        assert_eq!(image(&out, 1), changed);
    }
    // Another processor in e_flags (gfx908 is 0x30).
    let mut gfx908 = old.clone();
    gfx908[48] = 0x30;
    let e = plan(&data, &gfx908, "gfx90a", None).unwrap_err().to_string();
    assert!(e.contains("gfx908") && e.contains("amdgcn-amd-amdhsa-gfx90a"), "{e}");
    // An x86_64 image for the amdgcn one, and the reverse.
    let e = plan(&data, &small(), "gfx90a", None).unwrap_err().to_string();
    assert!(e.contains("machine 62"), "{e}");
    let e = plan(&data, &old, "x86_64-pc-linux-gnu", None).unwrap_err().to_string();
    assert!(e.contains("machine 224") && e.contains("x86-64"), "{e}");
}

#[test]
fn missing_symbols_oversized_images_and_unknown_entries_are_refused() {
    let data = fixture("lld_pie");
    // The kernel renamed (in .dynstr and .strtab): the host plugin would
    // not find the entry.
    let mut renamed = small();
    let from = b"offload_sum_l6";
    let mut hits = 0;
    for at in 0..renamed.len() - from.len() {
        if &renamed[at..at + from.len()] == from {
            renamed[at + from.len() - 1] = b'7';
            hits += 1;
        }
    }
    assert!(hits >= 2);
    let e = plan(&data, &renamed, "x86_64-pc-linux-gnu", None).unwrap_err();
    assert!(
        matches!(&e, ReplaceError::MissingSymbols { missing } if missing.iter().any(|m| m.ends_with("_l6"))),
        "{e}"
    );
    // One byte more than the OffloadBinary holds.
    let mut big = image(&data, 0);
    big.push(0);
    let e = plan(&data, &big, "x86_64-pc-linux-gnu", None).unwrap_err();
    assert!(matches!(e, ReplaceError::DoesNotFit { .. }) && e.to_string().contains("OpenMP image"), "{e}");
    let e = plan(&data, &small(), "sm_80", None).unwrap_err().to_string();
    assert!(e.contains("x86_64-pc-linux-gnu-") && e.contains("amdgcn-amd-amdhsa-gfx90a"), "{e}");
    let e = plan(&data, &small(), "x86_64-pc-linux-gnu", Some(2)).unwrap_err();
    assert!(matches!(e, ReplaceError::NoUnit { unit: 2, count: 2 }), "{e}");
    let e = plan(&data, &small(), "x86_64-pc-linux-gnu", Some(1)).unwrap_err();
    assert!(matches!(e, ReplaceError::NoEntry { .. }), "{e}");
    // A relocatable object: its images are not registered yet.
    let e = plan(&fixture("omp_x86.o"), &small(), "x86_64-pc-linux-gnu", None).unwrap_err();
    assert!(matches!(e, ReplaceError::OpenMp(_)), "{e}");
}

#[test]
fn mutated_inputs_give_errors_or_outputs_that_pass_the_check() {
    let new = small();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in FIXTURES {
        let data = fixture(name);
        let mut ok = 0;
        for _ in 0..200 {
            let mut bad = data.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % bad.len() as u64) as usize;
                bad[at] = next() as u8;
            }
            if let Ok(r) = plan(&bad, &new, "x86_64-pc-linux-gnu", None) {
                let out = r.output().to_vec();
                verify(&out, &bad, &r, &new).unwrap_or_else(|e| panic!("{name}: {e}"));
                ok += 1;
            }
        }
        assert!(ok > 50, "{name}: most mutations leave a replaceable file ({ok} of 200)");
    }
}
