//! Writing ROCm's kpack form (`docs/formats/kpack.md`, "Writing"): split
//! fat HIP host binaries into host binaries plus per-target `.kpack`
//! archives ([`split_tree`], one binary: [`host::split_binary`]), join them
//! back ([`host::join_binary`]), and prune archives to the GPUs kept
//! ([`prune_archive`], [`plan_prune`]).
//!
//! Like the rest of this crate, nothing here writes files: the caller gets
//! the bytes of every output and stages them atomically (`offload-io`).
//! Every split is checked before it is returned: each host binary reads
//! back and joins back to its input (when it has a join record), and an
//! independent resolver ([`offload_format::kpack::resolve`], written from
//! the loader's rules) must serve, for every GPU of every target in the
//! input, the bytes the fat binary holds for that GPU.

pub mod host;
pub mod pe;
mod prune;
#[cfg(test)]
mod tests;
pub mod wheel;

pub use host::{CodeObject, SplitBinary, join_binary, split_binary};
pub use prune::{PruneAction, loadable_by, plan_prune, prune_archive};
pub use wheel::{WheelSplit, split_wheel};

use offload_format::kpack::archive::stored_equals;
use offload_format::kpack::resolve::{ArchiveSource, Env, Resolver, clr_arch_list, normalize};
use offload_format::kpack::write::{self, NewEntry};
use offload_format::kpack::{HostBinary, WrapperKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Why a split, join or prune cannot be done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KpackError {
    /// The input is not understood well enough to rewrite it safely.
    #[error("{0}")]
    Refused(String),
    /// The input does not read well enough to rewrite it (the reader's
    /// error).
    #[error("{0}")]
    RefusedRead(#[source] crate::FormatError),
    /// The split output does not read back (the reader's error; a bug,
    /// nothing is returned).
    #[error("the split {what} does not read back: {source}")]
    ReadBack {
        /// `"output"` (an ELF binary) or `"image"` (a PE image).
        what: &'static str,
        /// The reader's error.
        #[source]
        source: crate::FormatError,
    },
    /// The cutter refused.
    #[error(transparent)]
    Prune(#[from] crate::prune::PruneError),
    /// An archive cannot be written.
    #[error(transparent)]
    Write(#[from] write::WriteError),
    /// An archive cannot be read.
    #[error("{path}: {error}")]
    Archive {
        /// The archive.
        path: String,
        /// Why.
        #[source]
        error: offload_format::kpack::ArchiveError,
    },
    /// The output would not serve the same bytes (a bug; nothing is
    /// returned).
    #[error("check failed: {0}")]
    Check(String),
    /// The output would not serve the same bytes: a split binary cannot
    /// be read back (a bug; nothing is returned).
    #[error("check failed: {path}: {source}")]
    CheckHost {
        /// The binary, by its path inside the tree.
        path: String,
        /// The reader's error.
        source: offload_format::kpack::host::HostError,
    },
    /// A join is not possible.
    #[error("join: {0}")]
    Join(String),
    /// A join is not possible: the split binary cannot be read as a
    /// host binary (the reader's error).
    #[error("join: {0}")]
    JoinHost(#[source] offload_format::kpack::host::HostError),
    /// A join is not possible: the split binary's ELF cannot be read (the
    /// reader's error).
    #[error("join: {0}")]
    JoinElf(#[source] offload_format::elf::ElfError),
}

/// The `@GFXARCH@` pattern for a binary at `rel` (a path inside the tree
/// root): as many `../` as `rel` has folders, then
/// `.kpack/<group>_@GFXARCH@.kpack`, as AMD's splitters write it.
///
/// ```
/// use offload_rewrite::kpack::search_pattern;
/// assert_eq!(search_pattern("lib/libx.so", "demo"), "../.kpack/demo_@GFXARCH@.kpack");
/// assert_eq!(search_pattern("libx.so", "demo"), ".kpack/demo_@GFXARCH@.kpack");
/// ```
pub fn search_pattern(rel: &str, group: &str) -> String {
    let depth = rel.split('/').filter(|c| !c.is_empty()).count().saturating_sub(1);
    format!("{}.kpack/{group}_@GFXARCH@.kpack", "../".repeat(depth))
}

/// The archive path (inside the tree) for `target`.
pub fn archive_path(group: &str, target: &str) -> String {
    format!(".kpack/{group}_{target}.kpack")
}

/// Options of a split.
#[derive(Clone, Debug)]
pub struct SplitOptions {
    /// The archives' group name (`<group>_<target>.kpack`).
    pub group: String,
    /// zstd level ([`write::DEFAULT_LEVEL`], AMD's default, unless told).
    pub level: i32,
    /// Worker threads for compression (0: the machine's parallelism).
    pub jobs: usize,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions { group: "kpack".into(), level: write::DEFAULT_LEVEL, jobs: 0 }
    }
}

/// The result of splitting a tree.
#[derive(Clone, Debug, Default)]
pub struct TreeSplit {
    /// Rewritten host binaries: (path inside the tree, bytes).
    pub hosts: Vec<(String, Vec<u8>)>,
    /// New archives: (path inside the tree, bytes).
    pub archives: Vec<(String, Vec<u8>)>,
    /// Code objects moved, per target.
    pub objects: BTreeMap<String, usize>,
    /// Bytes of device code moved (uncompressed).
    pub device_bytes: u64,
    /// Resolutions checked.
    pub checked: usize,
}

/// Compresses every code object into one zstd frame, on `jobs` threads
/// (offload-io's pool; 0: one per core; one compressor per thread),
/// largest first so that one big object does not finish alone.
fn compress_all(objects: &[&[u8]], level: i32, jobs: usize) -> Result<Vec<Vec<u8>>, KpackError> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
            const { std::cell::RefCell::new(None) };
    }
    let mut order: Vec<usize> = (0..objects.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(objects[i].len()));
    let one = |code: &[u8]| -> Result<Vec<u8>, KpackError> {
        let frame = COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                *slot = Some((level, write::compressor(level)?));
            }
            match slot.as_mut() {
                Some((_, c)) => write::compress_with(c, code),
                None => Err(write::WriteError::Compress("no compressor".into())),
            }
        })?;
        Ok(frame)
    };
    let done = offload_io::for_each_item(&order, jobs, |_, &i| one(objects[i]));
    let mut out: Vec<Vec<u8>> = vec![Vec::new(); objects.len()];
    for (&i, r) in order.iter().zip(done) {
        out[i] = r.ok_or_else(|| KpackError::Check("a compression thread panicked".into()))??;
    }
    Ok(out)
}

/// Splits every fat HIP binary among `files` (paths inside one tree, with
/// their bytes; files that are not fat binaries are ignored: the caller
/// copies them): host binaries with kernel name = their path and the
/// pattern of [`search_pattern`], one archive per target ID under
/// `.kpack/` holding that target's code objects of every binary. Checked
/// before returning ([`check_tree`]).
pub fn split_tree(files: &[(String, &[u8])], options: &SplitOptions) -> Result<TreeSplit, KpackError> {
    split_tree_then(files, options, |_| ()).map(|(tree, ())| tree)
}

/// [`split_tree`], running `during` on the split while it is checked (on
/// another thread): a caller stages its outputs there, and commits them
/// only when this returns `Ok` (the check passed). When the check fails,
/// `during`'s result is dropped and the error returned.
pub fn split_tree_then<R: Send>(
    files: &[(String, &[u8])],
    options: &SplitOptions,
    during: impl FnOnce(&TreeSplit) -> R + Send,
) -> Result<(TreeSplit, R), KpackError> {
    let mut out = TreeSplit::default();
    let mut prepared = Vec::new();
    for (rel, data) in files {
        let pattern = vec![search_pattern(rel, &options.group)];
        if let Some(p) = host::prepare(data, rel, &pattern)? {
            prepared.push((rel.clone(), pattern, p));
        }
    }
    let mut rests: Vec<(String, Vec<String>, host::Rest)> = Vec::with_capacity(prepared.len());
    let mut objects: Vec<Vec<CodeObject>> = Vec::with_capacity(prepared.len());
    for (rel, pattern, p) in prepared {
        rests.push((rel, pattern, p.rest));
        objects.push(p.objects);
    }
    // The code objects are compressed (on the pool) while the host
    // binaries are written and checked (on this thread).
    let all: Vec<&[u8]> = objects.iter().flatten().map(|o| &o.bytes[..]).collect();
    let (level, jobs) = (options.level, options.jobs);
    let (frames, finished) = std::thread::scope(|scope| {
        let compressing = scope.spawn(|| compress_all(&all, level, jobs));
        let finished: Result<Vec<(String, Vec<u8>)>, KpackError> = rests
            .into_iter()
            .zip(&objects)
            .map(|((rel, pattern, rest), objs)| {
                let (host, _, _) = host::finish(rest, objs, &rel, &pattern)?;
                Ok((rel, host))
            })
            .collect();
        let frames = compressing.join().map_err(|_| KpackError::Check("a compression thread panicked".into()));
        (frames, finished)
    });
    let hosts = finished?;
    let mut frames = frames??.into_iter();
    let mut by_target: BTreeMap<String, Vec<NewEntry<'static>>> = BTreeMap::new();
    for ((rel, _), objs) in hosts.iter().zip(&objects) {
        for o in objs {
            let frame = frames.next().ok_or_else(|| KpackError::Check("frame count".into()))?;
            by_target.entry(o.target.clone()).or_default().push(NewEntry {
                key: format!("{rel}#{}", o.co_index),
                target: o.target.clone(),
                original_size: o.bytes.len() as u64,
                frame: Cow::Owned(frame),
                source_id: Some(o.source_id.clone()),
            });
            *out.objects.entry(o.target.clone()).or_default() += 1;
            out.device_bytes += o.bytes.len() as u64;
        }
    }
    for (target, entries) in &by_target {
        let bytes = write::archive(&options.group, &[target.as_str()], entries)?;
        out.archives.push((archive_path(&options.group, target), bytes));
    }
    out.hosts = hosts;
    let inputs: Vec<(&str, &[CodeObject])> =
        out.hosts.iter().zip(&objects).map(|((rel, _), objs)| (rel.as_str(), objs.as_slice())).collect();
    let (checked, result) = std::thread::scope(|scope| {
        let tree = &out;
        let side = scope.spawn(move || during(tree));
        let checked = check_tree(&inputs, tree);
        (checked, side.join())
    });
    let result = result.map_err(|_| KpackError::Check("the thread beside the check panicked".into()))?;
    out.checked = checked?;
    Ok((out, result))
}

/// Files in memory, under a virtual root.
struct MemFiles<'a> {
    files: BTreeMap<PathBuf, &'a [u8]>,
}

impl<'a> ArchiveSource for MemFiles<'a> {
    type Data = &'a [u8];
    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(&normalize(path))
    }
    fn read(&self, path: &Path) -> std::io::Result<&'a [u8]> {
        self.files.get(&normalize(path)).copied().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// Processors CLR maps to a generic target (docs/formats/kpack.md), used to
/// check the generic fallback of a split.
const GENERIC_USERS: [&str; 22] = [
    "gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c", "gfx942", "gfx950", "gfx1010", "gfx1030", "gfx1031",
    "gfx1032", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1200", "gfx1201",
    "gfx1012",
];

/// What a fat binary serves a GPU: its own target ID's entry when there is
/// one, else, for a processor with a generic target, the generic entry.
/// (Only GPUs named by a target of the input are asked.)
fn fat_serves<'o, 'b>(objects: &[&'o CodeObject<'b>], agent: &str) -> Option<&'o CodeObject<'b>> {
    if let Some(o) = objects.iter().find(|o| o.target == agent) {
        return Some(o);
    }
    let list = clr_arch_list(agent);
    let generic = list.get(1)?.strip_prefix("amdgcn-amd-amdhsa--")?;
    let bare = generic.split(':').next()?;
    objects.iter().copied().find(|o| o.target == generic || o.target == bare)
}

/// Checks a split: for every binary, every record and every GPU named by a
/// target of its input (and every processor whose generic target is one),
/// the resolver over the output tree serves exactly the input's bytes.
/// `inputs` are each binary's path and the code objects its fat input
/// held ([`SplitBinary::objects`]). Returns how many resolutions were
/// checked.
///
/// The resolver runs without decoding ([`Resolver::decode`] off) and
/// names the entry it serves; each distinct entry served is then decoded
/// once (on every core) and compared with the code object the fat binary
/// serves there. So every frame is decoded once, however many GPUs load
/// it.
pub fn check_tree(inputs: &[(&str, &[CodeObject])], out: &TreeSplit) -> Result<usize, KpackError> {
    let root = PathBuf::from("/tree");
    let mut files = BTreeMap::new();
    for (rel, bytes) in out.hosts.iter().chain(&out.archives) {
        files.insert(normalize(&root.join(rel)), bytes.as_slice());
    }
    let source = MemFiles { files };
    let env = Env { cwd: root.clone(), ..Env::default() };
    let resolver = Resolver { decode: false, ..Resolver::new(&source, &env) };
    let mut checked = 0;
    // Served entry (archive, ordinal) -> the code object it must decode to.
    let mut served: BTreeMap<(PathBuf, u32), &CodeObject> = BTreeMap::new();
    for &(rel, objects) in inputs {
        let (_, split) = out
            .hosts
            .iter()
            .find(|(r, _)| r == rel)
            .ok_or_else(|| KpackError::Check(format!("{rel} has no output")))?;
        let hb = HostBinary::read(split).map_err(|source| KpackError::CheckHost { path: rel.to_string(), source })?;
        let mut agents: BTreeSet<String> = objects.iter().map(|o| o.target.clone()).collect();
        for p in GENERIC_USERS {
            let list = clr_arch_list(p);
            if let Some(g) = list.get(1).and_then(|g| g.strip_prefix("amdgcn-amd-amdhsa--"))
                && agents.iter().any(|a| a == g)
            {
                agents.insert(p.to_string());
            }
        }
        agents.retain(|a| !a.contains("generic"));
        for agent in &agents {
            let arch_list = clr_arch_list(agent);
            for (index, res) in resolver.load_host(&root.join(rel), &hb, &arch_list) {
                let co = u32::try_from(index).unwrap_or(u32::MAX);
                let objs: Vec<&CodeObject> = objects.iter().filter(|o| o.co_index == co).collect();
                let want = fat_serves(&objs, agent);
                match (&res.result, want) {
                    (Ok(l), Some(w)) if l.target == w.target && l.key == format!("{rel}#{co}") => {
                        let previous = served.insert((l.archive.clone(), l.ordinal), w);
                        if previous.is_some_and(|p| p.bytes != w.bytes) {
                            return Err(KpackError::Check(format!(
                                "{rel} record {index}: one entry of {} serves two different code objects",
                                l.archive.display()
                            )));
                        }
                    }
                    (Err(_), None) => {}
                    (got, want) => {
                        return Err(KpackError::Check(format!(
                            "{rel} record {index} for {agent}: the split serves {}, the fat binary {}",
                            got.as_ref().map_or_else(
                                |e| e.to_string(),
                                |l| format!("{} [{}] from {}", l.key, l.target, l.archive.display())
                            ),
                            want.map_or("nothing".to_string(), |w| w.target.clone())
                        )));
                    }
                }
                checked += 1;
            }
        }
        if hb.wrappers.iter().any(|w| w.record.kind() != WrapperKind::Hipk) {
            return Err(KpackError::Check(format!("{rel}: a record is not HIPK")));
        }
    }
    // Decode each served entry once and compare.
    let mut archives = BTreeMap::new();
    for (path, _) in served.keys() {
        if !archives.contains_key(path) {
            let data = source.read(path).map_err(|e| KpackError::Check(format!("{}: {e}", path.display())))?;
            let archive = offload_format::kpack::Archive::parse(data)
                .map_err(|error| KpackError::Archive { path: path.display().to_string(), error })?;
            archives.insert(path.clone(), archive);
        }
    }
    let work: Vec<(&(PathBuf, u32), &&CodeObject)> = served.iter().collect();
    let results = offload_io::for_each_item(&work, 0, |_, ((path, ordinal), want)| {
        let archive = archives.get(path).ok_or_else(|| format!("{}: not read", path.display()))?;
        let stored = archive.stored(*ordinal).map_err(|e| format!("{}: {e}", path.display()))?;
        // Compared while decoding, piece by piece: nothing the size of the
        // code object is allocated.
        let same = stored_equals(stored, archive.scheme, *ordinal, &want.bytes[..])
            .map_err(|e| format!("{} entry {ordinal}: {e}", path.display()))?;
        if !same {
            return Err(format!(
                "{} entry {ordinal} decodes to other bytes than the {} code object it serves",
                path.display(),
                want.target
            ));
        }
        Ok(())
    });
    for r in results {
        r.ok_or_else(|| KpackError::Check("a checking thread panicked".into()))?.map_err(KpackError::Check)?;
    }
    Ok(checked)
}
