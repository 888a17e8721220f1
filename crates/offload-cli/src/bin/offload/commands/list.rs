//! `offload list`: one row per code object, read from headers only.

use crate::cli::Context;
use crate::inputs;
use crate::output;
use clap::Args;
use offload_inspect::record::CodeObjectRecord;
use offload_inspect::{Inventory, Options};

#[derive(Args, Debug, PartialEq, Eq)]
pub struct ListArgs {
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Add a URI column: each code object's ROCm code-object URI (always in --json)
    #[arg(long)]
    pub uri: bool,
    /// Files, packages or folders (- for standard input)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
}

impl ListArgs {
    pub fn run(&self, ctx: &Context) -> u8 {
        list(&ctx.argv0, &self.files, self.json, self.uri)
    }
}

fn list(argv0: &str, files: &[String], json: bool, uri: bool) -> u8 {
    let mut status = 0;
    let (mut rows, mut objects) = (Vec::new(), Vec::new());
    inputs::gather_package_archives(files);
    for path in files {
        let mut found = 0;
        let problems = inputs::each(path, !json, &mut |item| {
            let (path, inv) = (item.file, item.scan(&Options::default()));
            inputs::print_diagnostics(argv0, path, &inv);
            found += inv.objects.len();
            if inv.has_errors() {
                status = 1;
            }
            list_rows(item, &inv, uri, &mut rows, &mut objects);
        });
        status = status.max(inputs::report(argv0, &problems));
        if found == 0 && !inputs::has_errors(&problems) {
            eprintln!("{argv0}: error: {path}: no offload code objects found");
            status = 1;
        }
    }
    if json {
        // An input that could not be read is an error (exit 2), not an
        // empty listing.
        if !(objects.is_empty() && status == 2) {
            print!("{}", output::array(&objects));
        }
    } else if !rows.is_empty() {
        let mut header =
            vec!["FILE", "LOCATION", "FORMAT", "IMAGE", "KIND", "TRIPLE", "TARGET ID", "SIZE", "OFFSET", "COMPRESSED"];
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
            inv.image_label(o).to_string(),
            r.offload_kind.clone(),
            r.triple.clone(),
            if r.target_id.is_empty() { "-".into() } else { r.target_id.clone() },
            output::size(r.size),
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
