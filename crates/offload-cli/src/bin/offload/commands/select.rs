//! `offload select`: the code object a runtime loads on a GPU, and why
//! each other one is not loaded.

use crate::cli::{Context, GPU_HELP, GPU_SHORT, Kind, KpackOrder, parse_gpu};
use crate::inputs;
use crate::output::{self, Colors, Paint};
use clap::Args;
use offload_format::kpack::SearchOrder;
use offload_inspect::record::{self, VerdictRecord};
use offload_inspect::select::{Gpu, Runtime, Selection, Verdict, select};
use offload_inspect::{Inventory, Options};

#[derive(Args, Debug)]
pub struct SelectArgs {
    #[arg(long, value_parser = parse_gpu, help = GPU_SHORT, long_help = GPU_HELP)]
    pub gpu: Gpu,
    /// The runtime that loads the code [default: cuda for an NVIDIA GPU, else hip]
    #[arg(long, value_enum)]
    pub kind: Option<Kind>,
    /// kpack-split binaries: the search order of AMD's kpack loader to follow
    #[arg(long, value_enum, default_value_t)]
    pub kpack_order: KpackOrder,
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

impl SelectArgs {
    /// The runtime that loads the code: `--kind`, or the GPU's default.
    pub fn runtime(&self) -> Runtime {
        crate::cli::runtime(self.kind, Some(&self.gpu))
    }

    pub fn run(&self, ctx: &Context) -> u8 {
        let how = (self.runtime(), self.kpack_order.order());
        select_cmd(&ctx.argv0, &self.files, &self.gpu, how, self.json, self.uri, ctx.colors(self.json))
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
    inputs::gather_package_archives(files);
    for path in files {
        let mut candidates = false;
        let mut failed = FailedUnits::default();
        let problems = inputs::each(path, !json, &mut |item| {
            let (path, inv) = (item.file, item.scan(&Options::default()));
            inputs::print_diagnostics(argv0, path, &inv);
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
                    output::size(r.size),
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
            if failed.add(path, &inv, &sel) {
                status = 1;
            }
            candidates |= !(sel.chosen.is_empty() && sel.failed_units.is_empty());
        });
        failed.print(argv0, gpu, runtime);
        status = status.max(inputs::report(argv0, &problems));
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

/// The fat binaries from which nothing loads on the GPU, gathered over a
/// whole path (a library, or every member of a package) so that identical
/// errors (a library whose 111 fat binaries all lack the GPU) print as one
/// line with a count and the first locations.
/// (file, the kpack loader's message or none) and the locations.
type Group = ((String, Option<String>), Vec<String>);

#[derive(Default)]
pub(crate) struct FailedUnits {
    /// Per file and message (`None`: nothing loadable; `Some`: the kpack
    /// loader's refusal), the locations, in the order first seen.
    groups: Vec<Group>,
}

impl FailedUnits {
    /// Adds the failed units of one scanned item of `file`; returns whether
    /// it had any.
    pub(crate) fn add(&mut self, file: &str, inv: &Inventory, sel: &Selection) -> bool {
        for &u in &sel.failed_units {
            let loc = inv.units.get(u).map(|u| u.location.to_string()).unwrap_or_default();
            let why = sel.refusals.iter().find(|(r, _)| *r == u).map(|(_, why)| why.clone());
            let key = (file.to_string(), why);
            match self.groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, locs)) => locs.push(loc),
                None => self.groups.push((key, vec![loc])),
            }
        }
        !sel.failed_units.is_empty()
    }

    /// Adds what another item's list holds (kept in the order first seen).
    pub(crate) fn absorb(&mut self, other: FailedUnits) {
        for (key, locs) in other.groups {
            match self.groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, mine)) => mine.extend(locs),
                None => self.groups.push((key, locs)),
            }
        }
    }

    /// Prints one error line per file and message, and empties the list.
    pub(crate) fn print(&mut self, argv0: &str, gpu: &Gpu, runtime: Runtime) {
        let rt = runtime.name();
        for ((file, why), locs) in self.groups.drain(..) {
            match (why, locs.as_slice()) {
                (Some(why), [loc]) => {
                    eprintln!("{argv0}: error: {file}: {loc}: the kpack loader loads nothing on {gpu}: {why}")
                }
                (Some(why), _) => eprintln!(
                    "{argv0}: error: {file}: the kpack loader loads nothing on {gpu} in {} fat binaries ({}): {why}",
                    locs.len(),
                    first_locations(&locs)
                ),
                (None, [loc]) => {
                    eprintln!(
                        "{argv0}: error: {file}: no code object in the fat binary at {loc} loads on {gpu} ({rt} runtime)"
                    )
                }
                (None, _) => eprintln!(
                    "{argv0}: error: {file}: no code object loads on {gpu} ({rt} runtime) in {} fat binaries ({})",
                    locs.len(),
                    first_locations(&locs)
                ),
            }
        }
    }
}

/// The first three locations of a collapsed error, and how many more.
fn first_locations(locs: &[String]) -> String {
    let shown: Vec<&str> = locs.iter().take(3).map(String::as_str).collect();
    match locs.len().saturating_sub(shown.len()) {
        0 => format!("at {}", shown.join(", ")),
        more => format!("at {}, and {more} more", shown.join(", ")),
    }
}

/// [`select`], with what AMD's kpack loader answers for the records of a
/// kpack-split binary (`offload_inspect::kpack::select`).
pub(crate) fn kpack_select(inv: &Inventory, gpu: &Gpu, runtime: Runtime, order: SearchOrder) -> Selection {
    crate::cli::note_settled(gpu, inv.objects.iter().map(|o| o.target_id.as_str()));
    let mut sel = select(&inv.objects, gpu, runtime);
    if runtime == Runtime::Hip {
        offload_inspect::kpack::select(inv, &mut sel, gpu, order);
    }
    sel
}
