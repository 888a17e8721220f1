//! `offload verify`: a deep structural check of every payload.

use crate::cli::Context;
use crate::inputs;
use crate::output::{self, Colors, Paint};
use clap::Args;
use offload_inspect::record::DiagnosticRecord;
use offload_inspect::{Options, Severity};

#[derive(Args, Debug, PartialEq, Eq)]
pub struct VerifyArgs {
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Files, packages or folders (- for standard input)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
}

impl VerifyArgs {
    pub fn run(&self, ctx: &Context) -> u8 {
        verify(&ctx.argv0, &self.files, self.json, ctx.colors(self.json))
    }
}

/// What `verify` found in one path given, before it is printed (archives
/// of wheels are judged against every path's libraries first).
struct Verdicts {
    path: String,
    diags: Vec<DiagnosticRecord>,
    problems: Vec<inputs::Problem>,
    found: usize,
    units: usize,
    /// `.kpack` members of a wheel: the wheel, the member, and where it
    /// lies once installed ([`offload_inspect::kpack::PackageTree::path_of`]).
    wheel_archives: Vec<(String, String, std::path::PathBuf)>,
}

fn verify(argv0: &str, files: &[String], json: bool, colors: Colors) -> u8 {
    let mut status = 0;
    let mut objects = Vec::new();
    // Wheels given together are one installed tree (docs/guide/kpack.md).
    inputs::gather_package_archives(files);
    // Archives the split libraries of wheels reach, over every path given.
    let mut reached_in_wheels = Vec::new();
    let mut results = Vec::new();
    for path in files {
        // Findings of every item of the path.
        let mut diags: Vec<DiagnosticRecord> = Vec::new();
        let (mut found, mut units) = (0, 0);
        // kpack archives given, and those the split libraries reach (by
        // canonical path): an archive no library reaches is dead weight.
        let (mut archives, mut reached) = (Vec::new(), Vec::new());
        let mut wheel_archives = Vec::new();
        let problems = inputs::each(path, !json, &mut |item| {
            let inv = item.scan(&Options { deep: true, ..Default::default() });
            found += inv.objects.len();
            units += inv.units.len();
            if let Some(split) = &inv.kpack {
                if split.tree.is_some() {
                    reached_in_wheels.extend(split.archives.iter().cloned());
                } else {
                    reached.extend(split.archives.iter().cloned());
                }
            }
            if offload_format::kpack::archive::has_magic(item.bytes) {
                match item.member() {
                    None => archives.push((item.file.to_string(), std::fs::canonicalize(item.file).ok())),
                    Some(m) if item.file.ends_with(".whl") && inputs::wheels_gathered() => wheel_archives.push((
                        item.file.to_string(),
                        m.to_string(),
                        offload_inspect::kpack::PackageTree::path_of(m),
                    )),
                    Some(_) => {}
                }
            }
            diags.extend(inv.diagnostics.iter().map(|d| DiagnosticRecord::of(Some(item.file), d)));
        });
        if std::path::Path::new(path).is_dir() {
            for (file, canonical) in archives {
                if canonical.is_some_and(|c| !reached.contains(&c)) {
                    let message = "no kpack-split library in this folder reaches this archive through its search paths (dead weight, or a library is missing)";
                    diags.push(DiagnosticRecord::new(Some(&file), Severity::Warning, None, "file", message));
                }
            }
        }
        if !json {
            inputs::report(argv0, &problems);
        }
        results.push(Verdicts { path: path.clone(), diags, problems, found, units, wheel_archives });
    }
    for r in results {
        let Verdicts { path, mut diags, problems, found, units, wheel_archives } = r;
        for (file, member, installed) in wheel_archives {
            if !reached_in_wheels.contains(&installed) {
                let message = "no kpack-split library of the wheels given reaches this archive through its search paths once installed (dead weight, or its host wheel is not given)";
                let location = format!("member {member}");
                diags.push(DiagnosticRecord::new(Some(&file), Severity::Warning, None, &location, message));
            }
        }
        let path = path.as_str();
        let unread = diags.len()..diags.len() + problems.len();
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
            status = status.max(1);
        }
        // A file that could not be read is an I/O error (exit 2).
        status = status.max(inputs::status(&problems));
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
