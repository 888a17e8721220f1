use super::*;

macro_rules! fixture {
    ($name:expr) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kernels/", $name))
    };
}

const SCALE906: &[u8] = fixture!("scale906.co");
const SCALE90A: &[u8] = fixture!("scale90a.co");

/// Numbers from `llvm-readelf-19 --notes scale906.co`.
#[test]
fn reads_the_kernel_of_a_hip_code_object() {
    let co = read(SCALE906).unwrap();
    assert_eq!(co.metadata_version, Some((1, 2)));
    assert_eq!(co.code_object_version, Some(5));
    assert_eq!(co.target.as_deref(), Some("amdgcn-amd-amdhsa--gfx906"));
    assert_eq!(co.kernels.len(), 1);
    let k = &co.kernels[0];
    assert_eq!(k.name, "_Z5scalePff");
    assert_eq!(k.symbol, "_Z5scalePff.kd");
    assert_eq!(k.vgpr_count, Some(2));
    assert_eq!(k.agpr_count, None);
    assert_eq!(k.sgpr_count, Some(10));
    assert_eq!(k.group_segment_fixed_size, Some(0));
    assert_eq!(k.private_segment_fixed_size, Some(0));
    assert_eq!(k.kernarg_segment_size, Some(12));
    assert_eq!(k.wavefront_size, Some(64));
    assert_eq!(k.max_flat_workgroup_size, Some(1024));
    assert_eq!(k.uniform_work_group_size, Some(true));
    assert_eq!(k.uses_dynamic_stack, Some(false));
    assert_eq!(k.vgpr_spill_count, Some(0));
    assert_eq!(k.sgpr_spill_count, Some(0));
    assert_eq!(
        k.descriptor,
        Some(KernelDescriptor { group_segment_fixed_size: 0, private_segment_fixed_size: 0, kernarg_size: 12 })
    );
    assert!(k.mismatches.is_empty(), "{:?}", k.mismatches);
}

#[test]
fn gfx90a_has_agprs() {
    let co = read(SCALE90A).unwrap();
    assert_eq!(co.target.as_deref(), Some("amdgcn-amd-amdhsa--gfx90a:xnack+"));
    assert_eq!(co.kernels[0].agpr_count, Some(0));
    assert!(co.kernels[0].mismatches.is_empty());
}

/// Patches the descriptor's kernarg size: the cross-check must report it.
#[test]
fn a_descriptor_that_disagrees_is_reported() {
    let elf = ElfFile::parse(SCALE906).unwrap();
    let syms = symtab(&elf).unwrap();
    let kd = syms.iter().find(|s| s.name == b"_Z5scalePff.kd").unwrap();
    let sh = elf.sections[usize::from(kd.shndx)];
    let at = (sh.offset + kd.value - sh.addr) as usize + 8;
    let mut data = SCALE906.to_vec();
    data[at..at + 4].copy_from_slice(&40u32.to_le_bytes());
    let co = read(&data).unwrap();
    assert_eq!(co.kernels[0].mismatches.len(), 1, "{:?}", co.kernels[0].mismatches);
    assert!(co.kernels[0].mismatches[0].contains("kernarg_segment_size is 12"));
}

fn note_range(data: &[u8]) -> (usize, usize) {
    let elf = ElfFile::parse(data).unwrap();
    let i = elf.sections.iter().position(|s| s.sh_type == SHT_NOTE).unwrap();
    (elf.sections[i].offset as usize, elf.sections[i].size as usize)
}

/// Every truncation of the metadata note and every single-byte change in
/// it gives a result or an error, never a panic; a descriptor size that
/// runs past the section is an error.
#[test]
fn damaged_notes_are_errors_not_panics() {
    let (off, size) = note_range(SCALE906);
    let mut data = SCALE906.to_vec();
    data[off + 4..off + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(read(&data).unwrap_err().to_string().contains("runs past the section"));
    let mut errors = 0;
    for i in off..off + size {
        for v in [0u8, 0x7f, 0xc1, 0xdc, 0xff] {
            let mut data = SCALE906.to_vec();
            data[i] = v;
            errors += usize::from(read(&data).is_err());
        }
    }
    assert!(errors > 0);
    for cut in 0..SCALE906.len() {
        let _ = read(&SCALE906[..cut]);
    }
}

#[test]
fn not_amdgpu_is_an_error() {
    let host =
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/objects/host-x86_64.o"));
    assert!(read(host).unwrap_err().to_string().contains("not an AMDGPU"));
}

/// Keys of one kernel as `llvm-readelf --notes` prints them.
fn as_readelf(k: &KernelInfo) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut put = |key: &str, v: Option<String>| {
        if let Some(v) = v {
            out.push((key.to_owned(), v));
        }
    };
    let n = |v: Option<u64>| v.map(|v| v.to_string());
    put(".name", Some(k.name.clone()));
    put(".symbol", Some(k.symbol.clone()));
    put(".vgpr_count", n(k.vgpr_count));
    put(".agpr_count", n(k.agpr_count));
    put(".sgpr_count", n(k.sgpr_count));
    put(".group_segment_fixed_size", n(k.group_segment_fixed_size));
    put(".private_segment_fixed_size", n(k.private_segment_fixed_size));
    put(".uses_dynamic_stack", k.uses_dynamic_stack.map(|b| b.to_string()));
    put(".vgpr_spill_count", n(k.vgpr_spill_count));
    put(".sgpr_spill_count", n(k.sgpr_spill_count));
    put(".wavefront_size", n(k.wavefront_size));
    put(".max_flat_workgroup_size", n(k.max_flat_workgroup_size));
    put(".kernarg_segment_size", n(k.kernarg_segment_size));
    put(".uniform_work_group_size", k.uniform_work_group_size.map(|b| u8::from(b).to_string()));
    out.sort();
    out
}

/// The same keys read from `llvm-readelf --notes` output: a kernel starts
/// at a `  - .key:` line, its keys are the `    .key:` lines.
fn parse_readelf(text: &str) -> Vec<Vec<(String, String)>> {
    const KEYS: &[&str] = &[
        ".name",
        ".symbol",
        ".vgpr_count",
        ".agpr_count",
        ".sgpr_count",
        ".group_segment_fixed_size",
        ".private_segment_fixed_size",
        ".uses_dynamic_stack",
        ".vgpr_spill_count",
        ".sgpr_spill_count",
        ".wavefront_size",
        ".max_flat_workgroup_size",
        ".kernarg_segment_size",
        ".uniform_work_group_size",
    ];
    let mut kernels: Vec<Vec<(String, String)>> = Vec::new();
    for line in text.lines() {
        let (start, rest) = if let Some(r) = line.strip_prefix("  - ").filter(|r| r.starts_with('.')) {
            (true, r)
        } else if let Some(r) = line.strip_prefix("    ").filter(|r| r.starts_with('.')) {
            (false, r)
        } else {
            continue;
        };
        if start {
            kernels.push(Vec::new());
        }
        let Some((key, value)) = rest.split_once(':') else { continue };
        let value = value.trim().trim_matches('\'').to_owned();
        if let (Some(k), true) = (kernels.last_mut(), KEYS.contains(&key)) {
            k.push((key.to_owned(), value));
        }
    }
    for k in &mut kernels {
        k.sort();
    }
    kernels
}

/// Every kernel and number equal to `llvm-readelf-19 --notes`, when that
/// tool is installed: on the fixtures, and on the code objects named in
/// `OFFLOAD_KERNELS_ORACLE_FILES` (colon-separated; e.g. code objects
/// extracted from the real corpus of scripts/fetch-real-corpus.sh).
/// Every kernel and value equals what `llvm-readelf --notes` prints, for
/// each of LLVM 19's and 22's readelf that is installed (ignored without
/// either; under `OFFLOAD_REQUIRE_LLVM=1` both must be there).
#[test]
#[cfg_attr(not(has_readelf), ignore = "needs llvm-readelf of LLVM 19 or 22: run scripts/install-reference-llvm.sh")]
fn equal_to_llvm_readelf_notes() {
    let mut files = vec![
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kernels/scale906.co").to_owned(),
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kernels/scale90a.co").to_owned(),
    ];
    if let Ok(extra) = std::env::var("OFFLOAD_KERNELS_ORACLE_FILES") {
        files.extend(extra.split(':').filter(|s| !s.is_empty()).map(str::to_owned));
    }
    let readelfs: Vec<&str> = ["/usr/lib/llvm-19/bin/llvm-readelf", "/usr/lib/llvm-22/bin/llvm-readelf"]
        .into_iter()
        .filter(|p| std::path::Path::new(p).is_file())
        .collect();
    let required = std::env::var("OFFLOAD_REQUIRE_LLVM").is_ok_and(|v| v == "1");
    assert!(!(required && readelfs.len() < 2), "OFFLOAD_REQUIRE_LLVM=1 but LLVM 19's or 22's llvm-readelf is missing");
    assert!(!readelfs.is_empty(), "build.rs found an llvm-readelf of LLVM 19 or 22");
    let co: Vec<_> = files.iter().map(|f| read(&std::fs::read(f).unwrap()).unwrap()).collect();
    for readelf in &readelfs {
        let (mut compared_kernels, mut compared_values) = (0, 0);
        for (f, co) in files.iter().zip(&co) {
            let out = std::process::Command::new(readelf).arg("--notes").arg(f).output().unwrap();
            let theirs = parse_readelf(&String::from_utf8_lossy(&out.stdout));
            let ours: Vec<_> = co.kernels.iter().map(as_readelf).collect();
            assert_eq!(ours, theirs, "{f} ({readelf})");
            for k in &co.kernels {
                assert!(k.mismatches.is_empty(), "{f}: {:?}", k.mismatches);
            }
            compared_kernels += ours.len();
            compared_values += ours.iter().map(Vec::len).sum::<usize>();
        }
        eprintln!("{readelf}: {} files, {compared_kernels} kernels, {compared_values} values equal", files.len());
        assert!(compared_kernels >= 2);
    }
}
