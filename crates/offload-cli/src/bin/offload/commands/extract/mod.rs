//! `offload extract`: writes code objects to files, chosen by filters
//! (`--all`, `--id`, `--target-id`, `--index`, `--gpu`) from one FILE, or
//! named by code-object URIs (`uri.rs`).

pub mod names;
mod uri;

use crate::cli::{Context, GPU_HELP, GPU_SHORT, Kind, KpackOrder, is_uri, parse_gpu, usage_error};
use crate::commands::select::kpack_select;
use crate::inputs;
use crate::output;
use clap::{ArgGroup, Args};
use offload_format::kpack::SearchOrder;
use offload_format::plan::Plan;
use offload_inspect::decode::visit_objects;
use offload_inspect::record::CodeObjectRecord;
use offload_inspect::select::{Gpu, Runtime};
use offload_inspect::{BytesError, Options};
use std::sync::Mutex;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("filter").multiple(true)))]
pub struct ExtractArgs {
    /// Every code object (not the containers)
    #[arg(long, group = "filter")]
    pub all: bool,
    /// The code object with this ID (repeatable)
    #[arg(long, value_name = "ID", group = "filter")]
    pub id: Vec<String>,
    /// The code objects for this target ID (repeatable)
    #[arg(long, value_name = "TARGET-ID", group = "filter")]
    pub target_id: Vec<String>,
    /// The code object with this index, counted across a package (repeatable)
    #[arg(long, value_name = "N", group = "filter")]
    pub index: Vec<usize>,
    #[arg(long, value_parser = parse_gpu, group = "filter", help = GPU_SHORT, long_help = GPU_HELP)]
    pub gpu: Option<Gpu>,
    /// The runtime that loads the code, with --gpu [default: cuda for an NVIDIA GPU, else hip]
    #[arg(long, value_enum, requires = "gpu")]
    pub kind: Option<Kind>,
    /// kpack-split binaries, with --gpu: the search order of AMD's kpack loader to follow
    #[arg(long, value_enum, default_value_t)]
    pub kpack_order: KpackOrder,
    /// The file to write (exactly one match; - for standard output)
    #[arg(short, long, value_name = "FILE", conflicts_with = "output_dir")]
    pub output: Option<String>,
    /// Where to write [default: .]
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<String>,
    /// Wheels installed beside a wheel FILE (its device wheels, repeatable): FILE's kpack-split libraries resolve their archives among the members of all of them, as once installed together
    #[arg(long, value_name = "WHEEL")]
    pub with: Vec<String>,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// A file, package or folder (- for standard input) with filters; or,
    /// without filters, code-object URIs (file://PATH#offset=N&size=M)
    #[arg(value_name = "FILE|URI", required = true)]
    pub files: Vec<String>,
}

/// One way of choosing code objects; a code object is written if any
/// filter matches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    Id(String),
    TargetId(String),
    Index(usize),
    Gpu,
}

impl ExtractArgs {
    fn filtered(&self) -> bool {
        self.all || !self.id.is_empty() || !self.target_id.is_empty() || !self.index.is_empty() || self.gpu.is_some()
    }

    /// Whether the operands are code-object URIs (checked by [`Self::validate`]).
    fn uris(&self) -> bool {
        self.files.iter().any(|f| is_uri(f))
    }

    /// One FILE with filters, or URIs without any; clap's usage errors
    /// (exit 2) otherwise.
    pub fn validate(&self) -> Result<(), clap::Error> {
        use clap::error::ErrorKind;
        let usage = |kind: ErrorKind, msg: &str| usage_error("extract", kind, msg);
        let uris = self.files.iter().filter(|f| is_uri(f)).count();
        if uris > 0 {
            if !self.with.is_empty() {
                return Err(usage(ErrorKind::ArgumentConflict, "--with applies to a wheel FILE, not to URIs"));
            }
            if uris != self.files.len() {
                return Err(usage(
                    ErrorKind::ArgumentConflict,
                    "URIs and files cannot be mixed: give URIs, or one FILE",
                ));
            }
            if self.filtered() {
                return Err(usage(ErrorKind::ArgumentConflict, "a URI names its code objects: filters do not apply"));
            }
            return Ok(());
        }
        if !self.filtered() {
            let msg = "one of --all, --id, --target-id, --index, --gpu is required with a FILE";
            return Err(usage(ErrorKind::MissingRequiredArgument, msg));
        }
        if self.files.len() != 1 {
            return Err(usage(ErrorKind::TooManyValues, "one FILE at a time (several URIs may be given)"));
        }
        if !self.with.is_empty() && !self.files.iter().chain(&self.with).all(|f| f.ends_with(".whl")) {
            return Err(usage(ErrorKind::ArgumentConflict, "--with takes wheels (.whl) installed beside a wheel FILE"));
        }
        Ok(())
    }

    /// The filters, in the order `--all`, `--id`, `--target-id`, `--index`, `--gpu`.
    pub fn filters(&self) -> Vec<Filter> {
        let mut filters = Vec::new();
        if self.all {
            filters.push(Filter::All);
        }
        filters.extend(self.id.iter().cloned().map(Filter::Id));
        filters.extend(self.target_id.iter().cloned().map(Filter::TargetId));
        filters.extend(self.index.iter().copied().map(Filter::Index));
        if self.gpu.is_some() {
            filters.push(Filter::Gpu);
        }
        filters
    }

    /// The runtime that loads the code with `--gpu`.
    pub fn runtime(&self) -> Runtime {
        crate::cli::runtime(self.kind, self.gpu.as_ref())
    }

    pub fn run(&self, ctx: &Context) -> u8 {
        let (output, dir) = (self.output.clone(), self.output_dir.clone());
        if self.uris() {
            return uri::run(&ctx.argv0, &self.files, output, dir, self.json);
        }
        let file = self.files.first().map(String::as_str).unwrap_or_default();
        let how = (self.runtime(), self.kpack_order.order());
        // A wheel and the wheels installed beside it are one tree
        // (docs/guide/kpack.md).
        let wheels: Vec<String> = self.files.iter().chain(&self.with).cloned().collect();
        crate::inputs::gather_package_archives(&wheels);
        extract(&ctx.argv0, file, &self.filters(), self.gpu.as_ref(), how, output, dir, self.json)
    }
}

/// For each fat binary from which nothing loads on `gpu` although it holds
/// code for the GPU's processor with other feature settings (`gfx90a:xnack+`
/// and `gfx90a:xnack-` for `--gpu gfx90a`): what each of those needs, as
/// `offload select` says it, so that "no code object matches" does not
/// stand alone (docs/reference/selection-rules.md).
fn explain_feature_misses(
    argv0: &str,
    file: &str,
    inv: &offload_inspect::Inventory,
    sel: &offload_inspect::select::Selection,
    gpu: &Gpu,
    runtime: Runtime,
) {
    use offload_inspect::select::Verdict;
    for &u in &sel.failed_units {
        let misses: Vec<String> = inv
            .objects
            .iter()
            .zip(&sel.verdicts)
            .filter(|(o, _)| o.unit == u)
            .filter_map(|(o, v)| match v {
                Some(v @ Verdict::Rejected(r)) if r.code().ends_with("-mismatch") => {
                    let (_, why) = offload_inspect::record::explain(v, &inv.objects, gpu, runtime);
                    Some(format!("'{}': {why}", o.id))
                }
                _ => None,
            })
            .collect();
        if misses.is_empty() {
            continue;
        }
        let loc = inv.units.get(u).map(|u| u.location.to_string()).unwrap_or_default();
        eprintln!(
            "{argv0}: note: {file}: {loc}: {} code for other feature settings: {}",
            gpu.processor,
            misses.join("; ")
        );
    }
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
    // Matching entries that could not be decoded (reported, not written).
    let mut skipped = 0usize;
    // The target IDs of the code objects seen, for what `--target-id`
    // took or why it took nothing.
    let mut held: Vec<String> = Vec::new();
    // Membership of `held` (a bundle may hold 200,000 distinct targets: a
    // linear search per object made `extract` quadratic; hostile corpus).
    let mut held_seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let problems = inputs::each(path, !json, &mut |item| {
        if failed {
            return;
        }
        let inv = item.scan(&Options::default());
        inputs::print_diagnostics(argv0, item.file, &inv);
        for o in inv.objects.iter().filter(|o| !o.container && !o.target_id.is_empty()) {
            if held_seen.insert(o.target_id.clone()) {
                held.push(o.target_id.clone());
            }
        }
        let selection = gpu.map(|g| kpack_select(&inv, g, runtime, kpack_order));
        if let (Some(sel), Some(g)) = (&selection, gpu) {
            for (u, why) in &sel.refusals {
                let loc = inv.units.get(*u).map(|u| u.location.to_string()).unwrap_or_default();
                eprintln!("{argv0}: error: {}: {loc}: the kpack loader loads nothing: {why}", item.file);
            }
            explain_feature_misses(argv0, item.file, &inv, sel, g, runtime);
        }
        let chosen = selection.map(|s| s.chosen).unwrap_or_default();
        let picked: Vec<usize> = (0..inv.objects.len())
            .filter(|&i| {
                let o = &inv.objects[i];
                filters.iter().any(|f| match f {
                    Filter::All => !o.container,
                    Filter::Id(id) => &o.id == id,
                    Filter::TargetId(t) => {
                        !o.target_id.is_empty() && offload_inspect::keep::agrees(&canonical(t), &o.target_id)
                    }
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
        // An entry that cannot be decoded (an obfuscated NVVM entry, a
        // damaged member) is reported and left out; the others are still
        // written, and the exit status says that something was not.
        let mut undecodable: Vec<usize> = Vec::new();
        // Outputs are named after the package member they come from, not
        // the package (`libcurand.so.10-19-cuda-elf-sm_89.cubin`).
        let named = item.member().unwrap_or(path);
        loop {
            let todo: Vec<usize> = wanted
                .iter()
                .zip(&staged)
                .filter(|(i, slot)| !undecodable.contains(i) && slot.lock().is_ok_and(|s| s.is_none()))
                .map(|(&i, _)| i)
                .collect();
            if todo.is_empty() {
                break;
            }
            let visited = visit_objects(&inv, &todo, 0, |i, bytes| {
                let bytes = bytes.map_err(ExtractError::Bytes)?;
                let dest = match &output {
                    Some(o) => o.clone(),
                    None => format!("{dir}/{}", names::output_name(named, before + i, &inv.objects[i].id, bytes)),
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
            match visited {
                Ok(_) => break,
                Err((position, ExtractError::Bytes(e))) => {
                    let Some(&i) = todo.get(position) else { break };
                    let o = &inv.objects[i];
                    eprintln!("{argv0}: error: {}: '{}' at {}: {e}; not written", item.file, o.id, o.location);
                    undecodable.push(i);
                    skipped += 1;
                }
                Err((_, ExtractError::Output(e))) => {
                    eprintln!("{argv0}: error: {e}");
                    failed = true;
                    return;
                }
            }
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
    let read = inputs::report(argv0, &problems);
    if read != 0 || failed {
        return read.max(1);
    }
    held.sort_by(|a, b| offload_inspect::report::size::target_cmp(a, b));
    for f in filters {
        if let Filter::TargetId(t) = f {
            let rule = canonical(t);
            if let Some(note) = offload_inspect::keep::either_setting_note(&rule, held.iter().map(String::as_str)) {
                eprintln!("{argv0}: note: --target-id {note}");
            } else if matched == 0 {
                // Why nothing matches: the settings held for its processor.
                let processor = rule.split(':').next().unwrap_or_default();
                let same: Vec<&str> =
                    held.iter().map(String::as_str).filter(|h| h.split(':').next() == Some(processor)).collect();
                if !same.is_empty() {
                    eprintln!(
                        "{argv0}: note: --target-id {rule}: {path} holds {processor} code for {} only",
                        same.join(", ")
                    );
                }
            }
        }
    }
    if matched == 0 {
        eprintln!("{argv0}: error: {path}: no code object matches");
        return 1;
    }
    if output.is_some() && matched > 1 {
        eprintln!("{argv0}: error: {path}: {matched} code objects match; use --output-dir to write them all");
        return 1;
    }
    if output.is_some() && skipped > 0 {
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
    if skipped > 0 {
        eprintln!(
            "{argv0}: error: {path}: {skipped} of {matched} matching code objects could not be decoded and were not written"
        );
        return 1;
    }
    0
}
