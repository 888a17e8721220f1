//! Occupancy estimates: how many waves of a kernel fit on one AMDGPU SIMD,
//! and how many blocks and warps on one NVIDIA SM, from the kernel's
//! register, LDS/shared memory and work-group size. The per-family tables
//! and the arithmetic, with their public sources, are in
//! `docs/formats/occupancy.md`.
//!
//! These are *estimates*: the hardware also limits by scratch, barriers,
//! the shared-memory carveout chosen at launch, CU masking and what else is
//! running. Only the limits named in [`Limiter`] are modelled.

/// What bounds an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limiter {
    /// The hardware's wave (warp) slots.
    Waves,
    /// Vector registers (AMDGPU VGPRs and AGPRs, CUDA registers).
    Vgprs,
    /// AMDGPU scalar registers (GFX6 to GFX9 only).
    Sgprs,
    /// LDS (AMDGPU) or shared memory (CUDA).
    Lds,
    /// Work-groups (blocks) per CU or SM.
    WorkGroups,
}

impl Limiter {
    /// A short lower-case name (`waves`, `vgprs`, `sgprs`, `lds`, `workgroups`).
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Waves => "waves",
            Limiter::Vgprs => "vgprs",
            Limiter::Sgprs => "sgprs",
            Limiter::Lds => "lds",
            Limiter::WorkGroups => "workgroups",
        }
    }
}

/// One AMDGPU family's occupancy parameters (per SIMD, also called EU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmdgpuFamily {
    /// A name for the rows it covers (`gfx9`, `gfx90a`, `gfx11 (1.5x VGPRs)`...).
    pub name: &'static str,
    /// Wave slots per SIMD.
    pub max_waves_per_simd: u32,
    /// SIMDs sharing one CU's LDS (4 on GCN/CDNA, 2 on RDNA in CU mode).
    pub simds_per_cu: u32,
    /// VGPRs per lane in one SIMD's register file, for wave64 (RDNA's
    /// wave32 has twice as many).
    pub vgprs_wave64: u32,
    /// VGPR allocation granule for wave64 (wave32: twice).
    pub vgpr_granule_wave64: u32,
    /// AGPRs share the VGPR file (gfx90a and later CDNA): the two counts
    /// are added (VGPRs first rounded up to 4) before allocation.
    pub unified_agprs: bool,
    /// gfx908: AGPRs are a file of their own, as large as the VGPR file.
    pub separate_agprs: bool,
    /// SGPRs per SIMD when they limit occupancy (GFX6 to GFX9); `None` on
    /// GFX10 and later, where they do not.
    pub sgprs: Option<u32>,
    /// SGPR allocation granule.
    pub sgpr_granule: u32,
    /// LDS bytes per CU.
    pub lds_per_cu: u32,
    /// Work-groups of more than one wave per CU at most (barrier slots).
    pub max_workgroups_per_cu: u32,
}

const KIB: u32 = 1024;

const GFX6: AmdgpuFamily = AmdgpuFamily {
    name: "gfx6-gfx7",
    max_waves_per_simd: 10,
    simds_per_cu: 4,
    vgprs_wave64: 256,
    vgpr_granule_wave64: 4,
    unified_agprs: false,
    separate_agprs: false,
    sgprs: Some(512),
    sgpr_granule: 8,
    lds_per_cu: 64 * KIB,
    max_workgroups_per_cu: 16,
};
const GFX8: AmdgpuFamily = AmdgpuFamily { name: "gfx8-gfx9", sgprs: Some(800), sgpr_granule: 16, ..GFX6 };
const GFX908: AmdgpuFamily = AmdgpuFamily { name: "gfx908", separate_agprs: true, ..GFX8 };
const GFX90A: AmdgpuFamily = AmdgpuFamily {
    name: "gfx90a-gfx94x",
    max_waves_per_simd: 8,
    vgprs_wave64: 512,
    vgpr_granule_wave64: 8,
    unified_agprs: true,
    ..GFX8
};
const GFX950: AmdgpuFamily = AmdgpuFamily { name: "gfx950", lds_per_cu: 160 * KIB, ..GFX90A };
const GFX10_1: AmdgpuFamily = AmdgpuFamily {
    name: "gfx10.1",
    max_waves_per_simd: 20,
    simds_per_cu: 2,
    vgprs_wave64: 512,
    vgpr_granule_wave64: 4,
    unified_agprs: false,
    separate_agprs: false,
    sgprs: None,
    sgpr_granule: 8,
    lds_per_cu: 64 * KIB,
    max_workgroups_per_cu: 16,
};
const GFX10_3: AmdgpuFamily = AmdgpuFamily { name: "gfx10.3-gfx12", max_waves_per_simd: 16, ..GFX10_1 };
const GFX11_BIG: AmdgpuFamily =
    AmdgpuFamily { name: "gfx11-gfx12 (1.5x VGPRs)", vgprs_wave64: 768, vgpr_granule_wave64: 12, ..GFX10_3 };

/// The family of an AMDGCN processor name (`gfx90a`, `gfx1100`; target-ID
/// features after `:` are ignored), `None` for names not covered
/// (generic targets, unknown processors).
pub fn amdgpu_family(processor: &str) -> Option<&'static AmdgpuFamily> {
    let name = processor.split(':').next().unwrap_or(processor);
    let digits = name.strip_prefix("gfx")?;
    if digits.contains('-') || digits.len() < 3 || digits.len() > 4 {
        return None;
    }
    Some(match name {
        "gfx908" => &GFX908,
        "gfx90a" | "gfx940" | "gfx941" | "gfx942" => &GFX90A,
        "gfx950" => &GFX950,
        "gfx1100" | "gfx1101" | "gfx1151" | "gfx1200" | "gfx1201" => &GFX11_BIG,
        _ => match digits.len() {
            3 => match digits.as_bytes().first()? {
                b'6' | b'7' => &GFX6,
                b'8' | b'9' => &GFX8,
                _ => return None,
            },
            _ => match digits.get(..3)? {
                "101" => &GFX10_1,
                "103" | "110" | "115" | "120" => &GFX10_3,
                _ => return None,
            },
        },
    })
}

/// What an AMDGPU kernel asks of a SIMD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AmdgpuUsage {
    /// `.vgpr_count`.
    pub vgprs: u32,
    /// `.agpr_count` (0 when absent).
    pub agprs: u32,
    /// `.sgpr_count`.
    pub sgprs: u32,
    /// Static LDS bytes per work-group.
    pub lds: u32,
    /// Work-items per work-group (the kernel's `.max_flat_workgroup_size`).
    pub workgroup_size: u32,
    /// 32 or 64.
    pub wavefront_size: u32,
}

/// An AMDGPU estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmdgpuOccupancy {
    /// Waves of this kernel resident on one SIMD at most.
    pub waves_per_simd: u32,
    /// The family's wave slots per SIMD.
    pub max_waves_per_simd: u32,
    /// The tightest limit.
    pub limiter: Limiter,
}

fn align_up(v: u32, granule: u32) -> u32 {
    if granule == 0 {
        return v;
    }
    v.div_ceil(granule).saturating_mul(granule)
}

fn div_ceil(a: u32, b: u32) -> u32 {
    if b == 0 { 0 } else { a.div_ceil(b) }
}

/// Waves per SIMD of a kernel on `family`: the smallest of the wave slots
/// and the limits by VGPRs (AGPRs), SGPRs, LDS and work-groups per CU.
/// `None` when the usage cannot run at all (more registers or LDS than
/// exist, a wavefront size of 0).
pub fn amdgpu_occupancy(family: &AmdgpuFamily, usage: &AmdgpuUsage) -> Option<AmdgpuOccupancy> {
    let wave32 = match usage.wavefront_size {
        32 if family.sgprs.is_none() => true,
        64 => false,
        _ => return None,
    };
    let scale = if wave32 { 2 } else { 1 };
    let max = family.max_waves_per_simd;
    let mut best = (max, Limiter::Waves);
    let mut limit = |waves: u32, why: Limiter| {
        if waves < best.0 {
            best = (waves, why);
        }
    };
    // Registers.
    let total = family.vgprs_wave64 * scale;
    let granule = family.vgpr_granule_wave64 * scale;
    let vgprs = if family.unified_agprs && usage.agprs > 0 {
        align_up(usage.vgprs, 4).saturating_add(usage.agprs)
    } else if family.separate_agprs {
        usage.vgprs.max(usage.agprs)
    } else {
        usage.vgprs
    };
    if vgprs > 0 {
        limit(total / align_up(vgprs, granule), Limiter::Vgprs);
    }
    if let Some(sgprs) = family.sgprs
        && usage.sgprs > 0
    {
        limit(sgprs / align_up(usage.sgprs, family.sgpr_granule), Limiter::Sgprs);
    }
    // Work-groups: several waves of one group share a CU.
    let waves_per_group = div_ceil(usage.workgroup_size.max(1), usage.wavefront_size);
    if let Some(groups) = family.lds_per_cu.checked_div(usage.lds) {
        let groups = groups.min(family.max_workgroups_per_cu);
        limit(groups.saturating_mul(waves_per_group) / family.simds_per_cu, Limiter::Lds);
    }
    if waves_per_group > 1 {
        limit(family.max_workgroups_per_cu.saturating_mul(waves_per_group) / family.simds_per_cu, Limiter::WorkGroups);
    }
    if best.0 == 0 {
        return None;
    }
    Some(AmdgpuOccupancy { waves_per_simd: best.0, max_waves_per_simd: max, limiter: best.1 })
}

/// One CUDA compute capability's per-SM limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaSm {
    /// `sm_XY` as `XY` (major * 10 + minor).
    pub sm: u32,
    /// Resident warps per SM.
    pub max_warps: u32,
    /// Resident blocks per SM.
    pub max_blocks: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Shared memory per SM at the largest carveout, bytes.
    pub shared: u32,
    /// Shared memory the runtime reserves per block, bytes.
    pub reserved_per_block: u32,
    /// Shared memory allocation unit, bytes.
    pub shared_granule: u32,
}

/// Registers are allocated per warp in units of this many.
pub const CUDA_REGISTER_GRANULE: u32 = 256;

const fn sm(sm: u32, max_warps: u32, max_blocks: u32, shared_kib: u32) -> CudaSm {
    let (reserved_per_block, shared_granule) = if sm >= 80 { (1024, 128) } else { (0, 256) };
    CudaSm {
        sm,
        max_warps,
        max_blocks,
        registers: 65536,
        shared: shared_kib * 1024,
        reserved_per_block,
        shared_granule,
    }
}

/// The CUDA Programming Guide's "technical specifications per compute
/// capability", the rows used for occupancy.
#[rustfmt::skip]
pub static CUDA_SMS: [CudaSm; 16] = [
    sm(50, 64, 32, 64), sm(52, 64, 32, 96), sm(53, 64, 32, 64),
    sm(60, 64, 32, 64), sm(61, 64, 32, 96), sm(62, 64, 32, 64),
    sm(70, 64, 32, 96), sm(72, 64, 32, 96), sm(75, 32, 16, 64),
    sm(80, 64, 32, 164), sm(86, 48, 16, 100), sm(87, 48, 16, 164), sm(89, 48, 24, 100),
    sm(90, 64, 32, 228), sm(100, 64, 32, 228), sm(120, 48, 32, 100),
];

/// The limits of `sm_<sm>`, `None` for a capability not in the table.
pub fn cuda_sm(sm: u32) -> Option<&'static CudaSm> {
    CUDA_SMS.iter().find(|s| s.sm == sm)
}

/// What a CUDA kernel asks of an SM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CudaUsage {
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory bytes per block.
    pub shared: u32,
    /// Threads per block.
    pub block_size: u32,
}

/// A CUDA estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaOccupancy {
    /// Blocks resident per SM.
    pub blocks_per_sm: u32,
    /// Warps resident per SM (`blocks_per_sm` times warps per block).
    pub warps_per_sm: u32,
    /// The capability's warp slots per SM.
    pub max_warps_per_sm: u32,
    /// The tightest limit.
    pub limiter: Limiter,
}

/// Blocks and warps per SM of a kernel on `sm`, limited by warp slots,
/// block slots, registers and shared memory. `None` when the block does
/// not fit at all.
pub fn cuda_occupancy(sm: &CudaSm, usage: &CudaUsage) -> Option<CudaOccupancy> {
    let warps_per_block = div_ceil(usage.block_size.max(1), 32);
    let mut best = (sm.max_blocks, Limiter::WorkGroups);
    let mut limit = |blocks: u32, why: Limiter| {
        if blocks < best.0 {
            best = (blocks, why);
        }
    };
    limit(sm.max_warps / warps_per_block, Limiter::Waves);
    if usage.registers > 0 {
        let per_warp = align_up(usage.registers.saturating_mul(32), CUDA_REGISTER_GRANULE);
        limit((sm.registers / per_warp) / warps_per_block, Limiter::Vgprs);
    }
    if usage.shared > 0 {
        let per_block = align_up(usage.shared.saturating_add(sm.reserved_per_block), sm.shared_granule);
        limit(sm.shared / per_block.max(1), Limiter::Lds);
    }
    if best.0 == 0 {
        return None;
    }
    Some(CudaOccupancy {
        blocks_per_sm: best.0,
        warps_per_sm: best.0.saturating_mul(warps_per_block),
        max_warps_per_sm: sm.max_warps,
        limiter: best.1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amd(p: &str, vgprs: u32, agprs: u32, sgprs: u32, lds: u32, wg: u32, wave: u32) -> Option<(u32, Limiter)> {
        let usage = AmdgpuUsage { vgprs, agprs, sgprs, lds, workgroup_size: wg, wavefront_size: wave };
        amdgpu_occupancy(amdgpu_family(p).unwrap(), &usage).map(|o| (o.waves_per_simd, o.limiter))
    }

    #[test]
    fn families() {
        assert_eq!(amdgpu_family("gfx906").unwrap().name, "gfx8-gfx9");
        assert_eq!(amdgpu_family("gfx90a:xnack+").unwrap().name, "gfx90a-gfx94x");
        assert_eq!(amdgpu_family("gfx942").unwrap().max_waves_per_simd, 8);
        assert_eq!(amdgpu_family("gfx1030").unwrap().max_waves_per_simd, 16);
        assert_eq!(amdgpu_family("gfx1010").unwrap().max_waves_per_simd, 20);
        assert_eq!(amdgpu_family("gfx1100").unwrap().vgprs_wave64, 768);
        assert_eq!(amdgpu_family("gfx1102").unwrap().vgprs_wave64, 512);
        assert_eq!(amdgpu_family("gfx9-generic"), None);
        assert_eq!(amdgpu_family("gfx"), None);
        assert_eq!(amdgpu_family("sm_80"), None);
    }

    #[test]
    fn gfx9_vgpr_limited() {
        // 41 VGPRs round up to 44 (granule 4): 256 / 44 = 5 waves.
        assert_eq!(amd("gfx900", 41, 0, 16, 0, 256, 64), Some((5, Limiter::Vgprs)));
        // 24 VGPRs: 256 / 24 = 10 = every wave slot, so the slots limit.
        assert_eq!(amd("gfx900", 24, 0, 16, 0, 256, 64), Some((10, Limiter::Waves)));
        // 129 VGPRs -> 132: 256 / 132 = 1.
        assert_eq!(amd("gfx906", 129, 0, 16, 0, 64, 64), Some((1, Limiter::Vgprs)));
    }

    #[test]
    fn gfx9_sgpr_limited() {
        // 102 SGPRs round up to 112 (granule 16): 800 / 112 = 7 waves.
        assert_eq!(amd("gfx900", 8, 0, 102, 0, 64, 64), Some((7, Limiter::Sgprs)));
        // GFX10 does not limit by SGPRs: 20 wave32 slots.
        assert_eq!(amd("gfx1010", 8, 0, 106, 0, 32, 32), Some((20, Limiter::Waves)));
    }

    #[test]
    fn gfx90a_unified_agprs() {
        // VGPRs 10 -> 12 (align 4), + 64 AGPRs = 76 -> 80 (granule 8):
        // 512 / 80 = 6 waves.
        assert_eq!(amd("gfx90a", 10, 64, 20, 0, 256, 64), Some((6, Limiter::Vgprs)));
        // gfx908: separate files, max(10, 64) = 64: 256 / 64 = 4 waves.
        assert_eq!(amd("gfx908", 10, 64, 20, 0, 256, 64), Some((4, Limiter::Vgprs)));
        // gfx90a, 64 VGPRs, no AGPRs: 512 / 64 = 8 = all slots.
        assert_eq!(amd("gfx90a", 64, 0, 20, 0, 256, 64), Some((8, Limiter::Waves)));
    }

    #[test]
    fn lds_limited() {
        // gfx90a, 16 KiB LDS per group of 256 work-items (4 waves):
        // 65536 / 16384 = 4 groups per CU, 16 waves over 4 SIMDs = 4.
        assert_eq!(amd("gfx90a", 16, 0, 16, 16384, 256, 64), Some((4, Limiter::Lds)));
        // gfx950 has 160 KiB: 163840 / 16384 = 10 groups, 40 waves / 4 = 10,
        // above the 8 slots.
        assert_eq!(amd("gfx950", 16, 0, 16, 16384, 256, 64), Some((8, Limiter::Waves)));
        // More LDS than the CU has: cannot run.
        assert_eq!(amd("gfx90a", 16, 0, 16, 65537, 256, 64), None);
    }

    #[test]
    fn rdna_wave32() {
        // gfx1030 wave32: 1024 VGPRs, granule 8. 100 VGPRs -> 104:
        // 1024 / 104 = 9 waves.
        assert_eq!(amd("gfx1030", 100, 0, 0, 0, 256, 32), Some((9, Limiter::Vgprs)));
        // wave64 on the same: 512 VGPRs, granule 4. 100: 512 / 100 = 5.
        assert_eq!(amd("gfx1030", 100, 0, 0, 0, 256, 64), Some((5, Limiter::Vgprs)));
        // gfx1100 (1.5x): 1536 / 104 (granule 24: 100 -> 120) = 12.
        assert_eq!(amd("gfx1100", 100, 0, 0, 0, 256, 32), Some((12, Limiter::Vgprs)));
    }

    #[test]
    fn workgroup_slots() {
        // 2-wave groups on gfx900: 16 groups * 2 waves / 4 SIMDs = 8 < 10.
        assert_eq!(amd("gfx900", 8, 0, 16, 0, 128, 64), Some((8, Limiter::WorkGroups)));
        // One-wave groups do not hold barrier slots.
        assert_eq!(amd("gfx900", 8, 0, 16, 0, 64, 64), Some((10, Limiter::Waves)));
    }

    fn cu(sm: u32, registers: u32, shared: u32, block: u32) -> Option<(u32, u32, Limiter)> {
        let o = cuda_occupancy(cuda_sm(sm).unwrap(), &CudaUsage { registers, shared, block_size: block })?;
        Some((o.blocks_per_sm, o.warps_per_sm, o.limiter))
    }

    #[test]
    fn cuda_register_limited() {
        // sm_80, 64 registers, 256 threads (8 warps): a warp takes
        // 64 * 32 = 2048 registers; 65536 / 2048 = 32 warps = 4 blocks.
        assert_eq!(cu(80, 64, 0, 256), Some((4, 32, Limiter::Vgprs)));
        // 37 registers: 37 * 32 = 1184 -> 1280 (unit 256); 65536 / 1280 =
        // 51 warps; / 8 = 6 blocks, 48 warps.
        assert_eq!(cu(80, 37, 0, 256), Some((6, 48, Limiter::Vgprs)));
    }

    #[test]
    fn cuda_warp_and_block_limited() {
        // sm_80, 16 registers, 1024 threads (32 warps): 64 / 32 = 2 blocks.
        assert_eq!(cu(80, 16, 0, 1024), Some((2, 64, Limiter::Waves)));
        // 32 threads (1 warp), 8 registers: 32 blocks per SM at most.
        assert_eq!(cu(80, 8, 0, 32), Some((32, 32, Limiter::WorkGroups)));
        // sm_75: 16 blocks, 32 warps.
        assert_eq!(cu(75, 8, 0, 32), Some((16, 16, Limiter::WorkGroups)));
    }

    #[test]
    fn cuda_shared_limited() {
        // sm_80, 48 KiB static shared: 49152 + 1024 reserved = 50176
        // (a multiple of 128); 167936 / 50176 = 3 blocks.
        assert_eq!(cu(80, 16, 48 * 1024, 128), Some((3, 12, Limiter::Lds)));
        // sm_70 (no reservation, unit 256): 1000 -> 1024; 98304 / 1024 = 96,
        // so the 32 block slots limit.
        assert_eq!(cu(70, 16, 1000, 32), Some((32, 32, Limiter::WorkGroups)));
        // More than the SM has: cannot run.
        assert_eq!(cu(75, 16, 65 * 1024, 32), None);
    }

    #[test]
    fn unknown_capability() {
        assert_eq!(cuda_sm(35), None);
        assert!(cuda_sm(90).is_some());
    }
}
