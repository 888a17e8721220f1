//! `offload`: one inspector for every container of GPU code. Lists the code
//! objects of any file, says which one a runtime loads on a given GPU (and
//! why the others are not loaded), extracts them, and verifies structure.

mod args;
mod check;
mod diff;
mod extract_uri;
mod generated;
mod gpus;
mod inputs;
mod output;
mod progress;
mod prune;
mod prune_openmp;
mod prune_tree;
mod replace;
mod size;
mod split;

use args::{Command, Filter};
use clap::CommandFactory;
use offload_cli::diag;
use offload_format::kpack::SearchOrder;
use offload_format::plan::Plan;
use offload_inspect::decode::visit_objects;
use offload_inspect::record::{self, CodeObjectRecord, DiagnosticRecord, VerdictRecord};
use offload_inspect::select::{Gpu, Runtime, Selection, Verdict, select};
use offload_inspect::{BytesError, Inventory, Options, Severity};
use output::{Colors, Paint};
use std::process::ExitCode;
use std::sync::Mutex;

fn main() -> ExitCode {
    // Like `cat` and `ls`: a reader that goes away (`offload list | head`)
    // ends the process quietly. Rust ignores SIGPIPE, which turns the
    // failed write into a panic inside `println!`.
    // SAFETY: setting a signal disposition to its default before any
    // thread starts has no memory-safety preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // SIGINT, SIGTERM and SIGHUP remove the staging files of outputs not
    // yet committed, then end the process by the signal.
    offload_io::remove_staging_on_signals();
    diag::report_output_errors();
    let argv0 = diag::argv0();
    let (command, color) = match args::parse(std::env::args_os()) {
        Ok(parsed) => parsed,
        // Help and version (exit 0, standard output) and usage errors
        // (exit 2, standard error): clap prints them.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    if let Some(warning) = args::gpu_warning(&command) {
        eprintln!("{argv0}: warning: {warning}");
    }
    let colors = |json: bool| Colors::new(color, json);
    let code = match command {
        Command::List { json, uri, files } => list(&argv0, &files, json, uri),
        Command::Select { gpu, runtime, kpack_order, json, uri, files } => {
            select_cmd(&argv0, &files, &gpu, (runtime, kpack_order.order()), json, uri, colors(json))
        }
        Command::Verify { json, files } => verify(&argv0, &files, json, colors(json)),
        Command::Prune(args) => prune::run(&argv0, &args),
        Command::Replace(args) => replace::run(&argv0, &args),
        Command::Split(args) => split::run(&argv0, &args),
        Command::Extract { filters, gpu, runtime, kpack_order, output, dir, json, file } => {
            extract(&argv0, &file, &filters, gpu.as_ref(), (runtime, kpack_order.order()), output, dir, json)
        }
        Command::ExtractUri { uris, output, dir, json } => extract_uri::run(&argv0, &uris, output, dir, json),
        Command::Gpus { sysfs_root, json } => gpus::run(&argv0, sysfs_root.as_deref(), json),
        Command::Size { paths, keep, json } => size::run(&argv0, &paths, &keep, json),
        Command::Diff { a, b, json } => diff::run(&argv0, &a, &b, json),
        Command::Check(args) => check::run(&argv0, &args, colors(args.json)),
        Command::Completions(shell) => {
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut args::Cli::command(), "offload", &mut text);
            if let Err(e) = std::io::Write::write_all(&mut std::io::stdout(), &text) {
                diag::output_failed(&e)
            }
            0
        }
        Command::Man { output_dir } => generated::man(&argv0, output_dir.as_deref()),
    };
    diag::flush_stdout();
    ExitCode::from(code)
}

/// The name used for a file in archive locations.
fn display_name(path: &str) -> String {
    if path == "-" {
        return "<stdin>".into();
    }
    std::path::Path::new(path).file_name().map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

/// Prints the scan's diagnostics (list, select, extract) with their
/// severity: an error found while scanning makes `list` exit 1, and the
/// message must say why.
fn report(argv0: &str, path: &str, inv: &Inventory) {
    for d in &inv.diagnostics {
        let at = d.offset.map(|o| format!(" (offset {o:#x})")).unwrap_or_default();
        eprintln!("{argv0}: {}: {path}: {}{at}: {}", d.severity.name(), d.location, d.message);
    }
}

fn list(argv0: &str, files: &[String], json: bool, uri: bool) -> u8 {
    let mut status = 0;
    let (mut rows, mut objects) = (Vec::new(), Vec::new());
    for path in files {
        let mut found = 0;
        let problems = inputs::each(path, !json, &mut |item| {
            let (path, inv) = (item.file, item.scan(&Options::default()));
            report(argv0, path, &inv);
            found += inv.objects.len();
            if inv.has_errors() {
                status = 1;
            }
            list_rows(item, &inv, uri, &mut rows, &mut objects);
        });
        status |= inputs::report(argv0, &problems);
        if found == 0 && !inputs::has_errors(&problems) {
            eprintln!("{argv0}: error: {path}: no offload code objects found");
            status = 1;
        }
    }
    if json {
        print!("{}", output::array(&objects));
    } else if !rows.is_empty() {
        let mut header =
            vec!["FILE", "LOCATION", "FORMAT", "KIND", "TRIPLE", "TARGET ID", "SIZE", "OFFSET", "COMPRESSED"];
        if uri {
            header.push("URI");
        }
        print!("{}", output::table(&header, &rows));
    }
    status
}

/// The rows (and JSON objects) `list` prints for one scanned item.
fn list_rows(
    item: &inputs::Item,
    inv: &Inventory,
    uri: bool,
    rows: &mut Vec<Vec<String>>,
    records: &mut Vec<CodeObjectRecord>,
) {
    for (i, o) in inv.objects.iter().enumerate() {
        let r = item.record(i, o);
        let mut row = vec![
            item.file.to_string(),
            r.location.clone(),
            r.format.to_string(),
            r.offload_kind.clone(),
            r.triple.clone(),
            if r.target_id.is_empty() { "-".into() } else { r.target_id.clone() },
            r.size.to_string(),
            output::offset(r.offset),
            if r.compressed { "yes".into() } else { "no".into() },
        ];
        if uri {
            row.push(r.uri.clone().unwrap_or_else(|| "-".into()));
        }
        rows.push(row);
        records.push(r);
    }
}

fn select_cmd(
    argv0: &str,
    files: &[String],
    gpu: &Gpu,
    (runtime, kpack_order): (Runtime, SearchOrder),
    json: bool,
    uri: bool,
    colors: Colors,
) -> u8 {
    let mut status = 0;
    let (mut chosen_rows, mut other_rows, mut chosen_json, mut other_json) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for path in files {
        let mut candidates = false;
        let problems = inputs::each(path, !json, &mut |item| {
            let (path, inv) = (item.file, item.scan(&Options::default()));
            report(argv0, path, &inv);
            let sel: Selection = kpack_select(&inv, gpu, runtime, kpack_order);
            for (i, (o, v)) in inv.objects.iter().zip(&sel.verdicts).enumerate() {
                let Some(v) = v else { continue };
                let (code, text) = record::explain(v, &inv.objects, gpu, runtime);
                let mut r = item.record(i, o);
                r.verdict = Some(VerdictRecord::new(v, &inv.objects, gpu, runtime));
                let selected = matches!(v, Verdict::Selected(_));
                let verdict = if selected {
                    "selected"
                } else if code == "not-chosen" {
                    "not chosen"
                } else {
                    "rejected"
                };
                let mut row = vec![
                    path.to_string(),
                    r.location.clone(),
                    r.id.clone(),
                    output::offset(r.offset),
                    r.size.to_string(),
                    verdict.to_string(),
                    text,
                ];
                if uri {
                    row.push(r.uri.clone().unwrap_or_else(|| "-".into()));
                }
                if selected {
                    chosen_json.push(r);
                    chosen_rows.push(row);
                } else {
                    other_json.push(r);
                    other_rows.push(row);
                }
            }
            for &u in &sel.failed_units {
                let loc = inv.units.get(u).map(|u| u.location.to_string()).unwrap_or_default();
                if let Some((_, why)) = sel.refusals.iter().find(|(r, _)| *r == u) {
                    eprintln!("{argv0}: error: {path}: {loc}: the kpack loader loads nothing on {gpu}: {why}");
                    status = 1;
                    continue;
                }
                eprintln!(
                    "{argv0}: error: {path}: no code object in the fat binary at {loc} loads on {gpu} ({} runtime)",
                    runtime.name()
                );
                status = 1;
            }
            candidates |= !(sel.chosen.is_empty() && sel.failed_units.is_empty());
        });
        status |= inputs::report(argv0, &problems);
        if !candidates && !inputs::has_errors(&problems) {
            eprintln!("{argv0}: error: {path}: no {} code objects found", runtime.name());
            status = 1;
        }
    }
    if json {
        chosen_json.extend(other_json);
        print!("{}", output::array(&chosen_json));
    } else {
        chosen_rows.extend(other_rows);
        if !chosen_rows.is_empty() {
            let mut header = vec!["FILE", "LOCATION", "ID", "OFFSET", "SIZE", "VERDICT", "WHY"];
            if uri {
                header.push("URI");
            }
            let verdict = |column: usize, text: &str| match (column, text) {
                (5, "selected") => colors.paint(text, Paint::Green),
                (5, "rejected") => colors.paint(text, Paint::Red),
                (5, _) => colors.paint(text, Paint::Yellow),
                _ => text.to_string(),
            };
            print!("{}", output::table_with(&header, &chosen_rows, &verdict));
        }
    }
    status
}

fn verify(argv0: &str, files: &[String], json: bool, colors: Colors) -> u8 {
    let mut status = 0;
    let mut objects = Vec::new();
    for path in files {
        // Findings of every item of the path.
        let mut diags: Vec<DiagnosticRecord> = Vec::new();
        let (mut found, mut units) = (0, 0);
        // kpack archives given, and those the split libraries reach (by
        // canonical path): an archive no library reaches is dead weight.
        let (mut archives, mut reached) = (Vec::new(), Vec::new());
        let problems = inputs::each(path, !json, &mut |item| {
            let inv = item.scan(&Options { deep: true, ..Default::default() });
            found += inv.objects.len();
            units += inv.units.len();
            if let Some(split) = &inv.kpack {
                reached.extend(split.archives.iter().cloned());
            }
            if item.member().is_none() && offload_format::kpack::archive::has_magic(item.bytes) {
                archives.push((item.file.to_string(), std::fs::canonicalize(item.file).ok()));
            }
            diags.extend(inv.diagnostics.iter().map(|d| DiagnosticRecord::of(Some(item.file), d)));
        });
        // Packages that could not be read: findings in JSON, messages on
        // standard error (as for every command) in text.
        if std::path::Path::new(path).is_dir() {
            for (file, canonical) in archives {
                if canonical.is_some_and(|c| !reached.contains(&c)) {
                    let message = "no kpack-split library in this folder reaches this archive through its search paths (dead weight, or a library is missing)";
                    diags.push(DiagnosticRecord::new(Some(&file), Severity::Warning, None, "file", message));
                }
            }
        }
        let unread = diags.len()..diags.len() + problems.len();
        if !json {
            inputs::report(argv0, &problems);
        }
        diags.extend(
            problems.iter().map(|p| DiagnosticRecord::new(Some(&p.file), p.severity, None, &p.location, &p.message)),
        );
        let mut errors = diags.iter().filter(|d| d.severity == Severity::Error).count();
        if found == 0 && errors == 0 {
            diags.push(DiagnosticRecord::new(
                Some(path),
                Severity::Error,
                None,
                "file",
                "no offload code objects found",
            ));
            errors += 1;
        }
        if !json {
            for d in diags.iter().enumerate().filter(|(k, _)| !unread.contains(k)).map(|(_, d)| d) {
                let at = d.offset.map(|o| format!(":{o:#x}")).unwrap_or_default();
                let file = d.file.as_deref().unwrap_or_default();
                println!("{file}{at}: {}: {}: {}", d.severity.name(), d.location, d.message);
            }
        }
        if errors > 0 {
            status = 1;
        }
        let warnings = diags.len() - errors;
        objects.extend(diags);
        if !json {
            let verdict =
                if errors > 0 { colors.paint("FAILED", Paint::Red) } else { colors.paint("OK", Paint::Green) };
            let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
            println!(
                "{path}: {verdict}: {} in {}, {}, {}",
                plural(found, "code object", "code objects"),
                plural(units, "fat binary", "fat binaries"),
                plural(errors, "error", "errors"),
                plural(warnings, "warning", "warnings"),
            );
        }
    }
    if json {
        print!("{}", output::array(&objects));
    }
    status
}

/// [`select`], with what AMD's kpack loader answers for the records of a
/// kpack-split binary (`offload_inspect::kpack::select`).
fn kpack_select(inv: &Inventory, gpu: &Gpu, runtime: Runtime, order: SearchOrder) -> Selection {
    let mut sel = select(&inv.objects, gpu, runtime);
    if runtime == Runtime::Hip {
        offload_inspect::kpack::select(inv, &mut sel, gpu, order);
    }
    sel
}

/// A file name for an extracted code object.
pub(crate) fn output_name(file: &str, index: usize, id: &str, bytes: &[u8]) -> String {
    let clean: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.+".contains(c) { c } else { '_' }).collect();
    // CUDA entries take the names cuobjdump gives them (`.cubin`, `.ptx`).
    let ext = if id.starts_with("cuda-elf-") {
        ".cubin"
    } else if id.starts_with("cuda-ptx-") {
        ".ptx"
    } else if bytes.starts_with(b"\x7fELF") {
        ".co"
    } else if offload_format::offload_binary::is_bitcode(bytes) {
        ".bc"
    } else {
        ""
    };
    fit_name(&format!("{}-{index}-{clean}{ext}", display_name(file)))
}

/// The longest file name written (Linux's NAME_MAX is 255 bytes).
const MAX_NAME: usize = 255;

/// `name` if it fits in a file name; else its first 200 bytes (cut at a
/// character boundary), `-` and a 16-digit hash of the whole name, and the
/// extension kept, so that long entry IDs still give distinct, writable
/// names (docs/reliability.md).
pub(crate) fn fit_name(name: &str) -> String {
    if name.len() <= MAX_NAME {
        return name.to_string();
    }
    // FNV-1a, 64 bits: stable across runs and releases.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let ext = match name.rfind('.') {
        Some(dot) if name.len() - dot <= 8 => &name[dot..],
        _ => "",
    };
    let mut cut = 200;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash:016x}{ext}", &name[..cut])
}

/// Why `extract` stopped.
enum ExtractError {
    Bytes(BytesError),
    Output(offload_io::OutputError),
}

#[allow(clippy::too_many_arguments)]
fn extract(
    argv0: &str,
    path: &str,
    filters: &[Filter],
    gpu: Option<&Gpu>,
    (runtime, kpack_order): (Runtime, SearchOrder),
    output: Option<String>,
    dir: Option<String>,
    json: bool,
) -> u8 {
    let canonical = |t: &str| {
        let triple = if t.starts_with("sm_") { "nvptx64-nvidia-cuda" } else { "amdgcn-amd-amdhsa" };
        offload_inspect::id::canonical_target_id(triple, t).unwrap_or_else(|_| t.to_string())
    };
    let dir = dir.unwrap_or_else(|| ".".into());
    let mut outputs = offload_io::Outputs::new();
    // Staged outputs: the JSON object and the text line of each.
    let mut written: Vec<(CodeObjectRecord, String)> = Vec::new();
    // Code objects in the items before this one (`--index` counts across a
    // package), matches so far, and whether an item failed.
    let (mut before, mut matched, mut failed) = (0, 0, false);
    let problems = inputs::each(path, !json, &mut |item| {
        if failed {
            return;
        }
        let inv = item.scan(&Options::default());
        report(argv0, item.file, &inv);
        let selection = gpu.map(|g| kpack_select(&inv, g, runtime, kpack_order));
        if let Some(sel) = &selection {
            for (u, why) in &sel.refusals {
                let loc = inv.units.get(*u).map(|u| u.location.to_string()).unwrap_or_default();
                eprintln!("{argv0}: error: {}: {loc}: the kpack loader loads nothing: {why}", item.file);
            }
        }
        let chosen = selection.map(|s| s.chosen).unwrap_or_default();
        let picked: Vec<usize> = (0..inv.objects.len())
            .filter(|&i| {
                let o = &inv.objects[i];
                filters.iter().any(|f| match f {
                    Filter::All => !o.container,
                    Filter::Id(id) => &o.id == id,
                    Filter::TargetId(t) => !o.target_id.is_empty() && o.target_id == canonical(t),
                    Filter::Index(n) => *n == before + i,
                    Filter::Gpu => chosen.contains(&i),
                })
            })
            .collect();
        // With `-o`, only the first match is written; the others are
        // counted for the error below.
        let mut wanted = Vec::new();
        for &i in &picked {
            matched += 1;
            if output.is_none() || matched == 1 {
                wanted.push(i);
            }
        }
        // Each bundle is decompressed once, on one of several threads, and
        // its objects are staged as soon as it is: memory holds one
        // decompressed bundle per thread, never all of them.
        let staged: Vec<Mutex<Option<(String, offload_io::StagedOutput)>>> =
            wanted.iter().map(|_| Mutex::new(None)).collect();
        let visited = visit_objects(&inv, &wanted, 0, |i, bytes| {
            let bytes = bytes.map_err(ExtractError::Bytes)?;
            let dest = match &output {
                Some(o) => o.clone(),
                None => format!("{dir}/{}", output_name(path, before + i, &inv.objects[i].id, bytes)),
            };
            let out = offload_io::Outputs::stage_detached(&dest, &Plan::borrowed(bytes), &[item.input])
                .map_err(ExtractError::Output)?;
            if let Some(slot) = wanted.binary_search(&i).ok().and_then(|p| staged.get(p))
                && let Ok(mut slot) = slot.lock()
            {
                *slot = Some((dest, out));
            }
            Ok(())
        });
        if let Err((position, failure)) = visited {
            match failure {
                ExtractError::Bytes(e) => {
                    let o = &inv.objects[wanted[position]];
                    eprintln!("{argv0}: error: {}: '{}' at {}: {e}", item.file, o.id, o.location);
                }
                ExtractError::Output(e) => eprintln!("{argv0}: error: {e}"),
            }
            failed = true;
            return;
        }
        for (&i, slot) in wanted.iter().zip(staged) {
            if let Some((dest, out)) = slot.into_inner().ok().flatten() {
                outputs.adopt(out);
                let o = &inv.objects[i];
                let line = format!(
                    "{dest}\t{}\t{}",
                    output::escape_controls(&o.id),
                    output::escape_controls(&o.location.to_string())
                );
                let mut record = item.record(i, o);
                record.path = Some(dest);
                written.push((record, line));
            }
        }
        before += inv.objects.len();
    });
    if inputs::report(argv0, &problems) != 0 || failed {
        return 1;
    }
    if matched == 0 {
        eprintln!("{argv0}: error: {path}: no code object matches");
        return 1;
    }
    if output.is_some() && matched > 1 {
        eprintln!("{argv0}: error: {path}: {matched} code objects match; use --output-dir to write them all");
        return 1;
    }
    if let Err(e) = outputs.commit() {
        eprintln!("{argv0}: error: {e}");
        return 1;
    }
    if json {
        let objects: Vec<CodeObjectRecord> = written.into_iter().map(|(o, _)| o).collect();
        print!("{}", output::array(&objects));
    } else if output.as_deref() != Some("-") {
        for (_, line) in &written {
            println!("{line}");
        }
    }
    0
}
