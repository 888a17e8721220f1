//! ROCm kpack in the inspector (`docs/formats/kpack.md`): `.kpack` archives
//! are containers ([`crate::scan`] lists their entries, format
//! `kpack-archive`), and a kpack-split host binary (`HIPK` records and a
//! `.rocm_kpack_ref` marker, its device code moved into archives) lists
//! the code objects its search paths reach ([`attach`]). [`select`] then
//! answers, for such a binary and a GPU, exactly what AMD's kpack loader
//! would load (or which error it would return), through
//! `offload_format::kpack::resolve`.
//!
//! Scanning stays pure (bytes in); [`attach`] and [`select`] are the two
//! places that read other files: the archives next to a library, found
//! through the marker's search paths relative to the library's own path,
//! or through the `ROCM_KPACK_PATH*` variables given as an [`Env`].

use crate::select::{Gpu, Rejection, Selection, Tier, Verdict};
use crate::{BytesError, CodeObject, Diagnostic, Format, Inventory, Location, Payload, Severity, Step, Unit};
use offload_format::kpack::archive::{Archive, Entry, Scheme, decode_stored};
use offload_format::kpack::clr_arch_list;
use offload_format::kpack::host::{GFXARCH, HostBinary, Marker, WrapperKind};
use offload_format::kpack::resolve::{ArchiveSource, Env, RealFiles, Request, Resolver, SearchOrder, flag_set};
use offload_format::kpack::verify::Problem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest code object decoded from an archive (4 GiB, the loader's
/// largest blob); a larger declared size is refused before anything is
/// allocated.
pub const DECODE_LIMIT: u64 = 4 << 30;

/// What a kpack entry is, on its [`CodeObject`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KpackRef {
    /// The archive, as the loader forms its path; `None` when the archive is
    /// the scanned file itself.
    pub archive: Option<PathBuf>,
    /// The binary key (`<kernel_name>#<co_index>`).
    pub key: String,
    /// The target it is filed under.
    pub target: String,
    /// Its ordinal in the archive.
    pub ordinal: u32,
    /// For a split host binary: the index of the `HIPK` record (in
    /// `.hipFatBinSegment`) that leads to it.
    pub record: Option<usize>,
}

/// A marker as read, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedMarker {
    /// `kernel_name`.
    pub kernel_name: String,
    /// `kpack_search_paths` (the string items).
    pub search_paths: Vec<String>,
}

impl OwnedMarker {
    fn marker(&self) -> Marker<'_> {
        Marker {
            kernel_name: &self.kernel_name,
            search_paths: self.search_paths.iter().map(String::as_str).collect(),
            dropped_paths: 0,
            len: 0,
        }
    }
}

/// One `HIPK` record of a split host binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitRecord {
    /// Its index in `.hipFatBinSegment`.
    pub record: usize,
    /// The unit ([`Inventory::units`]) it is: what CLR registers.
    pub unit: usize,
    /// The `co_index` it carries.
    pub co_index: u32,
    /// Its marker, or why the loader cannot read it.
    pub marker: Result<OwnedMarker, String>,
    /// The archive files (or `@GFXARCH@` patterns) looked for.
    pub looked_for: Vec<String>,
}

/// The kpack side of a split host binary, as [`attach`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The binary's path as given.
    pub library: PathBuf,
    /// The loader's environment used.
    pub env: Env,
    /// Its `HIPK` records.
    pub records: Vec<SplitRecord>,
    /// Every archive opened, by canonical path.
    pub archives: Vec<PathBuf>,
    /// The files the archives were looked for in, when they are not the
    /// file system: the members of packages ([`PackageTree`]).
    pub tree: Option<Arc<PackageTree>>,
}

/// Archives that are members of packages (a host wheel and the device
/// wheels given with it, which `pip` installs over one `site-packages`):
/// each member at `<root>/<path in its package>`, so that a library member
/// finds them through its search paths as it would once installed. The
/// loader's view of such a tree: [`ArchiveSource`] over these files only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackageTree {
    /// Files by path (lexically normalized, under [`PackageTree::ROOT`]).
    pub files: std::collections::BTreeMap<PathBuf, Arc<[u8]>>,
}

impl PackageTree {
    /// The virtual root the members are placed under.
    pub const ROOT: &'static str = "/site-packages";

    /// Adds a package member (`path` inside its package).
    pub fn add(&mut self, member: &str, bytes: Arc<[u8]>) {
        self.files.insert(Self::path_of(member), bytes);
    }

    /// Where a package member lies in the tree: where `pip` installs it
    /// ([`install_path`]).
    pub fn path_of(member: &str) -> PathBuf {
        offload_format::kpack::resolve::normalize(&Path::new(Self::ROOT).join(install_path(member)))
    }
}

/// Where a wheel member is installed, relative to `site-packages`: a
/// member of `<name>-<version>.data/purelib/` or `.data/platlib/` goes to
/// `site-packages` without those two folders (the wheel format, PEP 427);
/// any other member as it is. Members of the other `.data/` schemes
/// (`scripts`, `headers`, `data`) land outside `site-packages` and keep
/// their path, so no search path reaches them.
pub fn install_path(member: &str) -> &str {
    let mut parts = member.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(top), Some("purelib" | "platlib"), Some(rest)) if top.ends_with(".data") && !top.contains('/') => rest,
        _ => member,
    }
}

impl ArchiveSource for PackageTree {
    type Data = Arc<[u8]>;
    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(&offload_format::kpack::resolve::normalize(path))
    }
    fn read(&self, path: &Path) -> std::io::Result<Arc<[u8]>> {
        self.files
            .get(&offload_format::kpack::resolve::normalize(path))
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// The entry ID listed for a TOC entry: the bundle entry ID the splitter
/// recorded (`metadata.target`) when it names the same target, otherwise
/// `hipv4-amdgcn-amd-amdhsa--<target>`.
pub(crate) fn entry_id(entry: &Entry<'_>) -> String {
    match entry.source_id {
        Some(id) if id.ends_with(&format!("--{}", entry.target)) => id.to_string(),
        _ => format!("hipv4-amdgcn-amd-amdhsa--{}", entry.target),
    }
}

/// Where in the archive a verify problem lies.
pub(crate) fn problem_offset(archive: &Archive<'_>, problem: &Problem) -> u64 {
    let span = |o: u32| archive.spans.get(o as usize).map(|s| s.offset);
    let blob = archive.blob.map(|b| b.offset);
    let at = match problem {
        Problem::OverlapsHeader { ordinal: Some(o) } | Problem::OverlapsToc { ordinal: Some(o) } => span(*o),
        Problem::OverlapsHeader { ordinal: None } | Problem::OverlapsToc { ordinal: None } | Problem::BlobSlack(_) => {
            blob
        }
        Problem::Overlap(a, _) => span(*a),
        Problem::Unreferenced(o) => span(*o),
        Problem::NotZstd { ordinal, .. }
        | Problem::FrameLength { ordinal, .. }
        | Problem::ContentSize { ordinal, .. } => span(*ordinal),
        Problem::TrailingBytes(n) => Some((archive.data().len() as u64).saturating_sub(*n)),
        _ => None,
    };
    at.unwrap_or(archive.toc_offset)
}

/// Why decoded bytes are not a code object for `target` (its processor
/// from the ELF header), if they are not.
pub(crate) fn target_mismatch(bytes: &[u8], target: &str) -> Option<String> {
    let processor = target.split(':').next().unwrap_or(target);
    let Some(t) = crate::elf_flags::read(bytes) else {
        return Some(format!("the decoded entry is not an ELF code object (filed under {target})"));
    };
    if t.machine != offload_format::elf::EM_AMDGPU {
        return Some(format!("the decoded entry is an ELF for machine {}, not AMDGPU", t.machine));
    }
    match t.processor {
        Some(p) if p == processor => None,
        Some(p) => Some(format!("the code object is for {p}, but is filed under {target}")),
        None => {
            Some(format!("the code object names an unknown processor ({:#x}), filed under {target}", t.flags & 0xff))
        }
    }
}

/// Decodes one entry's stored bytes ([`Payload::Kpack`]).
pub(crate) fn decode(stored: &[u8], scheme: Scheme, ordinal: u32, len: u64) -> Result<Vec<u8>, BytesError> {
    Ok(decode_stored(stored, scheme, ordinal, len, DECODE_LIMIT)?)
}

/// The items of a path variable, as the loader reads them.
fn env_items(env: &Env, value: Option<&str>) -> Vec<PathBuf> {
    value.map_or_else(Vec::new, |v| v.split(env.separator).filter(|s| !s.is_empty()).map(|s| env.cwd.join(s)).collect())
}

/// The archive files a marker can reach for any GPU: the environment's
/// files, or the marker's paths formed as the loader forms them, each
/// `@GFXARCH@` pattern matched against the files of its folder. Also
/// returns what was looked for, in words.
pub fn reachable_archives(env: &Env, library: &Path, marker: &Marker<'_>) -> (Vec<PathBuf>, Vec<String>) {
    reachable_in(env, library, marker, None)
}

/// [`reachable_archives`] in `tree` when given, else on the file system.
fn reachable_in(
    env: &Env,
    library: &Path,
    marker: &Marker<'_>,
    tree: Option<&PackageTree>,
) -> (Vec<PathBuf>, Vec<String>) {
    let mut out = env_items(env, env.kpack_path_prefix.as_deref());
    let replace = env_items(env, env.kpack_path.as_deref());
    let mut looked: Vec<String> = out.iter().map(|p| p.display().to_string()).collect();
    if !replace.is_empty() {
        looked.extend(replace.iter().map(|p| p.display().to_string()));
        out.extend(replace);
        return (out, looked);
    }
    let binary = env.cwd.join(library);
    let dir = binary.parent().unwrap_or(Path::new(""));
    for pattern in &marker.search_paths {
        let p = Path::new(pattern);
        let formed = match tree {
            _ if p.is_absolute() => p.to_path_buf(),
            Some(t) => t.canonical(&dir.join(p)),
            None => RealFiles.canonical(&dir.join(p)),
        };
        let text = formed.to_string_lossy().into_owned();
        looked.push(text.clone());
        let Some(at) = text.find(GFXARCH) else {
            out.push(formed);
            continue;
        };
        let (head, tail) = (&text[..at], &text[at + GFXARCH.len()..]);
        // A pattern whose @GFXARCH@ is in a folder name is not listed.
        if tail.contains(std::path::MAIN_SEPARATOR) {
            continue;
        }
        let (folder, prefix) = match head.rsplit_once(std::path::MAIN_SEPARATOR) {
            Some(("", prefix)) => ("/", prefix),
            Some((folder, prefix)) => (folder, prefix),
            None => (".", head),
        };
        let in_folder: Vec<String> = match tree {
            Some(t) => t
                .files
                .keys()
                .filter(|k| k.parent() == Some(Path::new(folder)))
                .filter_map(|k| Some(k.file_name()?.to_string_lossy().into_owned()))
                .collect(),
            None => match std::fs::read_dir(folder) {
                Ok(entries) => entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect(),
                Err(_) => continue,
            },
        };
        let mut names: Vec<String> = in_folder
            .into_iter()
            .filter(|n| n.len() > prefix.len() + tail.len() && n.starts_with(prefix) && n.ends_with(tail))
            .collect();
        names.sort();
        for name in names {
            let middle = &name[prefix.len()..name.len() - tail.len()];
            out.push(PathBuf::from(format!("{head}{middle}{tail}")));
        }
    }
    (out, looked)
}

/// Looks at a host binary scanned into `inv`: when it is kpack-split,
/// records its `HIPK` records as units (one each, as CLR registers them)
/// and lists, for each, the entries of the archives its search paths reach
/// under its binary key. `library` is the binary's path (relative paths
/// resolve against `env.cwd`), `data` the bytes scanned. A record whose
/// archives are missing, or whose marker is unreadable, gets a diagnostic:
/// a warning, or an error when `deep` (`verify`).
pub fn attach(inv: &mut Inventory<'_>, data: &[u8], library: &Path, env: &Env, deep: bool) {
    attach_in(inv, data, library, env, deep, None);
}

/// [`attach`] for a package member: its archives are looked for among the
/// members of `tree` (the library at [`PackageTree::path_of`] its member
/// path), not on the file system.
pub fn attach_member(
    inv: &mut Inventory<'_>,
    data: &[u8],
    member: &str,
    env: &Env,
    deep: bool,
    tree: &Arc<PackageTree>,
) {
    let env = Env { kpack_path: None, kpack_path_prefix: None, cwd: PathBuf::from(PackageTree::ROOT), ..env.clone() };
    attach_in(inv, data, &PackageTree::path_of(member), &env, deep, Some(tree));
}

fn attach_in(
    inv: &mut Inventory<'_>,
    data: &[u8],
    library: &Path,
    env: &Env,
    deep: bool,
    tree: Option<&Arc<PackageTree>>,
) {
    let Ok(host) = HostBinary::read(data) else { return };
    if !host.wrappers.iter().any(|w| w.record.kind() == WrapperKind::Hipk) {
        return;
    }
    let severity = if deep { Severity::Error } else { Severity::Warning };
    let mut split = Split {
        library: library.to_path_buf(),
        env: env.clone(),
        records: Vec::new(),
        archives: Vec::new(),
        tree: tree.cloned(),
    };
    // Files read so far: path, and the owned buffer when it is an archive.
    let mut read: Vec<(PathBuf, Option<usize>)> = Vec::new();
    for (index, w) in host.wrappers.iter().enumerate() {
        if w.record.kind() != WrapperKind::Hipk {
            continue;
        }
        let rloc = Location(vec![Step::Section(host.wrapper_section.into()), Step::Index(index)]);
        inv.units.push(Unit { location: rloc.clone(), format: Format::KpackArchive });
        let unit = inv.units.len() - 1;
        let co_index = w.record.co_index();
        let marker = match &w.marker {
            Some(Ok(m)) => Ok(m),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("the record points at no file bytes".to_string()),
        };
        let marker = match marker {
            Err(e) => {
                inv.diagnostics.push(Diagnostic {
                    severity: Severity::Error,
                    offset: None,
                    location: rloc.to_string(),
                    message: format!(
                        "HIPK record {index}: {e}: the kpack loader refuses it (KPACK_ERROR_INVALID_METADATA)"
                    ),
                });
                split.records.push(SplitRecord {
                    record: index,
                    unit,
                    co_index,
                    marker: Err(e),
                    looked_for: Vec::new(),
                });
                continue;
            }
            Ok(m) => m,
        };
        let key = marker.lookup_key(co_index);
        let (files, looked_for) = reachable_in(env, library, marker, tree.map(|t| &**t));
        let (mut archives, mut listed) = (Vec::new(), 0);
        for file in files {
            let canonical = match tree {
                Some(t) => t.canonical(&file),
                None => RealFiles.canonical(&file),
            };
            let buffer = match read.iter().find(|(p, _)| *p == canonical) {
                Some((_, b)) => *b,
                None => {
                    let bytes: Option<Arc<[u8]>> = match tree {
                        Some(t) => t.read(&file).ok(),
                        None => std::fs::read(&file).ok().map(Arc::from),
                    };
                    let b = bytes.filter(|d| Archive::parse(d).is_ok()).map(|d| {
                        inv.owned.push(d);
                        inv.owned.len() - 1
                    });
                    read.push((canonical.clone(), b));
                    if b.is_some() {
                        split.archives.push(canonical);
                    }
                    b
                }
            };
            let Some(buffer) = buffer else { continue };
            let Some(rc) = inv.owned.get(buffer).cloned() else { continue };
            let Ok(archive) = Archive::parse(&rc) else { continue };
            archives.push(file.display().to_string());
            let Some(binary) = archive.binaries.iter().find(|b| b.key == key) else { continue };
            for entry in &binary.entries {
                let Ok(stored) = archive.stored(entry.ordinal) else { continue };
                let start = stored.as_ptr() as usize - rc.as_ptr() as usize;
                inv.objects.push(object(&file, &key, entry, archive.scheme, buffer, start, stored.len(), unit, index));
                listed += 1;
            }
        }
        let problem = if archives.is_empty() {
            Some(format!("no kpack archive found for {key} (looked for {})", looked_for.join(", ")))
        } else if listed == 0 {
            Some(format!("the kpack archives found have no entry for {key} ({})", archives.join(", ")))
        } else {
            None
        };
        if let Some(message) = problem {
            inv.diagnostics.push(Diagnostic { severity, offset: None, location: rloc.to_string(), message });
        }
        let marker = OwnedMarker {
            kernel_name: marker.kernel_name.to_string(),
            search_paths: marker.search_paths.iter().map(|s| s.to_string()).collect(),
        };
        split.records.push(SplitRecord { record: index, unit, co_index, marker: Ok(marker), looked_for });
    }
    inv.kpack = Some(split);
}

#[allow(clippy::too_many_arguments)]
fn object<'a>(
    file: &Path,
    key: &str,
    entry: &Entry<'_>,
    scheme: Scheme,
    buffer: usize,
    start: usize,
    len: usize,
    unit: usize,
    record: usize,
) -> CodeObject<'a> {
    let id = entry_id(entry);
    let split = crate::id::split_entry_id(&id);
    let (target_id, target_id_error) = match crate::id::canonical_target_id(&split.triple, entry.target) {
        Ok(t) => (t, None),
        Err(e) => (entry.target.to_string(), Some(e.to_string())),
    };
    CodeObject {
        location: Location(vec![
            Step::KpackArchive(file.display().to_string()),
            Step::KpackEntry { key: key.to_string(), target: entry.target.to_string() },
        ]),
        format: Format::KpackArchive,
        id,
        offload_kind: split.kind,
        triple: split.triple,
        target_id,
        target_id_error,
        stored_target: entry.target.to_string(),
        size: entry.original_size,
        offset: None,
        compressed: scheme == Scheme::ZstdPerKernel,
        unit,
        container: false,
        image_kind: None,
        payload: Payload::Kpack {
            stored: crate::Bytes::Owned { buffer, start, len },
            scheme,
            ordinal: entry.ordinal,
            len: entry.original_size,
        },
        cuda: None,
        kpack: Some(KpackRef {
            archive: Some(file.to_path_buf()),
            key: key.to_string(),
            target: entry.target.to_string(),
            ordinal: entry.ordinal,
            record: Some(record),
        }),
    }
}

/// What the kpack loader answers for one record of a split binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The record's unit.
    pub unit: usize,
    /// The object loaded (index into [`Inventory::objects`]), or the
    /// loader's error: its name (`KPACK_ERROR_ARCHIVE_NOT_FOUND`), code and
    /// message.
    pub result: Result<usize, (String, u32, String)>,
}

/// Resolves every record of the split binary in `inv` (if it is one) for
/// `gpu`, as AMD's kpack loader would with `order`, and rewrites the
/// verdicts of its objects in `sel` (from [`crate::select::select`]): the
/// object the loader serves is selected, every other one rejected; a
/// record the loader refuses is a failed unit with its error in
/// [`Selection::refusals`]. Reads the archives again (the loader's view).
pub fn select(inv: &Inventory<'_>, sel: &mut Selection, gpu: &Gpu, order: SearchOrder) -> Vec<Answer> {
    let Some(split) = &inv.kpack else { return Vec::new() };
    if gpu.arch != "amdgcn" {
        return Vec::new();
    }
    let arch_list = clr_arch_list(&gpu.target_id());
    match &split.tree {
        Some(tree) => {
            let resolver = Resolver { order, limit: DECODE_LIMIT, ..Resolver::new(&**tree, &split.env) };
            select_with(inv, split, sel, gpu, &arch_list, &resolver)
        }
        None => {
            let resolver = Resolver { order, limit: DECODE_LIMIT, ..Resolver::new(&RealFiles, &split.env) };
            select_with(inv, split, sel, gpu, &arch_list, &resolver)
        }
    }
}

fn select_with<S: ArchiveSource>(
    inv: &Inventory<'_>,
    split: &Split,
    sel: &mut Selection,
    gpu: &Gpu,
    arch_list: &[String],
    resolver: &Resolver<'_, S>,
) -> Vec<Answer> {
    sel.verdicts.resize(inv.objects.len(), None);
    let mut answers = Vec::new();
    for r in &split.records {
        let members: Vec<usize> = (0..inv.objects.len())
            .filter(|&i| inv.objects[i].kpack.as_ref().is_some_and(|k| k.record == Some(r.record)))
            .collect();
        sel.chosen.retain(|i| !members.contains(i));
        sel.failed_units.retain(|&u| u != r.unit);
        let result = match &r.marker {
            Ok(m) => {
                let marker = m.marker();
                let request = Request { binary_path: &split.library, marker: &marker, co_index: r.co_index, arch_list };
                resolver.load(&request).result.map_err(|e| (e.name().to_string(), e.code(), e.to_string()))
            }
            Err(e) => Err(("KPACK_ERROR_INVALID_METADATA".to_string(), 12, e.clone())),
        };
        let result = match result {
            Ok(loaded) => {
                let hit = members.iter().copied().find(|&i| {
                    inv.objects[i].kpack.as_ref().is_some_and(|k| {
                        k.archive.as_deref() == Some(loaded.archive.as_path())
                            && k.key == loaded.key
                            && k.target == loaded.target
                    })
                });
                let served = format!("{} [{}] from {}", loaded.key, loaded.target, loaded.archive.display());
                for &i in &members {
                    sel.verdicts[i] = Some(if Some(i) == hit {
                        let generic = loaded.target.split(':').next().is_some_and(|p| p.ends_with("-generic"));
                        Verdict::Selected(if generic { Tier::Generic } else { Tier::Native })
                    } else {
                        Verdict::Rejected(Rejection::Kpack(format!("the kpack loader serves {served} instead")))
                    });
                }
                match hit {
                    Some(i) => {
                        sel.chosen.push(i);
                        Ok(i)
                    }
                    None => Err((
                        "UNLISTED".to_string(),
                        0,
                        format!("the kpack loader serves {served}, which this listing did not reach"),
                    )),
                }
            }
            Err(e) => {
                for &i in &members {
                    let why = format!("the kpack loader refuses this fat binary on {gpu}: {}: {}", e.0, e.2);
                    sel.verdicts[i] = Some(Verdict::Rejected(Rejection::Kpack(why)));
                }
                Err(e)
            }
        };
        if let Err((name, _, message)) = &result {
            sel.failed_units.push(r.unit);
            sel.refusals.push((r.unit, format!("{name}: {message}")));
        }
        answers.push(Answer { unit: r.unit, result });
    }
    sel.chosen.sort_unstable();
    sel.chosen.dedup();
    sel.failed_units.sort_unstable();
    sel.failed_units.dedup();
    answers
}

/// The loader's environment of this process: `ROCM_KPACK_PATH`,
/// `ROCM_KPACK_PATH_PREFIX`, `ROCM_KPACK_DISABLE` and the working directory
/// (what the HIP runtime would see if started here).
pub fn process_env() -> Env {
    let var = |name: &str| std::env::var(name).ok();
    Env {
        kpack_path: var("ROCM_KPACK_PATH"),
        kpack_path_prefix: var("ROCM_KPACK_PATH_PREFIX"),
        disable: var("ROCM_KPACK_DISABLE"),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        separator: if cfg!(windows) { ';' } else { ':' },
    }
}

/// Whether `env` turns kpack loading off (`ROCM_KPACK_DISABLE`).
pub fn disabled(env: &Env) -> bool {
    flag_set(env.disable.as_deref())
}
