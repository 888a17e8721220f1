//! `offload size`: bytes per target and offload kind, per file and in
//! total, and what `offload prune --keep` would drop (the library's
//! `report::size` does the counting; this file prints).

use crate::inputs;
use crate::output;
use offload_inspect::Options;
use offload_inspect::report::size::{Counts, Tally, TargetSize, tally};
use offload_rewrite::prune::{self, Rules};
use serde::Serialize;

/// One file (or the total) in `--json`.
#[derive(Serialize)]
struct Record {
    /// The path given or the file below the folder given; absent for the total.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    targets: Vec<TargetSize>,
    device: Counts,
    host: Counts,
    /// What `prune --keep` would drop; null without `--keep`.
    prunable: Option<Counts>,
}

#[derive(Serialize)]
struct Report {
    keep: Option<Vec<String>>,
    files: Vec<Record>,
    total: Record,
}

fn record(file: Option<&str>, t: &Tally, keep: bool) -> Record {
    Record {
        file: file.map(str::to_string),
        targets: t.rows(),
        device: t.device(),
        host: t.host,
        prunable: keep.then_some(t.prunable),
    }
}

/// `offload size`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct SizeArgs {
    /// Targets prune would keep (comma-separated, repeatable)
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',')]
    pub keep: Vec<String>,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Files, packages or folders
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

impl SizeArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        run(&ctx.argv0, &self.paths, &crate::cli::targets(self.keep.clone()), self.json)
    }
}

/// Runs the command; returns the exit status.
fn run(argv0: &str, paths: &[String], keep: &[String], json: bool) -> u8 {
    for w in crate::cli::keep_warnings(keep) {
        eprintln!("{argv0}: warning: {w}");
    }
    let rules = match keep.iter().map(|t| prune::parse_target(t)).collect::<Result<Vec<_>, _>>() {
        Ok(keep) if !keep.is_empty() => Some(Rules { keep, ..Default::default() }),
        Ok(_) => None,
        Err(e) => {
            eprintln!("{argv0}: error: --keep: {e}");
            return 2;
        }
    };
    let mut status = 0;
    let mut files: Vec<(String, Tally)> = Vec::new();
    // Wheels given together are one installed tree (docs/guide/kpack.md).
    inputs::gather_package_archives(paths);
    for path in paths {
        let mut found = 0;
        let problems = inputs::each(path, !json, &mut |item| {
            let inv = item.scan(&Options::default());
            crate::inputs::print_diagnostics(argv0, item.file, &inv);
            if inv.has_errors() {
                status = 1;
            }
            found += inv.objects.len();
            let t = tally(&inv, rules.as_ref());
            match files.last_mut() {
                Some((f, sum)) if f == item.file => sum.merge(&t),
                _ => files.push((item.file.to_string(), t)),
            }
        });
        status = status.max(inputs::report(argv0, &problems));
        if found == 0 && !inputs::has_errors(&problems) {
            eprintln!("{argv0}: error: {path}: no offload code objects found");
            status = 1;
        }
    }
    files.retain(|(_, t)| !t.targets.is_empty() || t.host.objects > 0);
    let mut total = Tally::default();
    for (_, t) in &files {
        total.merge(t);
    }
    if let Some(rules) = &rules {
        let held: Vec<String> = total.rows().into_iter().map(|r| r.target).collect();
        for rule in &rules.keep {
            if let Some(note) = offload_inspect::keep::either_setting_note(rule, held.iter().map(String::as_str)) {
                eprintln!("{argv0}: note: --keep {note}");
            }
        }
    }
    if json {
        let report = Report {
            keep: rules.as_ref().map(|r| r.keep.clone()),
            files: files.iter().map(|(f, t)| record(Some(f), t, rules.is_some())).collect(),
            total: record(None, &total, rules.is_some()),
        };
        if let Err(code) = crate::output::print_pretty(argv0, &report) {
            return code;
        }
    } else if !files.is_empty() {
        print!("{}", text(&files, &total, rules.as_ref()));
    }
    status
}

fn counts_cells(c: &Counts) -> [String; 3] {
    [c.objects.to_string(), output::size(c.bytes), output::size(c.stored)]
}

/// The table: one row per file and target, the file's host entries and
/// device total, then the totals over all files when there are several.
fn text(files: &[(String, Tally)], total: &Tally, rules: Option<&Rules>) -> String {
    let mut rows = Vec::new();
    let mut push = |file: &str, target: &str, kind: &str, c: &Counts| {
        let mut row = vec![file.to_string(), target.to_string(), kind.to_string()];
        row.extend(counts_cells(c));
        rows.push(row);
    };
    let mut group = |file: &str, t: &Tally| {
        for r in t.rows() {
            push(file, &r.target, &r.kind, &r.counts);
        }
        if t.host.objects > 0 {
            push(file, "host", "host", &t.host);
        }
        push(file, "(device)", "", &t.device());
    };
    for (file, t) in files {
        group(file, t);
    }
    if files.len() > 1 {
        group("(total)", total);
    }
    let mut out = output::table(&["FILE", "TARGET", "KIND", "OBJECTS", "BYTES", "STORED"], &rows);
    if let Some(rules) = rules {
        let device = total.device();
        let p = total.prunable;
        out.push_str(&format!(
            "prune --keep {}: would drop {} of {} device code objects, {} of {}{unit} ({} of {} stored)\n",
            rules.keep.join(","),
            p.objects,
            device.objects,
            output::size(p.bytes),
            output::size(device.bytes),
            output::size(p.stored),
            output::size(device.stored),
            unit = output::bytes_unit()
        ));
    }
    out
}
