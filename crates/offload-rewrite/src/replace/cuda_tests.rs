//! CUDA `replace` on the nvcc-made fixtures of the CLI crate
//! (`offload-cli/tests/fixtures/cuda/COMMANDS.md`): a cubin replaced in
//! place in an object and a shared library, standalone `.fatbin` files
//! rewritten (stored and zstd-compressed entries), a grown fat binary moved
//! (an object's section, a library's `.nv_fatbin` to a new segment), PTX
//! replaced, and the refusals (wrong SM, missing kernel, not a cubin, concatenated entry).

use super::super::{Placement, ReplaceError, plan, verify};
use offload_format::cuda::{EntryKind, code_object_bytes, fat_binaries};
use offload_inspect::layout::FileMap;

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::cli_fixture(&format!("cuda/{name}"))
}

/// The CUDA sections of an ELF file, or the whole file for a `.fatbin`.
fn regions(data: &[u8]) -> Vec<&[u8]> {
    if data.starts_with(b"\x50\xed\x55\xba") {
        return vec![data];
    }
    let elf = offload_format::elf::ElfFile::parse(data).unwrap();
    (1..elf.sections.len())
        .filter(|&i| matches!(elf.section_name(i).unwrap(), b".nv_fatbin" | b"__nv_relfatbin"))
        .map(|i| elf.section_data(i).unwrap())
        .collect()
}

/// Every entry of `data` as (kind, arch, code object).
fn entries(data: &[u8]) -> Vec<(EntryKind, String, Vec<u8>)> {
    let mut all = Vec::new();
    for region in regions(data) {
        for fatbin in fat_binaries(region) {
            for e in fatbin.unwrap().1.entries() {
                let e = e.unwrap();
                let code = code_object_bytes(&e).map(|c| c.to_vec()).unwrap_or_default();
                all.push((e.header.kind(), e.header.arch().to_string(), code));
            }
        }
    }
    all
}

fn code(data: &[u8], kind: EntryKind, arch: &str) -> Vec<u8> {
    entries(data).into_iter().find(|e| e.0 == kind && e.1 == arch).unwrap().2
}

/// A cubin with other code: one byte of the kernel's `.text` flipped
/// (kern.cubin's `.text._Z5scalePffi` starts at 0x700).
fn changed(cubin: &[u8]) -> Vec<u8> {
    let mut new = cubin.to_vec();
    new[0x710] ^= 0xff;
    new
}

/// A valid, larger cubin: its program header table moved `pad` bytes
/// further out, past zeros.
fn grown(cubin: &[u8], pad: usize) -> Vec<u8> {
    let phoff = u64::from_le_bytes(cubin[32..40].try_into().unwrap()) as usize;
    let table = cubin[phoff..].to_vec();
    let mut new = changed(cubin);
    let at = new.len() + pad;
    new.resize(at, 0);
    new.extend_from_slice(&table);
    new[32..40].copy_from_slice(&(at as u64).to_le_bytes());
    new
}

/// Plans, writes and verifies; checks that only the asked entry changed.
fn replace_ok(data: &[u8], new: &[u8], wanted: &str, kind: EntryKind, arch: &str) -> (Vec<u8>, Placement) {
    let replaced = plan(data, new, wanted, None).unwrap();
    let out = replaced.output().to_vec();
    verify(&out, data, &replaced, new).unwrap();
    let (before, after) = (entries(data), entries(&out));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((a.0, &a.1), (b.0, &b.1));
        if a.0 == kind && a.1 == arch {
            let ptx = kind == EntryKind::Ptx;
            let expected = if ptx { new.strip_suffix(b"\0").unwrap_or(new) } else { new };
            assert!(
                a.2 == expected,
                "{wanted}: the new code is in place ({} bytes, {} expected)",
                a.2.len(),
                expected.len()
            );
            assert!(a.2 != b.2);
        } else {
            assert!(a.2 == b.2, "{wanted}: other entries are unchanged");
        }
    }
    (out, replaced.placement)
}

#[test]
fn a_cubin_of_an_object_and_a_library_is_replaced_in_place() {
    let new = changed(&fixture("kern.cubin"));
    let data = fixture("obj_sm80.o");
    let (out, placement) = replace_ok(&data, &new, "sm_80", EntryKind::Elf, "sm_80");
    assert_eq!((placement, out.len()), (Placement::InPlace, data.len()));
    // The full ID names it too.
    assert!(plan(&data, &new, "cuda-elf-sm_80", None).is_ok());

    let lib = fixture("libsmall.so");
    let old75 = code(&lib, EntryKind::Elf, "sm_75");
    let mut new75 = old75.clone();
    let text = new75.len() / 2;
    new75[text] ^= 1;
    let (out, placement) = replace_ok(&lib, &new75, "sm_75", EntryKind::Elf, "sm_75");
    assert_eq!((placement, out.len()), (Placement::InPlace, lib.len()));
}

#[test]
fn a_larger_cubin_rewrites_a_fatbin_file_moves_an_objects_section_and_a_librarys_segment() {
    let new = grown(&fixture("kern.cubin"), 4096);
    let data = fixture("kern_nocompress.fatbin");
    let (out, placement) = replace_ok(&data, &new, "sm_80", EntryKind::Elf, "sm_80");
    assert_eq!(placement, Placement::Rewritten);
    assert!(out.len() > data.len() + 4096);
    // An object: .nv_fatbin moves to the end, its old bytes zeroed.
    let data = fixture("obj_sm80.o");
    let (out, placement) = replace_ok(&data, &new, "sm_80", EntryKind::Elf, "sm_80");
    let Placement::MovedSection { offset } = placement else { panic!("{placement:?}") };
    assert!(offset >= data.len() as u64 && out.len() as u64 > offset + 4096);
    let elf = offload_format::elf::ElfFile::parse(&out).unwrap();
    let fatbin = (1..elf.sections.len()).find(|&i| elf.section_name(i).unwrap() == b".nv_fatbin").unwrap();
    assert_eq!(elf.sections[fatbin].offset, offset);
    // A library: .nv_fatbin moves to a new PT_LOAD, the wrapper pointers
    // follow it to the rebuilt fat binary.
    let lib = fixture("libsmall.so");
    let new75 = grown(&code(&lib, EntryKind::Elf, "sm_75"), 4096);
    let (out, placement) = replace_ok(&lib, &new75, "sm_75", EntryKind::Elf, "sm_75");
    let Placement::NewSegment { offset, addr, segment_offset } = placement else { panic!("{placement:?}") };
    assert!(segment_offset >= lib.len() as u64 && offset > segment_offset && out.len() as u64 > offset + 4096);
    let (before, after) = (FileMap::read_cuda(&lib).unwrap(), FileMap::read_cuda(&out).unwrap());
    assert_eq!((after.fatbin_offset, after.fatbin_addr), (offset, addr));
    assert!(!after.wrappers.is_empty() && after.wrappers.len() == before.wrappers.len());
    for (a, b) in after.wrappers.iter().zip(&before.wrappers) {
        assert_eq!(a.target, b.target, "each record leads to the same fat binary");
        let offload_inspect::layout::Target::Unit(u) = a.target else { panic!("{a:?}") };
        assert_eq!(a.pointer, addr + after.units[u].section_offset);
    }
    let loads = offload_format::elf::segments::read(&out).unwrap().1;
    let last = loads.iter().rfind(|p| p.kind == offload_format::elf::segments::PT_LOAD).unwrap();
    assert_eq!((last.offset, last.filesz), (segment_offset, out.len() as u64 - segment_offset));
    // The old section's bytes are zero.
    let old = &out[before.fatbin_offset as usize..][..before.fatbin_size as usize];
    assert!(old.iter().all(|&b| b == 0));
}

#[test]
fn a_compressed_entry_is_stored_uncompressed() {
    let new = changed(&fixture("kern.cubin"));
    for name in ["kern_zstd_all.fatbin", "kern_lz4.fatbin"] {
        let data = fixture(name);
        let replaced = plan(&data, &new, "sm_80", None).unwrap();
        assert!(replaced.stored_uncompressed, "{name}");
        replace_ok(&data, &new, "sm_80", EntryKind::Elf, "sm_80");
    }
}

#[test]
fn ptx_is_replaced_by_ptx_for_its_target_declaring_its_entries() {
    let data = fixture("kern_nocompress.fatbin");
    let old = String::from_utf8(code(&data, EntryKind::Ptx, "sm_90")).unwrap();
    let new = format!("// rebuilt\n{old}");
    replace_ok(&data, new.as_bytes(), "compute_90", EntryKind::Ptx, "sm_90");
    let wrong = new.replace(".target sm_90", ".target sm_80");
    let err = plan(&data, wrong.as_bytes(), "compute_90", None).unwrap_err().to_string();
    assert!(err.contains(".target is sm_80"), "{err}");
    let renamed = new.replace("_Z5scalePffi", "_Z5scalzPffi");
    let err = plan(&data, renamed.as_bytes(), "compute_90", None).unwrap_err();
    assert_eq!(err, ReplaceError::MissingSymbols { missing: vec!["_Z5scalePffi".into()] });
    // A cubin is not PTX, and PTX is not a cubin.
    assert!(plan(&data, &fixture("kern.cubin"), "compute_90", None).is_err());
    let err = plan(&data, new.as_bytes(), "sm_90", None).unwrap_err().to_string();
    assert!(err.contains("looks like PTX"), "{err}");
}

#[test]
fn wrong_sm_missing_kernels_and_foreign_objects_are_refused() {
    let data = fixture("obj_sm80.o");
    let fatbin = fixture("kern_nocompress.fatbin");
    let sm75 = code(&fatbin, EntryKind::Elf, "sm_75");
    let err = plan(&data, &sm75, "sm_80", None).unwrap_err().to_string();
    assert!(err.contains("built for sm_75") && err.contains("the entry is for sm_80"), "{err}");
    // The kernel's name changed in the string table: it no longer defines it.
    let mut renamed = fixture("kern.cubin");
    let at = renamed.windows(12).rposition(|w| w == b"_Z5scalePffi").unwrap();
    renamed[at + 7] = b'z';
    let err = plan(&data, &renamed, "sm_80", None).unwrap_err();
    assert!(
        matches!(&err, ReplaceError::MissingSymbols { missing } if missing.contains(&"_Z5scalePffi".to_string())),
        "{err}"
    );
    let mut amdgpu = fixture("kern.cubin");
    amdgpu[18..20].copy_from_slice(&224u16.to_le_bytes());
    let err = plan(&data, &amdgpu, "sm_80", None).unwrap_err().to_string();
    assert!(err.contains("AMDGPU"), "{err}");
    let err = plan(&data, b"not a cubin", "sm_80", None).unwrap_err().to_string();
    assert!(err.contains("not an ELF cubin"), "{err}");
    let err = plan(&data, &fixture("kern.cubin"), "sm_86", None).unwrap_err().to_string();
    assert!(err.contains("cuda-elf-sm_80"), "the entries are listed: {err}");
    // Cut anywhere, the new file is refused, never a panic.
    let cubin = fixture("kern.cubin");
    for n in (0..cubin.len()).step_by(97) {
        assert!(plan(&data, &cubin[..n], "sm_80", None).is_err());
    }
}

#[test]
fn a_cubin_inside_a_concatenated_entry_is_refused_by_name() {
    let err = plan(&fixture("concat.fatbin"), &fixture("kern.cubin"), "sm_80", None).unwrap_err();
    assert!(matches!(&err, ReplaceError::NotSupported(m) if m.contains("concatenated")), "{err}");
}

#[test]
fn a_compressed_entry_of_a_linked_file_is_compressed_again_when_it_would_not_fit() {
    // libsmall.so's compute_90 PTX is zstd-compressed and its fat binary
    // has no room for it uncompressed.
    let lib = fixture("libsmall.so");
    let old = code(&lib, EntryKind::Ptx, "sm_90");
    let new = String::from_utf8(old).unwrap().replacen("mul.f32", "add.f32", 1);
    let replaced = plan(&lib, new.as_bytes(), "compute_90", None).unwrap();
    assert!(!replaced.stored_uncompressed, "stored compressed again");
    let (out, placement) = replace_ok(&lib, new.as_bytes(), "compute_90", EntryKind::Ptx, "sm_90");
    assert_eq!((placement, out.len()), (Placement::InPlace, lib.len()));
}

#[test]
fn mutated_inputs_give_errors_or_outputs_that_pass_the_check() {
    let new = changed(&fixture("kern.cubin"));
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in ["obj_sm80.o", "kern_zstd_all.fatbin", "kern_nocompress.fatbin"] {
        let data = fixture(name);
        for _ in 0..300 {
            let mut bad = data.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % bad.len() as u64) as usize;
                bad[at] = next() as u8;
            }
            if let Ok(r) = plan(&bad, &new, "sm_80", None) {
                let out = r.output().to_vec();
                verify(&out, &bad, &r, &new).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
    // A library whose grown sm_75 cubin moves .nv_fatbin to a new segment.
    let lib = fixture("libsmall.so");
    let grown75 = grown(&code(&lib, EntryKind::Elf, "sm_75"), 4096);
    let mut moved = 0;
    for _ in 0..300 {
        let mut bad = lib.clone();
        for _ in 0..1 + next() % 3 {
            let at = (next() % bad.len() as u64) as usize;
            bad[at] = next() as u8;
        }
        if let Ok(r) = plan(&bad, &grown75, "sm_75", None) {
            let out = r.output().to_vec();
            verify(&out, &bad, &r, &grown75).unwrap_or_else(|e| panic!("libsmall.so: {e}"));
            moved += usize::from(matches!(r.placement, Placement::NewSegment { .. }));
        }
    }
    assert!(moved > 100, "most mutations leave a movable file ({moved} of 300)");
}
