//! Which entry of each CUDA fat binary the CUDA driver loads on a GPU
//! (`docs/formats/cuda-fatbin.md` §9), and why each other entry
//! is not loaded. Per fat binary (unit):
//!
//! 1. A cubin `sm_AB` runs on GPU `X.Y` iff A = X and B ≤ Y; `sm_ABa` only
//!    on exactly A.B; `sm_ABf` on A = X with B ≤ Y. PTX `compute_AB` is
//!    JIT-compiled for any GPU at or above A.B; `compute_ABa` only on A.B;
//!    `compute_ABf` as `sm_ABf`. NVVM (LTO) entries and relocatable code
//!    (`__nv_relfatbin`, relocatable cubins) are never loaded as such, nor
//!    are fat binaries of a linked image that no `.nvFatBinSegment` record
//!    registers.
//! 2. A compatible cubin is used before any PTX.
//! 3. Among entries of the chosen kind, the nearest (highest) architecture.
//! 4. Ties: a cubin without flag 0x1000000 first, then file order; PTX the
//!    last in file order (measured by a third party, docs/formats/cuda-fatbin.md §9.4).
//!
//! The PTX JIT also needs a driver that knows the PTX ISA version; that
//! cannot be judged from the file, and the explanation says so.

use super::select::{Gpu, Rejection, Selection, Tier, Verdict};
use super::{CodeObject, Format};
use offload_format::cuda::{Arch, EntryKind, Suffix, flags};

/// Why a CUDA entry is not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CudaRejection {
    /// Built for another major version.
    OtherMajor {
        /// The entry's architecture (`sm_86`, `sm_90a`).
        arch: String,
    },
    /// Same major, newer minor than the GPU's.
    NewerMinor {
        /// The entry's architecture (`sm_86`, `sm_90a`).
        arch: String,
    },
    /// PTX for a newer architecture than the GPU.
    NewerArch {
        /// The entry's architecture (`sm_86`, `sm_90a`).
        arch: String,
    },
    /// `a` code for another exact architecture.
    ArchSpecific {
        /// The entry's architecture (`sm_86`, `sm_90a`).
        arch: String,
    },
    /// A compatible cubin is loaded, so the PTX is not compiled.
    PtxNotNeeded {
        /// The architecture of the cubin loaded instead.
        cubin: String,
    },
    /// NVVM IR, input to link-time optimisation.
    LtoIr,
    /// Relocatable device code (`__nv_relfatbin`, relocatable cubins,
    /// OffloadBinary images): input to `nvlink`.
    Relocatable,
    /// An entry kind with no known loading rule.
    UnknownKind {
        /// The kind's name as listed.
        kind: String,
    },
    /// Device code of kind `cuda` outside a fat binary.
    NotFatBinary,
    /// In a fat binary no `.nvFatBinSegment` record registers.
    Unregistered,
}

impl CudaRejection {
    /// A stable machine-readable name (`other-major`, `lto-ir`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            CudaRejection::OtherMajor { .. } => "other-major",
            CudaRejection::NewerMinor { .. } => "newer-minor",
            CudaRejection::NewerArch { .. } => "newer-arch",
            CudaRejection::ArchSpecific { .. } => "arch-specific",
            CudaRejection::PtxNotNeeded { .. } => "ptx-not-needed",
            CudaRejection::LtoIr => "lto-ir",
            CudaRejection::Relocatable => "relocatable",
            CudaRejection::UnknownKind { .. } => "unknown-kind",
            CudaRejection::NotFatBinary => "not-fatbin",
            CudaRejection::Unregistered => "unregistered",
        }
    }

    /// The explanation in words, for `gpu`.
    pub fn explain(&self, gpu: &Gpu) -> String {
        let g = &gpu.processor;
        match self {
            CudaRejection::OtherMajor { arch } => {
                format!("built for {arch}: cubins run only on GPUs of the same major version, the GPU is {g}")
            }
            CudaRejection::NewerMinor { arch } => format!("built for {arch}, a newer minor version than the GPU ({g})"),
            CudaRejection::NewerArch { arch } => {
                format!("PTX for {arch} is JIT-compiled only for GPUs at or above it, the GPU is {g}")
            }
            CudaRejection::ArchSpecific { arch } => {
                format!("architecture-specific code ({arch}) runs only on exactly that GPU, the GPU is {g}")
            }
            CudaRejection::PtxNotNeeded { cubin } => {
                format!("a compatible cubin ('{cubin}') is loaded instead; PTX is JIT-compiled only when no cubin fits")
            }
            CudaRejection::LtoIr => "NVVM IR for link-time optimisation: nvlink input, never loaded".to_string(),
            CudaRejection::Relocatable => {
                "relocatable device code: nvlink input, loaded only through the device-linked fat binary".to_string()
            }
            CudaRejection::UnknownKind { kind } => format!("entry kind {kind} has no known loading rule"),
            CudaRejection::NotFatBinary => {
                "CUDA device code outside a fat binary: the CUDA runtime loads fat binaries".to_string()
            }
            CudaRejection::Unregistered => {
                "no .nvFatBinSegment record points at its fat binary: the runtime never registers it".to_string()
            }
        }
    }
}

/// The GPU's architecture number (`sm_86` → 86).
fn gpu_number(gpu: &Gpu) -> Option<u32> {
    Arch::parse(&gpu.processor).map(|a| a.number)
}

/// Orders compatible entries, lower first: PTX after cubins, then the
/// highest architecture, then cubins without the sm_100+ flag.
type Rank = (u8, std::cmp::Reverse<u32>, u8);

/// Cubin or PTX, and its rank, or why the entry does not load.
fn evaluate(o: &CodeObject, gpu: u32) -> Result<(Tier, Rank), CudaRejection> {
    let Some(c) = o.cuda.filter(|_| matches!(o.format, Format::CudaFatbin | Format::Cubin)) else {
        return Err(if o.image_kind.is_some() { CudaRejection::Relocatable } else { CudaRejection::NotFatBinary });
    };
    let arch = c.arch;
    let name = |prefix: &str| format!("{prefix}{}", &arch.to_string()[3..]);
    let (gmaj, gmin) = (gpu / 10, gpu % 10);
    match c.kind {
        EntryKind::Nvvm => return Err(CudaRejection::LtoIr),
        EntryKind::Elf | EntryKind::Ptx => {}
        other => return Err(CudaRejection::UnknownKind { kind: other.name() }),
    }
    if c.relocatable {
        return Err(CudaRejection::Relocatable);
    }
    if c.unregistered {
        return Err(CudaRejection::Unregistered);
    }
    let ptx = c.kind == EntryKind::Ptx;
    let shown = name(if ptx { "compute_" } else { "sm_" });
    match (ptx, arch.suffix) {
        (_, Suffix::A) if arch.number != gpu => return Err(CudaRejection::ArchSpecific { arch: shown }),
        (_, Suffix::A) => {}
        // Cubins, and family PTX: same major, minor at most the GPU's.
        (false, _) | (true, Suffix::F) => {
            if arch.major() != gmaj {
                return Err(CudaRejection::OtherMajor { arch: shown });
            }
            if arch.minor() > gmin {
                return Err(CudaRejection::NewerMinor { arch: shown });
            }
        }
        (true, Suffix::None) if arch.number > gpu => return Err(CudaRejection::NewerArch { arch: shown }),
        (true, Suffix::None) => {}
    }
    let tier = if ptx {
        Tier::Jit
    } else if arch.number == gpu {
        Tier::Native
    } else {
        Tier::Compatible
    };
    let sm100_flag = u8::from(!ptx && c.flags & flags::SM100_ELF != 0);
    Ok((tier, (u8::from(ptx), std::cmp::Reverse(arch.number), sm100_flag)))
}

/// Judges every code object for `gpu` as the CUDA driver would.
pub fn select(objects: &[CodeObject], gpu: &Gpu) -> Selection {
    let mut sel = Selection { verdicts: vec![None; objects.len()], ..Default::default() };
    let Some(gpu_no) = gpu_number(gpu) else {
        for (i, o) in objects.iter().enumerate() {
            let kind = o.offload_kind.clone();
            sel.verdicts[i] = (!o.container).then_some(Verdict::Rejected(Rejection::OtherKind { kind }));
        }
        return sel;
    };
    let units = objects.iter().map(|o| o.unit + 1).max().unwrap_or(0);
    // Per unit, the best (key, position tie-break, index) so far.
    type Key = (Rank, usize);
    let mut best: Vec<Option<(Key, usize)>> = vec![None; units];
    let mut relevant = vec![false; units];
    let mut compatible = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        if o.container {
            continue;
        }
        if o.offload_kind != "cuda" {
            let r = if o.offload_kind == "host" {
                Rejection::Host
            } else {
                Rejection::OtherKind { kind: o.offload_kind.clone() }
            };
            sel.verdicts[i] = Some(Verdict::Rejected(r));
            continue;
        }
        if o.cuda
            .is_some_and(|c| !c.relocatable && !c.unregistered && matches!(c.kind, EntryKind::Elf | EntryKind::Ptx))
        {
            relevant[o.unit] = true;
        }
        match evaluate(o, gpu_no) {
            Ok((tier, key)) => {
                // Cubins: first in file order wins a tie; PTX: the last.
                let order = if tier == Tier::Jit { usize::MAX - i } else { i };
                let key = (key, order);
                if best[o.unit].is_none_or(|(k, _)| key < k) {
                    best[o.unit] = Some((key, i));
                }
                compatible.push((i, tier));
            }
            Err(r) => sel.verdicts[i] = Some(Verdict::Rejected(Rejection::Cuda(r))),
        }
    }
    for (i, tier) in compatible {
        let chosen = best[objects[i].unit].map_or(i, |(_, c)| c);
        let chosen_is_cubin = objects[chosen].cuda.is_some_and(|c| c.kind == EntryKind::Elf);
        sel.verdicts[i] = Some(if chosen == i {
            sel.chosen.push(i);
            Verdict::Selected(tier)
        } else if tier == Tier::Jit && chosen_is_cubin {
            Verdict::Rejected(Rejection::Cuda(CudaRejection::PtxNotNeeded { cubin: objects[chosen].id.clone() }))
        } else {
            Verdict::NotChosen { chosen, tier }
        });
    }
    sel.chosen.sort_unstable();
    sel.failed_units = (0..units).filter(|&u| relevant[u] && best[u].is_none()).collect();
    sel
}

#[cfg(test)]
#[path = "select_cuda_tests.rs"]
mod tests;
