//! One file of a package or folder: what happens to it, decided from its
//! name and its bytes (docs/guide/prune-trees.md, "What is pruned").

use super::names;
use crate::prune::cut_file;
use crate::prune::files::{self, Input};
use crate::prune::{self, Cut, PruneError, Pruned, Rules};
use offload_format::cuda::{Arch, Cubin, EntryKind, Suffix};
use offload_inspect::keep::EntryInfo;
use offload_inspect::keep::cuda::decide_images;

/// How a rewritten file was made smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The freed pages were cut out (linked HIP/CUDA binaries, objects,
    /// archives): the file is smaller.
    Cut,
    /// The dropped code objects became zeros in place: the file keeps its
    /// size (holes on disk where the file system allows).
    Zero,
    /// A file nothing refers to by address (a bundle, a `.fatbin`, a fat
    /// object) rewritten without the dropped entries.
    Rebuilt,
}

impl Mode {
    /// `cut`, `zero` or `rebuilt`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cut => "cut",
            Mode::Zero => "zero",
            Mode::Rebuilt => "rebuilt",
        }
    }
}

/// One code object of a file and its fate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetFate {
    /// The entry ID (`hipv4-amdgcn-amd-amdhsa--gfx90a`, `cuda-elf-sm_90`),
    /// or for a file named by its target, the target.
    pub id: String,
    /// Bytes (uncompressed payload; the file's size for a whole file).
    pub size: u64,
    /// Kept, else dropped.
    pub kept: bool,
}

/// A file's new bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// The new contents, checked.
    pub bytes: Vec<u8>,
    /// What the file is (`HIP host binary`, ...).
    pub kind: &'static str,
    /// How it was made smaller.
    pub mode: Mode,
    /// Why that mode.
    pub reason: String,
    /// Every entry of every fat binary, kept or dropped.
    pub entries: Vec<TargetFate>,
}

/// What happens to one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Rewritten smaller.
    Rewritten(Rewritten),
    /// A file for one GPU target (by its name or its own ELF header) that
    /// no kept GPU loads: removed from the package or folder.
    Removed {
        /// The target it is for.
        target: String,
        /// How it was recognised.
        reason: String,
    },
    /// Device code whose every entry stays.
    AllKept {
        /// The entries.
        entries: Vec<TargetFate>,
    },
    /// Left as it is, with the reason (device code this does not rewrite,
    /// a file that would keep no device code, a malformed file).
    Untouched {
        /// Why.
        reason: String,
    },
    /// No device code.
    Plain,
}

/// What `name` (a path inside a package or folder, `/`-separated) with
/// contents `data` becomes under `rules`. Only a failing check of a
/// rewritten file is an error (a bug, never written); anything this cannot
/// or should not rewrite is left [`Outcome::Untouched`] with the reason.
pub fn prune_file(name: &str, data: &[u8], rules: &Rules) -> Result<Outcome, PruneError> {
    let base = name.rsplit('/').next().unwrap_or(name);
    // An archive's own table of contents says what it serves, more exactly
    // than the target in its name.
    if data.starts_with(b"KPAK") {
        return Ok(kpack_archive(data, rules));
    }
    if let Some(outcome) = removed_by_name(name, rules, data.len() as u64) {
        return Ok(outcome);
    }
    let named = names::targets_in_name(base);
    if !named.is_empty() && !offload_inspect::package::may_hold_code(data) {
        let entries = vec![TargetFate { id: named.join(","), size: data.len() as u64, kept: true }];
        return Ok(Outcome::AllKept { entries });
    }
    if let Some(outcome) = standalone_code_object(data, rules) {
        return Ok(outcome);
    }
    if !offload_inspect::package::may_hold_code(data) {
        return Ok(Outcome::Plain);
    }
    if offload_inspect::layout::openmp::is_openmp_host(data) {
        return Ok(Outcome::Untouched {
            reason: "an OpenMP host binary: prune it on its own with `offload prune` (not yet inside packages)".into(),
        });
    }
    let (kind, pruned) = match files::plan_file(data, rules) {
        Ok(p) => p,
        Err(PruneError::Unsupported(_)) => return Ok(Outcome::Plain),
        Err(PruneError::Empty { held, .. }) => {
            return Ok(Outcome::Untouched {
                reason: format!(
                    "the kept GPUs load nothing from it (it holds {held}); left as it is (--allow-empty prunes it to no device code)"
                ),
            });
        }
        Err(e) => return Ok(Outcome::Untouched { reason: format!("not pruned: {e}") }),
    };
    let entries: Vec<TargetFate> = pruned
        .units
        .iter()
        .flat_map(|u| u.entries.iter().map(|e| TargetFate { id: e.id.clone(), size: e.size, kept: e.kept }))
        .collect();
    if pruned.changed() == 0 {
        return Ok(Outcome::AllKept { entries });
    }
    let (bytes, mode, reason) = smallest(data, &kind, &pruned)?;
    Ok(Outcome::Rewritten(Rewritten { bytes, kind: kind.name(), mode, reason, entries }))
}

/// Whether a file named `name` starting with `head` needs reading whole:
/// it may hold code, or it is named for a target (reported as kept).
pub fn worth_reading(name: &str, head: &[u8]) -> bool {
    offload_inspect::package::may_hold_code(head)
        || !names::targets_in_name(name.rsplit('/').next().unwrap_or(name)).is_empty()
}

/// [`Outcome::Removed`] when `name` (a path) is named for GPU targets
/// ([`names::targets_in_name`]) none of which a GPU the rules keep loads;
/// decided from the name alone, before the file is read.
pub fn removed_by_name(name: &str, rules: &Rules, size: u64) -> Option<Outcome> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let named = names::targets_in_name(base);
    if named.is_empty() || named.iter().any(|t| keeps_amd(rules, t, size)) {
        return None;
    }
    let target = named.join(",");
    Some(Outcome::Removed { reason: format!("named for {target} (the gfxNNN in its file name)"), target })
}

/// The smallest safe output: cut where it applies, zero elsewhere; checked.
fn smallest(data: &[u8], kind: &Input, pruned: &Pruned) -> Result<(Vec<u8>, Mode, String), PruneError> {
    match cut_file::plan_file_cut(data, kind, pruned) {
        Ok(Some(cut)) => {
            let out = cut.output_plan(data, pruned).to_vec();
            cut.verify(&out, data, pruned)?;
            return Ok((out, Mode::Cut, "a relocatable object or archive: the dropped code is cut out".into()));
        }
        Ok(None) => {}
        Err(e) => return zero(data, kind, pruned, format!("zero: cut refused ({e})")),
    }
    if !kind.in_place() {
        let out = files::zero_output_plan(data, kind, pruned).to_vec();
        files::verify_file(&out, data, kind, pruned)?;
        return Ok((
            out,
            Mode::Rebuilt,
            "nothing refers to it by address: rewritten without the dropped entries".into(),
        ));
    }
    let map = match kind {
        Input::Hip(map) => map.clone(),
        Input::Cuda => match prune::cuda::linked_map(data, pruned) {
            Ok(map) => map,
            Err(e) => return zero(data, kind, pruned, format!("zero: cut refused ({e})")),
        },
        _ => return zero(data, kind, pruned, "zero: cut does not apply to this kind of file".into()),
    };
    match prune::plan_cut(data, &map, pruned) {
        Ok(Cut::Planned(c)) => {
            let out = c.output_plan(data, pruned).to_vec();
            prune::verify_cut(&out, data, &map, pruned, &c)?;
            Ok((out, Mode::Cut, "a linked binary: the freed pages are cut out".into()))
        }
        Ok(Cut::TooSmall { saves, minimum }) => {
            zero(data, kind, pruned, format!("zero: cutting would save only {saves} bytes (under {minimum})"))
        }
        Err(e) => zero(data, kind, pruned, format!("zero: cut refused ({e})")),
    }
}

fn zero(data: &[u8], kind: &Input, pruned: &Pruned, reason: String) -> Result<(Vec<u8>, Mode, String), PruneError> {
    let out = files::zero_output_plan(data, kind, pruned).to_vec();
    files::verify_file(&out, data, kind, pruned)?;
    Ok((out, Mode::Zero, reason))
}

/// Whether an AMD GPU the rules keep loads code for `target`.
fn keeps_amd(rules: &Rules, target: &str, size: u64) -> bool {
    let entry = EntryInfo { id: format!("hipv4-amdgcn-amd-amdhsa--{target}"), size };
    rules.decide(&[vec![entry]]).first().and_then(|u| u.first()).copied().unwrap_or(true)
}

/// A file that is one code object (an AMDGPU ELF `.co`/`.hsaco`, a
/// `.cubin`): kept or removed whole, by the target in its ELF header.
fn standalone_code_object(data: &[u8], rules: &Rules) -> Option<Outcome> {
    let size = data.len() as u64;
    if let Some(cubin) = Cubin::parse(data) {
        let arch = Arch { number: cubin.sm(), suffix: Suffix::None };
        let kept = decide_images(rules, &[vec![(EntryKind::Elf, arch, 0)]]).first().copied().unwrap_or(true);
        let target = arch.to_string();
        return Some(match kept {
            true => Outcome::AllKept { entries: vec![TargetFate { id: target, size, kept }] },
            false => Outcome::Removed { target, reason: "a cubin (its ELF header names the SM)".into() },
        });
    }
    let elf = offload_inspect::elf_flags::read(data)?;
    if elf.machine != offload_inspect::elf_flags::EM_AMDGPU {
        return None;
    }
    let target = elf.processor?.to_string();
    Some(match keeps_amd(rules, &target, size) {
        true => Outcome::AllKept { entries: vec![TargetFate { id: target, size, kept: true }] },
        false => Outcome::Removed { target, reason: "an AMDGPU code object (its ELF header names the GPU)".into() },
    })
}

/// A kpack archive (`KPAK`), pruned by its table of contents with
/// [`crate::kpack::prune_archive`]: removed when no kept GPU loads any of
/// its targets, rewritten without the entries none loads, else kept
/// (docs/formats/kpack.md, "Prune").
fn kpack_archive(data: &[u8], rules: &Rules) -> Outcome {
    use crate::kpack::{PruneAction, prune_archive};
    if !rules.drop.is_empty() {
        return Outcome::Untouched {
            reason: "a kpack archive: --drop is not applied to kpack archives (use --keep)".into(),
        };
    }
    // The GPUs kept: each --keep target as every GPU it names (a target
    // without features keeps its xnack/sramecc variants, as one-file prune
    // keeps both settings), and each --keep-gpu as given. Naming a feature
    // a processor lacks only asks for an archive that does not exist, so
    // the list errs on the side of keeping.
    let mut gpus = Vec::new();
    for t in &rules.keep {
        gpus.push(t.clone());
        if !t.contains(':') && t.starts_with("gfx") {
            for f in ["xnack+", "xnack-", "sramecc+", "sramecc-"] {
                gpus.push(format!("{t}:{f}"));
            }
            for s in ["sramecc+", "sramecc-"] {
                for x in ["xnack+", "xnack-"] {
                    gpus.push(format!("{t}:{s}:{x}"));
                }
            }
        }
    }
    gpus.extend(rules.keep_gpu.iter().map(|g| g.target_id()));
    let size = data.len() as u64;
    match prune_archive(data, &gpus) {
        Ok(PruneAction::Keep) => {
            Outcome::AllKept { entries: vec![TargetFate { id: "kpack archive".into(), size, kept: true }] }
        }
        Ok(PruneAction::Remove) => Outcome::Removed {
            target: "kpack archive".into(),
            reason: "a kpack archive none of whose targets a kept GPU loads (its table of contents)".into(),
        },
        Ok(PruneAction::Rewrite(bytes)) => {
            let entries = vec![TargetFate { id: "kpack archive".into(), size, kept: true }];
            Outcome::Rewritten(Rewritten {
                bytes,
                kind: "kpack archive",
                mode: Mode::Rebuilt,
                reason: "a kpack archive: the entries no kept GPU loads are left out, the others' frames copied".into(),
                entries,
            })
        }
        Err(e) => Outcome::Untouched { reason: format!("a kpack archive, not pruned: {e}") },
    }
}
