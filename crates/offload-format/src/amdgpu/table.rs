//! The AMDGPU processor table, as data: one row per processor.
//!
//! Sources (facts only; checked with the public sources named here):
//! * names, alternative names, ISA versions and which of the two target-ID
//!   features each processor supports: LLVM's
//!   `llvm/include/llvm/TargetParser/AMDGPUTargetParser.def` on `main`
//!   during LLVM 23's development, 2026 (the successor of the `AMDGCNGPUs`
//!   array in `TargetParser.cpp`), newer than LLVM 22 and ROCm 7.2. Rows
//!   newer than LLVM 19 are marked `NEWER` (which release first had each is
//!   not recorded here). A processor supports the
//!   `xnack` target-ID feature when it has `FEATURE_XNACK_ON_OFF_MODES`,
//!   and `sramecc` when it has `FEATURE_SRAMECC`. One exception, taken from
//!   the binaries: LLVM `main` marks gfx1250 and gfx1251 "XNACK always on"
//!   (no `:xnack±` in their IDs), but ROCm 7.x's compiler (AMD clang 23)
//!   writes their code objects with xnack "any" in `e_flags` (0x549,
//!   0x55a in PyPI's jax-rocm7-plugin and torch-cluster-rocm wheels), so IDs
//!   and GPUs named `gfx1250:xnack±` exist; the inspector accepts them;
//! * `EF_AMDGPU_MACH` numbers: LLVM's `llvm/include/llvm/BinaryFormat/ELF.h`,
//!   as `llvm/test/CodeGen/AMDGPU/elf-header-flags-mach.ll` prints them
//!   (LLVM 19's were also read back from `llc-19` output);
//! * which generic target covers a processor: the "AMDGPU Generic
//!   Processors" table of `llvm/docs/AMDGPUUsage.rst` (same revision); the
//!   HIP runtime's own map (ROCm `clr`, `GenericTargetMapping`) lists a
//!   subset of it;
//! * the `in_llvm19` column: LLVM 19.1.7, checked against its library and
//!   bundler by `tests/llvm19_tables.rs`.
//!
//! gfx940 and gfx941 left LLVM in LLVM 21; they stay here so that older code
//! objects are still recognised.
//!
//! To add a GPU, add one row (keep the family's order).

use super::Processor;

/// Target-ID features: (xnack, sramecc).
const NONE: (bool, bool) = (false, false);
const X: (bool, bool) = (true, false);
const XS: (bool, bool) = (true, true);

/// Whether LLVM 19.1.7 knows the processor.
const IN19: bool = true;
const NEWER: bool = false;

const G9: Option<&str> = Some("gfx9-generic");
const G9_4: Option<&str> = Some("gfx9-4-generic");
const G10_1: Option<&str> = Some("gfx10-1-generic");
const G10_3: Option<&str> = Some("gfx10-3-generic");
const G11: Option<&str> = Some("gfx11-generic");
const G11_7: Option<&str> = Some("gfx11-7-generic");
const G12: Option<&str> = Some("gfx12-generic");
const G12_5: Option<&str> = Some("gfx12-5-generic");

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    aliases: &'static [&'static str],
    (xnack, sramecc): (bool, bool),
    isa_version: (u8, u8, u8),
    elf_mach: u8,
    generic: Option<&'static str>,
    in_llvm19: bool,
) -> Processor {
    Processor { name, aliases, xnack, sramecc, isa_version, elf_mach, generic, in_llvm19 }
}

/// Every AMDGCN processor, in LLVM's order (by GPU kind; generic targets
/// last). Filtering on `in_llvm19` gives LLVM 19.1.7's table in its order.
#[rustfmt::skip]
pub(super) static AMDGCN: [Processor; 63] = [
    // GFX6 (Southern Islands)
    row("gfx600",  &["tahiti"],              NONE, (6, 0, 0),  0x20, None,  IN19),
    row("gfx601",  &["pitcairn", "verde"],   NONE, (6, 0, 1),  0x21, None,  IN19),
    row("gfx602",  &["hainan", "oland"],     NONE, (6, 0, 2),  0x3a, None,  IN19),
    // GFX7 (Sea Islands)
    row("gfx700",  &["kaveri"],              NONE, (7, 0, 0),  0x22, None,  IN19),
    row("gfx701",  &["hawaii"],              NONE, (7, 0, 1),  0x23, None,  IN19),
    row("gfx702",  &[],                      NONE, (7, 0, 2),  0x24, None,  IN19),
    row("gfx703",  &["kabini", "mullins"],   NONE, (7, 0, 3),  0x25, None,  IN19),
    row("gfx704",  &["bonaire"],             NONE, (7, 0, 4),  0x26, None,  IN19),
    row("gfx705",  &[],                      NONE, (7, 0, 5),  0x3b, None,  IN19),
    // GFX8 (Volcanic Islands); only the APUs have xnack
    row("gfx801",  &["carrizo"],             X,    (8, 0, 1),  0x28, None,  IN19),
    row("gfx802",  &["iceland", "tonga"],    NONE, (8, 0, 2),  0x29, None,  IN19),
    row("gfx803",  &["fiji", "polaris10", "polaris11"], NONE, (8, 0, 3), 0x2a, None, IN19),
    row("gfx805",  &["tongapro"],            NONE, (8, 0, 5),  0x3c, None,  IN19),
    row("gfx810",  &["stoney"],              X,    (8, 1, 0),  0x2b, None,  IN19),
    // GFX9 (Vega, CDNA 1-4)
    row("gfx900",  &[],                      X,    (9, 0, 0),  0x2c, G9,    IN19),
    row("gfx902",  &[],                      X,    (9, 0, 2),  0x2d, G9,    IN19),
    row("gfx904",  &[],                      X,    (9, 0, 4),  0x2e, G9,    IN19),
    row("gfx906",  &[],                      XS,   (9, 0, 6),  0x2f, G9,    IN19),
    row("gfx908",  &[],                      XS,   (9, 0, 8),  0x30, None,  IN19),
    row("gfx909",  &[],                      X,    (9, 0, 9),  0x31, G9,    IN19),
    row("gfx90a",  &[],                      XS,   (9, 0, 10), 0x3f, None,  IN19),
    row("gfx90c",  &[],                      X,    (9, 0, 12), 0x32, G9,    IN19),
    row("gfx940",  &[],                      XS,   (9, 4, 0),  0x40, G9_4,  IN19),
    row("gfx941",  &[],                      XS,   (9, 4, 1),  0x4b, G9_4,  IN19),
    row("gfx942",  &[],                      XS,   (9, 4, 2),  0x4c, G9_4,  IN19),
    row("gfx950",  &[],                      XS,   (9, 5, 0),  0x4f, G9_4,  NEWER),
    // GFX10.1 (RDNA 1) has xnack; GFX10.3 and later do not
    row("gfx1010", &[],                      X,    (10, 1, 0), 0x33, G10_1, IN19),
    row("gfx1011", &[],                      X,    (10, 1, 1), 0x34, G10_1, IN19),
    row("gfx1012", &[],                      X,    (10, 1, 2), 0x35, G10_1, IN19),
    row("gfx1013", &[],                      X,    (10, 1, 3), 0x42, G10_1, IN19),
    // GFX10.3 (RDNA 2)
    row("gfx1030", &[],                      NONE, (10, 3, 0), 0x36, G10_3, IN19),
    row("gfx1031", &[],                      NONE, (10, 3, 1), 0x37, G10_3, IN19),
    row("gfx1032", &[],                      NONE, (10, 3, 2), 0x38, G10_3, IN19),
    row("gfx1033", &[],                      NONE, (10, 3, 3), 0x39, G10_3, IN19),
    row("gfx1034", &[],                      NONE, (10, 3, 4), 0x3e, G10_3, IN19),
    row("gfx1035", &[],                      NONE, (10, 3, 5), 0x3d, G10_3, IN19),
    row("gfx1036", &[],                      NONE, (10, 3, 6), 0x45, G10_3, IN19),
    // GFX11 (RDNA 3) and GFX11.5 (RDNA 3.5)
    row("gfx1100", &[],                      NONE, (11, 0, 0), 0x41, G11,   IN19),
    row("gfx1101", &[],                      NONE, (11, 0, 1), 0x46, G11,   IN19),
    row("gfx1102", &[],                      NONE, (11, 0, 2), 0x47, G11,   IN19),
    row("gfx1103", &[],                      NONE, (11, 0, 3), 0x44, G11,   IN19),
    row("gfx1150", &[],                      NONE, (11, 5, 0), 0x43, G11,   IN19),
    row("gfx1151", &[],                      NONE, (11, 5, 1), 0x4a, G11,   IN19),
    row("gfx1152", &[],                      NONE, (11, 5, 2), 0x55, G11,   IN19),
    row("gfx1153", &[],                      NONE, (11, 5, 3), 0x58, G11,   NEWER),
    row("gfx1154", &[],                      NONE, (11, 5, 4), 0x57, G11,   NEWER),
    // GFX11.7. gfx11-7-generic covers gfx1170 and gfx1171
    // (AMDGPUUsage and ROCr's isa.cpp as FlyDSL's arch_families quotes
    // them); gfx1172's membership is not published yet.
    row("gfx1170", &[],                      NONE, (11, 7, 0), 0x5d, G11_7, NEWER),
    row("gfx1171", &[],                      NONE, (11, 7, 1), 0x5e, G11_7, NEWER),
    row("gfx1172", &[],                      NONE, (11, 7, 2), 0x5c, None,  NEWER),
    // GFX12 (RDNA 4) and GFX12.5 (xnack: see the module doc)
    row("gfx1200", &[],                      NONE, (12, 0, 0), 0x48, G12,   IN19),
    row("gfx1201", &[],                      NONE, (12, 0, 1), 0x4e, G12,   IN19),
    row("gfx1250", &[],                      XS,   (12, 5, 0), 0x49, G12_5, NEWER),
    row("gfx1251", &[],                      XS,   (12, 5, 1), 0x5a, G12_5, NEWER),
    // GFX13; gfx13-generic's coverage is not published yet
    row("gfx1310", &[],                      NONE, (13, 1, 0), 0x50, None,  NEWER),
    // Generic targets: code objects that run on every processor whose
    // `generic` column names them.
    row("gfx9-generic",    &[],              X,    (9, 0, 0),  0x51, None,  IN19),
    row("gfx10-1-generic", &[],              X,    (10, 1, 0), 0x52, None,  IN19),
    row("gfx10-3-generic", &[],              NONE, (10, 3, 0), 0x53, None,  IN19),
    row("gfx11-generic",   &[],              NONE, (11, 0, 3), 0x54, None,  IN19),
    row("gfx12-generic",   &[],              NONE, (12, 0, 0), 0x59, None,  IN19),
    row("gfx9-4-generic",  &[],              XS,   (9, 4, 0),  0x5f, None,  NEWER),
    row("gfx12-5-generic", &[],              NONE, (12, 5, 0), 0x5b, None,  NEWER),
    row("gfx11-7-generic", &[],              NONE, (11, 7, 0), 0x62, None,  NEWER),
    row("gfx13-generic",   &[],              NONE, (13, 1, 0), 0x63, None,  NEWER),
];

/// R600 processors (pre-GCN; unchanged since LLVM 19). They have no
/// target-ID features; only the name mapping matters.
pub(super) static R600: [(&str, &[&str]); 16] = [
    ("r600", &["rv630", "rv635"]),
    ("r630", &[]),
    ("rs880", &["rs780", "rv610", "rv620"]),
    ("rv670", &[]),
    ("rv710", &[]),
    ("rv730", &[]),
    ("rv770", &["rv740"]),
    ("cedar", &["palm"]),
    ("cypress", &["hemlock"]),
    ("juniper", &[]),
    ("redwood", &[]),
    ("sumo", &["sumo2"]),
    ("barts", &[]),
    ("caicos", &[]),
    ("cayman", &["aruba"]),
    ("turks", &[]),
];
