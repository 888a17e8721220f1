use super::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kernels/");
const RES_SM80: &[u8] = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kernels/res_sm80.cubin"));

/// Numbers from `cuobjdump -res-usage res_sm80.cubin` (CUDA 13) and the
/// launch bounds in res.cu.
#[test]
fn reads_the_kernels_of_a_cubin() {
    let c = read(RES_SM80).unwrap();
    assert_eq!(c.sm, 80);
    assert_eq!(c.constant_banks, vec![(3, 256)]);
    let names: Vec<_> = c.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["_Z5spillPiPKii", "_Z5plainPfi", "_Z4tilePfPKfi"]);
    let [spill, plain, tile] = &c.kernels[..] else { panic!() };
    assert_eq!(spill.registers, Some(122));
    assert_eq!(spill.min_stack_size, Some(UNKNOWN_STACK));
    assert_eq!(spill.frame_size, Some(384));
    assert_eq!(spill.max_threads, Some([256, 1, 1]));
    assert_eq!(spill.max_reg_count, Some(128));
    assert_eq!(spill.param_count, 3);
    assert_eq!(spill.param_size, Some(20));
    assert_eq!(plain.registers, Some(10));
    assert_eq!(plain.max_threads, None);
    assert_eq!(plain.constant_banks, vec![(0, 364)]);
    assert_eq!(tile.registers, Some(16));
    assert_eq!(tile.shared, 2048);
    assert_eq!(tile.min_stack_size, Some(0));
    assert_eq!(tile.max_threads, Some([128, 1, 1]));
    assert_eq!(tile.constant_banks, vec![(0, 372)]);
}

fn info_sections(data: &[u8]) -> Vec<(usize, usize)> {
    let elf = ElfFile::parse(data).unwrap();
    (0..elf.sections.len())
        .filter(|&i| elf.section_name(i).unwrap().starts_with(b".nv.info"))
        .map(|i| (elf.sections[i].offset as usize, elf.sections[i].size as usize))
        .collect()
}

/// A record size past its section and an unknown format are errors; every
/// byte of every `.nv.info` section changed, and every truncation of the
/// file, gives a result or an error, never a panic.
#[test]
fn damaged_records_are_errors_not_panics() {
    let sections = info_sections(RES_SM80);
    let (off, _) = sections[0];
    let mut data = RES_SM80.to_vec();
    data[off + 2..off + 4].copy_from_slice(&0xfff0u16.to_le_bytes());
    let e = read(&data).unwrap_err();
    let NvInfoError::Section { source, .. } = &e else { panic!("{e:?}") };
    let NvInfoError::Read(read_error) = source.as_ref() else { panic!("{e:?}") };
    assert_eq!((read_error.what, read_error.offset), ("EIATTR record payload", 4));
    assert!(matches!(read_error.kind, crate::bytes::ReadErrorKind::Truncated { need: 0xfff0, .. }), "{e}");
    let mut data = RES_SM80.to_vec();
    data[off] = 9;
    assert!(read(&data).unwrap_err().to_string().contains("unknown format"));
    assert!(records(&[4, 0x2f, 8]).is_err());
    for (off, size) in sections {
        for i in off..off + size {
            for v in [0u8, 1, 4, 0xff] {
                let mut data = RES_SM80.to_vec();
                data[i] = v;
                let _ = read(&data);
            }
        }
    }
    for cut in (0..RES_SM80.len()).step_by(7) {
        let _ = read(&RES_SM80[..cut]);
    }
}

/// cuobjdump's line for one kernel, from our record.
fn as_cuobjdump(k: &CudaKernel) -> String {
    let stack = match k.min_stack_size {
        Some(UNKNOWN_STACK) => "UNKNOWN".to_owned(),
        v => v.unwrap_or(0).to_string(),
    };
    let mut s = format!("REG:{} STACK:{stack} SHARED:{} LOCAL:{}", k.registers.unwrap_or(0), k.shared, k.local);
    for (bank, size) in &k.constant_banks {
        s.push_str(&format!(" CONSTANT[{bank}]:{size}"));
    }
    s
}

/// Every kernel and number equal to `cuobjdump -res-usage`, when it is
/// installed (set CUOBJDUMP or have it on PATH): on the fixtures, and on
/// the cubins named in `OFFLOAD_CUBIN_ORACLE_FILES` (colon-separated).
/// A `-res-usage` line's fields in a fixed order: cuobjdump prints the
/// constant banks in the order of their sections in the file (`CONSTANT[2]`
/// before `CONSTANT[0]` in some of NVIDIA's cubins); the values compared
/// are the same either way.
fn sorted_fields(line: &str) -> String {
    let mut fields: Vec<&str> = line.split(' ').collect();
    fields.sort_unstable();
    fields.join(" ")
}

#[test]
#[cfg_attr(not(has_cuobjdump), ignore = "needs CUDA's cuobjdump: run scripts/install-cuda-tools.sh")]
fn equal_to_cuobjdump_res_usage() {
    // CUDA's cuobjdump: $CUOBJDUMP, else the one scripts/install-cuda-tools.sh
    // unpacks, else PATH's (the test is ignored when build.rs found none).
    let tool = std::env::var("CUOBJDUMP").unwrap_or_else(|_| {
        let unpacked = "/opt/cuda-wheels/nvidia/cu13/bin/cuobjdump";
        if std::path::Path::new(unpacked).is_file() { unpacked.to_owned() } else { "cuobjdump".to_owned() }
    });
    let mut files: Vec<String> =
        ["res_sm80.cubin", "res_sm90_O0.cubin", "clang_nd_sm90.cubin"].iter().map(|f| format!("{DIR}{f}")).collect();
    files.push(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/cuda/kern.cubin").to_owned());
    if let Ok(extra) = std::env::var("OFFLOAD_CUBIN_ORACLE_FILES") {
        files.extend(extra.split(':').filter(|s| !s.is_empty()).map(str::to_owned));
    }
    let (mut kernels, mut values) = (0, 0);
    for f in &files {
        let out = std::process::Command::new(&tool).arg("-res-usage").arg(f).output();
        let out = out.unwrap_or_else(|e| panic!("{tool} (found by build.rs): {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        // "Function NAME:" then "  REG:.. STACK:.. ... TEXTURE:.." ; keep
        // the fields this reader gives.
        let mut theirs = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if let Some(name) = line.trim().strip_prefix("Function ").and_then(|n| n.strip_suffix(':')) {
                let fields: Vec<_> = lines
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .filter(|f| ["REG:", "STACK:", "SHARED:", "LOCAL:", "CONSTANT["].iter().any(|p| f.starts_with(p)))
                    .collect();
                theirs.push((name.to_owned(), sorted_fields(&fields.join(" "))));
            }
        }
        let c = read(&std::fs::read(f).unwrap()).unwrap();
        let ours: Vec<_> = c.kernels.iter().map(|k| (k.name.clone(), sorted_fields(&as_cuobjdump(k)))).collect();
        assert_eq!(ours, theirs, "{f}");
        kernels += ours.len();
        values += ours.iter().map(|(_, s)| s.split(' ').count()).sum::<usize>();
    }
    eprintln!("{} cubins, {kernels} kernels, {values} values equal", files.len());
    assert!(kernels >= 7);
}
