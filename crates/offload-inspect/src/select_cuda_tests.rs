//! The CUDA driver's choice on hand-built fat binaries (headers only: the
//! rules read nothing else). Real files: `offload-cli/tests/cli/cuda_fixtures.rs`.

use super::*;
use crate::{Options, scan};
use offload_format::cuda::{FATBIN_MAGIC_BYTES, flags};

/// A fat binary of 64-byte-header entries (kind, arch, flags) with 8-byte
/// payloads.
fn fatbin(entries: &[(u16, u32, u64)]) -> Vec<u8> {
    let mut body = Vec::new();
    for &(kind, arch, bits) in entries {
        let mut e = vec![0u8; 72];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&8u64.to_le_bytes());
        e[0x1c..0x20].copy_from_slice(&arch.to_le_bytes());
        e[0x28..0x30].copy_from_slice(&(0x11 | bits).to_le_bytes());
        body.extend_from_slice(&e);
    }
    let mut f = FATBIN_MAGIC_BYTES.to_vec();
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&16u16.to_le_bytes());
    f.extend_from_slice(&(body.len() as u64).to_le_bytes());
    f.extend_from_slice(&body);
    f
}

const ELF: u16 = 2;
const PTX: u16 = 1;
const NVVM: u16 = 8;

/// The chosen IDs and every other entry's reason code, for GPU `g`.
fn pick(entries: &[(u16, u32, u64)], g: &str) -> (Vec<String>, Vec<&'static str>, Vec<usize>) {
    let data = fatbin(entries);
    let inv = scan(&data, "f", &Options::default());
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    let gpu = Gpu::parse(g).unwrap();
    let sel = select(&inv.objects, &gpu);
    let chosen = sel.chosen.iter().map(|&i| inv.objects[i].id.clone()).collect();
    let reasons = sel
        .verdicts
        .iter()
        .map(|v| match v {
            Some(Verdict::Selected(_)) => "selected",
            Some(Verdict::NotChosen { .. }) => "not-chosen",
            Some(Verdict::Rejected(r)) => r.code(),
            None => "container",
        })
        .collect();
    (chosen, reasons, sel.failed_units)
}

#[test]
fn same_major_lower_minor_cubins_run_and_the_nearest_wins() {
    let entries = [(ELF, 75, 0), (ELF, 80, 0), (ELF, 86, 0), (ELF, 90, 0), (PTX, 90, 0)];
    let (chosen, reasons, failed) = pick(&entries, "sm_89");
    assert_eq!(chosen, ["cuda-elf-sm_86"]);
    assert_eq!(reasons, ["other-major", "not-chosen", "selected", "other-major", "newer-arch"]);
    assert!(failed.is_empty());
    // sm_86 does not run on 8.0.
    let (chosen, reasons, _) = pick(&entries, "8.0");
    assert_eq!(chosen, ["cuda-elf-sm_80"]);
    assert_eq!(reasons[2], "newer-minor");
}

#[test]
fn cubin_before_ptx_and_ptx_jit_above_its_arch() {
    let entries = [(ELF, 86, 0), (PTX, 86, 0)];
    let (chosen, reasons, _) = pick(&entries, "sm_86");
    assert_eq!((chosen, reasons), (vec!["cuda-elf-sm_86".to_string()], vec!["selected", "ptx-not-needed"]));
    let (chosen, reasons, _) = pick(&entries, "compute_90");
    assert_eq!((chosen, reasons), (vec!["cuda-ptx-sm_86".to_string()], vec!["other-major", "selected"]));
}

#[test]
fn arch_and_family_specific_code() {
    let entries = [(ELF, 90, flags::ARCH_A), (ELF, 100, flags::ARCH_F), (PTX, 100, flags::ARCH_A)];
    let (chosen, _, failed) = pick(&entries, "sm_86");
    assert!(chosen.is_empty());
    assert_eq!(failed, [0]);
    assert_eq!(pick(&entries, "sm_90").0, ["cuda-elf-sm_90a"]);
    // sm_100f runs on 10.0 and 10.3; compute_100a only on 10.0.
    let (chosen, reasons, _) = pick(&entries, "sm_103");
    assert_eq!(chosen, ["cuda-elf-sm_100f"]);
    assert_eq!(reasons, ["arch-specific", "selected", "arch-specific"]);
    let (_, reasons, _) = pick(&entries, "sm_100");
    assert_eq!(reasons, ["arch-specific", "selected", "ptx-not-needed"]);
}

#[test]
fn ties_prefer_cubins_without_the_sm100_flag_and_the_last_ptx() {
    let (chosen, _, _) = pick(&[(ELF, 100, flags::SM100_ELF), (ELF, 100, 0)], "sm_100");
    assert_eq!(chosen, ["cuda-elf-sm_100"]);
    let data = fatbin(&[(PTX, 80, 0), (PTX, 80, 0)]);
    let inv = scan(&data, "f", &Options::default());
    let sel = select(&inv.objects, &Gpu::parse("sm_80").unwrap());
    assert_eq!(sel.chosen, [1]);
}

#[test]
fn lto_ir_is_never_loaded() {
    let (chosen, reasons, failed) = pick(&[(NVVM, 80, flags::OBFUSCATED | flags::ZSTD)], "sm_80");
    assert!(chosen.is_empty() && failed.is_empty());
    assert_eq!(reasons, ["lto-ir"]);
}

#[test]
fn gpus_in_every_notation() {
    for text in ["sm_86", "compute_86", "8.6"] {
        assert_eq!(Gpu::parse(text).unwrap().processor, "sm_86", "{text}");
    }
    assert!(Gpu::parse("sm_90a").is_err());
    assert!(Gpu::parse("9.10").is_err());
}
