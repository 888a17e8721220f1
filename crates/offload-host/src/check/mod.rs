//! `offload check`: whether the GPUs of a machine can run a program, a
//! library, a folder or a package. For each file: every fat binary (unit)
//! must hold a code object that the runtime loads on each GPU, under the
//! same rules [`select`] applies (HIP and OpenMP on AMD GPUs, CUDA and
//! OpenMP on NVIDIA GPUs).
//!
//! * [`judge`] answers for one scanned file;
//! * [`deps`] finds what a program loads, as the dynamic loader does
//!   ([`dynamic`] reads the ELF side, [`ldcache`] the loader's cache);
//! * [`Summary`] adds files up for the one-screen report.
//!
//! Host-only files (no device code) are counted, not judged. A file that
//! is itself device code (an AMDGPU code object, a cubin, a raw bundle or
//! fat binary: what libraries load at run time with `hipModuleLoad` or
//! `cuModuleLoad`) is *standalone*: reported with the GPUs it serves, never
//! a failure.

pub mod deps;
pub mod dynamic;
pub mod ldcache;
pub mod package;
pub mod windows;

#[cfg(test)]
mod tests;

use offload_format::kpack::SearchOrder;
use offload_inspect::elf_flags::{self, Setting};
use offload_inspect::select::{Gpu, Rejection, Runtime, Verdict, select};
use offload_inspect::{Bytes, CodeObject, Format, Inventory, Location, Payload};
use std::collections::BTreeSet;

/// The runtimes that load code on a GPU, in the order they are tried.
pub fn runtimes(gpu: &Gpu) -> [Runtime; 2] {
    if gpu.arch == "nvptx64" { [Runtime::Cuda, Runtime::OpenMp] } else { [Runtime::Hip, Runtime::OpenMp] }
}

/// One fat binary and what each GPU loads from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitCheck {
    /// Its index among the fat binaries of the scanned file (or package
    /// member): the `unit` of `offload list` and `select` for that file.
    pub unit: usize,
    /// Where it lies in the file.
    pub location: String,
    /// Its container format.
    pub format: Format,
    /// The distinct targets of its device code, in file order.
    pub targets: Vec<String>,
    /// Per GPU checked (same order): the ID of the code object loaded, or
    /// why none is.
    pub loads: Vec<Result<String, String>>,
}

impl UnitCheck {
    /// Whether every GPU loads something.
    pub fn ok(&self) -> bool {
        self.loads.iter().all(Result::is_ok)
    }
}

/// What kind of file a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// No device code.
    Host,
    /// A host binary with fat binaries.
    Fat,
    /// Device code on its own, loaded at run time by a library.
    Standalone,
}

impl Role {
    /// `host`, `fat` or `standalone`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Host => "host",
            Role::Fat => "fat",
            Role::Standalone => "standalone",
        }
    }
}

/// The answer for one file (or package member).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileCheck {
    /// Host, fat or standalone.
    pub role: Role,
    /// Its units (for a standalone AMDGPU code object: one, the file).
    pub units: Vec<UnitCheck>,
}

impl FileCheck {
    /// Per GPU: whether every unit loads (a standalone file: whether it
    /// serves the GPU).
    pub fn loads_on(&self, gpu: usize) -> bool {
        self.units.iter().all(|u| u.loads.get(gpu).is_some_and(Result::is_ok))
    }

    /// A failure: a fat file with a unit some GPU cannot load.
    pub fn fails(&self) -> bool {
        self.role == Role::Fat && !self.units.iter().all(UnitCheck::ok)
    }

    /// The distinct targets over all units.
    pub fn targets(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        self.units.iter().flat_map(|u| &u.targets).filter(|t| seen.insert(t.as_str())).cloned().collect()
    }
}

/// Whether a code object is device code a runtime registers (not a host
/// entry, a container record, relocatable CUDA code for `nvlink`, or a fat
/// binary nothing registers).
fn is_device(o: &CodeObject) -> bool {
    use offload_format::cuda::EntryKind;
    !o.container
        && o.offload_kind != "host"
        && o.cuda.is_none_or(|c| !c.relocatable && !c.unregistered && matches!(c.kind, EntryKind::Elf | EntryKind::Ptx))
}

fn target_of(o: &CodeObject) -> String {
    if !o.target_id.is_empty() {
        o.target_id.clone()
    } else if o.stored_target.is_empty() && !o.triple.is_empty() {
        // An OpenMP image for a CPU has a triple and no processor; its ID
        // (`x86_64-pc-linux-gnu-`) ends in the empty field.
        o.triple.clone()
    } else {
        o.id.clone()
    }
}

/// Whether the bytes are a host container (a program, library, object or
/// archive for a CPU); anything else holding device code is standalone.
fn is_host_container(bytes: &[u8]) -> bool {
    use offload_format::elf::EM_CUDA;
    if let Some(abi) = dynamic::abi(bytes) {
        return abi.machine != offload_format::elf::EM_AMDGPU && abi.machine != EM_CUDA;
    }
    bytes.starts_with(b"!<arch>\n")
        || bytes.starts_with(b"MZ")
        || [[0xcf, 0xfa, 0xed, 0xfe], [0xce, 0xfa, 0xed, 0xfe], [0xca, 0xfe, 0xba, 0xbe]]
            .iter()
            .any(|m| bytes.starts_with(m))
}

/// Judges one scanned file (`bytes` are what was scanned) for each GPU.
pub fn judge(inv: &Inventory, bytes: &[u8], gpus: &[Gpu]) -> FileCheck {
    if let Some(unit) = amdgpu_code_object(bytes, gpus) {
        return FileCheck { role: Role::Standalone, units: vec![unit] };
    }
    let units = units_of(
        &inv.objects,
        &inv.units.iter().map(|u| (u.location.clone(), u.format)).collect::<Vec<_>>(),
        gpus,
        Some(inv),
    );
    let role = if units.is_empty() {
        Role::Host
    } else if is_host_container(bytes) {
        Role::Fat
    } else {
        Role::Standalone
    };
    FileCheck { role, units }
}

/// The units with device code, judged for each GPU. The `HIPK` records of
/// a kpack-split binary in `inv` are units too (with or without archives
/// found), judged by what AMD's kpack loader serves or refuses
/// (`offload_inspect::kpack::select`, the loader's newer fall-through
/// order, with this process's `ROCM_KPACK_*` variables).
fn units_of(
    objects: &[CodeObject],
    units: &[(Location, Format)],
    gpus: &[Gpu],
    inv: Option<&Inventory>,
) -> Vec<UnitCheck> {
    let mut device: Vec<Vec<usize>> = vec![Vec::new(); units.len()];
    for (i, o) in objects.iter().enumerate() {
        if is_device(o)
            && let Some(d) = device.get_mut(o.unit)
        {
            d.push(i);
        }
    }
    // Per GPU and runtime, the selection over all objects.
    let kpack_units: Vec<usize> =
        inv.and_then(|i| i.kpack.as_ref()).map(|k| k.records.iter().map(|r| r.unit).collect()).unwrap_or_default();
    let selections: Vec<Vec<(Runtime, offload_inspect::select::Selection)>> = gpus
        .iter()
        .map(|g| {
            runtimes(g)
                .into_iter()
                .map(|r| {
                    let mut sel = select(objects, g, r);
                    if r == Runtime::Hip
                        && let Some(inv) = inv
                    {
                        offload_inspect::kpack::select(inv, &mut sel, g, SearchOrder::FallThrough);
                    }
                    (r, sel)
                })
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    for (u, members) in device.iter().enumerate() {
        if members.is_empty() && !kpack_units.contains(&u) {
            continue;
        }
        let Some((location, format)) = units.get(u) else { continue };
        let mut seen = BTreeSet::new();
        let targets: Vec<String> =
            members.iter().map(|&i| target_of(&objects[i])).filter(|t| seen.insert(t.clone())).collect();
        let loads = gpus
            .iter()
            .zip(&selections)
            .map(|(gpu, sels)| {
                let chosen = sels.iter().find_map(|(_, s)| s.chosen.iter().find(|&&i| objects[i].unit == u));
                let refused = sels.iter().find_map(|(_, s)| s.refusals.iter().find(|(r, _)| *r == u));
                match (chosen, refused) {
                    (Some(&i), _) => Ok(objects[i].id.clone()),
                    (None, Some((_, why))) => Err(format!("the kpack loader loads nothing: {why}")),
                    (None, None) => Err(why_not(objects, members, gpu, sels, &targets)),
                }
            })
            .collect();
        out.push(UnitCheck { unit: u, location: location.to_string(), format: *format, targets, loads });
    }
    out
}

/// Why no object of a unit loads: a feature mismatch on the GPU's own
/// processor says so; otherwise the targets the unit holds.
fn why_not(
    objects: &[CodeObject],
    members: &[usize],
    gpu: &Gpu,
    sels: &[(Runtime, offload_inspect::select::Selection)],
    targets: &[String],
) -> String {
    for (runtime, sel) in sels {
        for &i in members {
            if let Some(Some(Verdict::Rejected(r @ Rejection::Features(_)))) = sel.verdicts.get(i) {
                return format!("{}: {}", objects[i].id, r.explain(gpu, *runtime));
            }
        }
    }
    format!("no code object for {} (holds {})", gpu.target_id(), targets.join(", "))
}

/// A standalone AMDGPU code object (`.co`, `.hsaco`): judged as the HIP
/// runtime judges a bundle entry with the target its ELF header names.
fn amdgpu_code_object(bytes: &[u8], gpus: &[Gpu]) -> Option<UnitCheck> {
    let t = elf_flags::read(bytes)?;
    if t.machine != offload_format::elf::EM_AMDGPU {
        return None;
    }
    let mut target = t.processor.map_or_else(|| format!("unknown processor {:#x}", t.flags & 0xff), str::to_string);
    for (name, s) in [("sramecc", t.sramecc), ("xnack", t.xnack)] {
        match s {
            Setting::On => target.push_str(&format!(":{name}+")),
            Setting::Off => target.push_str(&format!(":{name}-")),
            Setting::Any | Setting::Unknown => {}
        }
    }
    let object = CodeObject {
        location: Location::default(),
        format: Format::Bundle,
        id: format!("hipv4-amdgcn-amd-amdhsa--{target}"),
        offload_kind: "hipv4".into(),
        triple: "amdgcn-amd-amdhsa".into(),
        target_id: target.clone(),
        target_id_error: t.processor.is_none().then(|| "processor not in the table".to_string()),
        stored_target: target.clone(),
        size: bytes.len() as u64,
        offset: Some(0),
        compressed: false,
        unit: 0,
        container: false,
        image_kind: None,
        payload: Payload::Plain(Bytes::Borrowed(bytes)),
        cuda: None,
        kpack: None,
    };
    let objects = [object];
    let units = [(Location::default(), Format::Bundle)];
    let mut checks = units_of(&objects, &units, gpus, None);
    let mut unit = checks.pop()?;
    unit.location = "file".into();
    Some(unit)
}

/// Files and units added up, for the summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Files with fat binaries.
    pub fat_files: usize,
    /// Files without device code.
    pub host_files: usize,
    /// Standalone code object files.
    pub standalone_files: usize,
    /// Fat binaries in the fat files.
    pub units: usize,
    /// Per GPU: fat files with a unit it cannot load, and units it cannot load.
    pub failing: Vec<(usize, usize)>,
}

impl Summary {
    /// A summary for `gpus` GPUs, nothing counted yet.
    pub fn new(gpus: usize) -> Summary {
        Summary { failing: vec![(0, 0); gpus], ..Default::default() }
    }

    /// Counts one file.
    pub fn add(&mut self, file: &FileCheck) {
        match file.role {
            Role::Host => self.host_files += 1,
            Role::Standalone => self.standalone_files += 1,
            Role::Fat => {
                self.fat_files += 1;
                self.units += file.units.len();
                for (g, (files, units)) in self.failing.iter_mut().enumerate() {
                    let bad = file.units.iter().filter(|u| u.loads.get(g).is_some_and(Result::is_err)).count();
                    *units += bad;
                    *files += usize::from(bad > 0);
                }
            }
        }
    }
}
