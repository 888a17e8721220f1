//! `offload diff A B`: the code objects added, removed and changed between
//! two files, folders or packages (the library's `report::diff` matches
//! and compares them; this file prints). Exit status 0 when identical, 1
//! when different, 2 on bad usage or when an input cannot be read fully.
//! With `--kernels`, the kernels added, removed and changed (registers,
//! spills, LDS, occupancy; `offload_inspect::kernels::diff`) instead.

use crate::inputs;
use crate::output;
use offload_inspect::Options;
use offload_inspect::kernels::{self, KernelDiff, KernelRow};
use offload_inspect::report::diff::{Change, Diff, Entry, Status, Summary, diff, entries};
use serde::Serialize;
use std::path::Path;

#[derive(Serialize)]
struct TargetSummary<'a> {
    target: &'a str,
    #[serde(flatten)]
    summary: &'a Summary,
}

#[derive(Serialize)]
struct FileSummary<'a> {
    file: &'a str,
    #[serde(flatten)]
    summary: &'a Summary,
}

/// The `--json` document.
#[derive(Serialize)]
struct Report<'a> {
    a: &'a str,
    b: &'a str,
    identical: bool,
    total: &'a Summary,
    targets: Vec<TargetSummary<'a>>,
    files: Vec<FileSummary<'a>>,
    /// Added, removed and changed objects (unchanged ones are only counted).
    changes: Vec<&'a Change>,
}

/// The name a scanned item's objects are matched by: the path below the
/// folder given, or empty for a file given as such (a package's members
/// add their own path).
fn relative(root: &str, file: &str) -> String {
    if !Path::new(root).is_dir() {
        return String::new();
    }
    Path::new(file).strip_prefix(root).map_or_else(|_| file.to_string(), |p| p.to_string_lossy().into_owned())
}

/// What one side holds, gathered by `rows` from each scanned item (which
/// returns false for an item it could not read fully, having said why), or
/// `None` when something could not be read fully.
fn read_side<T>(
    argv0: &str,
    root: &str,
    json: bool,
    mut rows: impl FnMut(&inputs::Item<'_>, &offload_inspect::Inventory, &mut Vec<T>) -> bool,
) -> Option<Vec<T>> {
    let mut all = Vec::new();
    let mut ok = true;
    let problems = inputs::each(root, !json, &mut |item| {
        let inv = item.scan(&Options::default());
        crate::inputs::print_diagnostics(argv0, item.file, &inv);
        ok &= !inv.has_errors();
        ok &= rows(item, &inv, &mut all);
    });
    if inputs::report(argv0, &problems) != 0 {
        ok = false;
    }
    ok.then_some(all)
}

/// The entries of one side, or `None` when it could not be read fully.
fn side(argv0: &str, root: &str, json: bool) -> Option<Vec<Entry>> {
    read_side(argv0, root, json, |item, inv, all| match entries(inv, &relative(root, item.file)) {
        Ok(e) => {
            all.extend(e);
            true
        }
        Err((id, e)) => {
            eprintln!("{argv0}: error: {}: '{id}': {e}", item.file);
            false
        }
    })
}

/// `offload diff`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct DiffArgs {
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Compare the kernels (added, removed, resource changes) instead of the code objects
    #[arg(long)]
    pub kernels: bool,
    /// The old file, package or folder
    pub a: String,
    /// The new one
    pub b: String,
}

impl DiffArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        if self.kernels {
            return run_kernels(&ctx.argv0, &self.a, &self.b, self.json);
        }
        run(&ctx.argv0, &self.a, &self.b, self.json)
    }
}

/// Runs the command; returns the exit status.
fn run(argv0: &str, a: &str, b: &str, json: bool) -> u8 {
    let (Some(ea), Some(eb)) = (side(argv0, a, json), side(argv0, b, json)) else {
        eprintln!("{argv0}: error: not compared: an input could not be read fully");
        return 2;
    };
    let d = diff(ea, eb);
    if json {
        let report = Report {
            a,
            b,
            identical: d.total.identical(),
            total: &d.total,
            targets: d.by_target.iter().map(|(target, summary)| TargetSummary { target, summary }).collect(),
            files: d.by_file.iter().map(|(file, summary)| FileSummary { file, summary }).collect(),
            changes: d.changes.iter().filter(|c| c.status != Status::Unchanged).collect(),
        };
        if let Err(code) = crate::output::print_pretty(argv0, &report) {
            return code;
        }
    } else {
        print!("{}", text(&d));
    }
    u8::from(!d.total.identical())
}

fn size(s: Option<u64>) -> String {
    s.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn delta(a: u64, b: u64) -> String {
    let d = i128::from(b) - i128::from(a);
    if d > 0 { format!("+{d}") } else { d.to_string() }
}

fn summary_cells(s: &Summary) -> Vec<String> {
    vec![
        s.added.to_string(),
        s.removed.to_string(),
        s.changed.to_string(),
        s.unchanged.to_string(),
        s.bytes_a.to_string(),
        s.bytes_b.to_string(),
        delta(s.bytes_a, s.bytes_b),
    ]
}

/// The changes, then a summary per target and (for several files) per
/// file, then the total.
fn text(d: &Diff) -> String {
    let file_name = |f: &str| if f.is_empty() { "-".to_string() } else { f.to_string() };
    let mut out = String::new();
    let rows: Vec<Vec<String>> = d
        .changes
        .iter()
        .filter(|c| c.status != Status::Unchanged)
        .map(|c| {
            vec![
                c.status.name().to_string(),
                file_name(&c.file),
                c.unit.to_string(),
                c.target.clone(),
                c.id.clone(),
                size(c.size_a),
                size(c.size_b),
                delta(c.size_a.unwrap_or(0), c.size_b.unwrap_or(0)),
            ]
        })
        .collect();
    if !rows.is_empty() {
        out.push_str(&output::table(&["STATUS", "FILE", "UNIT", "TARGET", "ID", "SIZE A", "SIZE B", "DELTA"], &rows));
        out.push('\n');
    }
    let head = ["ADDED", "REMOVED", "CHANGED", "UNCHANGED", "BYTES A", "BYTES B", "DELTA"];
    let group = |name: &str, items: Vec<(String, &Summary)>| {
        let rows: Vec<Vec<String>> = items
            .into_iter()
            .map(|(key, s)| {
                let mut row = vec![key];
                row.extend(summary_cells(s));
                row
            })
            .collect();
        let mut header = vec![name];
        header.extend(head);
        output::table(&header, &rows)
    };
    out.push_str(&group("TARGET", d.by_target.iter().map(|(t, s)| (t.clone(), s)).collect()));
    if d.by_file.len() > 1 {
        out.push('\n');
        out.push_str(&group("FILE", d.by_file.iter().map(|(f, s)| (file_name(f), s)).collect()));
    }
    let t = &d.total;
    out.push_str(&format!(
        "{}: {} added, {} removed, {} changed, {} unchanged; {} -> {} bytes ({})\n",
        if t.identical() { "identical" } else { "different" },
        t.added,
        t.removed,
        t.changed,
        t.unchanged,
        t.bytes_a,
        t.bytes_b,
        delta(t.bytes_a, t.bytes_b)
    ));
    out
}

/// The kernel rows of one side, or `None` when it could not be read fully.
fn kernel_side(argv0: &str, root: &str, json: bool) -> Option<Vec<KernelRow>> {
    read_side(argv0, root, json, |item, inv, all| {
        let found = kernels::kernels(inv, 0);
        let mut ok = true;
        for o in &found {
            if let Err(e) = &o.result {
                let loc = inv.objects.get(o.object).map(|x| x.location.to_string()).unwrap_or_default();
                eprintln!("{argv0}: error: {}: {loc}: kernels not read: {e}", item.file);
                ok = false;
            }
        }
        all.extend(kernels::rows(inv, &found));
        ok
    })
}

#[derive(Serialize)]
struct KernelReport<'a> {
    a: &'a str,
    b: &'a str,
    identical: bool,
    #[serde(flatten)]
    diff: &'a KernelDiff,
}

fn run_kernels(argv0: &str, a: &str, b: &str, json: bool) -> u8 {
    let (Some(ka), Some(kb)) = (kernel_side(argv0, a, json), kernel_side(argv0, b, json)) else {
        eprintln!("{argv0}: error: not compared: an input could not be read fully");
        return 2;
    };
    let d = kernels::diff(&ka, &kb);
    if json {
        let report = KernelReport { a, b, identical: d.is_empty(), diff: &d };
        if let Err(code) = crate::output::print_pretty(argv0, &report) {
            return code;
        }
    } else {
        print!("{}", kernel_text(&d));
    }
    u8::from(!d.is_empty())
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// One line per added or removed kernel and per changed resource, then
/// the counts.
fn kernel_text(d: &KernelDiff) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (status, list) in [("added", &d.added), ("removed", &d.removed)] {
        for k in list {
            rows.push(vec![status.into(), k.target.clone(), k.demangled.clone(), "-".into(), "-".into(), "-".into()]);
        }
    }
    for c in &d.changed {
        let status = if c.spills_grew { "spills" } else { "changed" };
        for ch in &c.changes {
            rows.push(vec![
                status.into(),
                c.target.clone(),
                c.demangled.clone(),
                ch.resource.to_string(),
                opt(ch.old),
                opt(ch.new),
            ]);
        }
    }
    let mut out = String::new();
    if !rows.is_empty() {
        out.push_str(&output::table(&["STATUS", "TARGET", "KERNEL", "RESOURCE", "A", "B"], &rows));
        out.push('\n');
    }
    let spills = d.changed.iter().filter(|c| c.spills_grew).count();
    out.push_str(&format!(
        "{}: {} kernels added, {} removed, {} changed ({} with more spills), {} unchanged\n",
        if d.is_empty() { "identical" } else { "different" },
        d.added.len(),
        d.removed.len(),
        d.changed.len(),
        spills,
        d.unchanged
    ));
    out
}
