//! Following a program's or library's dependencies as glibc's dynamic
//! loader (`ld.so(8)`) does, without loading anything: breadth first, each
//! `DT_NEEDED` name looked up once, in this order:
//!
//! 1. a name with a slash is a path (relative to the current folder);
//! 2. an object already loaded under that name or soname is reused;
//! 3. when the object that needs it has no `DT_RUNPATH`: the `DT_RPATH`
//!    of that object, then of the object that loaded it, and so on up to
//!    the program;
//! 4. `LD_LIBRARY_PATH` (given by the caller, not read here);
//! 5. the needing object's `DT_RUNPATH`;
//! 6. `ld.so.cache`, then the system folders (both skipped for an object
//!    linked with `-z nodefaultlib`).
//!
//! In a search path, `$ORIGIN` is the folder of the object the path belongs
//! to, `$LIB` and `$PLATFORM` take the values in [`Search`]. A file found
//! whose ELF class or machine differs from the program's is passed over, as
//! the loader does. `glibc-hwcaps` subfolders are not searched: the plain
//! folder holds the same sonames on every distribution that uses them.

use super::dynamic::{self, Abi, Dynamic};
use super::ldcache::LdCache;
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where libraries are looked for.
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// A system root: the cache, the system folders and absolute
    /// `DT_RPATH`/`DT_RUNPATH` folders are read below it (`$ORIGIN`
    /// paths are already real paths).
    pub root: Option<PathBuf>,
    /// `LD_LIBRARY_PATH`, split at colons.
    pub ld_library_path: Vec<String>,
    /// The parsed `ld.so.cache` (none: not used).
    pub cache: Option<LdCache>,
    /// The system folders, searched last.
    pub system_dirs: Vec<String>,
    /// What `$LIB` stands for.
    pub lib: String,
    /// What `$PLATFORM` stands for.
    pub platform: String,
}

impl Search {
    /// The search of an x86-64 Debian/Ubuntu-style system (what `ld.so
    /// --help` prints there), plus the `lib64` folders other distributions
    /// use; reads `ROOT/etc/ld.so.cache` when it parses.
    pub fn system(root: Option<PathBuf>, ld_library_path: Option<&str>) -> Search {
        let cache_path = root.as_deref().unwrap_or(Path::new("/")).join("etc/ld.so.cache");
        let cache = read_capped(&cache_path).and_then(|d| LdCache::parse(&d).ok());
        let system_dirs =
            ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
                .map(String::from)
                .to_vec();
        Search {
            root,
            ld_library_path: ld_library_path.map(split_path).unwrap_or_default(),
            cache,
            system_dirs,
            lib: "lib/x86_64-linux-gnu".into(),
            platform: "x86_64".into(),
        }
    }

    /// `path` below the root, for absolute system paths.
    fn rooted(&self, path: &str) -> PathBuf {
        match &self.root {
            Some(root) if path.starts_with('/') => root.join(path.trim_start_matches('/')),
            _ => PathBuf::from(path),
        }
    }
}

/// A real cache is well under a MiB; a larger file is not read whole.
const CACHE_LIMIT: u64 = 64 << 20;

fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    open_regular(path).ok()?.take(CACHE_LIMIT).read_to_end(&mut data).ok()?;
    Some(data)
}

/// Opens `path` for reading only if it is a regular file. A pipe, socket
/// or device is refused before it is opened (opening a FIFO blocks until a
/// writer comes; opening a device can have effects), and the opened file
/// is checked again, without blocking, in case the name was swapped in
/// between (docs/reliability.md).
pub(crate) fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || std::io::Error::other("not a regular file");
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// Splits a colon-separated search path; empty elements are dropped (the
/// loader reads them as the current folder, which a check should not).
pub fn split_path(list: &str) -> Vec<String> {
    list.split([':', ';']).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// How a library was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Via {
    /// Given on the command line (the program itself).
    Given,
    /// A `DT_NEEDED` name with a slash.
    Path,
    /// A `DT_RPATH`.
    Rpath,
    /// `LD_LIBRARY_PATH`.
    LdLibraryPath,
    /// A `DT_RUNPATH`.
    Runpath,
    /// `ld.so.cache`.
    Cache,
    /// A system folder (on Windows: System32, an API set or a KnownDLL).
    System,
    /// Windows: the application folder (`check::windows`).
    AppFolder,
    /// Windows: a folder given in place of `PATH` (`check::windows`).
    PathFolder,
}

impl Via {
    /// The name used in reports: `given`, `path`, `rpath`,
    /// `ld_library_path`, `runpath`, `ld.so.cache`, `system`, `app_folder`,
    /// `PATH`.
    pub fn name(self) -> &'static str {
        match self {
            Via::Given => "given",
            Via::Path => "path",
            Via::Rpath => "rpath",
            Via::LdLibraryPath => "ld_library_path",
            Via::Runpath => "runpath",
            Via::Cache => "ld.so.cache",
            Via::System => "system",
            Via::AppFolder => "app_folder",
            Via::PathFolder => "PATH",
        }
    }
}

/// One object the loader would map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The file (as found, not canonicalised).
    pub path: PathBuf,
    /// The name it was asked for by (`DT_NEEDED`), or the path given.
    pub name: String,
    /// Index of the object that first needed it; `None` for the program.
    pub loader: Option<usize>,
    /// How it was found.
    pub via: Via,
    /// Its dynamic section.
    pub dynamic: Dynamic,
}

/// A dependency that is not found: the program would not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The `DT_NEEDED` name.
    pub name: String,
    /// Index of the object that needs it.
    pub needed_by: usize,
}

/// The program and everything it loads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Closure {
    /// In load order, the program first.
    pub objects: Vec<Loaded>,
    /// Names found nowhere.
    pub missing: Vec<Missing>,
    /// Files found but unreadable as ELF: (path, what is wrong); the search
    /// went on past them.
    pub problems: Vec<(PathBuf, String)>,
}

impl Closure {
    /// `a.out -> libx.so -> liby.so`: the chain of loaders of object `i`.
    pub fn chain(&self, mut i: usize) -> Vec<&str> {
        let mut names = Vec::new();
        while let Some(o) = self.objects.get(i) {
            names.push(o.name.as_str());
            match o.loader {
                Some(l) if l < i => i = l,
                _ => break,
            }
        }
        names.reverse();
        names
    }
}

/// Why the starting file cannot be followed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DepsError {
    /// It cannot be opened or mapped.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not a dynamically loadable ELF file, or its dynamic section
    /// is malformed.
    #[error("{0}")]
    Dynamic(#[from] dynamic::DynamicError),
    /// Not ELF at all.
    #[error("not an ELF file")]
    NotElf,
}

/// A mapped file (headers are all that is read; the map costs no memory
/// until touched).
fn map(path: &Path) -> std::io::Result<(memmap2::Mmap, (u64, u64))> {
    let file = open_regular(path)?;
    let meta = file.metadata()?;
    // SAFETY: read-only private map of a file this process never writes.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok((map, (meta.dev(), meta.ino())))
}

/// `$ORIGIN`, `$LIB`, `$PLATFORM` (also in `${...}` form) expanded.
fn expand(dir: &str, origin: &Path, search: &Search) -> (String, bool) {
    let origin = origin.to_string_lossy();
    let mut out = dir.to_string();
    let mut used_origin = false;
    for (names, value) in [
        (["$ORIGIN", "${ORIGIN}"], origin.as_ref()),
        (["$LIB", "${LIB}"], &search.lib),
        (["$PLATFORM", "${PLATFORM}"], &search.platform),
    ] {
        for name in names {
            if out.contains(name) {
                used_origin |= name.contains("ORIGIN");
                out = out.replace(name, value);
            }
        }
    }
    (out, used_origin)
}

/// The folder an object's `$ORIGIN` names: that of its real path.
fn origin_of(path: &Path) -> PathBuf {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    real.parent().map(Path::to_path_buf).unwrap_or_default()
}

struct Walker<'s> {
    search: &'s Search,
    abi: Abi,
    closure: Closure,
    /// Every name an object was loaded by, and its soname.
    names: HashMap<String, usize>,
    /// (device, inode) of each object.
    files: HashMap<(u64, u64), usize>,
}

impl Walker<'_> {
    /// Tries one candidate file: `Some(index)` when it is (or already was)
    /// loaded, `None` to go on searching.
    fn try_file(&mut self, path: &Path, name: &str, loader: usize, via: Via) -> Option<usize> {
        let (data, id) = map(path).ok()?;
        if let Some(&i) = self.files.get(&id) {
            return Some(i);
        }
        if dynamic::abi(&data) != Some(self.abi) {
            return None;
        }
        let dynamic = match dynamic::read(&data) {
            Ok(d) => d,
            Err(e) => {
                self.closure.problems.push((path.to_path_buf(), e.to_string()));
                return None;
            }
        };
        let index = self.closure.objects.len();
        self.files.insert(id, index);
        if let Some(s) = &dynamic.soname {
            self.names.entry(s.clone()).or_insert(index);
        }
        self.closure.objects.push(Loaded {
            path: path.to_path_buf(),
            name: name.to_string(),
            loader: Some(loader),
            via,
            dynamic,
        });
        Some(index)
    }

    fn in_dirs(&mut self, dirs: &[(String, bool)], name: &str, loader: usize, via: Via) -> Option<usize> {
        for (dir, real) in dirs {
            let dir = if *real { PathBuf::from(dir) } else { self.search.rooted(dir) };
            if let Some(i) = self.try_file(&dir.join(name), name, loader, via) {
                return Some(i);
            }
        }
        None
    }

    /// The folders of one object's search path, expanded; `true` when a
    /// folder is a real path (from `$ORIGIN`), not below the root.
    fn dirs_of(&self, list: &str, object: usize) -> Vec<(String, bool)> {
        let origin = self.closure.objects.get(object).map(|o| origin_of(&o.path)).unwrap_or_default();
        split_path(list).iter().map(|d| expand(d, &origin, self.search)).collect()
    }

    fn find(&mut self, name: &str, loader: usize) -> Option<usize> {
        if let Some(&i) = self.names.get(name) {
            return Some(i);
        }
        let found = self.search_for(name, loader);
        if let Some(i) = found {
            self.names.entry(name.to_string()).or_insert(i);
        }
        found
    }

    fn search_for(&mut self, name: &str, loader: usize) -> Option<usize> {
        let me = self.closure.objects.get(loader)?.dynamic.clone();
        if name.contains('/') {
            let (path, _) = expand(name, &origin_of(&self.closure.objects[loader].path), self.search);
            return self.try_file(Path::new(&path), name, loader, Via::Path);
        }
        if me.runpath.is_none() {
            let mut at = Some(loader);
            while let Some(l) = at {
                if let Some(rpath) = self.closure.objects.get(l).and_then(|o| o.dynamic.rpath.clone()) {
                    let dirs = self.dirs_of(&rpath, l);
                    if let Some(i) = self.in_dirs(&dirs, name, loader, Via::Rpath) {
                        return Some(i);
                    }
                }
                at = self.closure.objects.get(l).and_then(|o| o.loader).filter(|&p| p < l);
            }
        }
        let ld: Vec<(String, bool)> = self.search.ld_library_path.iter().map(|d| (d.clone(), true)).collect();
        if let Some(i) = self.in_dirs(&ld, name, loader, Via::LdLibraryPath) {
            return Some(i);
        }
        if let Some(runpath) = &me.runpath {
            let dirs = self.dirs_of(runpath, loader);
            if let Some(i) = self.in_dirs(&dirs, name, loader, Via::Runpath) {
                return Some(i);
            }
        }
        if me.nodeflib {
            return None;
        }
        let cached: Vec<String> = self
            .search
            .cache
            .iter()
            .flat_map(|c| c.lookup(name))
            .filter(|e| e.hwcap == 0)
            .map(|e| e.path.clone())
            .collect();
        for path in cached {
            if let Some(i) = self.try_file(&self.search.rooted(&path), name, loader, Via::Cache) {
                return Some(i);
            }
        }
        let system: Vec<(String, bool)> = self.search.system_dirs.iter().map(|d| (d.clone(), false)).collect();
        self.in_dirs(&system, name, loader, Via::System)
    }
}

/// Everything `program` (a program or shared library) loads, as the
/// loader would find it under `search`.
pub fn closure(program: &Path, search: &Search) -> Result<Closure, DepsError> {
    let (data, id) = map(program)?;
    let abi = dynamic::abi(&data).ok_or(DepsError::NotElf)?;
    let dynamic = dynamic::read(&data)?;
    drop(data);
    let mut w = Walker { search, abi, closure: Closure::default(), names: HashMap::new(), files: HashMap::new() };
    w.files.insert(id, 0);
    if let Some(soname) = &dynamic.soname {
        w.names.insert(soname.clone(), 0);
    }
    w.closure.objects.push(Loaded {
        path: program.to_path_buf(),
        name: program.to_string_lossy().into_owned(),
        loader: None,
        via: Via::Given,
        dynamic,
    });
    let mut next = 0;
    while let Some(object) = w.closure.objects.get(next) {
        let needed = object.dynamic.needed.clone();
        for name in needed {
            if w.find(&name, next).is_none() {
                w.closure.missing.push(Missing { name, needed_by: next });
            }
        }
        next += 1;
    }
    Ok(w.closure)
}
