//! The kernels of every code object of a scanned file, with their
//! resources: AMDGPU code objects through
//! [`offload_format::amdgpu::kernels`], cubins through
//! [`offload_format::cuda::nvinfo`], PTX text through
//! [`offload_format::cuda::ptx`] (`docs/formats/kernels.md`). Other
//! payloads (host objects, bitcode, containers) have no record.
//!
//! [`row::rows`] flattens them into one [`row::KernelRow`] per kernel,
//! with demangled names ([`demangle`]) and occupancy estimates;
//! [`diff::diff`] compares the rows of two inputs.

pub mod demangle;
pub mod diff;
pub mod row;

pub use diff::{KernelDiff, diff};
pub use row::{KernelRow, Occupancy, Resources, RowKind, rows};

use crate::Inventory;
use crate::decode::visit_objects;
use offload_format::amdgpu::kernels::{self as amdgpu, CodeObjectKernels};
use offload_format::cuda::{self, nvinfo::CubinKernels, ptx::PtxModule};
use offload_format::elf::EM_AMDGPU;
use std::sync::Mutex;

/// The kernels of one code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// An AMDGPU code object's metadata and kernels.
    Amdgpu(CodeObjectKernels),
    /// A cubin's kernels.
    Cuda(CubinKernels),
    /// A PTX module's `.entry` directives.
    Ptx(PtxModule),
}

impl Kernels {
    /// The kernels' names, in file order.
    pub fn names(&self) -> Vec<&str> {
        match self {
            Kernels::Amdgpu(c) => c.kernels.iter().map(|k| k.name.as_str()).collect(),
            Kernels::Cuda(c) => c.kernels.iter().map(|k| k.name.as_str()).collect(),
            Kernels::Ptx(m) => m.entries.iter().map(|e| e.name.as_str()).collect(),
        }
    }
}

/// What [`kernels`] found for one code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectKernels {
    /// Index into [`Inventory::objects`].
    pub object: usize,
    /// Its kernels, or why they could not be read (its bytes could not be
    /// produced, or its metadata or `.nv.info` is damaged).
    pub result: Result<Kernels, String>,
}

/// Reads the kernels of every AMDGPU code object and cubin of `inv`, in
/// inventory order, decompressing each compressed bundle once on up to
/// `workers` threads (0: one per core).
pub fn kernels(inv: &Inventory<'_>, workers: usize) -> Vec<ObjectKernels> {
    let wanted: Vec<usize> = (0..inv.objects.len()).filter(|&i| !inv.objects[i].container).collect();
    let found = Mutex::new(Vec::new());
    let visit = |object: usize, bytes: Result<&[u8], crate::BytesError>| -> Result<(), ()> {
        let result = match bytes {
            Err(e) => Some(Err(e.to_string())),
            Ok(data) => of_bytes(data),
        };
        if let Some(result) = result {
            found.lock().unwrap_or_else(|p| p.into_inner()).push(ObjectKernels { object, result });
        }
        Ok(())
    };
    let _ = visit_objects(inv, &wanted, workers, visit);
    let mut found = found.into_inner().unwrap_or_else(|p| p.into_inner());
    found.sort_by_key(|o| o.object);
    found
}

/// The kernels of one code object's bytes; `None` when it is neither an
/// AMDGPU code object, a cubin nor PTX text.
pub fn of_bytes(data: &[u8]) -> Option<Result<Kernels, String>> {
    if cuda::is_cubin(data) {
        return Some(cuda::nvinfo::read(data).map(Kernels::Cuda).map_err(|e| e.to_string()));
    }
    let machine = offload_format::bytes::u16_le(data, 18);
    if offload_format::elf::is_elf(data) && data.get(5) == Some(&1) && machine == Some(EM_AMDGPU) {
        return Some(amdgpu::read(data).map(Kernels::Amdgpu).map_err(|e| e.to_string()));
    }
    if !offload_format::elf::is_elf(data) && cuda::ptx::is_ptx(data) {
        return Some(Ok(Kernels::Ptx(cuda::ptx::read(data))));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, scan};

    #[test]
    fn kernels_of_a_hip_library() {
        let data = include_bytes!("../../../offload-cli/tests/fixtures/inspect/libscale.so");
        let inv = scan(data, "libscale.so", &Options::default());
        let found = kernels(&inv, 1);
        let targets: Vec<_> = found.iter().map(|o| inv.objects[o.object].target_id.as_str()).collect();
        assert_eq!(targets, ["gfx906", "gfx90a:xnack+"]);
        for o in &found {
            let Ok(Kernels::Amdgpu(k)) = &o.result else { panic!("{:?}", o.result) };
            assert_eq!(k.kernels.len(), 1);
            assert_eq!(k.kernels[0].name, "_Z5scalePff");
            assert_eq!(k.kernels[0].kernarg_segment_size, Some(12));
        }
    }

    #[test]
    fn kernels_of_a_compressed_cuda_fat_binary() {
        let data = include_bytes!("../../../offload-cli/tests/fixtures/cuda/kern_zstd_all.fatbin");
        let inv = scan(data, "kern_zstd_all.fatbin", &Options::default());
        let found = kernels(&inv, 1);
        // cuobjdump -res-usage: three cubins (sm_75, sm_80, sm_90), REG:8 on sm_75.
        let cubins: Vec<&CubinKernels> = found
            .iter()
            .filter_map(|o| match &o.result {
                Ok(Kernels::Cuda(c)) => Some(c),
                Ok(Kernels::Ptx(_)) => None,
                other => panic!("{other:?}"),
            })
            .collect();
        let sms: Vec<u32> = cubins.iter().map(|c| c.sm).collect();
        assert_eq!(sms, [75, 80, 90]);
        let c = cubins[0];
        assert_eq!(c.kernels[0].name, "_Z5scalePffi");
        assert_eq!(c.kernels[0].registers, Some(8));
    }

    #[test]
    fn other_payloads_have_no_record() {
        assert_eq!(of_bytes(b"not a code object"), None);
        let host = include_bytes!("../../../offload-cli/tests/fixtures/objects/host-x86_64.o");
        assert_eq!(of_bytes(host), None);
    }

    /// Every file under `OFFLOAD_KERNELS_CORPUS` (e.g. the `files` folder
    /// of scripts/fetch-real-corpus.sh's cache): every code object's
    /// kernels read without error, descriptors agreeing with metadata.
    #[test]
    fn real_corpus_when_given() {
        let Ok(dir) = std::env::var("OFFLOAD_KERNELS_CORPUS") else { return };
        let mut stack = vec![std::path::PathBuf::from(dir)];
        let (mut objects, mut count) = (0, 0);
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let data = std::fs::read(&p).unwrap();
            let inv = scan(&data, &p.to_string_lossy(), &Options::default());
            for o in kernels(&inv, 0) {
                match &o.result {
                    Ok(Kernels::Amdgpu(c)) => {
                        for k in &c.kernels {
                            assert!(k.mismatches.is_empty(), "{}: {:?}", p.display(), k.mismatches);
                        }
                        count += c.kernels.len();
                    }
                    Ok(Kernels::Cuda(c)) => count += c.kernels.len(),
                    Ok(Kernels::Ptx(m)) => count += m.entries.len(),
                    Err(e) => panic!("{}: object {}: {e}", p.display(), o.object),
                }
                objects += 1;
            }
        }
        eprintln!("{objects} code objects, {count} kernels");
    }
}
