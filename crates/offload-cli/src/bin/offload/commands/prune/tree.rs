//! `offload prune` on a package or folder: wheels and zip archives,
//! folders in place (`--in-place`), tarballs (`offload_rewrite::tree`,
//! docs/guide/prune-trees.md).

use crate::output;
use offload_rewrite::prune::Rules;
use offload_rewrite::tree::{self, Options, PackageKind, TreeError, TreeReport};
use std::path::Path;

/// What `prune` needs for a package or folder.
pub struct TreeArgs<'a> {
    pub rules: Rules,
    pub input: &'a str,
    pub output: Option<&'a str>,
    pub in_place: bool,
    pub dry_run: bool,
    pub json: bool,
}

/// The bytes read to tell a package from a single file.
const HEAD: u64 = 1 << 20;

/// The package kind of `path`, `None` for a single file (one-file prune).
pub fn package_kind(path: &str) -> Option<PackageKind> {
    use std::io::Read;
    let p = Path::new(path);
    if p.is_dir() {
        return Some(PackageKind::Dir);
    }
    // Only a regular file is opened (a FIFO would block); anything else is
    // left to one-file prune, which says what it is.
    if !std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
        return None;
    }
    // Enough bytes to decode the first tar header of a compressed tarball:
    // zstd decodes a whole block (up to 128 KiB) before its first byte, so
    // a 4 KiB head missed `tar | zstd` streams whose first file is large.
    let mut head = Vec::new();
    let f = std::fs::File::open(p).ok()?;
    f.take(HEAD).read_to_end(&mut head).ok()?;
    tree::package_kind(p, &head)
}

/// Whether `a` and `b` name the same file (also through links).
pub fn same_file(a: &str, b: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Runs `prune` on a package or folder; returns the exit status.
pub fn run(argv0: &str, args: &TreeArgs, kind: PackageKind) -> u8 {
    let path = args.input;
    let usage = |msg: &str| {
        eprintln!("{argv0}: error: {msg}");
        2
    };
    if let Some(why) = tree::refusal(kind) {
        eprintln!("{argv0}: error: {path}: {why}");
        return 1;
    }
    let opts = Options { rules: args.rules.clone(), dry_run: args.dry_run, threads: 0 };
    let result = match kind {
        PackageKind::Dir => {
            if args.output.is_some() {
                return usage(&format!(
                    "{path} is a folder: it is pruned in place with --in-place (copy it first to keep the original), not written to -o"
                ));
            }
            if !args.in_place && !args.dry_run {
                return usage(&format!(
                    "{path} is a folder: pass --in-place to rewrite its files in place, or --dry-run"
                ));
            }
            tree::dir::prune_dir(Path::new(path), &opts)
        }
        PackageKind::Zip | PackageKind::Tar(_) => {
            if args.in_place {
                return usage(&format!("--in-place rewrites folders; write the pruned {path} with -o NEW"));
            }
            let out = args.output.filter(|_| !args.dry_run);
            if let Some(o) = out
                && same_file(path, o)
            {
                return usage(&format!("{o} is the input: write the pruned package to a new file"));
            }
            package(path, out, kind, &opts)
        }
        _ => return usage("not a package"),
    };
    match result {
        Ok(report) => {
            print_report(path, &report, args.json, args.dry_run);
            0
        }
        Err(e) => {
            eprintln!("{argv0}: error: {path}: {e}");
            match e {
                TreeError::Io { .. } => 2,
                _ => 1,
            }
        }
    }
}

/// A zip or tarball into `out` (staged, committed only when whole).
fn package(path: &str, out: Option<&str>, kind: PackageKind, opts: &Options) -> Result<TreeReport, TreeError> {
    let input = offload_io::Input::open(path)
        .map_err(|e| TreeError::Io { path: path.to_string(), message: offload_io::error_text(&e) })?;
    let data = input.bytes();
    let mut outputs = offload_io::Outputs::new();
    let file = match out {
        Some(o) => {
            let h =
                outputs.stage_empty(o).map_err(|e| TreeError::Io { path: o.to_string(), message: e.to_string() })?;
            outputs.staged_file(h)
        }
        None => None,
    };
    let report = match kind {
        PackageKind::Tar(c) => tree::tarball::prune_tar(data, c, file, opts)?,
        _ => tree::wheel::prune_zip(data, file, opts, None)?,
    };
    if out.is_some() {
        outputs.commit().map_err(|e| TreeError::Io { path: out.unwrap_or("").to_string(), message: e.to_string() })?;
    }
    Ok(report)
}

#[derive(serde::Serialize)]
struct JsonFile<'a> {
    path: &'a str,
    action: &'static str,
    mode: Option<&'static str>,
    reason: &'a str,
    old_size: u64,
    new_size: u64,
    kept: Vec<&'a str>,
    dropped: Vec<&'a str>,
}

#[derive(serde::Serialize)]
struct JsonTarget {
    target: String,
    kept_bytes: u64,
    dropped_bytes: u64,
}

#[derive(serde::Serialize)]
struct JsonReport<'a> {
    input: &'a str,
    dry_run: bool,
    scanned: usize,
    changed: usize,
    input_size: u64,
    output_size: u64,
    saved_bytes: i64,
    files: Vec<JsonFile<'a>>,
    targets: Vec<JsonTarget>,
    notes: &'a [String],
}

/// The report: per file, per target, the total.
pub fn print_report(path: &str, r: &TreeReport, json: bool, dry_run: bool) {
    let targets = r.targets();
    if json {
        let files = r
            .files
            .iter()
            .map(|f| JsonFile {
                path: &f.path,
                action: f.action.name(),
                mode: f.mode.map(|m| m.name()),
                reason: &f.reason,
                old_size: f.old_size,
                new_size: f.new_size,
                kept: f.entries.iter().filter(|e| e.kept).map(|e| e.id.as_str()).collect(),
                dropped: f.entries.iter().filter(|e| !e.kept).map(|e| e.id.as_str()).collect(),
            })
            .collect();
        let targets = targets
            .into_iter()
            .map(|(target, t)| JsonTarget { target, kept_bytes: t.kept, dropped_bytes: t.dropped })
            .collect();
        let report = JsonReport {
            input: path,
            dry_run,
            scanned: r.scanned,
            changed: r.changed(),
            input_size: r.input_size,
            output_size: r.output_size,
            saved_bytes: r.saved(),
            files,
            targets,
            notes: &r.notes,
        };
        println!("{}", output::json(&report));
        return;
    }
    let rows: Vec<Vec<String>> = r
        .files
        .iter()
        .map(|f| {
            vec![
                output::escape_controls(&f.path),
                f.action.name().into(),
                f.mode.map_or("-", |m| m.name()).into(),
                output::size(f.old_size),
                output::size(f.new_size),
                f.reason.clone(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        print!("{}", output::table(&["FILE", "ACTION", "MODE", "OLD SIZE", "NEW SIZE", "WHY"], &rows));
    }
    let rows: Vec<Vec<String>> =
        targets.iter().map(|(t, v)| vec![t.clone(), output::size(v.kept), output::size(v.dropped)]).collect();
    if !rows.is_empty() {
        print!("{}", output::table(&["TARGET", "KEPT BYTES", "DROPPED BYTES"], &rows));
    }
    for n in &r.notes {
        eprintln!("note: {path}: {n}");
    }
    let verb = if dry_run { "would rewrite or remove" } else { "rewrote or removed" };
    let about = if dry_run { "about " } else { "" };
    let unit = output::bytes_unit();
    println!(
        "{path}: {verb} {} of {} files with device code ({} files looked at); {} -> {about}{}{unit}, {about}{}{unit} saved",
        r.changed(),
        r.files.len(),
        r.scanned,
        output::size(r.input_size),
        output::size(r.output_size),
        output::signed_size(r.saved())
    );
}
