//! `offload split`: one fat wheel into self-contained wheels, one per GPU
//! target or per CUDA SM family (docs/guide/split.md). Each output is the
//! input pruned ([`crate::tree::wheel`]) to what the group's GPUs load,
//! relabelled with a local version (`1.0+sm9x`, `1.0+gfx942`) so that the
//! wheels can stand side by side in one index and pip installs any of them.
//!
//! Families follow the CUDA driver's rules: a cubin for `sm_XY` runs on
//! GPUs of the same major version with a minor of at least `Y` (the `a`
//! and `f` variants only where the driver allows them), and PTX is
//! compiled at load time for any GPU at or above its version. A family
//! wheel keeps, for every GPU of that major version, what the driver
//! would load on it (`--keep-gpu` for each of them). AMD code objects run
//! only on their own processor (or a generic target's), so AMD targets are
//! split one per target in either mode, a generic target (`gfx11-generic`,
//! label `gfx11generic`) being one such target.

use crate::prune::Rules;
use crate::tree::wheel::{self, Relabel};
use crate::tree::{Options, TreeError, TreeReport, names};
use offload_inspect::select::Gpu;
use std::collections::BTreeSet;
use std::io::{Cursor, Read};

/// How the wheels are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// One wheel per CUDA major version (`sm8x`, `sm9x`), one per AMD target.
    Family,
    /// One wheel per GPU target (`sm80`, `sm86`, `gfx90a`).
    Target,
}

/// One output wheel: its label and the GPUs it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The local version label (`sm9x`, `sm80`, `gfx942`).
    pub label: String,
    /// The GPUs it is pruned for.
    pub gpus: Vec<String>,
}

/// The SM versions of NVIDIA GPUs a family wheel serves (compute
/// capabilities of shipping GPUs, docs/guide/split.md).
const KNOWN_SMS: &[u32] = &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90, 100, 101, 103, 110, 120, 121];

/// The GPU targets the code in wheel `data` is for: AMD processors (by
/// their code objects and by file names) and CUDA SM versions (cubins and
/// PTX), read member by member.
pub fn targets(data: &[u8]) -> Result<(BTreeSet<String>, BTreeSet<u32>), TreeError> {
    let bad = |e: zip::result::ZipError| TreeError::Malformed(format!("malformed zip archive: {e}"));
    let mut archive = zip::ZipArchive::new(Cursor::new(data)).map_err(bad)?;
    let (mut amd, mut cuda) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).map_err(bad)?;
        let name = f.name().to_string();
        let base = name.rsplit('/').next().unwrap_or(&name).to_string();
        amd.extend(names::targets_in_name(&base));
        let mut head = Vec::new();
        (&mut f)
            .take(offload_inspect::package::HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| TreeError::io(&name, e))?;
        if !offload_inspect::package::may_hold_code(&head) {
            continue;
        }
        // Bounded like a pruned member: what was read, then the rest.
        let limit = f.compressed_size().saturating_mul(1100).saturating_add(1 << 20);
        (&mut f).take(limit).read_to_end(&mut head).map_err(|e| TreeError::io(&name, e))?;
        let inv = offload_inspect::scan(&head, &name, &offload_inspect::Options::default());
        for o in inv.objects.iter().filter(|o| !o.container) {
            let target = o.target_id.split(':').next().unwrap_or("");
            if o.triple.starts_with("nvptx") {
                if let Some(arch) = offload_format::cuda::Arch::parse(target) {
                    cuda.insert(arch.number);
                }
            } else if o.triple.starts_with("amdgcn") && target.starts_with("gfx") {
                amd.insert(target.to_string());
            }
        }
    }
    // Generic targets (gfx11-generic) stay: a wheel built only for them
    // (JAX's ROCm 7 PJRT plug-in) has no processor of its own to split by.
    Ok((amd, cuda))
}

/// The groups for `by`, from the targets found; `only`: just the groups
/// serving these GPUs.
pub fn groups(amd: &BTreeSet<String>, cuda: &BTreeSet<u32>, by: By, only: &[Gpu]) -> Vec<Group> {
    let mut out = Vec::new();
    let wanted = |gpus: &[String]| only.is_empty() || only.iter().any(|g| gpus.contains(&g.processor));
    match by {
        By::Target => {
            for sm in cuda {
                let gpus = vec![format!("sm_{sm}")];
                if wanted(&gpus) {
                    out.push(Group { label: format!("sm{sm}"), gpus });
                }
            }
        }
        By::Family => {
            let majors: BTreeSet<u32> = cuda.iter().map(|sm| sm / 10).collect();
            for major in majors {
                let mut sms: BTreeSet<u32> = KNOWN_SMS.iter().copied().filter(|s| s / 10 == major).collect();
                sms.extend(cuda.iter().copied().filter(|s| s / 10 == major));
                let gpus: Vec<String> = sms.iter().map(|s| format!("sm_{s}")).collect();
                if wanted(&gpus) {
                    out.push(Group { label: format!("sm{major}x"), gpus });
                }
            }
        }
    }
    for t in amd {
        let gpus = vec![t.clone()];
        // A generic target's wheel serves every processor it covers.
        let serves =
            |g: &Gpu| g.processor == *t || offload_format::amdgpu::generic_target(&g.processor) == Some(t.as_str());
        if only.is_empty() || only.iter().any(serves) {
            out.push(Group { label: t.replace('-', ""), gpus });
        }
    }
    out
}

/// `name-version(-build)?-tags.whl` with the version replaced.
pub fn wheel_file_name(file_name: &str, version: &str) -> Option<String> {
    let stem = file_name.strip_suffix(".whl")?;
    let mut parts: Vec<&str> = stem.split('-').collect();
    if parts.len() < 5 {
        return None;
    }
    parts[1] = version;
    Some(format!("{}.whl", parts.join("-")))
}

/// The version with `label` appended as (part of) its local version.
pub fn labelled(version: &str, label: &str) -> String {
    if version.contains('+') { format!("{version}.{label}") } else { format!("{version}+{label}") }
}

/// One wheel written by [`split_wheel`].
#[derive(Clone, Debug)]
pub struct SplitWheel {
    /// Its group.
    pub group: Group,
    /// Its file name.
    pub file_name: String,
    /// What was pruned.
    pub report: TreeReport,
}

/// Splits wheel `data`, named `file_name`, into one wheel per group in
/// `out_dir` (nothing there until all are written; a dry run when
/// `opts.dry_run`). `opts.rules` is replaced by each group's GPUs.
pub fn split_wheel(
    data: &[u8],
    file_name: &str,
    groups: &[Group],
    out_dir: &std::path::Path,
    opts: &Options,
) -> Result<Vec<SplitWheel>, TreeError> {
    let archive = zip::ZipArchive::new(Cursor::new(data)).map_err(|e| TreeError::Malformed(e.to_string()))?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    let dist =
        wheel::dist_info(&names).ok_or_else(|| TreeError::Refused("not a wheel: no .dist-info/RECORD".into()))?;
    let (dist_name, version) = dist
        .strip_suffix(".dist-info")
        .and_then(|d| d.rsplit_once('-'))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .ok_or_else(|| TreeError::Malformed(format!("{dist}: not NAME-VERSION.dist-info")))?;
    let mut outputs = offload_io::Outputs::new();
    let mut done = Vec::new();
    for group in groups {
        let new_version = labelled(&version, &group.label);
        let out_name = wheel_file_name(file_name, &new_version)
            .ok_or_else(|| TreeError::Refused(format!("{file_name}: not a wheel file name (NAME-VERSION-TAGS.whl)")))?;
        let relabel = Relabel {
            old_dist_info: dist.clone(),
            new_dist_info: format!("{dist_name}-{new_version}.dist-info"),
            version: new_version,
        };
        // CUDA: what the driver loads on each GPU of the group. AMD: every
        // code object for the processor, whatever its xnack/sramecc
        // setting (a GPU runs in either mode).
        let (mut keep, mut keep_gpu) = (Vec::new(), Vec::new());
        for g in &group.gpus {
            let bad = |e: String| TreeError::Refused(format!("{g}: {e}"));
            if g.starts_with("sm_") {
                keep_gpu.push(Gpu::parse(g).map_err(|e| bad(e.to_string()))?);
            } else {
                keep.push(crate::prune::parse_target(g).map_err(|e| bad(e.to_string()))?);
            }
        }
        let group_opts = Options { rules: Rules { keep, keep_gpu, ..opts.rules.clone() }, ..opts.clone() };
        let path = out_dir.join(&out_name);
        let path_text = path.display().to_string();
        let report = if opts.dry_run {
            wheel::prune_zip(data, None, &group_opts, Some(&relabel))?
        } else {
            let h = outputs.stage_empty(&path_text).map_err(|e| TreeError::io(&path_text, e))?;
            let file = outputs.staged_file(h).ok_or_else(|| TreeError::io(&path_text, "no staged file"))?;
            wheel::prune_zip(data, Some(file), &group_opts, Some(&relabel))?
        };
        done.push(SplitWheel { group: group.clone(), file_name: out_name, report });
    }
    if !opts.dry_run {
        outputs.commit().map_err(|e| TreeError::io(out_dir.display().to_string(), e))?;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_driver_and_amd_targets_stand_alone() {
        let amd: BTreeSet<String> = ["gfx90a".to_string(), "gfx942".to_string()].into();
        let cuda: BTreeSet<u32> = [75, 80, 86, 90].into();
        let g = groups(&amd, &cuda, By::Family, &[]);
        let labels: Vec<&str> = g.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["sm7x", "sm8x", "sm9x", "gfx90a", "gfx942"]);
        assert_eq!(g[1].gpus, ["sm_80", "sm_86", "sm_87", "sm_88", "sm_89"]);
        let g = groups(&amd, &cuda, By::Target, &[Gpu::parse("sm_86").unwrap()]);
        assert_eq!(g, [Group { label: "sm86".into(), gpus: vec!["sm_86".into()] }]);
    }

    /// A wheel whose AMD code is built for generic targets only (JAX's
    /// ROCm 7 PJRT plug-in: gfx908, gfx90a, gfx9-4-generic,
    /// gfx10-3-generic, gfx11-generic, gfx12-generic) gets one wheel per
    /// generic target too, and `--gpu gfx1100` picks gfx11-generic's.
    #[test]
    fn generic_targets_get_their_own_wheels() {
        let amd: BTreeSet<String> = ["gfx11-generic", "gfx9-4-generic", "gfx90a"].map(String::from).into();
        let g = groups(&amd, &BTreeSet::new(), By::Target, &[]);
        let labels: Vec<&str> = g.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["gfx11generic", "gfx94generic", "gfx90a"]);
        let g = groups(&amd, &BTreeSet::new(), By::Family, &[Gpu::parse("gfx1100").unwrap()]);
        assert_eq!(g, [Group { label: "gfx11generic".into(), gpus: vec!["gfx11-generic".into()] }]);
        let g = groups(&amd, &BTreeSet::new(), By::Target, &[Gpu::parse("gfx942").unwrap()]);
        assert_eq!(g[0].gpus, ["gfx9-4-generic"]);
        assert_eq!(crate::prune::parse_target("gfx11-generic").unwrap(), "gfx11-generic");
    }

    #[test]
    fn wheel_names_get_a_local_version() {
        assert_eq!(
            wheel_file_name("nvidia_curand_cu12-10.3.7.77-py3-none-manylinux2014_x86_64.whl", "10.3.7.77+sm9x")
                .unwrap(),
            "nvidia_curand_cu12-10.3.7.77+sm9x-py3-none-manylinux2014_x86_64.whl"
        );
        assert_eq!(labelled("2.5.0+rocm6", "gfx942"), "2.5.0+rocm6.gfx942");
        assert_eq!(labelled("1.0", "sm80"), "1.0+sm80");
        assert!(wheel_file_name("x.zip", "1").is_none());
    }
}
