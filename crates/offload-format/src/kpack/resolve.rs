//! Which archive and TOC entry AMD's kpack loader serves for one GPU, or
//! which error it returns, written from the published rules
//! (`docs/formats/kpack.md`, "The loader"), not from AMD's code.
//!
//! The loader is given the binary's path, its marker, the `co_index` of one
//! `HIPK` record and CLR's list of ISA names for the device
//! ([`clr_arch_list`]). It builds a list of archive files (the marker's
//! search paths, relative to the binary's directory, with `@GFXARCH@`
//! replaced by every compatible target of every ISA name; or the
//! environment's overrides), opens those that are archives, and searches
//! them ISA name by ISA name, most specific target first. The two
//! [`SearchOrder`]s differ in what a failed candidate does.
//!
//! The environment is data ([`Env`]), and the file system is behind
//! [`ArchiveSource`], so that tests can use a fake or a fixture folder and
//! a tool can answer for another machine's settings.

use super::archive::{Archive, ArchiveError};
use super::host::{GFXARCH, HostBinary, Marker, MarkerError, WrapperKind};
use std::path::{Component, Path, PathBuf};

/// The prefix of CLR's ISA names.
pub const ISA_PREFIX: &str = "amdgcn-amd-amdhsa--";
/// Agent strings with more features than this are matched only as a whole
/// (the loader's candidate list has 2^features entries).
pub const MAX_FEATURES: usize = 8;
/// The processors for which CLR's `TargetToGeneric` adds a generic ISA name
/// (its table; the generic name itself comes from [`crate::amdgpu`]).
pub const CLR_GENERIC_PROCESSORS: &[&str] = &[
    "gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c", "gfx942", "gfx950", "gfx1010", "gfx1011", "gfx1012",
    "gfx1013", "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036", "gfx1100", "gfx1101",
    "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201",
];

/// What the loader does when a compatible archive fails to serve the code
/// object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchOrder {
    /// The first archive with a compatible target decides: its entry, or
    /// its error (AMD's loader as of July 2026).
    FirstCompatible,
    /// A failing candidate is remembered and the next one tried; the last
    /// error is returned when none serves (the newer loader).
    #[default]
    FallThrough,
}

/// The loader's environment, as data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    /// `ROCM_KPACK_PATH`: archive files that replace the marker's paths.
    pub kpack_path: Option<String>,
    /// `ROCM_KPACK_PATH_PREFIX`: archive files searched before them.
    pub kpack_path_prefix: Option<String>,
    /// `ROCM_KPACK_DISABLE`.
    pub disable: Option<String>,
    /// The directory relative paths resolve against (the process's working
    /// directory).
    pub cwd: PathBuf,
    /// The list separator of the path variables (`:`; `;` on Windows).
    pub separator: char,
}

impl Default for Env {
    fn default() -> Self {
        Env { kpack_path: None, kpack_path_prefix: None, disable: None, cwd: PathBuf::from("/"), separator: ':' }
    }
}

/// Whether a flag variable counts as set: present, non-empty, and not
/// starting with `0`.
pub fn flag_set(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && !v.starts_with('0'))
}

impl Env {
    /// The items of a path variable: split, empty items dropped, relative
    /// ones resolved against `cwd`. No `@GFXARCH@` expansion.
    fn items(&self, value: Option<&str>) -> Vec<PathBuf> {
        let Some(value) = value else { return Vec::new() };
        value.split(self.separator).filter(|s| !s.is_empty()).map(|s| self.cwd.join(s)).collect()
    }
}

/// The file system as the loader sees it.
pub trait ArchiveSource {
    /// The bytes of a file ([`Vec`], a memory map, a slice).
    type Data: AsRef<[u8]>;
    /// Whether `path` is a regular file (symbolic links followed).
    fn is_file(&self, path: &Path) -> bool;
    /// The whole file.
    fn read(&self, path: &Path) -> std::io::Result<Self::Data>;
    /// `path` with `.` and `..` resolved, and symbolic links where the
    /// source has them (C++'s `weakly_canonical`). The default is lexical.
    fn canonical(&self, path: &Path) -> PathBuf {
        normalize(path)
    }
}

/// `path` with `.` removed and `..` applied lexically (`..` above the root
/// stays at the root).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFiles;

impl ArchiveSource for RealFiles {
    type Data = Vec<u8>;
    fn is_file(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(path)
    }
    fn canonical(&self, path: &Path) -> PathBuf {
        // The longest prefix that exists, resolved; the rest lexically.
        let path = normalize(path);
        let mut head = path.as_path();
        let mut tail = Vec::new();
        loop {
            if let Ok(real) = std::fs::canonicalize(head) {
                return tail.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
            }
            match (head.parent(), head.file_name()) {
                (Some(parent), Some(name)) => {
                    tail.push(name.to_os_string());
                    head = parent;
                }
                _ => return path,
            }
        }
    }
}

/// One load request: what CLR passes to `kpack_load_code_object`.
#[derive(Clone, Copy, Debug)]
pub struct Request<'r> {
    /// The host binary's path (relative paths resolve against [`Env::cwd`]).
    pub binary_path: &'r Path,
    /// Its marker.
    pub marker: &'r Marker<'r>,
    /// The `co_index` of the wrapper record.
    pub co_index: u32,
    /// CLR's ISA names for the device ([`clr_arch_list`]).
    pub arch_list: &'r [String],
}

/// A served code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The archive, as its path was formed.
    pub archive: PathBuf,
    /// The TOC key (`kernel_name#co_index`).
    pub key: String,
    /// The TOC target it was filed under.
    pub target: String,
    /// The ISA name of the request that found it.
    pub arch: String,
    /// Its ordinal in the archive.
    pub ordinal: u32,
    /// The decompressed code object.
    pub bytes: Vec<u8>,
}

/// The loader's errors, with its `kpack_error_t` codes ([`LoadError::code`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// `ROCM_KPACK_DISABLE` is set (`KPACK_ERROR_NOT_IMPLEMENTED`, 8).
    #[error("ROCM_KPACK_DISABLE is set: kpack loading is turned off")]
    Disabled,
    /// The marker is unusable (`KPACK_ERROR_INVALID_METADATA`, 12).
    #[error(transparent)]
    InvalidMetadata(#[from] MarkerError),
    /// No path names an archive that opens (`KPACK_ERROR_ARCHIVE_NOT_FOUND`, 13).
    #[error("no kpack archive found (looked for {})", list(.looked_for))]
    ArchiveNotFound {
        /// The paths formed, in order.
        looked_for: Vec<PathBuf>,
    },
    /// Archives opened, but none lists a compatible target
    /// (`KPACK_ERROR_ARCH_NOT_FOUND`, 14).
    #[error("no archive serves a compatible target (opened {})", list(.archives))]
    ArchNotFound {
        /// The archives opened.
        archives: Vec<PathBuf>,
    },
    /// The archive has no entry for this key and target
    /// (`KPACK_ERROR_KERNEL_NOT_FOUND`, 5).
    #[error("{} has no entry {key:?} for {target}", .archive.display())]
    KernelNotFound {
        /// The archive.
        archive: PathBuf,
        /// The key.
        key: String,
        /// The target.
        target: String,
    },
    /// The entry's ordinal names no code object (`KPACK_ERROR_INVALID_FORMAT`, 3).
    #[error("{}: {error}", .archive.display())]
    InvalidFormat {
        /// The archive.
        archive: PathBuf,
        /// What is wrong.
        error: ArchiveError,
    },
    /// The code object does not decode to its declared size, or is over the
    /// caller's limit (`KPACK_ERROR_DECOMPRESSION_FAILED`, 6).
    #[error("{}: {error}", .archive.display())]
    DecompressionFailed {
        /// The archive.
        archive: PathBuf,
        /// What went wrong.
        error: ArchiveError,
    },
}

fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".into();
    }
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

impl LoadError {
    /// The loader's `kpack_error_t` value.
    pub fn code(&self) -> u32 {
        match self {
            LoadError::Disabled => 8,
            LoadError::InvalidMetadata(_) => 12,
            LoadError::ArchiveNotFound { .. } => 13,
            LoadError::ArchNotFound { .. } => 14,
            LoadError::KernelNotFound { .. } => 5,
            LoadError::InvalidFormat { .. } => 3,
            LoadError::DecompressionFailed { .. } => 6,
        }
    }

    /// The loader's name for it (`KPACK_ERROR_KERNEL_NOT_FOUND`).
    pub fn name(&self) -> &'static str {
        match self {
            LoadError::Disabled => "KPACK_ERROR_NOT_IMPLEMENTED",
            LoadError::InvalidMetadata(_) => "KPACK_ERROR_INVALID_METADATA",
            LoadError::ArchiveNotFound { .. } => "KPACK_ERROR_ARCHIVE_NOT_FOUND",
            LoadError::ArchNotFound { .. } => "KPACK_ERROR_ARCH_NOT_FOUND",
            LoadError::KernelNotFound { .. } => "KPACK_ERROR_KERNEL_NOT_FOUND",
            LoadError::InvalidFormat { .. } => "KPACK_ERROR_INVALID_FORMAT",
            LoadError::DecompressionFailed { .. } => "KPACK_ERROR_DECOMPRESSION_FAILED",
        }
    }
}

/// One step of a resolution, for explaining it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A formed path that is not a regular file.
    NotAFile(PathBuf),
    /// A path naming an archive already opened (by its canonical path).
    Duplicate(PathBuf),
    /// A file that cannot be read.
    Unreadable(PathBuf, String),
    /// A file that is not a usable archive.
    Rejected(PathBuf, ArchiveError),
    /// An archive opened, with its `gfx_arches`.
    Opened(PathBuf, Vec<String>),
    /// A candidate tried: archive, target, and the error when it failed.
    Tried(PathBuf, String, Option<LoadError>),
}

/// The answer to a request, with how it was reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The code object served, or the loader's error.
    pub result: Result<Loaded, LoadError>,
    /// What was looked at, in order.
    pub trace: Vec<Step>,
}

/// The ISA names CLR passes for a device: its own (`amdgcn-amd-amdhsa--`
/// and the agent's target ID) and, for processors CLR's table maps, the
/// generic target with the agent's `sramecc` and then `xnack` features.
///
/// ```
/// use offload_format::kpack::clr_arch_list;
///
/// assert_eq!(
///     clr_arch_list("gfx942:sramecc+:xnack-"),
///     ["amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-"]
/// );
/// assert_eq!(clr_arch_list("gfx90a:xnack+"), ["amdgcn-amd-amdhsa--gfx90a:xnack+"]);
/// ```
pub fn clr_arch_list(agent: &str) -> Vec<String> {
    let bare = agent.strip_prefix(ISA_PREFIX).unwrap_or(agent);
    let mut parts = bare.split(':');
    let processor = parts.next().unwrap_or_default();
    let features: Vec<&str> = parts.collect();
    let mut out = vec![format!("{ISA_PREFIX}{bare}")];
    let generic = CLR_GENERIC_PROCESSORS.contains(&processor).then(|| crate::amdgpu::generic_target(processor));
    if let Some(Some(generic)) = generic {
        let mut name = format!("{ISA_PREFIX}{generic}");
        for want in ["sramecc", "xnack"] {
            for f in features.iter().filter(|f| f.strip_suffix(['+', '-']) == Some(want)) {
                name.push(':');
                name.push_str(f);
            }
        }
        out.push(name);
    }
    out
}

/// The targets an ISA name matches, most specific first: the processor with
/// every subset of its features, in descending bit-mask order (the first
/// feature is the highest bit), so the full set comes first and the bare
/// processor last.
///
/// ```
/// use offload_format::kpack::resolve::compatible_targets;
///
/// assert_eq!(
///     compatible_targets("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
///     ["gfx90a:sramecc+:xnack-", "gfx90a:sramecc+", "gfx90a:xnack-", "gfx90a"]
/// );
/// ```
pub fn compatible_targets(arch: &str) -> Vec<String> {
    let bare = arch.strip_prefix(ISA_PREFIX).unwrap_or(arch);
    let mut parts = bare.split(':');
    let processor = parts.next().unwrap_or_default();
    let features: Vec<&str> = parts.collect();
    let n = features.len();
    if n > MAX_FEATURES {
        return vec![bare.to_string()];
    }
    (0..1u32 << n)
        .rev()
        .map(|mask| {
            let mut t = processor.to_string();
            for (i, f) in features.iter().enumerate() {
                if mask & (1 << (n - 1 - i)) != 0 {
                    t.push(':');
                    t.push_str(f);
                }
            }
            t
        })
        .collect()
}

/// The loader, over a source of files and an environment.
#[derive(Clone, Copy, Debug)]
pub struct Resolver<'s, S> {
    /// The file system.
    pub source: &'s S,
    /// The environment.
    pub env: &'s Env,
    /// What a failing candidate does.
    pub order: SearchOrder,
    /// The largest code object decoded, in bytes (a larger one fails as
    /// `DecompressionFailed`; the real loader has no such limit).
    pub limit: u64,
    /// Whether the served entry is decoded (the default). Without decoding,
    /// [`Loaded::bytes`] is empty and a frame that would not decode serves
    /// all the same: for callers that checked every frame already (the
    /// splitter's own check) and want only which entry is served.
    pub decode: bool,
}

impl<'s, S: ArchiveSource> Resolver<'s, S> {
    /// A resolver with the default order ([`SearchOrder::FallThrough`]) and
    /// a 4 GiB limit.
    pub fn new(source: &'s S, env: &'s Env) -> Self {
        Resolver { source, env, order: SearchOrder::default(), limit: 4 << 30, decode: true }
    }

    /// The archive paths the loader forms for `request`, in order, before
    /// any is opened.
    pub fn archive_paths(&self, request: &Request<'_>) -> Vec<PathBuf> {
        let env = self.env;
        let mut out = env.items(env.kpack_path_prefix.as_deref());
        let replace = env.items(env.kpack_path.as_deref());
        if !replace.is_empty() {
            out.extend(replace);
            return out;
        }
        let binary = env.cwd.join(request.binary_path);
        let dir = binary.parent().unwrap_or(Path::new(""));
        for pattern in &request.marker.search_paths {
            let p = Path::new(pattern);
            let formed = if p.is_absolute() { p.to_path_buf() } else { self.source.canonical(&dir.join(p)) };
            let text = formed.to_string_lossy();
            match text.find(GFXARCH) {
                None => out.push(formed.clone()),
                Some(at) => {
                    let (head, tail) = (&text[..at], &text[at + GFXARCH.len()..]);
                    for arch in request.arch_list {
                        for t in compatible_targets(arch) {
                            out.push(PathBuf::from(format!("{head}{t}{tail}")));
                        }
                    }
                }
            }
        }
        out
    }

    /// Resolves `request` as the loader would, decoding the code object it
    /// serves.
    pub fn load(&self, request: &Request<'_>) -> Resolution {
        let mut trace = Vec::new();
        let result = self.load_traced(request, &mut trace);
        Resolution { result, trace }
    }

    /// Resolves every `HIPK` record of a host binary, in record order, as
    /// CLR registers them: (record index, resolution). A record whose marker
    /// cannot be read fails with `InvalidMetadata`.
    pub fn load_host(
        &self,
        binary_path: &Path,
        host: &HostBinary<'_>,
        arch_list: &[String],
    ) -> Vec<(usize, Resolution)> {
        let mut out = Vec::new();
        for (index, w) in host.wrappers.iter().enumerate() {
            if w.record.kind() != WrapperKind::Hipk {
                continue;
            }
            let resolution = match &w.marker {
                Some(Ok(marker)) => {
                    let request = Request { binary_path, marker, co_index: w.record.co_index(), arch_list };
                    self.load(&request)
                }
                Some(Err(e)) => Resolution { result: Err(LoadError::InvalidMetadata(e.clone())), trace: Vec::new() },
                None => Resolution {
                    result: Err(LoadError::InvalidMetadata(MarkerError::Shape("the record points at no file bytes"))),
                    trace: Vec::new(),
                },
            };
            out.push((index, resolution));
        }
        out
    }

    fn load_traced(&self, request: &Request<'_>, trace: &mut Vec<Step>) -> Result<Loaded, LoadError> {
        if flag_set(self.env.disable.as_deref()) {
            return Err(LoadError::Disabled);
        }
        let looked_for = self.archive_paths(request);
        let mut seen = Vec::new();
        let mut files = Vec::new();
        for path in &looked_for {
            if !self.source.is_file(path) {
                trace.push(Step::NotAFile(path.clone()));
                continue;
            }
            let canonical = self.source.canonical(path);
            if seen.contains(&canonical) {
                trace.push(Step::Duplicate(path.clone()));
                continue;
            }
            match self.source.read(path) {
                Ok(data) => {
                    seen.push(canonical);
                    files.push((path.clone(), data));
                }
                Err(e) => trace.push(Step::Unreadable(path.clone(), e.to_string())),
            }
        }
        let mut archives = Vec::new();
        for (path, data) in &files {
            match Archive::parse(data.as_ref()) {
                Ok(a) => {
                    trace.push(Step::Opened(path.clone(), a.gfx_arches.iter().map(|s| s.to_string()).collect()));
                    archives.push((path, a));
                }
                Err(e) => trace.push(Step::Rejected(path.clone(), e)),
            }
        }
        if archives.is_empty() {
            return Err(LoadError::ArchiveNotFound { looked_for });
        }
        let key = request.marker.lookup_key(request.co_index);
        let mut last = None;
        for arch in request.arch_list {
            for target in compatible_targets(arch) {
                for (path, archive) in archives.iter().filter(|(_, a)| a.gfx_arches.contains(&target.as_str())) {
                    match self.get_kernel(path, archive, &key, &target) {
                        Ok((ordinal, bytes)) => {
                            trace.push(Step::Tried((*path).clone(), target.clone(), None));
                            return Ok(Loaded {
                                archive: (*path).clone(),
                                key,
                                target,
                                arch: arch.clone(),
                                ordinal,
                                bytes,
                            });
                        }
                        Err(e) => {
                            trace.push(Step::Tried((*path).clone(), target.clone(), Some(e.clone())));
                            if self.order == SearchOrder::FirstCompatible {
                                return Err(e);
                            }
                            last = Some(e);
                        }
                    }
                }
            }
        }
        Err(last.unwrap_or_else(|| LoadError::ArchNotFound {
            archives: archives.iter().map(|(p, _)| (*p).clone()).collect(),
        }))
    }

    fn get_kernel(
        &self,
        path: &Path,
        archive: &Archive<'_>,
        key: &str,
        target: &str,
    ) -> Result<(u32, Vec<u8>), LoadError> {
        let entry = archive.find(key, target).ok_or_else(|| LoadError::KernelNotFound {
            archive: path.to_path_buf(),
            key: key.to_string(),
            target: target.to_string(),
        })?;
        if !self.decode {
            return Ok((entry.ordinal, Vec::new()));
        }
        match archive.decompress(entry, self.limit) {
            Ok(bytes) => Ok((entry.ordinal, bytes)),
            Err(error @ ArchiveError::Ordinal { .. }) => {
                Err(LoadError::InvalidFormat { archive: path.to_path_buf(), error })
            }
            Err(error) => Err(LoadError::DecompressionFailed { archive: path.to_path_buf(), error }),
        }
    }
}
