//! Which code object a runtime loads on a given GPU, and why the others
//! are not loaded.
//!
//! The rules, per fat binary (one bundle, compressed bundle, or the
//! OffloadBinaries of one section: what a runtime registers as one unit):
//!
//! 1. Only device code of the runtime's kind is considered: bundle kinds
//!    `hip`, `hipv4` and `hcc` (or OffloadBinary kind `hip`) for HIP, as the
//!    HIP runtime's comgr lookup filters them; `openmp` for OpenMP.
//! 2. The triple must be the GPU's: `amdgcn-amd-amdhsa` (for HIP with an
//!    empty environment, the only form comgr's ISA table holds) or
//!    `nvptx64-nvidia-cuda`.
//! 3. The processor must be the GPU's, by canonical name (the GPU may be
//!    given by an alternative name such as `fiji`; a stored alternative name
//!    is not matched by the HIP runtime). For HIP, a generic code object
//!    (`gfx9-generic`, ...) serves the processors of its family (the
//!    coverage column of [`offload_format::amdgpu`]'s current table: gfx950 falls
//!    back to `gfx9-4-generic`, gfx1153 to `gfx11-generic`, gfx1251 to
//!    `gfx12-5-generic`), and an `amdgcnspirv` SPIR-V object serves any AMD
//!    GPU. Processors are those of the current table; a GPU named by a
//!    processor missing from it matches by exact name, features as given.
//! 4. Each feature the code object fixes (`xnack+`, `sramecc-`) must be set
//!    the same way on the GPU; a feature it leaves out ("any") matches both
//!    settings. A feature the GPU description leaves out is unknown, and a
//!    code object that fixes it does not match (as in comgr, whose query
//!    names the agent's settings).
//! 5. Among compatible code objects: native before generic before SPIR-V
//!    (the HIP runtime's order), then the one that fixes more features
//!    ("an exact feature match is preferred over any"), then file order.
//!    Runtimes themselves take the first compatible object in their own
//!    visiting order; the two differ only for bundles that hold both an
//!    "any" and a fixed object for one processor, which LLVM 19 refuses to
//!    build in most cases.

use super::CodeObject;
use offload_format::amdgpu::{self, Table};
use offload_format::target_id::{TargetId, TargetIdError, parse_format};
use offload_format::triple::Triple;
use std::fmt;

/// The runtime that loads the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Runtime {
    /// The HIP runtime (offload kinds `hip`, `hipv4`, `hcc`).
    Hip,
    /// The OpenMP offload runtime (offload kind `openmp`).
    OpenMp,
    /// The CUDA driver loading fat binaries (rules in `select_cuda`).
    Cuda,
}

impl Runtime {
    /// `hip`, `openmp` or `cuda` (the CLI's `--runtime` values); `None`
    /// for anything else.
    pub fn parse(s: &str) -> Option<Runtime> {
        match s {
            "hip" => Some(Runtime::Hip),
            "openmp" => Some(Runtime::OpenMp),
            "cuda" => Some(Runtime::Cuda),
            _ => None,
        }
    }

    /// The name [`Runtime::parse`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Hip => "hip",
            Runtime::OpenMp => "openmp",
            Runtime::Cuda => "cuda",
        }
    }

    fn loads_kind(self, kind: &str) -> bool {
        match self {
            Runtime::Hip => matches!(kind, "hip" | "hipv4" | "hcc"),
            Runtime::OpenMp => kind == "openmp",
            Runtime::Cuda => kind == "cuda",
        }
    }

    fn kinds(self) -> &'static str {
        match self {
            Runtime::Hip => "hip, hipv4 and hcc",
            Runtime::OpenMp => "openmp",
            Runtime::Cuda => "cuda",
        }
    }
}

/// A GPU, as a target ID: canonical processor and the settings given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// `amdgcn` or `nvptx64`.
    pub arch: &'static str,
    /// The canonical processor name (`gfx90a`, `gfx803` for `fiji`,
    /// `sm_80`).
    pub processor: String,
    /// The xnack setting given (`:xnack+` is `Some(true)`); `None` when
    /// not given, which matches code built for either setting.
    pub xnack: Option<bool>,
    /// The sramecc setting given, as for `xnack`.
    pub sramecc: Option<bool>,
}

/// Why a GPU description is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// A generic target (`gfx9-generic`) names code, not a GPU.
    #[error("'{name}' is a generic target, not a GPU; name the processor (e.g. gfx906)")]
    Generic {
        /// The generic target given.
        name: String,
    },
    /// Not a valid AMDGPU target ID (unknown processor, bad feature, ...).
    #[error("{0} (a processor name with its settings: gfx90a, gfx942:sramecc+:xnack-, gfx1100, fiji, sm_80, ...)")]
    TargetId(#[from] TargetIdError),
    /// An NVIDIA GPU given with `:feature` settings.
    #[error("'{text}': NVIDIA GPUs have no target-ID features")]
    NvptxFeatures {
        /// The GPU as given.
        text: String,
    },
    /// An NVIDIA architecture with an `a`/`f` suffix (`sm_90a`).
    #[error("'{text}': a GPU has no a/f suffix (those name code); give its compute capability, e.g. sm_90 or 9.0")]
    NvidiaSuffix {
        /// The GPU as given.
        text: String,
    },
}

impl Gpu {
    /// Parses `gfx90a:xnack+`, `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`
    /// (an HSA ISA name), `fiji` or `sm_80`.
    ///
    /// ```
    /// use offload_inspect::select::Gpu;
    ///
    /// let gpu = Gpu::parse("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")?;
    /// assert_eq!((gpu.arch, gpu.processor.as_str()), ("amdgcn", "gfx90a"));
    /// assert_eq!((gpu.xnack, gpu.sramecc), (Some(false), Some(true)));
    /// assert_eq!(gpu.target_id(), "gfx90a:sramecc+:xnack-");
    /// assert_eq!(Gpu::parse("fiji")?.processor, "gfx803");
    /// assert!(Gpu::parse("gfx9-generic").is_err());
    /// # Ok::<(), offload_inspect::select::GpuError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Gpu, GpuError> {
        let tid = text.rsplit_once("--").map_or(text, |(_, t)| t);
        if let Some(arch) = nvidia_gpu(tid) {
            return arch.map(|processor| Gpu { arch: "nvptx64", processor, xnack: None, sramecc: None });
        }
        if tid.starts_with("sm_") {
            let parts = parse_format(tid)?;
            if !parts.features.is_empty() {
                return Err(GpuError::NvptxFeatures { text: text.to_string() });
            }
            return Ok(Gpu { arch: "nvptx64", processor: parts.processor.to_string(), xnack: None, sramecc: None });
        }
        let parsed = match TargetId::parse_in(Table::Current, &Triple::parse("amdgcn-amd-amdhsa"), tid) {
            Err(TargetIdError::UnknownProcessor { processor, .. })
                if amdgpu::looks_like_amdgcn_processor(&processor) && !processor.ends_with("-generic") =>
            {
                return Gpu::not_in_table(tid);
            }
            parsed => parsed?,
        };
        if parsed.processor.ends_with("-generic") {
            return Err(GpuError::Generic { name: parsed.processor });
        }
        Ok(Gpu {
            arch: "amdgcn",
            xnack: parsed.features.get("xnack").copied(),
            sramecc: parsed.features.get("sramecc").copied(),
            processor: parsed.processor,
        })
    }

    /// A GPU whose processor is not in the table: taken at its word, with
    /// `xnack` and `sramecc` as the only settings it can have.
    fn not_in_table(tid: &str) -> Result<Gpu, GpuError> {
        let parts = parse_format(tid)?;
        if let Some(other) = parts.features.keys().find(|f| !matches!(**f, "xnack" | "sramecc")) {
            let (id, processor, feature) = (tid.to_string(), parts.processor.to_string(), other.to_string());
            return Err(TargetIdError::UnsupportedFeature { id, processor, feature }.into());
        }
        Ok(Gpu {
            arch: "amdgcn",
            processor: parts.processor.to_string(),
            xnack: parts.features.get("xnack").copied(),
            sramecc: parts.features.get("sramecc").copied(),
        })
    }

    /// Why the GPU's description could not be checked, when it could not:
    /// its processor is not in this tool's processor table.
    pub fn warning(&self) -> Option<String> {
        let unknown = self.arch == "amdgcn" && Table::Current.amdgcn_processor(&self.processor).is_none();
        unknown.then(|| {
            format!(
                "processor '{}' is not in this tool's processor table; code objects are matched by exact processor name, features as given",
                self.processor
            )
        })
    }

    /// The GPU with the `xnack` setting its description leaves out made
    /// explicit, the way a process runs on it: a real GPU runs in one xnack
    /// mode, and code built for `xnack+` or `xnack-` loads only in that
    /// mode. `default(processor)` gives the mode (`HSA_XNACK`, else the
    /// driver's default for the chip) and why, or why it cannot be told;
    /// then the setting stays unset and code that fixes it does not match
    /// (rule 4). `sramecc` is a property of the board that no default
    /// tells, so it stays as given. Returns the GPU and a note saying what
    /// was chosen (or why nothing was), `None` when nothing was left out
    /// (docs/reference/selection-rules.md, "A GPU named without its
    /// settings").
    ///
    /// ```
    /// use offload_inspect::select::Gpu;
    ///
    /// let gfx90a = Gpu::parse("gfx90a")?;
    /// let (gpu, note) = gfx90a.settle(|_| Ok((false, "the driver's default".into())));
    /// assert_eq!(gpu.target_id(), "gfx90a:xnack-");
    /// assert_eq!(note.unwrap(), "gfx90a leaves xnack unset: taking xnack- (the driver's default)");
    /// let (gpu, note) = Gpu::parse("gfx1030")?.settle(|_| Ok((false, String::new())));
    /// assert_eq!((gpu.target_id().as_str(), note), ("gfx1030", None));
    /// # Ok::<(), offload_inspect::select::GpuError>(())
    /// ```
    pub fn settle(&self, default: impl Fn(&str) -> Result<(bool, String), String>) -> (Gpu, Option<String>) {
        let has_xnack =
            self.arch == "amdgcn" && Table::Current.amdgcn_processor(&self.processor).is_some_and(|p| p.xnack);
        if !has_xnack || self.xnack.is_some() {
            return (self.clone(), None);
        }
        let name = &self.processor;
        match default(name) {
            Ok((on, why)) => {
                let gpu = Gpu { xnack: Some(on), ..self.clone() };
                let sign = if on { '+' } else { '-' };
                (gpu, Some(format!("{name} leaves xnack unset: taking xnack{sign} ({why})")))
            }
            Err(why) => (
                self.clone(),
                Some(format!(
                    "{name} leaves xnack unset and its mode cannot be told ({why}): code built for xnack+ or xnack- matches neither; name it ({name}:xnack+ or {name}:xnack-)"
                )),
            ),
        }
    }

    /// The canonical target ID (`gfx90a:sramecc+:xnack-`).
    pub fn target_id(&self) -> String {
        let mut s = self.processor.clone();
        for (name, v) in [("sramecc", self.sramecc), ("xnack", self.xnack)] {
            if let Some(on) = v {
                s.push_str(&format!(":{name}{}", if on { '+' } else { '-' }));
            }
        }
        s
    }

    fn feature(&self, name: &str) -> Option<bool> {
        match name {
            "xnack" => self.xnack,
            "sramecc" => self.sramecc,
            _ => None,
        }
    }
}

impl fmt::Display for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.target_id())
    }
}

/// An NVIDIA GPU given as `compute_86` or `8.6` (`sm_86` itself is parsed
/// as a target ID), as `sm_86`; `None` when `text` is neither form.
fn nvidia_gpu(text: &str) -> Option<Result<String, GpuError>> {
    if !(text.starts_with("compute_") || text.contains('.') || text.starts_with("sm_") && text.ends_with(['a', 'f'])) {
        return None;
    }
    let arch = offload_format::cuda::Arch::parse(text)?;
    Some(if arch.suffix == offload_format::cuda::Suffix::None {
        Ok(format!("sm_{}", arch.number))
    } else {
        Err(GpuError::NvidiaSuffix { text: text.to_string() })
    })
}

/// How a compatible code object serves the GPU, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Built for the GPU's own processor.
    Native,
    /// Built for the generic target that covers the processor
    /// (`gfx9-generic` for `gfx906`).
    Generic,
    /// AMD's SPIR-V (`amdgcnspirv`), compiled for the GPU when loaded.
    SpirV,
    /// CUDA: a cubin of the same major and a lower minor version.
    Compatible,
    /// CUDA: PTX, JIT-compiled when loaded.
    Jit,
}

/// Why a code object is not loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejection {
    /// A host entry: never loaded on a GPU.
    Host,
    /// An offload kind the runtime does not load (`openmp` for HIP).
    OtherKind {
        /// The object's offload kind.
        kind: String,
    },
    /// A triple for another architecture, vendor or OS.
    OtherTriple {
        /// The object's triple.
        triple: String,
    },
    /// A bundle ID with a three-field triple (`hip-amdgcn-amd-amdhsa-gfx906`).
    ThreeFieldTriple,
    /// The object names no processor.
    NoTargetId,
    /// The object's target ID does not parse.
    InvalidTargetId {
        /// Why, in words.
        error: String,
    },
    /// Stored under an alternative processor name (`fiji`), which the HIP
    /// runtime does not match against the canonical one.
    AlternativeName {
        /// The name as stored.
        stored: String,
        /// The canonical name it stands for.
        canonical: String,
    },
    /// Built for another processor.
    OtherProcessor {
        /// The object's (canonical) processor.
        processor: String,
    },
    /// (feature, what the code object requires, what the GPU has).
    Features(Vec<(String, bool, Option<bool>)>),
    /// The CUDA driver's rules (`select_cuda`).
    Cuda(super::select_cuda::CudaRejection),
    /// An entry of a kpack-split binary that AMD's kpack loader does not
    /// serve (another one, or an error), in words (`crate::kpack::select`).
    Kpack(String),
}

impl Rejection {
    /// A stable machine-readable name.
    pub fn code(&self) -> &'static str {
        match self {
            Rejection::Host => "host",
            Rejection::OtherKind { .. } => "other-kind",
            Rejection::OtherTriple { .. } | Rejection::ThreeFieldTriple => "other-triple",
            Rejection::NoTargetId => "no-target-id",
            Rejection::InvalidTargetId { .. } => "invalid-target-id",
            Rejection::AlternativeName { .. } => "alternative-name",
            Rejection::OtherProcessor { .. } => "other-processor",
            Rejection::Features(f) if f.first().is_some_and(|(n, _, _)| n == "sramecc") => "sramecc-mismatch",
            Rejection::Features(_) => "xnack-mismatch",
            Rejection::Cuda(r) => r.code(),
            Rejection::Kpack(_) => "kpack-not-loaded",
        }
    }

    /// The explanation, for `gpu` and `runtime`.
    pub fn explain(&self, gpu: &Gpu, runtime: Runtime) -> String {
        let sign = |on: bool| if on { '+' } else { '-' };
        match self {
            Rejection::Host => "host code, not a device code object".to_string(),
            Rejection::OtherKind { kind } => {
                format!("other offload kind '{kind}': the {} runtime loads {} code objects", runtime.name(), runtime.kinds())
            }
            Rejection::OtherTriple { triple } => match (gpu.arch, runtime) {
                ("amdgcn", Runtime::Hip) => format!(
                    "triple '{triple}' is not amdgcn-amd-amdhsa (with an empty environment), the only one the HIP runtime looks up"
                ),
                _ => format!("triple '{triple}' is not for {} GPUs", gpu.arch),
            },
            Rejection::ThreeFieldTriple => "the ID has a three-field triple (amdgcn-amd-amdhsa-<processor>, as clang 12 and older wrote); the HIP runtime looks up amdgcn-amd-amdhsa--<processor>".to_string(),
            Rejection::NoTargetId => "the ID names no processor".to_string(),
            Rejection::InvalidTargetId { error } => format!("invalid target ID: {error}"),
            Rejection::AlternativeName { stored, canonical } => format!(
                "processor '{stored}' is an alternative name of {canonical}; the HIP runtime matches canonical names only"
            ),
            Rejection::OtherProcessor { processor } => {
                format!("other processor: built for {processor}, the GPU is {}", gpu.processor)
            }
            Rejection::Features(list) => list
                .iter()
                .map(|(name, wanted, has)| match has {
                    Some(h) => format!("{name} mismatch: the code object needs {name}{}, the GPU has {name}{}", sign(*wanted), sign(*h)),
                    None => format!(
                        "{name} mismatch: the code object needs {name}{}, and the GPU's {name} setting was not given (add :{name}+ or :{name}- to the GPU)",
                        sign(*wanted)
                    ),
                })
                .collect::<Vec<_>>()
                .join("; "),
            Rejection::Cuda(r) => r.explain(gpu),
            Rejection::Kpack(why) => why.clone(),
        }
    }
}

/// The outcome for one code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Loaded for its fat binary.
    Selected(Tier),
    /// Compatible, but `chosen` (an index into the objects) is preferred.
    NotChosen {
        /// Index of the object loaded instead.
        chosen: usize,
        /// How this one would have served.
        tier: Tier,
    },
    /// Not loadable on the GPU, and why.
    Rejected(Rejection),
}

/// The outcome for a whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// One per object; `None` for records whose payload holds further code
    /// objects (those are judged instead).
    pub verdicts: Vec<Option<Verdict>>,
    /// Indices of the selected objects, in file order.
    pub chosen: Vec<usize>,
    /// Units that hold code of the runtime's kind but nothing loadable.
    pub failed_units: Vec<usize>,
    /// Failed units a loader refuses with an error of its own (the kpack
    /// loader for a kpack-split binary, `crate::kpack::select`): the unit
    /// and the error, `NAME: message`.
    pub refusals: Vec<(usize, String)>,
}

/// A compatible object: its tier and how many features it fixes.
fn evaluate(o: &CodeObject, gpu: &Gpu, runtime: Runtime) -> Result<(Tier, usize), Rejection> {
    if o.offload_kind == "host" {
        return Err(Rejection::Host);
    }
    if !runtime.loads_kind(&o.offload_kind) {
        return Err(Rejection::OtherKind { kind: o.offload_kind.clone() });
    }
    let triple = Triple::parse(&o.triple);
    let other_triple = || Rejection::OtherTriple { triple: o.triple.clone() };
    let spirv = runtime == Runtime::Hip
        && gpu.arch == "amdgcn"
        && o.triple == "spirv64-amd-amdhsa"
        && o.target_id == "amdgcnspirv";
    if spirv {
        return Ok((Tier::SpirV, 0));
    }
    match gpu.arch {
        "amdgcn" => {
            let env_ok = runtime == Runtime::OpenMp || o.triple.split('-').nth(3).is_none_or(str::is_empty);
            if !(triple.is_amdgcn() && triple.vendor_name() == "amd" && triple.os_name() == "amdhsa" && env_ok) {
                return Err(other_triple());
            }
        }
        _ => {
            if !triple.is_nvptx() {
                return Err(other_triple());
            }
        }
    }
    let bundle_id = o.format != super::Format::OffloadBinary;
    if runtime == Runtime::Hip && bundle_id && o.id.splitn(6, '-').count() < 6 {
        return Err(Rejection::ThreeFieldTriple);
    }
    if let Some(error) = &o.target_id_error {
        return Err(Rejection::InvalidTargetId { error: error.clone() });
    }
    if o.target_id.is_empty() {
        return Err(Rejection::NoTargetId);
    }
    let parts = parse_format(&o.target_id).map_err(|e| Rejection::InvalidTargetId { error: e.to_string() })?;
    let stored = parse_format(&o.stored_target).map(|p| p.processor).unwrap_or(parts.processor);
    if runtime == Runtime::Hip && stored != parts.processor {
        return Err(Rejection::AlternativeName { stored: stored.to_string(), canonical: parts.processor.to_string() });
    }
    let tier = if parts.processor == gpu.processor {
        Tier::Native
    } else if runtime == Runtime::Hip && amdgpu::generic_target(&gpu.processor) == Some(parts.processor) {
        Tier::Generic
    } else {
        return Err(Rejection::OtherProcessor { processor: parts.processor.to_string() });
    };
    // xnack first, then sramecc, so that the reason code names xnack when
    // both differ.
    let mut mismatches = Vec::new();
    for name in ["xnack", "sramecc"] {
        if let Some(&wanted) = parts.features.get(name) {
            let has = gpu.feature(name);
            if has != Some(wanted) {
                mismatches.push((name.to_string(), wanted, has));
            }
        }
    }
    if !mismatches.is_empty() {
        return Err(Rejection::Features(mismatches));
    }
    Ok((tier, parts.features.len()))
}

/// Judges every code object for `gpu` under `runtime`, as the runtime
/// would: per unit (one fat binary), the best compatible object is chosen
/// (native before generic before SPIR-V, then the one fixing the most
/// features); every other object gets a verdict saying why not.
///
/// ```
/// use offload_inspect::select::{Gpu, Runtime, Tier, Verdict, select};
/// use offload_inspect::{Options, scan};
///
/// let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.bc");
/// let inventory = scan(data, "sample", &Options::default());
/// let selection = select(&inventory.objects, &Gpu::parse("gfx906")?, Runtime::Hip);
/// assert_eq!(selection.chosen, [1]);
/// assert_eq!(selection.verdicts[1], Some(Verdict::Selected(Tier::Native)));
/// let codes: Vec<_> = selection
///     .verdicts
///     .iter()
///     .map(|v| match v {
///         Some(Verdict::Rejected(r)) => r.code(),
///         _ => "-",
///     })
///     .collect();
/// assert_eq!(codes, ["host", "-", "other-processor"]);
/// # Ok::<(), offload_inspect::select::GpuError>(())
/// ```
pub fn select(objects: &[CodeObject], gpu: &Gpu, runtime: Runtime) -> Selection {
    if runtime == Runtime::Cuda {
        return super::select_cuda::select(objects, gpu);
    }
    let mut sel = Selection { verdicts: vec![None; objects.len()], ..Default::default() };
    let units = objects.iter().map(|o| o.unit + 1).max().unwrap_or(0);
    // Per unit, the best (rank, object) so far; lower ranks are better.
    type Rank = (Tier, std::cmp::Reverse<usize>, usize);
    let mut best: Vec<Option<(Rank, usize)>> = vec![None; units];
    let mut relevant = vec![false; units];
    let mut compatible = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        if o.container {
            continue;
        }
        if o.offload_kind != "host" && runtime.loads_kind(&o.offload_kind) {
            relevant[o.unit] = true;
        }
        match evaluate(o, gpu, runtime) {
            Ok((tier, features)) => {
                let key = (tier, std::cmp::Reverse(features), i);
                if best[o.unit].is_none_or(|(k, _)| key < k) {
                    best[o.unit] = Some((key, i));
                }
                compatible.push((i, tier));
            }
            Err(r) => sel.verdicts[i] = Some(Verdict::Rejected(r)),
        }
    }
    for (i, tier) in compatible {
        let chosen = best[objects[i].unit].map(|(_, c)| c).unwrap_or(i);
        sel.verdicts[i] = Some(if chosen == i { Verdict::Selected(tier) } else { Verdict::NotChosen { chosen, tier } });
        if chosen == i {
            sel.chosen.push(i);
        }
    }
    sel.failed_units = (0..units).filter(|&u| relevant[u] && best[u].is_none()).collect();
    sel
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, scan};
    use std::num::NonZeroU64;

    fn gpu(s: &str) -> Gpu {
        Gpu::parse(s).unwrap()
    }

    #[test]
    fn gpus_parse_with_aliases_and_isa_names() {
        assert_eq!(gpu("fiji").processor, "gfx803");
        let g = gpu("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-");
        assert_eq!((g.processor.as_str(), g.xnack, g.sramecc), ("gfx90a", Some(false), Some(true)));
        assert_eq!(g.target_id(), "gfx90a:sramecc+:xnack-");
        assert_eq!(gpu("sm_80").arch, "nvptx64");
        assert!(matches!(Gpu::parse("gfx1030:xnack+"), Err(GpuError::TargetId(_))));
        let g = gpu("gfx950:xnack-:sramecc+");
        assert_eq!((g.processor.as_str(), g.xnack, g.sramecc, g.warning()), ("gfx950", Some(false), Some(true), None));
        assert!(matches!(Gpu::parse("gfx1153:xnack+"), Err(GpuError::TargetId(_))));
        assert!(matches!(Gpu::parse("gfx12-5-generic"), Err(GpuError::Generic { .. })));
        // Not in the table: accepted by name, with a warning.
        let g = gpu("gfx9999:xnack+");
        assert_eq!((g.processor.as_str(), g.xnack, g.sramecc), ("gfx9999", Some(true), None));
        assert!(g.warning().unwrap().contains("not in this tool's processor table"));
        assert!(matches!(Gpu::parse("gfx9999:cumode+"), Err(GpuError::TargetId(_))));
        assert!(matches!(Gpu::parse("gfx99-generic"), Err(GpuError::TargetId(_))));
        assert!(matches!(Gpu::parse("banana"), Err(GpuError::TargetId(_))));
        assert_eq!(gpu("sm_80").warning(), None);
        assert!(matches!(Gpu::parse("gfx9-generic"), Err(GpuError::Generic { .. })));
        assert!(Gpu::parse("sm_80:xnack+").is_err());
    }

    fn bundle(ids: &[&str]) -> Vec<u8> {
        let entries: Vec<(&[u8], &[u8])> = ids.iter().map(|id| (id.as_bytes(), id.as_bytes())).collect();
        offload_format::bundle::binary::write(&entries, NonZeroU64::new(8).unwrap()).to_vec()
    }

    /// The chosen ID and each other ID's reason code.
    fn pick(ids: &[&str], g: &str, runtime: Runtime) -> (Option<String>, Vec<(String, &'static str)>) {
        let data = bundle(ids);
        let inv = scan(&data, "b", &Options::default());
        let sel = select(&inv.objects, &gpu(g), runtime);
        let chosen = sel.chosen.first().map(|&i| inv.objects[i].id.clone());
        let others = inv
            .objects
            .iter()
            .zip(&sel.verdicts)
            .filter_map(|(o, v)| match v {
                Some(Verdict::Rejected(r)) => Some((o.id.clone(), r.code())),
                Some(Verdict::NotChosen { .. }) => Some((o.id.clone(), "not-chosen")),
                _ => None,
            })
            .collect();
        (chosen, others)
    }

    const H: &str = "hipv4-amdgcn-amd-amdhsa--";

    #[test]
    fn xnack_settings_pick_their_object() {
        let owned = [format!("{H}gfx90a:xnack+"), format!("{H}gfx90a:xnack-"), "host-x86_64-unknown-linux--".into()];
        let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
        let (c, _) = pick(&ids, "gfx90a:xnack+", Runtime::Hip);
        assert_eq!(c.unwrap(), format!("{H}gfx90a:xnack+"));
        let (c, others) = pick(&ids, "gfx90a:sramecc+:xnack-", Runtime::Hip);
        assert_eq!(c.unwrap(), format!("{H}gfx90a:xnack-"));
        assert!(others.contains(&(format!("{H}gfx90a:xnack+"), "xnack-mismatch")));
        assert!(others.contains(&("host-x86_64-unknown-linux--".into(), "host")));
        // Not knowing the GPU's setting matches neither.
        let (c, others) = pick(&ids, "gfx90a", Runtime::Hip);
        assert_eq!(c, None);
        assert_eq!(others.iter().filter(|(_, r)| *r == "xnack-mismatch").count(), 2);
    }

    #[test]
    fn exact_feature_match_beats_any() {
        for order in [[0, 1], [1, 0]] {
            let both = [format!("{H}gfx90a"), format!("{H}gfx90a:xnack+")];
            let ids: Vec<&str> = order.iter().map(|&i| both[i].as_str()).collect();
            let (c, others) = pick(&ids, "gfx90a:xnack+", Runtime::Hip);
            assert_eq!(c.unwrap(), both[1]);
            assert_eq!(others, [(both[0].clone(), "not-chosen")]);
            let (c, others) = pick(&ids, "gfx90a:xnack-", Runtime::Hip);
            assert_eq!(c.unwrap(), both[0]);
            assert_eq!(others, [(both[1].clone(), "xnack-mismatch")]);
        }
    }

    #[test]
    fn sramecc_aliases_processors_kinds_and_generics() {
        let (c, o) = pick(&[&format!("{H}gfx906:sramecc+")], "gfx906:sramecc-", Runtime::Hip);
        assert_eq!((c, o[0].1), (None, "sramecc-mismatch"));
        let (c, _) = pick(&[&format!("{H}gfx803")], "fiji", Runtime::Hip);
        assert_eq!(c.unwrap(), format!("{H}gfx803"));
        let (_, o) = pick(&[&format!("{H}fiji")], "gfx803", Runtime::Hip);
        assert_eq!(o[0].1, "alternative-name");
        let (c, _) = pick(&[&format!("{H}fiji")], "gfx803", Runtime::OpenMp);
        assert_eq!(c, None);
        let (_, o) = pick(&[&format!("{H}gfx906")], "gfx908", Runtime::Hip);
        assert_eq!(o[0].1, "other-processor");
        let (_, o) = pick(&["openmp-amdgcn-amd-amdhsa--gfx906"], "gfx906", Runtime::Hip);
        assert_eq!(o[0].1, "other-kind");
        let (c, _) = pick(&["openmp-amdgcn-amd-amdhsa--gfx906"], "gfx906", Runtime::OpenMp);
        assert!(c.is_some());
        let (_, o) = pick(&["hipv4-amdgcn-amd-amdhsa-unknown-gfx906"], "gfx906", Runtime::Hip);
        assert_eq!(o[0].1, "other-triple");
        let (_, o) = pick(&["hip-amdgcn-amd-amdhsa-gfx906"], "gfx906", Runtime::Hip);
        assert_eq!(o[0].1, "other-triple");
        let (c, _) = pick(&["openmp-amdgcn-amd-amdhsa-gfx906"], "gfx906", Runtime::OpenMp);
        assert!(c.is_some());
        let ids = [format!("{H}gfx9-generic"), format!("{H}gfx906")];
        let (c, o) = pick(&[&ids[0], &ids[1]], "gfx906", Runtime::Hip);
        assert_eq!((c.unwrap(), o[0].1), (ids[1].clone(), "not-chosen"));
        let (c, _) = pick(&[&ids[0]], "gfx90c", Runtime::Hip);
        assert_eq!(c.unwrap(), ids[0]);
        let (_, o) = pick(&[&ids[0]], "gfx90a", Runtime::Hip);
        assert_eq!(o[0].1, "other-processor");
        let (_, o) = pick(&[&format!("{H}gfx1030:xnack+")], "gfx1030", Runtime::Hip);
        assert_eq!(o[0].1, "invalid-target-id");
    }

    #[test]
    fn newer_processors_select_and_fall_back() {
        let ids = [
            format!("{H}gfx950:sramecc+:xnack+"),
            format!("{H}gfx950:sramecc+:xnack-"),
            format!("{H}gfx9-4-generic"),
            format!("{H}gfx11-generic"),
            format!("{H}gfx12-5-generic"),
            format!("{H}gfx9999:xnack-"),
        ];
        let all: Vec<&str> = ids.iter().map(String::as_str).collect();
        let (c, others) = pick(&all, "gfx950:sramecc+:xnack-", Runtime::Hip);
        assert_eq!(c.unwrap(), ids[1]);
        assert!(others.contains(&(ids[0].clone(), "xnack-mismatch")));
        assert!(others.contains(&(ids[2].clone(), "not-chosen")));
        assert!(others.contains(&(ids[5].clone(), "other-processor")));
        // Without native objects: the family's generic object.
        assert_eq!(pick(&all[2..], "gfx950:sramecc+:xnack-", Runtime::Hip).0.unwrap(), ids[2]);
        assert_eq!(pick(&all, "gfx1151", Runtime::Hip).0.unwrap(), ids[3]);
        assert_eq!(pick(&all, "gfx1153", Runtime::Hip).0.unwrap(), ids[3]);
        assert_eq!(pick(&all, "gfx1251:sramecc+", Runtime::Hip).0.unwrap(), ids[4]);
        // Generic fallback is the HIP runtime's, not OpenMP's.
        assert_eq!(pick(&["openmp-amdgcn-amd-amdhsa--gfx11-generic"], "gfx1151", Runtime::OpenMp).0, None);
        // A processor missing from the table matches by exact name.
        assert_eq!(pick(&all, "gfx9999:xnack-", Runtime::Hip).0.unwrap(), ids[5]);
        let (c, others) = pick(&all, "gfx9999:xnack+", Runtime::Hip);
        assert_eq!((c, others.contains(&(ids[5].clone(), "xnack-mismatch"))), (None, true));
        assert_eq!(pick(&all, "gfx9998", Runtime::Hip).0, None);
    }

    #[test]
    fn units_without_a_match_are_reported() {
        let a = bundle(&[&format!("{H}gfx906")]);
        let b = bundle(&[&format!("{H}gfx90a")]);
        let mut data = a.clone();
        data.resize(4096, 0);
        data.extend_from_slice(&b);
        let inv = scan(&data, "two", &Options::default());
        assert_eq!(inv.units.len(), 2);
        let sel = select(&inv.objects, &gpu("gfx906"), Runtime::Hip);
        assert_eq!(sel.chosen, [0]);
        assert_eq!(sel.failed_units, [1]);
        let sel = select(&inv.objects, &gpu("sm_80"), Runtime::OpenMp);
        assert!(sel.chosen.is_empty() && sel.failed_units.is_empty());
    }
}
