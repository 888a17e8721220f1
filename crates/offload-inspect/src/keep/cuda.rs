//! Which CUDA fat-binary entries `--keep`/`--drop`/`--keep-gpu` keep, as
//! NVIDIA's `nvprune` names targets (`sm_80` the cubin, `compute_80` the
//! PTX, `lto_80` the NVVM IR) and, for `--keep-gpu`, as the CUDA driver
//! would load them ([`crate::select_cuda`]'s rules).

use super::{Rules, TargetError};
use crate::select::{Gpu, Runtime, select};
use crate::{Bytes, CodeObject, CudaEntry, Format, Location, Payload};
use offload_format::cuda::{Arch, EntryKind};

/// The canonical form of a CUDA `--keep`/`--drop` target (`sm_90a`,
/// `compute_80`, `lto_80`), or `None` when `text` does not name one.
pub fn parse_target(text: &str) -> Option<Result<String, TargetError>> {
    let prefix = ["sm_", "compute_", "lto_"].into_iter().find(|p| text.starts_with(p))?;
    Some(match Arch::parse(text) {
        Some(arch) => Ok(format!("{prefix}{}", &arch.to_string()[3..])),
        None => Err(TargetError(format!("'{text}' names no CUDA architecture"))),
    })
}

/// A rule as (entry kind, architecture).
fn rule(text: &str) -> Option<(EntryKind, Arch)> {
    let kind = if text.starts_with("sm_") {
        EntryKind::Elf
    } else if text.starts_with("compute_") {
        EntryKind::Ptx
    } else if text.starts_with("lto_") {
        EntryKind::Nvvm
    } else {
        return None;
    };
    Some((kind, Arch::parse(text)?))
}

/// The (kind, arch, flags) images each entry of one fat binary stands
/// for, the form [`decide_images`] takes.
pub type ImageGroup = Vec<(EntryKind, Arch, u64)>;

/// Which entries of one fat binary stay, each entry given by its images
/// (one, or a concatenated entry's cubins). `offload size --keep` asks the
/// same question of listed code objects, so both share this rule.
pub fn decide_images(rules: &Rules, groups: &[ImageGroup]) -> Vec<bool> {
    let keep: Vec<_> = rules.keep.iter().filter_map(|t| rule(t)).collect();
    let drop: Vec<_> = rules.drop.iter().filter_map(|t| rule(t)).collect();
    let restricts = !rules.keep.is_empty() || !rules.keep_gpu.is_empty();
    let chosen = gpu_choices(rules, groups);
    groups
        .iter()
        .enumerate()
        .map(|(i, imgs)| {
            let named = |list: &[(EntryKind, Arch)], img: &(EntryKind, Arch, u64)| {
                list.iter().any(|&(k, a)| k == img.0 && a == img.1)
            };
            // Part of a concatenated entry cannot go: dropped only whole.
            if !imgs.is_empty() && imgs.iter().all(|img| named(&drop, img)) {
                return false;
            }
            !restricts || chosen.contains(&i) || imgs.iter().any(|img| named(&keep, img))
        })
        .collect()
}

/// Entries the CUDA driver would load on a `--keep-gpu` GPU.
fn gpu_choices(rules: &Rules, groups: &[ImageGroup]) -> Vec<usize> {
    if rules.keep_gpu.is_empty() {
        return Vec::new();
    }
    let mut objects = Vec::new();
    let mut owner = Vec::new();
    for (i, imgs) in groups.iter().enumerate() {
        for &(kind, arch, flags) in imgs {
            let target = arch.to_string();
            objects.push(CodeObject {
                location: Location::default(),
                format: Format::CudaFatbin,
                id: format!("cuda-{}-{target}", kind.name()),
                offload_kind: "cuda".into(),
                triple: "nvptx64-nvidia-cuda".into(),
                target_id: target.clone(),
                target_id_error: None,
                stored_target: target,
                size: 0,
                offset: None,
                compressed: false,
                unit: 0,
                container: false,
                image_kind: None,
                payload: Payload::Plain(Bytes::Borrowed(&[])),
                cuda: Some(CudaEntry { kind, arch, flags, relocatable: false, fatbin: None, unregistered: false }),
                kpack: None,
            });
            owner.push(i);
        }
    }
    let gpus = rules.keep_gpu.iter().filter(|g: &&Gpu| g.arch == "nvptx64");
    gpus.flat_map(|gpu| select(&objects, gpu, Runtime::Cuda).chosen).filter_map(|o| owner.get(o).copied()).collect()
}
