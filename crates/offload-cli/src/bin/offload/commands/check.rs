//! `offload check`: whether each GPU loads code from every fat binary of
//! the programs, libraries, folders and packages given, and from the
//! libraries programs need (found as the dynamic loader finds them, or for
//! PE images as the Windows loader does: docs/guide/windows.md). The
//! rules live in `offload_host::check`; this file walks the inputs and
//! prints.

use crate::cli::{Context, GPU_HELP, parse_gpu};
use crate::inputs;
use crate::output::{self, Colors, Paint};
use clap::Args;
use offload_host::check::deps::{self, Closure, Search, Via};
use offload_host::check::package;
use offload_host::check::windows::{self, WinSearch};
use offload_host::check::{FileCheck, Role, Summary, dynamic, judge};
use offload_host::gpus::{self, Environment, Probe};
use offload_inspect::Options;
use offload_inspect::select::Gpu;
use serde::Serialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// At most this many names in a summary line, so that it fits a screen.
const NAMES_SHOWN: usize = 8;

/// One file (or package member) with device code.
struct Checked {
    file: String,
    member: Option<String>,
    /// For a dependency: the chain of objects that needs it, program first.
    needed_by: Option<Vec<String>>,
    /// For a dependency: how the loader finds it.
    via: Option<&'static str>,
    check: FileCheck,
}

impl Checked {
    /// `lib.whl: member torch/lib/x.so` or the path.
    fn name(&self) -> String {
        match &self.member {
            Some(m) => format!("{}: {m}", self.file),
            None => self.file.clone(),
        }
    }

    /// A unit's location inside the member (the FILE column names the
    /// member already).
    fn within<'l>(&self, location: &'l str) -> &'l str {
        let Some(m) = &self.member else { return location };
        let step = format!("member {m} ");
        location.find(&step).map_or(location, |at| &location[at + step.len()..])
    }

    /// The short name in summary lines: the file (or member) name.
    fn short(&self) -> String {
        let full = self.member.as_deref().unwrap_or(&self.file);
        full.rsplit('/').next().unwrap_or(full).to_string()
    }
}

/// `--json`'s output (docs/guide/checking.md).
#[derive(Serialize)]
struct Report {
    gpus: Vec<String>,
    ok: bool,
    files: Vec<FileRecord>,
    libraries: Vec<LibraryRecord>,
    missing: Vec<MissingRecord>,
    problems: Vec<ProblemRecord>,
    summary: SummaryRecord,
}

#[derive(Serialize)]
struct FileRecord {
    file: String,
    member: Option<String>,
    role: &'static str,
    needed_by: Option<Vec<String>>,
    via: Option<&'static str>,
    targets: Vec<String>,
    /// Per GPU: every unit loads (standalone: the GPU is served).
    loads: Vec<GpuLoads>,
    units: Vec<UnitRecord>,
}

#[derive(Serialize)]
struct GpuLoads {
    gpu: String,
    ok: bool,
}

#[derive(Serialize)]
struct UnitRecord {
    /// The fat binary's index in its file or member, as `list` numbers it.
    unit: usize,
    location: String,
    format: &'static str,
    targets: Vec<String>,
    loads: Vec<UnitLoad>,
}

#[derive(Serialize)]
struct UnitLoad {
    gpu: String,
    /// Whether the GPU loads code from this fat binary.
    ok: bool,
    /// The ID of the code object loaded; null when none is.
    object: Option<String>,
    /// Why none is; null when one is.
    reason: Option<String>,
}

/// A library a program given loads, found as the loader finds it.
#[derive(Clone, Serialize)]
struct LibraryRecord {
    name: String,
    path: String,
    via: &'static str,
    needed_by: Vec<String>,
}

#[derive(Serialize)]
struct MissingRecord {
    name: String,
    needed_by: Vec<String>,
}

#[derive(Serialize)]
struct ProblemRecord {
    file: String,
    severity: &'static str,
    location: String,
    message: String,
}

#[derive(Serialize)]
struct SummaryRecord {
    fat_files: usize,
    units: usize,
    host_files: usize,
    standalone_files: usize,
    per_gpu: Vec<GpuSummary>,
}

#[derive(Serialize)]
struct GpuSummary {
    gpu: String,
    failing_files: usize,
    failing_units: usize,
    standalone_served: usize,
}

/// The GPUs to check: those given, else this machine's (distinct target
/// IDs); `Err` with the exit status when there are none.
fn gpus_to_check(argv0: &str, args: &CheckArgs) -> Result<Vec<Gpu>, u8> {
    let mut found: Vec<Gpu> = args.gpu.clone();
    if found.is_empty() {
        let root = args
            .sysfs_root
            .clone()
            .or_else(|| std::env::var_os("OFFLOAD_SYSFS_ROOT").filter(|v| !v.is_empty()).map(PathBuf::from));
        let scan = match gpus::scan(&Probe { root, env: Environment::from_process() }) {
            Ok(scan) => scan,
            Err(e) => {
                eprintln!("{argv0}: error: {e}");
                return Err(2);
            }
        };
        for w in &scan.warnings {
            eprintln!("{argv0}: warning: {w}");
        }
        found = scan.gpus.into_iter().map(|g| g.gpu).collect();
        if found.is_empty() {
            eprintln!("{argv0}: error: no GPU found on this machine; name one with --gpu (e.g. --gpu gfx1030)");
            return Err(2);
        }
    }
    let mut seen = HashSet::new();
    found.retain(|g| seen.insert(g.target_id()));
    Ok(found)
}

/// Everything found over all paths.
#[derive(Default)]
struct Findings {
    checked: Vec<Checked>,
    libraries: Vec<LibraryRecord>,
    missing: Vec<MissingRecord>,
    problems: Vec<inputs::Problem>,
    summary: Summary,
    /// Dependencies already checked (real paths).
    seen: HashSet<PathBuf>,
    scan_errors: bool,
    /// The programs and libraries among the members of the package being
    /// scanned (path in the package, imports), when imports are followed.
    members: Option<Vec<(String, package::Image)>>,
}

impl Findings {
    /// Scans and judges every item of `path` (a file, package or folder).
    fn scan(&mut self, argv0: &str, path: &str, gpus: &[Gpu], dep: Option<(Vec<String>, &'static str)>, json: bool) {
        let mut items = Vec::new();
        let members = &mut self.members;
        let problems = inputs::each(path, !json, &mut |item| {
            if let (Some(list), Some(member)) = (members.as_mut(), item.member())
                && let Some(image) = package::read_image(item.bytes)
            {
                list.push((member.to_string(), image));
            }
            let inv = item.scan(&Options::default());
            crate::inputs::print_diagnostics(argv0, item.file, &inv);
            for gpu in gpus {
                crate::cli::note_settled(gpu, inv.objects.iter().map(|o| o.target_id.as_str()));
            }
            let check = judge(&inv, item.bytes, gpus);
            items.push((item.file.to_string(), item.member().map(str::to_string), check, inv.has_errors()));
        });
        self.problems.extend(problems);
        for (file, member, check, errors) in items {
            self.scan_errors |= errors;
            self.summary.add(&check);
            if check.role != Role::Host {
                let (needed_by, via) = dep.clone().map_or((None, None), |(c, v)| (Some(c), Some(v)));
                self.checked.push(Checked { file, member, needed_by, via, check });
            }
        }
    }

    /// A program or library and, unless `no_deps`, what it loads
    /// (`closure`: as the loader would find it).
    fn program(&mut self, argv0: &str, path: &str, gpus: &[Gpu], closure: Result<Closure, String>, json: bool) {
        let closure = match closure {
            Ok(c) => c,
            Err(e) => {
                // Not followable (a malformed dynamic section): checked as a file.
                eprintln!("{argv0}: warning: '{path}': dependencies not followed: {e}");
                return self.scan(argv0, path, gpus, None, json);
            }
        };
        let names = |i: usize| closure.chain(i).into_iter().map(str::to_string).collect::<Vec<_>>();
        for (i, object) in closure.objects.iter().enumerate() {
            let dep = object.loader.map(|l| (names(l), object.via.name()));
            if let Some((needed_by, via)) = &dep {
                self.libraries.push(LibraryRecord {
                    name: object.name.clone(),
                    path: object.path.to_string_lossy().into_owned(),
                    via,
                    needed_by: needed_by.clone(),
                });
            }
            // Windows system DLLs are assumed, not read (their path is a
            // placeholder).
            if object.via == Via::System && !object.path.exists() {
                continue;
            }
            // A library two programs load is checked once.
            let real = std::fs::canonicalize(&object.path).unwrap_or_else(|_| object.path.clone());
            if !self.seen.insert(real) && i > 0 {
                continue;
            }
            self.scan(argv0, &object.path.to_string_lossy(), gpus, dep, json);
        }
        for m in &closure.missing {
            self.missing.push(MissingRecord { name: m.name.clone(), needed_by: names(m.needed_by) });
        }
        for (file, message) in &closure.problems {
            eprintln!("{argv0}: warning: '{}': passed over: {message}", file.display());
        }
    }
}

impl Findings {
    /// A package file (a wheel, a tarball, a `.deb`) scanned and, unless
    /// `no_deps`, the imports of its programs and libraries followed
    /// inside it (`offload_host::check::package`): a DLL's in its own
    /// folder of the package, then the `--path` folders; an ELF object's
    /// through its `$ORIGIN` run paths, then this system's libraries.
    fn package(&mut self, argv0: &str, path: &str, gpus: &[Gpu], deps: Option<(&Search, &WinSearch)>, json: bool) {
        self.members = deps.map(|_| Vec::new());
        self.scan(argv0, path, gpus, None, json);
        let (Some(members), Some((search, win))) = (self.members.take(), deps) else { return };
        let resolved = package::resolve(&members, search, win);
        let file = inputs::display_name(path);
        for found in resolved.found {
            let needed_by = vec![file.clone(), found.by];
            if self.libraries.iter().any(|l| l.name.eq_ignore_ascii_case(&found.name) && l.path == found.path) {
                continue;
            }
            self.libraries.push(LibraryRecord { name: found.name, path: found.path, via: found.via.name(), needed_by });
        }
        for m in resolved.missing {
            if !m.pe {
                // A Linux wheel's libraries often come from other packages
                // (a ROCm or CUDA install): noted, not a failure.
                self.problems.push(inputs::Problem {
                    file: path.to_string(),
                    severity: offload_inspect::Severity::Warning,
                    location: format!("member {}", m.by),
                    message: format!(
                        "needs {}, found neither in the package (its $ORIGIN run paths) nor on this system",
                        m.name
                    ),
                    io: false,
                });
            } else if !self.missing.iter().any(|r| r.name.eq_ignore_ascii_case(&m.name)) {
                self.missing.push(MissingRecord { name: m.name, needed_by: vec![file.clone(), m.by] });
            }
        }
    }

    /// The imports of every PE image below the folder `dir` (already
    /// scanned as a folder), each image's own folder being its application
    /// folder: missing DLLs are reported, DLLs found outside the folder
    /// (through `--path`) are checked too.
    fn windows_folder(&mut self, argv0: &str, dir: &str, gpus: &[Gpu], search: &WinSearch, json: bool) {
        let root = std::fs::canonicalize(dir).unwrap_or_else(|_| PathBuf::from(dir));
        for image in windows::pe_files(Path::new(dir)) {
            let closure = match windows::closure(&image, search) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{argv0}: warning: '{}': imports not followed: {e}", image.display());
                    continue;
                }
            };
            let names = |i: usize| closure.chain(i).into_iter().map(str::to_string).collect::<Vec<_>>();
            for object in closure.objects.iter().skip(1) {
                let Some(loader) = object.loader else { continue };
                let via = object.via.name();
                let path = object.path.to_string_lossy().into_owned();
                // Images of one folder import each other: each DLL is
                // listed once, as first found.
                if self.libraries.iter().any(|l| l.name.eq_ignore_ascii_case(&object.name) && l.path == path) {
                    continue;
                }
                let record = LibraryRecord { name: object.name.clone(), path, via, needed_by: names(loader) };
                self.libraries.push(record);
                let real = std::fs::canonicalize(&object.path).unwrap_or_else(|_| object.path.clone());
                if object.via == Via::System || real.starts_with(&root) || !self.seen.insert(real) {
                    continue;
                }
                self.scan(argv0, &object.path.to_string_lossy(), gpus, Some((names(loader), via)), json);
            }
            for m in &closure.missing {
                if !self.missing.iter().any(|r| r.name.eq_ignore_ascii_case(&m.name)) {
                    self.missing.push(MissingRecord { name: m.name.clone(), needed_by: names(m.needed_by) });
                }
            }
            for (file, message) in &closure.problems {
                eprintln!("{argv0}: warning: '{}': passed over: {message}", file.display());
            }
        }
    }
}

/// Whether `path` is a PE image (a Windows program or DLL).
fn is_pe_program(path: &str) -> bool {
    if path == "-" || Path::new(path).is_dir() {
        return false;
    }
    offload_io::Input::open_regular(path).is_ok_and(|input| windows::is_pe(input.bytes()))
}

/// Whether `path` is a package file (a wheel or other zip, a tarball, a
/// `.deb`) whose members are walked.
fn is_package(path: &str) -> bool {
    if path == "-" || Path::new(path).is_dir() {
        return false;
    }
    offload_io::Input::open_regular(path).is_ok_and(|input| {
        let bytes = input.bytes();
        offload_inspect::package::detect(&bytes[..bytes.len().min(4096)]).is_some()
    })
}

/// Whether `path` is a program or shared library for a CPU (whose
/// dependencies the loader would follow).
fn is_program(path: &str) -> bool {
    let p = Path::new(path);
    if path == "-" || p.is_dir() {
        return false;
    }
    let Ok(input) = offload_io::Input::open_regular(path) else { return false };
    let bytes = input.bytes();
    dynamic::abi(bytes)
        .is_some_and(|a| a.machine != offload_format::elf::EM_AMDGPU && a.machine != offload_format::elf::EM_CUDA)
        && dynamic::is_loadable(bytes)
}
/// `offload check`'s options (docs/guide/checking.md).
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct CheckArgs {
    /// A GPU to check for (repeatable) [default: every GPU of this machine]
    #[arg(long, value_parser = parse_gpu, long_help = GPU_HELP)]
    pub gpu: Vec<Gpu>,
    /// Read sysfs under DIR when finding this machine's GPUs (default: $OFFLOAD_SYSFS_ROOT)
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<std::path::PathBuf>,
    /// Look libraries up below DIR: its etc/ld.so.cache, system folders and absolute RPATH/RUNPATH folders
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Check only the files given, not the libraries programs and libraries need
    #[arg(long)]
    pub no_deps: bool,
    /// List every file checked (fat, standalone and host-only), not only the failures
    #[arg(short, long)]
    pub verbose: bool,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Windows (PE) programs and DLLs: a folder searched for the DLLs they import after the application folder, standing in for PATH (repeatable)
    #[arg(long = "path", value_name = "DIR")]
    pub windows_path: Vec<std::path::PathBuf>,
    /// Programs, libraries, code objects, packages or folders
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

impl CheckArgs {
    pub fn run(&self, ctx: &Context) -> u8 {
        run(&ctx.argv0, self, ctx.colors(self.json))
    }
}

fn run(argv0: &str, args: &CheckArgs, colors: Colors) -> u8 {
    let gpus = match gpus_to_check(argv0, args) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let ld_library_path = std::env::var("LD_LIBRARY_PATH").ok();
    let search = Search::system(args.root.clone(), ld_library_path.as_deref());
    let mut f = Findings { summary: Summary::new(gpus.len()), ..Default::default() };
    let win = WinSearch { path: args.windows_path.clone() };
    // Split wheels: a host wheel's libraries resolve through the archives
    // of the wheels given with it (docs/guide/kpack.md).
    inputs::gather_package_archives(&args.paths);
    for path in &args.paths {
        if !args.no_deps && is_pe_program(path) {
            let closure = windows::closure(Path::new(path), &win).map_err(|e| e.to_string());
            f.program(argv0, path, &gpus, closure, args.json);
        } else if !args.no_deps && is_program(path) {
            let closure = deps::closure(Path::new(path), &search).map_err(|e| e.to_string());
            f.program(argv0, path, &gpus, closure, args.json);
        } else if is_package(path) {
            let deps = (!args.no_deps).then_some((&search, &win));
            f.package(argv0, path, &gpus, deps, args.json);
        } else {
            f.scan(argv0, path, &gpus, None, args.json);
            if !args.no_deps && Path::new(path).is_dir() {
                f.windows_folder(argv0, path, &gpus, &win, args.json);
            }
        }
    }
    let failing = f.summary.failing.iter().any(|&(files, _)| files > 0);
    let ok = !failing && f.missing.is_empty() && !inputs::has_errors(&f.problems) && !f.scan_errors;
    if args.json {
        if let Err(e) = print_json(&gpus, ok, &f) {
            eprintln!("{argv0}: error: {e}");
            return 1;
        }
    } else {
        inputs::report(argv0, &f.problems);
        print_text(argv0, &gpus, &f, args.verbose, colors);
    }
    // A path that could not be read is an I/O error (2), not a "no".
    u8::from(!ok).max(inputs::status(&f.problems))
}

fn print_json(gpus: &[Gpu], ok: bool, f: &Findings) -> serde_json::Result<()> {
    let ids: Vec<String> = gpus.iter().map(Gpu::target_id).collect();
    let files = f
        .checked
        .iter()
        .map(|c| FileRecord {
            file: c.file.clone(),
            member: c.member.clone(),
            role: c.check.role.name(),
            needed_by: c.needed_by.clone(),
            via: c.via,
            targets: c.check.targets(),
            loads: ids
                .iter()
                .enumerate()
                .map(|(g, id)| GpuLoads { gpu: id.clone(), ok: c.check.loads_on(g) })
                .collect(),
            units: c
                .check
                .units
                .iter()
                .map(|u| UnitRecord {
                    unit: u.unit,
                    location: u.location.clone(),
                    format: u.format.name(),
                    targets: u.targets.clone(),
                    loads: ids
                        .iter()
                        .zip(&u.loads)
                        .map(|(id, l)| UnitLoad {
                            gpu: id.clone(),
                            ok: l.is_ok(),
                            object: l.as_ref().ok().cloned(),
                            reason: l.as_ref().err().cloned(),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let s = &f.summary;
    let report = Report {
        gpus: ids.clone(),
        ok,
        files,
        libraries: f.libraries.clone(),
        missing: f
            .missing
            .iter()
            .map(|m| MissingRecord { name: m.name.clone(), needed_by: m.needed_by.clone() })
            .collect(),
        problems: f
            .problems
            .iter()
            .map(|p| ProblemRecord {
                file: p.file.clone(),
                severity: p.severity.name(),
                location: p.location.clone(),
                message: p.message.clone(),
            })
            .collect(),
        summary: SummaryRecord {
            fat_files: s.fat_files,
            units: s.units,
            host_files: s.host_files,
            standalone_files: s.standalone_files,
            per_gpu: ids
                .iter()
                .enumerate()
                .map(|(g, id)| GpuSummary {
                    gpu: id.clone(),
                    failing_files: s.failing.get(g).map_or(0, |x| x.0),
                    failing_units: s.failing.get(g).map_or(0, |x| x.1),
                    standalone_served: served(f, g),
                })
                .collect(),
        },
    };
    out(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    Ok(())
}

fn served(f: &Findings, gpu: usize) -> usize {
    f.checked.iter().filter(|c| c.check.role == Role::Standalone && c.check.loads_on(gpu)).count()
}

/// Writes to standard output; a closed pipe (`| head`) ends the process
/// by SIGPIPE, and any other failed write is an error (exit 2).
fn out(text: &str) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_all(text.as_bytes()) {
        offload_cli::diag::output_failed(&e)
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `a, b, c and 4 more`.
fn names(list: &[String]) -> String {
    let mut text = list.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if list.len() > NAMES_SHOWN {
        text.push_str(&format!(" and {} more", list.len() - NAMES_SHOWN));
    }
    text
}

fn print_text(argv0: &str, gpus: &[Gpu], f: &Findings, verbose: bool, colors: Colors) {
    let ids: Vec<String> = gpus.iter().map(Gpu::target_id).collect();
    // The failing units: one row per file, GPU and reason (a library
    // with 400 fat binaries that all lack the GPU is one row).
    let mut rows = Vec::new();
    for c in f.checked.iter().filter(|c| c.check.role == Role::Fat) {
        for (g, id) in ids.iter().enumerate() {
            let mut groups: Vec<(bool, &str, Vec<&str>)> = Vec::new();
            for u in &c.check.units {
                let (ok, text) = match u.loads.get(g) {
                    Some(Ok(object)) if verbose => (true, object.as_str()),
                    Some(Err(why)) => (false, why.as_str()),
                    _ => continue,
                };
                let at = c.within(&u.location);
                match groups.iter_mut().find(|(k, t, _)| *k == ok && *t == text) {
                    Some((_, _, units)) => units.push(at),
                    None => groups.push((ok, text, vec![at])),
                }
            }
            for (ok, text, units) in groups {
                let at = if units.len() == 1 { units[0].to_string() } else { format!("{} fat binaries", units.len()) };
                let loads = if ok { "yes" } else { "no" };
                rows.push(vec![c.name(), at, id.clone(), loads.to_string(), text.to_string()]);
            }
        }
    }
    if !rows.is_empty() {
        // Coloured after padding: the escapes never count as width.
        let paint = |column: usize, cell: &str| match (column, cell) {
            (3, "yes") => colors.paint(cell, Paint::Green),
            (3, _) => colors.paint(cell, Paint::Red),
            _ => cell.to_string(),
        };
        out(&output::table_with(&["FILE", "FAT BINARY", "GPU", "LOADS", "WHY / CODE OBJECT"], &rows, &paint));
    }
    let standalone: Vec<&Checked> = f.checked.iter().filter(|c| c.check.role == Role::Standalone).collect();
    if verbose && !standalone.is_empty() {
        let rows: Vec<Vec<String>> = standalone
            .iter()
            .map(|c| {
                let serves: Vec<String> =
                    ids.iter().enumerate().filter(|(g, _)| c.check.loads_on(*g)).map(|(_, id)| id.clone()).collect();
                let serves = if serves.is_empty() { "-".to_string() } else { serves.join(", ") };
                vec![c.name(), c.check.targets().join(", "), serves]
            })
            .collect();
        out(&output::table(&["STANDALONE CODE OBJECT", "TARGETS", "SERVES"], &rows));
    }
    for m in &f.missing {
        eprintln!("{argv0}: error: {}: needed by {}, not found", m.name, m.needed_by.join(" -> "));
    }
    let s = &f.summary;
    let head = format!(
        "{}, {}",
        plural(s.fat_files, "GPU library", "GPU libraries"),
        plural(s.units, "fat binary", "fat binaries")
    );
    for (g, id) in ids.iter().enumerate() {
        let lacking: Vec<&Checked> = f
            .checked
            .iter()
            .filter(|c| {
                c.check.role == Role::Fat && c.check.units.iter().any(|u| u.loads.get(g).is_some_and(Result::is_err))
            })
            .collect();
        let line = if s.fat_files == 0 {
            format!("{id}: no fat binaries found")
        } else if lacking.is_empty() {
            colors.paint(&format!("{id}: {head}: all load"), Paint::Green)
        } else {
            let mut held: Vec<String> = lacking.iter().flat_map(|c| c.check.targets()).collect();
            held.sort_by(|a, b| offload_inspect::report::size::target_cmp(a, b));
            held.dedup();
            let list: Vec<String> = lacking.iter().map(|c| c.short()).collect();
            colors.paint(
                &format!(
                    "{id}: {head}: {} {id} code: {} ({} {})",
                    plural(lacking.len(), "library lacks", "libraries lack"),
                    names(&list),
                    if lacking.len() == 1 { "it holds" } else { "they hold" },
                    names(&held)
                ),
                Paint::Red,
            )
        };
        out(&format!("{line}\n"));
    }
    let mut also = vec![plural(s.host_files, "host-only file", "host-only files")];
    if s.standalone_files > 0 {
        let per: Vec<String> = ids.iter().enumerate().map(|(g, id)| format!("{} serve {id}", served(f, g))).collect();
        also.push(format!(
            "{} ({})",
            plural(s.standalone_files, "standalone code object", "standalone code objects"),
            per.join(", ")
        ));
    }
    if !f.missing.is_empty() {
        also.push(colors.paint(&plural(f.missing.len(), "missing library", "missing libraries"), Paint::Red));
    }
    let unread = f.problems.iter().filter(|p| p.severity == offload_inspect::Severity::Error).count();
    if unread > 0 {
        also.push(colors.paint(&plural(unread, "file not read", "files not read"), Paint::Red));
    }
    if f.scan_errors {
        also.push(colors.paint("malformed fat binaries (errors above)", Paint::Red));
    }
    out(&format!("also: {}\n", also.join(", ")));
}
