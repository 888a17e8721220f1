//! One flat record per kernel per code object, the same for AMDGPU code
//! objects, cubins and PTX: what `offload kernels` prints, the C API and
//! the Python module return, and `offload diff` compares. The JSON form
//! is documented in `docs/reference/kernels-json.md`.

use super::demangle::demangle;
use super::{Kernels, ObjectKernels};
use crate::Inventory;
use offload_format::amdgpu::kernels::KernelInfo;
use offload_format::cuda::nvinfo::{CudaKernel, UNKNOWN_STACK};
use offload_format::cuda::ptx::PtxEntry;
use offload_format::occupancy::{self, AmdgpuUsage, CudaUsage};
use serde::Serialize;

/// What kind of code a kernel row comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// An AMDGPU code object.
    Amdgpu,
    /// A cubin.
    Cuda,
    /// PTX text (declared limits only).
    Ptx,
}

impl RowKind {
    /// `amdgpu`, `cuda` or `ptx`.
    pub fn name(self) -> &'static str {
        match self {
            RowKind::Amdgpu => "amdgpu",
            RowKind::Cuda => "cuda",
            RowKind::Ptx => "ptx",
        }
    }
}

/// A kernel's resources; a field is `None` (absent in JSON) when the code
/// object does not state it or it does not apply to the kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// AMDGPU: vector registers per work-item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgprs: Option<u64>,
    /// AMDGPU: accumulation registers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agprs: Option<u64>,
    /// AMDGPU: scalar registers per wave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgprs: Option<u64>,
    /// AMDGPU: static LDS bytes per work-group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lds: Option<u64>,
    /// AMDGPU: static scratch bytes per work-item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch: Option<u64>,
    /// AMDGPU: the stack size is not known statically.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_stack: Option<bool>,
    /// AMDGPU: VGPRs spilled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpr_spills: Option<u64>,
    /// AMDGPU: SGPRs spilled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgpr_spills: Option<u64>,
    /// AMDGPU: 32 or 64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefront_size: Option<u64>,
    /// AMDGPU: work-items per work-group at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_flat_workgroup_size: Option<u64>,
    /// AMDGPU: kernel argument bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernarg_size: Option<u64>,
    /// AMDGPU: every work-group is full-sized.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uniform_workgroup_size: Option<bool>,
    /// AMDGPU: code object version (4, 5, 6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_object_version: Option<u8>,
    /// CUDA: registers per thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registers: Option<u64>,
    /// CUDA: static shared memory bytes per block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<u64>,
    /// CUDA: local memory bytes per thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<u64>,
    /// CUDA: stack bytes per thread (absent when not known statically,
    /// see `dynamic_stack`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<u64>,
    /// CUDA and PTX: the declared launch bound (`__launch_bounds__`, `.maxntid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_threads: Option<[u32; 3]>,
    /// PTX: `.reqntid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reqntid: Option<[u32; 3]>,
    /// PTX: `.minnctapersm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_blocks_per_sm: Option<u32>,
    /// CUDA (`EIATTR_MAXREG_COUNT`) and PTX (`.maxnreg`): register limit given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_registers: Option<u32>,
    /// CUDA: kernel parameter bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param_size: Option<u64>,
    /// CUDA: bytes of each per-kernel constant bank, by bank.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub constant_banks: Vec<ConstantBank>,
    /// CUDA and PTX: the SM (e.g. 80).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sm: Option<u32>,
}

/// One per-kernel CUDA constant bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ConstantBank {
    /// N of `.nv.constantN.<kernel>`.
    pub bank: u32,
    /// Its bytes.
    pub size: u64,
}

impl Resources {
    /// The numeric resources by JSON name, in a fixed order, for reports
    /// that compare them (`offload diff`). Flags count as 0/1.
    pub fn values(&self) -> [(&'static str, Option<u64>); 16] {
        [
            ("vgprs", self.vgprs),
            ("agprs", self.agprs),
            ("sgprs", self.sgprs),
            ("lds", self.lds),
            ("scratch", self.scratch),
            ("dynamic_stack", self.dynamic_stack.map(u64::from)),
            ("vgpr_spills", self.vgpr_spills),
            ("sgpr_spills", self.sgpr_spills),
            ("wavefront_size", self.wavefront_size),
            ("max_flat_workgroup_size", self.max_flat_workgroup_size),
            ("kernarg_size", self.kernarg_size),
            ("registers", self.registers),
            ("shared", self.shared),
            ("local", self.local),
            ("stack", self.stack),
            ("max_registers", self.max_registers.map(u64::from)),
        ]
    }
}

/// An occupancy estimate (`offload_format::occupancy`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    /// `simd` (AMDGPU: waves per SIMD) or `sm` (CUDA: warps per SM).
    pub unit: &'static str,
    /// Waves per SIMD or warps per SM.
    pub waves: u32,
    /// The hardware's slots for them.
    pub max_waves: u32,
    /// CUDA: blocks per SM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks: Option<u32>,
    /// The work-group (block) size assumed: the kernel's declared maximum,
    /// 1024 when it declares none.
    pub workgroup_size: u32,
    /// What limits it: `waves`, `vgprs`, `sgprs`, `lds`, `workgroups`.
    pub limiter: &'static str,
}

/// One kernel of one code object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelRow {
    /// Index into the inventory's objects.
    pub object: usize,
    /// Where the code object is, as `offload list` shows it.
    pub location: String,
    /// `amdgpu`, `cuda`, `ptx`.
    pub kind: RowKind,
    /// The target ID (`gfx90a:xnack+`) or `sm_80`.
    pub target: String,
    /// The name as stored (mangled).
    pub name: String,
    /// The demangled name; the stored name when it is not a C++ name.
    pub demangled: String,
    /// Resources.
    pub resources: Resources,
    /// The estimate, where the target's family is in the tables.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<Occupancy>,
    /// Disagreements between metadata and descriptor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
}

/// The work-group size assumed when a kernel declares none.
pub const DEFAULT_WORKGROUP_SIZE: u32 = 1024;

fn clamp(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn amdgpu_occupancy(target: &str, r: &Resources) -> Option<Occupancy> {
    let family = occupancy::amdgpu_family(target)?;
    let wg = r.max_flat_workgroup_size.map_or(DEFAULT_WORKGROUP_SIZE, clamp);
    let usage = AmdgpuUsage {
        vgprs: clamp(r.vgprs?),
        agprs: clamp(r.agprs.unwrap_or(0)),
        sgprs: clamp(r.sgprs.unwrap_or(0)),
        lds: clamp(r.lds.unwrap_or(0)),
        workgroup_size: wg,
        wavefront_size: clamp(r.wavefront_size.unwrap_or(64)),
    };
    let o = occupancy::amdgpu_occupancy(family, &usage)?;
    Some(Occupancy {
        unit: "simd",
        waves: o.waves_per_simd,
        max_waves: o.max_waves_per_simd,
        blocks: None,
        workgroup_size: wg,
        limiter: o.limiter.name(),
    })
}

fn cuda_occupancy(sm: u32, r: &Resources) -> Option<Occupancy> {
    let table = occupancy::cuda_sm(sm)?;
    let block = r
        .max_threads
        .map(|[x, y, z]| x.saturating_mul(y).saturating_mul(z))
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_WORKGROUP_SIZE);
    let usage = CudaUsage { registers: clamp(r.registers?), shared: clamp(r.shared.unwrap_or(0)), block_size: block };
    let o = occupancy::cuda_occupancy(table, &usage)?;
    Some(Occupancy {
        unit: "sm",
        waves: o.warps_per_sm,
        max_waves: o.max_warps_per_sm,
        blocks: Some(o.blocks_per_sm),
        workgroup_size: block,
        limiter: o.limiter.name(),
    })
}

fn amdgpu_resources(k: &KernelInfo, code_object_version: Option<u8>) -> Resources {
    Resources {
        vgprs: k.vgpr_count,
        agprs: k.agpr_count,
        sgprs: k.sgpr_count,
        lds: k.group_segment_fixed_size,
        scratch: k.private_segment_fixed_size,
        dynamic_stack: k.uses_dynamic_stack,
        vgpr_spills: k.vgpr_spill_count,
        sgpr_spills: k.sgpr_spill_count,
        wavefront_size: k.wavefront_size,
        max_flat_workgroup_size: k.max_flat_workgroup_size,
        kernarg_size: k.kernarg_segment_size,
        uniform_workgroup_size: k.uniform_work_group_size,
        code_object_version,
        ..Resources::default()
    }
}

fn cuda_resources(k: &CudaKernel, sm: u32) -> Resources {
    let unknown_stack = k.min_stack_size == Some(UNKNOWN_STACK);
    Resources {
        registers: k.registers.map(u64::from),
        shared: Some(k.shared),
        local: Some(k.local),
        stack: k.min_stack_size.filter(|_| !unknown_stack).map(u64::from),
        dynamic_stack: k.min_stack_size.map(|_| unknown_stack),
        max_threads: k.max_threads,
        max_registers: k.max_reg_count.map(u32::from),
        param_size: k.param_size.map(u64::from),
        constant_banks: k.constant_banks.iter().map(|&(bank, size)| ConstantBank { bank, size }).collect(),
        sm: Some(sm),
        ..Resources::default()
    }
}

fn ptx_resources(e: &PtxEntry, sm: Option<u32>) -> Resources {
    Resources {
        max_threads: e.maxntid,
        reqntid: e.reqntid,
        min_blocks_per_sm: e.minnctapersm,
        max_registers: e.maxnreg,
        sm,
        ..Resources::default()
    }
}

fn sm_of(target: &str) -> Option<u32> {
    let digits = target.strip_prefix("sm_").or_else(|| target.strip_prefix("compute_"))?;
    let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn row(object: usize, location: &str, kind: RowKind, target: &str, name: &str, resources: Resources) -> KernelRow {
    KernelRow {
        object,
        location: location.to_string(),
        kind,
        target: target.to_string(),
        name: name.to_string(),
        demangled: demangle(name).unwrap_or_else(|| name.to_string()),
        resources,
        occupancy: None,
        mismatches: Vec::new(),
    }
}

/// One row per kernel of each code object that [`super::kernels`] read
/// (objects whose kernels could not be read have none), sorted by target,
/// then demangled name, then location.
pub fn rows(inv: &Inventory<'_>, found: &[ObjectKernels]) -> Vec<KernelRow> {
    let mut out = Vec::new();
    for o in found {
        let (Ok(kernels), Some(object)) = (&o.result, inv.objects.get(o.object)) else { continue };
        let location = object.location.to_string();
        match kernels {
            Kernels::Amdgpu(c) => {
                let target = if object.target_id.is_empty() {
                    c.target.as_deref().and_then(|t| t.rsplit("--").next()).unwrap_or("").to_string()
                } else {
                    object.target_id.clone()
                };
                for k in &c.kernels {
                    let mut r = row(
                        o.object,
                        &location,
                        RowKind::Amdgpu,
                        &target,
                        &k.name,
                        amdgpu_resources(k, c.code_object_version),
                    );
                    r.occupancy = amdgpu_occupancy(&target, &r.resources);
                    r.mismatches = k.mismatches.clone();
                    out.push(r);
                }
            }
            Kernels::Cuda(c) => {
                let target = format!("sm_{}", c.sm);
                for k in &c.kernels {
                    let mut r = row(o.object, &location, RowKind::Cuda, &target, &k.name, cuda_resources(k, c.sm));
                    r.occupancy = cuda_occupancy(c.sm, &r.resources);
                    out.push(r);
                }
            }
            Kernels::Ptx(m) => {
                let target = m.target.clone().unwrap_or_else(|| object.target_id.clone());
                let sm = sm_of(&target);
                for e in m.entries.iter().filter(|e| !e.declaration) {
                    out.push(row(o.object, &location, RowKind::Ptx, &target, &e.name, ptx_resources(e, sm)));
                }
            }
        }
    }
    sort(&mut out);
    out
}

/// Sorts rows by target, kind, demangled name, location.
pub fn sort(rows: &mut [KernelRow]) {
    rows.sort_by(|a, b| {
        (&a.target, a.kind, &a.demangled, &a.location, a.object).cmp(&(
            &b.target,
            b.kind,
            &b.demangled,
            &b.location,
            b.object,
        ))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::kernels;
    use crate::{Options, scan};

    #[test]
    fn rows_of_a_hip_library() {
        let data = include_bytes!("../../../offload-cli/tests/fixtures/inspect/libscale.so");
        let inv = scan(data, "libscale.so", &Options::default());
        let rows = rows(&inv, &kernels(&inv, 1));
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!((r.kind, r.target.as_str()), (RowKind::Amdgpu, "gfx906"));
        assert_eq!(r.demangled, "scale(float*, float)");
        assert_eq!(r.name, "_Z5scalePff");
        assert_eq!(r.resources.kernarg_size, Some(12));
        let occ = r.occupancy.as_ref().expect("gfx906 is in the tables");
        assert_eq!(occ.unit, "simd");
        assert!(occ.waves >= 1 && occ.waves <= occ.max_waves);
        assert_eq!(rows[1].target, "gfx90a:xnack+");
        let json = serde_json::to_value(r).unwrap();
        assert_eq!(json["kind"], "amdgpu");
        assert!(json["resources"].get("registers").is_none());
    }

    #[test]
    fn rows_of_cubins() {
        let data = include_bytes!("../../../offload-cli/tests/fixtures/cuda/kern_zstd_all.fatbin");
        let inv = scan(data, "kern_zstd_all.fatbin", &Options::default());
        let rows = rows(&inv, &kernels(&inv, 1));
        let cubins: Vec<_> = rows.iter().filter(|r| r.kind == RowKind::Cuda).collect();
        assert_eq!(cubins.len(), 3);
        assert_eq!(cubins[0].target, "sm_75");
        assert_eq!(cubins[0].resources.registers, Some(8));
        // 8 registers, no launch bound (1024 threads = 32 warps): sm_75
        // holds 32 warps, so 1 block of 32 warps.
        let occ = cubins[0].occupancy.as_ref().unwrap();
        assert_eq!((occ.blocks, occ.waves, occ.max_waves), (Some(1), 32, 32));
    }

    #[test]
    fn sm_names() {
        assert_eq!(sm_of("sm_80"), Some(80));
        assert_eq!(sm_of("sm_90a"), Some(90));
        assert_eq!(sm_of("compute_75"), Some(75));
        assert_eq!(sm_of("gfx90a"), None);
    }
}
