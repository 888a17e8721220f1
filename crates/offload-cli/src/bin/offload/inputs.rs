//! What the commands scan for one path given on the command line: the file
//! itself; each member of a package (zip, wheel, tar, deb, conda) that may
//! hold code; or, for a folder, each file below it (each its own `file`,
//! packages opened too). See `offload_inspect::package`.

use crate::progress::Progress;
use offload_inspect::package::{self, Event, HEAD_LEN, Limits};
use offload_inspect::record::CodeObjectRecord;
use offload_inspect::{CodeObject, Inventory, Options, Severity, Step, scan, uri};
use std::cell::{Cell, OnceCell};
use std::path::Path;

/// One thing to scan.
pub struct Item<'a> {
    /// The FILE column: the path given, or a file below the folder given.
    pub file: &'a str,
    pub bytes: &'a [u8],
    /// The mapped file `bytes` come from when they are stored there as is
    /// (extraction copies them with the kernel).
    pub input: &'a offload_io::Input,
    prefix: &'a [Step],
    base: Option<u64>,
    /// Fat binaries found in the file's items so far: units are numbered
    /// across a package.
    units: &'a Cell<usize>,
    units_before: usize,
    /// `file://` and the encoded absolute path, made once per item.
    uri_prefix: OnceCell<Option<String>>,
}

impl<'a> Item<'a> {
    /// Scans the item; locations start at the file, offsets are absolute
    /// in it (none for code inside a compressed member).
    pub fn scan(&self, opts: &Options) -> Inventory<'a> {
        let name = match self.prefix.last() {
            Some(Step::PackageMember(path)) => path.rsplit('/').next().unwrap_or(path).to_string(),
            _ => display_name(self.file),
        };
        let mut inv = scan(self.bytes, &name, opts);
        package::rebase(&mut inv, self.prefix, self.base);
        // A kpack-split library's archives lie beside it: looked for only
        // for a file on disk (docs/formats/kpack.md).
        if self.prefix.is_empty() && self.file != "-" {
            let env = offload_inspect::kpack::process_env();
            offload_inspect::kpack::attach(&mut inv, self.bytes, Path::new(self.file), &env, opts.deep);
        } else if let ([Step::PackageMember(member)], Some(tree)) = (self.prefix, PACKAGE_TREE.get()) {
            // A member of a wheel: its archives are members of the wheels
            // given (docs/guide/kpack.md, "Wheels").
            let env = offload_inspect::kpack::process_env();
            offload_inspect::kpack::attach_member(&mut inv, self.bytes, member, &env, opts.deep, tree);
        }
        self.units.set(self.units_before + inv.units.len());
        inv
    }

    /// The package member this item is (its path there), if it is one.
    pub fn member(&self) -> Option<&'a str> {
        match self.prefix.last() {
            Some(Step::PackageMember(path)) => Some(path),
            _ => None,
        }
    }

    /// The record (`list --json`'s object) of code object `index` of this
    /// item's scan: fat binaries numbered across the package, and the ROCm
    /// code-object URI (`file://ABSOLUTE-PATH#offset=N&size=M`; a
    /// compressed bundle's range for the objects inside it), none where the
    /// bytes lie in no range of the file (standard input, decoded or
    /// decompressed data).
    pub fn record(&self, index: usize, o: &CodeObject) -> CodeObjectRecord {
        let origin = self.base.filter(|_| self.file != "-").and_then(|offset| {
            let prefix = self.uri_prefix.get_or_init(|| uri::file_prefix(Path::new(self.file))).as_deref()?;
            Some(uri::Origin { prefix, offset })
        });
        let mut record = CodeObjectRecord::new(Some(self.file), index, o, self.bytes, origin.as_ref());
        record.unit = record.unit.saturating_add(self.units_before);
        record
    }
}

/// The `.kpack` archives of the packages given on the command line
/// ([`gather_package_archives`]), for the split libraries among their
/// members.
static PACKAGE_TREE: std::sync::OnceLock<std::sync::Arc<offload_inspect::kpack::PackageTree>> =
    std::sync::OnceLock::new();

/// Collects the kpack archives (`.kpack` members starting with `KPAK`) of
/// every wheel among `paths` into one tree, as `pip` installs a host wheel
/// and its device wheels over one `site-packages`: the split libraries of
/// any of them then resolve through it (a host wheel given alone has
/// none: its split libraries fail to load, as once installed without
/// device wheels). Does nothing when no path is a wheel. Unreadable paths
/// are left for the scan to report.
pub fn gather_package_archives(paths: &[String]) {
    let mut tree = offload_inspect::kpack::PackageTree::default();
    let wheels: Vec<&String> = paths.iter().filter(|p| p.ends_with(".whl") && Path::new(p).is_file()).collect();
    if wheels.is_empty() {
        return;
    }
    for path in wheels {
        let Ok(input) = offload_io::Input::open(path) else { continue };
        // Member names are stored as they are in the zip: a wheel without
        // `.kpack` in its bytes has no archive, and is not decompressed.
        if !input.bytes().windows(6).any(|w| w == b".kpack") {
            continue;
        }
        let _ = package::walk(input.bytes(), &Limits::default(), &mut |event| {
            if let Event::Member(m) = event
                && let [Step::PackageMember(member)] = m.steps
                && member.ends_with(".kpack")
                && m.bytes.starts_with(b"KPAK")
            {
                tree.add(member, std::sync::Arc::from(m.bytes));
            }
        });
    }
    let _ = PACKAGE_TREE.set(std::sync::Arc::new(tree));
}

/// Whether [`gather_package_archives`] found wheels among the paths given
/// (their archives then resolve as one installed tree).
pub fn wheels_gathered() -> bool {
    PACKAGE_TREE.get().is_some()
}

/// A file, package member or folder that could not be read.
#[derive(Clone)]
pub struct Problem {
    pub file: String,
    pub severity: Severity,
    /// The member (`member a/b.so`); empty for the file itself.
    pub location: String,
    pub message: String,
    /// The file could not be opened or read (exit status 2), as opposed to
    /// a damaged member found inside it (1).
    pub io: bool,
}

/// Prints `problems`; the exit status they call for (docs/reference/offload.md,
/// "Exit status"): 2 if a file could not be read, 1 if another error was
/// found, else 0.
pub fn report(argv0: &str, problems: &[Problem]) -> u8 {
    for p in problems {
        if p.location.is_empty() {
            eprintln!("{argv0}: {}: '{}': {}", p.severity.name(), p.file, p.message);
        } else {
            eprintln!("{argv0}: {}: {}: {}: {}", p.severity.name(), p.file, p.location, p.message);
        }
    }
    status(problems)
}

/// The exit status `problems` call for, without printing them.
pub fn status(problems: &[Problem]) -> u8 {
    if problems.iter().any(|p| p.io) { 2 } else { u8::from(has_errors(problems)) }
}

pub fn has_errors(problems: &[Problem]) -> bool {
    problems.iter().any(|p| p.severity == Severity::Error)
}

fn unreadable(file: &str, e: &std::io::Error) -> Problem {
    Problem {
        file: file.into(),
        severity: Severity::Error,
        location: String::new(),
        message: offload_io::error_text(e),
        io: true,
    }
}

/// Calls `visit` for each thing to scan in `path`, one at a time, and
/// returns what could not be read. `progress`: a count may be shown on a
/// terminal.
pub fn each(path: &str, progress: bool, visit: &mut dyn FnMut(&Item<'_>)) -> Vec<Problem> {
    let mut problems = Vec::new();
    if path != "-" && Path::new(path).is_dir() {
        let mut bar = Progress::new(path, progress);
        for (n, file) in package::dir::files(Path::new(path)).enumerate() {
            match file {
                Err(e) => problems.push(Problem {
                    file: e.path.display().to_string(),
                    severity: Severity::Error,
                    location: String::new(),
                    message: offload_io::error_text(&e.error),
                    io: true,
                }),
                Ok(file) => {
                    let file = file.to_string_lossy();
                    match offload_io::Input::open_regular(&file) {
                        Err(e) => problems.push(unreadable(&file, &e)),
                        Ok(input) if package::interesting(head(input.bytes())) => {
                            bar.clear();
                            one(&file, &input, None, visit, &mut problems);
                        }
                        Ok(_) => {}
                    }
                }
            }
            bar.tick(n as u64 + 1, None, "files");
        }
        return problems;
    }
    match offload_io::Input::open(path) {
        Err(e) => problems.push(unreadable(path, &e)),
        Ok(input) => one(path, &input, Some(Progress::new(path, progress)), visit, &mut problems),
    }
    problems
}

/// What [`each_parallel`] found for one path of the command line: what
/// `scan` returned for each of its items, and what could not be read, in
/// the order [`each`] gives them.
pub struct Found<R> {
    pub results: Vec<R>,
    pub problems: Vec<Problem>,
}

/// One file to read for [`each_parallel`]: the path it was found under
/// (index into the command line's paths), and the file, or why the folder
/// could not be listed there.
enum Job {
    File { path: usize, file: String, in_folder: bool },
    Unlisted { path: usize, problem: Problem },
}

/// [`each`] for several paths, with the files (of all paths, and of the
/// folders below them) spread over every core: each worker opens one file
/// and walks it (a package's members one after another, each within that
/// walk's own decompression budget), calling `scan` for each item. What
/// `scan` returns comes back per path and in the order [`each`] visits,
/// whatever order the workers finished in, so the output does not depend
/// on timing. Memory: one file mapped and one member decompressed per
/// worker (one worker per core), plus what `scan` itself holds.
pub fn each_parallel<R: Send>(
    paths: &[String],
    progress: bool,
    scan: &(dyn Fn(&Item<'_>) -> R + Sync),
) -> Vec<Found<R>> {
    let mut jobs = Vec::new();
    for (path, name) in paths.iter().enumerate() {
        if name != "-" && Path::new(name).is_dir() {
            for file in package::dir::files(Path::new(name)) {
                jobs.push(match file {
                    Err(e) => Job::Unlisted {
                        path,
                        problem: Problem {
                            file: e.path.display().to_string(),
                            severity: Severity::Error,
                            location: String::new(),
                            message: offload_io::error_text(&e.error),
                            io: true,
                        },
                    },
                    Ok(file) => Job::File { path, file: file.to_string_lossy().into_owned(), in_folder: true },
                });
            }
        } else {
            jobs.push(Job::File { path, file: name.clone(), in_folder: false });
        }
    }
    // One file alone: its members are counted, as `each` does; else files.
    let single = matches!(&jobs[..], [Job::File { in_folder: false, .. }]);
    let label =
        if paths.len() == 1 { paths.first().cloned().unwrap_or_default() } else { format!("{} paths", paths.len()) };
    let bar = std::sync::Mutex::new(Progress::new(&label, progress && !single));
    let done = std::sync::atomic::AtomicU64::new(0);
    let outcomes = offload_io::for_each_item(&jobs, 0, |_, job| {
        let mut results = Vec::new();
        let mut problems = Vec::new();
        match job {
            Job::Unlisted { problem, .. } => problems.push(problem.clone()),
            Job::File { file, in_folder, .. } => {
                let opened =
                    if *in_folder { offload_io::Input::open_regular(file) } else { offload_io::Input::open(file) };
                match opened {
                    Err(e) => problems.push(unreadable(file, &e)),
                    Ok(input) if *in_folder && !package::interesting(head(input.bytes())) => {}
                    Ok(input) => {
                        let members = single.then(|| Progress::new(file, progress));
                        one(file, &input, members, &mut |item| results.push(scan(item)), &mut problems);
                    }
                }
            }
        }
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if let Ok(mut bar) = bar.lock() {
            bar.tick(n, Some(jobs.len() as u64), "files");
        }
        (results, problems)
    });
    let mut found: Vec<Found<R>> = paths.iter().map(|_| Found { results: Vec::new(), problems: Vec::new() }).collect();
    for (job, outcome) in jobs.iter().zip(outcomes) {
        let (path, file) = match job {
            Job::File { path, file, .. } => (*path, file.as_str()),
            Job::Unlisted { path, problem } => (*path, problem.file.as_str()),
        };
        let Some(slot) = found.get_mut(path) else { continue };
        match outcome {
            Some((results, problems)) => {
                slot.results.extend(results);
                slot.problems.extend(problems);
            }
            // A worker panicked: said, never silently dropped.
            None => slot.problems.push(Problem {
                file: file.to_string(),
                severity: Severity::Error,
                location: String::new(),
                message: "internal error while reading this file".into(),
                io: false,
            }),
        }
    }
    found
}

fn head(bytes: &[u8]) -> &[u8] {
    bytes.get(..bytes.len().min(HEAD_LEN)).unwrap_or_default()
}

/// One file: a package is walked, anything else scanned as it is.
fn one(
    file: &str,
    input: &offload_io::Input,
    mut bar: Option<Progress>,
    visit: &mut dyn FnMut(&Item<'_>),
    problems: &mut Vec<Problem>,
) {
    let bytes = input.bytes();
    let units = Cell::new(0);
    if package::detect(head(bytes)).is_none() {
        return visit(&Item {
            file,
            bytes,
            input,
            prefix: &[],
            base: Some(0),
            units: &units,
            units_before: 0,
            uri_prefix: OnceCell::new(),
        });
    }
    let found = |e: package::PackageError| {
        let location =
            if e.at.is_empty() { String::new() } else { offload_inspect::Location(e.at.clone()).to_string() };
        Problem { file: file.into(), severity: e.severity(), location, message: e.kind.to_string(), io: false }
    };
    let result = package::walk(bytes, &Limits::default(), &mut |event| match event {
        Event::Member(m) => {
            if let Some(b) = &mut bar {
                b.clear();
            }
            let units_before = units.get();
            let uri_prefix = OnceCell::new();
            visit(&Item {
                file,
                bytes: m.bytes,
                input,
                prefix: m.steps,
                base: m.offset,
                units: &units,
                units_before,
                uri_prefix,
            });
        }
        Event::Progress { done, total, read } => {
            if let Some(b) = &mut bar {
                b.tick_bytes(read, bytes.len() as u64, done, total);
            }
        }
        Event::Problem(e) => problems.push(found(e)),
    });
    if let Err(e) = result {
        problems.push(found(e));
    }
}

/// The name used for a file in archive locations.
pub fn display_name(path: &str) -> String {
    if path == "-" {
        return "<stdin>".into();
    }
    std::path::Path::new(path).file_name().map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// The lines [`print_diagnostics`] prints, for a worker thread to hand
/// back.
pub fn diagnostics_text(argv0: &str, path: &str, inv: &offload_inspect::Inventory) -> String {
    let mut text = String::new();
    for d in &inv.diagnostics {
        let at = d.offset.map(|o| format!(" (offset {o:#x})")).unwrap_or_default();
        text.push_str(&format!("{argv0}: {}: {path}: {}{at}: {}\n", d.severity.name(), d.location, d.message));
    }
    text
}

/// Prints the scan's diagnostics (list, select, extract) with their
/// severity: an error found while scanning makes `list` exit 1, and the
/// message must say why.
pub fn print_diagnostics(argv0: &str, path: &str, inv: &offload_inspect::Inventory) {
    eprint!("{}", diagnostics_text(argv0, path, inv));
}
