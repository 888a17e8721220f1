//! `offload prune`: drops the device code of unwanted GPU targets from a
//! HIP or CUDA host binary, from every member of a static archive, and
//! from raw bundles, `.fatbin` files and fat objects (the library's
//! `prune` module does the work). By default the output is the smallest
//! the layout allows: cut where cutting applies (linked HIP and CUDA
//! binaries, relocatable objects, archives, PE images), zero elsewhere,
//! the reason in the report (docs/guide/pruning.md, "Which mode");
//! `--mode zero|cut` forces one. The output is checked from its own bytes
//! before it replaces anything, and written atomically; the input is
//! modified only with `--in-place`.

mod openmp;
mod tree;

use crate::cli::{Context, parse_gpu, targets};
use crate::output;
use clap::{ArgGroup, Args, ValueEnum};
use offload_format::plan::Plan;
use offload_inspect::layout::UnitKind;
use offload_inspect::select::Gpu;
use offload_rewrite::prune::cut_file::{self, FileCut};
use offload_rewrite::prune::files::{self, Input};
use offload_rewrite::prune::{self, Cut, CutPlan, PruneError, Pruned, Rules};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Zero the dropped code objects in place (the file keeps its size)
    Zero,
    /// Cut them out: the file shrinks (GNU strip/objcopy must not run on it afterwards)
    Cut,
}

const EXAMPLES: &str = "Examples:
  offload prune --keep gfx90a libfoo.so -o libfoo.gfx90a.so    # as small as the layout allows (the report says how)
  offload prune --keep gfx90a --mode zero libfoo.so -o libfoo.gfx90a.so   # same size, every other byte in place
  offload prune --keep gfx1100 jax_rocm7_plugin-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl -o small.whl
  offload prune --keep sm_90 --in-place venv/                  # each file replaced atomically
  offload prune --keep gfx942 rootfs.tar.zst -o small.tar.zst  # a container layer
  offload prune --keep gfx90a --dry-run --json libfoo.so       # the report only";

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("targets").required(true).multiple(true)), after_help = EXAMPLES)]
pub struct PruneCli {
    /// Targets to keep: gfx90a, sm_80 (cubin), compute_80 (PTX), lto_80, x86_64-pc-linux-gnu (an OpenMP image); comma-separated, repeatable
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', group = "targets")]
    keep: Vec<String>,
    /// Targets to drop (comma-separated, repeatable)
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', group = "targets")]
    drop: Vec<String>,
    /// Keep what the runtime would load on this GPU (repeatable)
    #[arg(long, value_name = "GPU", value_parser = parse_gpu, group = "targets")]
    keep_gpu: Vec<Gpu>,
    /// How dropped code objects are removed (default: the smallest output the file allows, cut where it applies, else zero; the report says which and why)
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Allow dropping every device code object of a fat binary
    #[arg(long)]
    allow_empty: bool,
    /// Level for recompressed bundles: zstd 1-22, zlib 1-9 (default: zstd 3, zlib 6, as LLVM)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=22))]
    compression_level: Option<i32>,
    /// Check and report what would change; write nothing
    #[arg(long)]
    dry_run: bool,
    /// Machine-readable report (schema in docs/guide/pruning.md)
    #[arg(long)]
    json: bool,
    /// Skip re-reading the output before it replaces anything
    #[arg(long)]
    no_verify: bool,
    /// Rewrite IN itself (a file, or every file of a folder, each replaced atomically)
    #[arg(long, conflicts_with = "output")]
    in_place: bool,
    /// The output file (- for standard output)
    #[arg(short, long, value_name = "OUT", required_unless_present_any = ["dry_run", "in_place"])]
    output: Option<String>,
    /// A host binary, object, static archive, bundle, fat object or .fatbin; a wheel or zip, a tarball (.tar, .tar.gz, .tar.zst, .tar.xz) or a folder (docs/guide/prune-trees.md)
    #[arg(value_name = "IN")]
    input: String,
}

/// `offload prune`'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneArgs {
    pub keep: Vec<String>,
    pub drop: Vec<String>,
    pub keep_gpu: Vec<Gpu>,
    pub allow_empty: bool,
    pub compression_level: Option<i32>,
    pub dry_run: bool,
    pub json: bool,
    pub verify: bool,
    /// `--mode`: `None` picks the smallest output the file allows (cut
    /// where it applies, zero elsewhere).
    pub mode: Option<Mode>,
    /// `--in-place`: the output is the input (a folder's files each).
    pub in_place: bool,
    pub input: String,
    pub output: Option<String>,
}

impl PruneCli {
    /// The options with every default applied.
    pub fn args(&self) -> PruneArgs {
        PruneArgs {
            keep: targets(self.keep.clone()),
            drop: targets(self.drop.clone()),
            keep_gpu: self.keep_gpu.clone(),
            allow_empty: self.allow_empty,
            compression_level: self.compression_level,
            dry_run: self.dry_run,
            json: self.json,
            verify: !self.no_verify,
            mode: self.mode,
            in_place: self.in_place,
            input: self.input.clone(),
            output: self.output.clone(),
        }
    }

    pub fn run(&self, ctx: &Context) -> u8 {
        run(&ctx.argv0, &self.args())
    }
}

fn kind_name(kind: UnitKind, version: Option<u16>) -> String {
    match (kind, version) {
        (UnitKind::Bundle, _) => "bundle".into(),
        (UnitKind::Compressed { version: old }, Some(new)) if new != old => format!("compressed v{old}->v{new}"),
        (UnitKind::Compressed { version }, _) => format!("compressed v{version}"),
        (UnitKind::Cuda, _) => "cuda fatbin".into(),
        (UnitKind::Object, _) => "fat object".into(),
    }
}

/// `prune --json`: the report's top level (key order is the schema's).
#[derive(serde::Serialize)]
struct Report<'a> {
    file: &'a str,
    dry_run: bool,
    fat_binaries: usize,
    rewritten: usize,
    unreferenced: usize,
    dropped_bytes: u64,
    freed_bytes: u64,
    units: Vec<UnitReport<'a>>,
    mode: &'static str,
    mode_reason: &'a str,
    input_size: u64,
    output_size: u64,
    saved_bytes: i64,
}

/// One fat binary of [`Report`].
#[derive(serde::Serialize)]
struct UnitReport<'a> {
    offset: u64,
    format: String,
    old_size: u64,
    new_size: u64,
    dropped_bytes: u64,
    freed_bytes: u64,
    kept: Vec<&'a str>,
    dropped: Vec<&'a str>,
    new_offset: u64,
}

/// What was (or would be) written, for the report.
struct Written<'c> {
    cut: Option<&'c CutPlan>,
    /// The cut of an object or archive.
    file_cut: Option<&'c FileCut>,
    /// `--mode cut` on an input that shrinks in any mode (a fat object,
    /// bundle or `.fatbin` file).
    shrunk: bool,
    /// Why this mode (`cut: ...`, `zero: ...`, `--mode zero`).
    reason: &'c str,
    input_size: u64,
    output_size: u64,
}

fn report(path: &str, kind: &Input, pruned: &Pruned, json: bool, dry_run: bool, written: &Written) {
    if json {
        let units = pruned
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let ids = |kept: bool| u.entries.iter().filter(|e| e.kept == kept).map(|e| e.id.as_str()).collect();
                UnitReport {
                    offset: u.unit.offset,
                    format: kind_name(u.unit.kind, u.new_version),
                    old_size: u.unit.used,
                    new_size: u.new_used,
                    dropped_bytes: u.dropped_bytes(),
                    freed_bytes: u.freed_bytes(),
                    kept: ids(true),
                    dropped: ids(false),
                    new_offset: written
                        .cut
                        .and_then(|c| c.unit_offsets.get(i).copied())
                        .or_else(|| written.file_cut.and_then(|c| c.unit_offset(i)))
                        .unwrap_or(u.unit.offset),
                }
            })
            .collect();
        let report = Report {
            file: path,
            dry_run,
            fat_binaries: pruned.units.len(),
            rewritten: pruned.changed(),
            unreferenced: pruned.unreferenced.len(),
            dropped_bytes: pruned.dropped_bytes(),
            freed_bytes: pruned.freed_bytes(),
            units,
            mode: if written.cut.is_some() || written.file_cut.is_some() || written.shrunk { "cut" } else { "zero" },
            mode_reason: written.reason,
            input_size: written.input_size,
            output_size: written.output_size,
            saved_bytes: saved(written.input_size, written.output_size),
        };
        println!("{}", output::json(&report));
        return;
    }
    let mut rows = Vec::new();
    for u in &pruned.units {
        for e in &u.entries {
            rows.push(vec![
                format!("{:#x}", u.unit.offset),
                kind_name(u.unit.kind, u.new_version),
                e.id.clone(),
                output::size(e.size),
                if e.kept { "kept".into() } else { "dropped".into() },
            ]);
        }
    }
    if !rows.is_empty() {
        print!("{}", output::table(&["FAT BINARY", "FORMAT", "ID", "SIZE", "FATE"], &rows));
    }
    if let Input::Archive { untouched, .. } = kind {
        for member in untouched {
            eprintln!(
                "warning: {path}: member {member}: .llvm.offloading images are not pruned yet (copied unchanged)"
            );
        }
    }
    if !pruned.unreferenced.is_empty() {
        eprintln!(
            "warning: {path}: {} fat binaries are pointed at by no wrapper record (pruned all the same)",
            pruned.unreferenced.len()
        );
    }
    let verb = if dry_run { "would rewrite" } else { "rewrote" };
    let (input_size, output_size) = (written.input_size, written.output_size);
    let cut = written.cut.is_some() || written.file_cut.is_some() || written.shrunk;
    let unit = output::bytes_unit();
    let mut effect = effect(input_size, output_size);
    // Zero mode on a file that keeps its layout: the freed bytes are zeros
    // (holes on disk where the file system allows).
    if !cut && kind.in_place() {
        effect.push_str(&format!(" ({}{unit} zeroed)", output::size(pruned.freed_bytes())));
    }
    let what = if matches!(kind, Input::Hip(_)) { String::new() } else { format!(" ({})", kind.name()) };
    println!(
        "{path}: {verb} {} of {} fat binaries{what}; {}{unit} of code objects dropped; {effect}; {}",
        pruned.changed(),
        pruned.units.len(),
        output::size(pruned.dropped_bytes()),
        written.reason,
    );
}

/// `24832 -> 12288 bytes, 12544 saved`, or on a terminal (human sizes)
/// `24.2 KiB -> 12.0 KiB, 12.2 KiB saved`.
pub(crate) fn effect(input: u64, output: u64) -> String {
    format!(
        "{} -> {}{}, {} saved",
        output::size(input),
        output::size(output),
        output::bytes_unit(),
        output::signed_size(saved(input, output))
    )
}

/// The advice when `--keep` (alone) keeps no device code anywhere in the
/// file: a target it does not hold (`--keep sm_89` on a library of AMD
/// code, `--keep gfx1030` on one without it, a typo). `--allow-empty`,
/// the way out when one fat binary of several would be emptied, would
/// strip every code object here, so the advice names what the file holds
/// instead. `None` when something is kept somewhere, or other rules are
/// given.
fn keeps_nothing(path: &str, data: &[u8], rules: &Rules, keep: &[String]) -> Option<String> {
    if keep.is_empty() || !rules.drop.is_empty() || !rules.keep_gpu.is_empty() || rules.allow_empty {
        return None;
    }
    let inventory = offload_inspect::scan(data, path, &offload_inspect::Options::default());
    let dropped = offload_inspect::report::size::dropped_by(&inventory, rules);
    let mut held: Vec<&str> = Vec::new();
    for (o, dropped) in inventory.objects.iter().zip(dropped) {
        if o.container || o.offload_kind == "host" {
            continue;
        }
        if !dropped {
            return None;
        }
        let target = if o.target_id.is_empty() { o.stored_target.as_str() } else { o.target_id.as_str() };
        if !held.contains(&target) {
            held.push(target);
        }
    }
    nothing_kept_advice(path, keep, held)
}

/// The message of [`keeps_nothing`] for the targets `held` (none kept).
pub(super) fn nothing_kept_advice(path: &str, keep: &[String], mut held: Vec<&str>) -> Option<String> {
    if held.is_empty() {
        return None;
    }
    held.sort_by(|a, b| offload_inspect::report::size::target_cmp(a, b));
    let nvidia = |t: &str| ["sm_", "compute_", "lto_"].iter().any(|p| t.starts_with(p));
    let what = if keep.len() == 1 { "an NVIDIA target" } else { "NVIDIA targets" };
    let amd = |t: &str| t.starts_with("gfx") || t.starts_with("amdgcn");
    let vendor = if keep.iter().all(|k| nvidia(k)) && held.iter().all(|t| amd(t)) {
        format!(" ({what}, and the file holds AMD GPU code only)")
    } else if !keep.iter().any(|k| nvidia(k)) && held.iter().all(|t| nvidia(t)) {
        " (the file holds NVIDIA GPU code only)".to_string()
    } else {
        String::new()
    };
    Some(format!(
        "--keep {} matches none of its device code{vendor}: it holds {}, so nothing would be kept; \
         name a target it holds ('offload size {path}' lists them; --allow-empty would remove all of it)",
        keep.join(","),
        held.join(", ")
    ))
}

/// Bytes saved: the input's size less the output's.
pub(crate) fn saved(input: u64, output: u64) -> i64 {
    (input as i64).saturating_sub(output as i64)
}

/// What each `--keep` target that leaves a feature out took (`gfx90a`
/// keeps `gfx90a:xnack+` and `gfx90a:xnack-`), as `extract --target-id`
/// and `size --keep` say it (`offload_inspect::keep::either_setting_note`).
fn keep_notes(argv0: &str, keep: &[String], pruned: &Pruned) {
    let mut kept: Vec<String> = Vec::new();
    for e in pruned.units.iter().flat_map(|u| &u.entries).filter(|e| e.kept) {
        let split = offload_inspect::id::split_entry_id(&e.id);
        let target = offload_inspect::id::canonical_target_id(&split.triple, &split.target).unwrap_or(split.target);
        if !kept.contains(&target) {
            kept.push(target);
        }
    }
    for rule in keep {
        if let Some(note) = offload_inspect::keep::either_setting_note(rule, kept.iter().map(String::as_str)) {
            eprintln!("{argv0}: note: --keep {note}");
        }
    }
}

fn rules(args: &PruneArgs) -> Result<Rules, PruneError> {
    let parse = |list: &[String]| list.iter().map(|t| prune::parse_target(t)).collect::<Result<Vec<_>, _>>();
    Ok(Rules {
        keep: parse(&args.keep)?,
        drop: parse(&args.drop)?,
        keep_gpu: args.keep_gpu.clone(),
        allow_empty: args.allow_empty,
        compression_level: args.compression_level,
    })
}

/// Runs the command; returns the exit status.
fn run(argv0: &str, args: &PruneArgs) -> u8 {
    let rules = match rules(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{argv0}: error: {e}");
            return 2;
        }
    };
    // `--keep gfx9000`: did you mean gfx900? (as size --keep and --gpu say)
    for w in crate::cli::keep_warnings(&args.keep) {
        eprintln!("{argv0}: warning: {w}");
    }
    let path = &args.input;
    if let Some(kind) = tree::package_kind(path) {
        let tree_args = tree::TreeArgs {
            rules,
            input: path,
            output: args.output.as_deref(),
            in_place: args.in_place,
            dry_run: args.dry_run,
            json: args.json,
        };
        return tree::run(argv0, &tree_args, kind);
    }
    // `-o IN` (the same file, also by a link) only with --in-place: a
    // mistyped output must not overwrite the input.
    let in_place_out;
    let args = if args.in_place {
        in_place_out = PruneArgs { output: Some(path.clone()), ..args.clone() };
        &in_place_out
    } else {
        if let Some(out) = args.output.as_deref().filter(|o| *o != "-" && !args.dry_run)
            && tree::same_file(path, out)
        {
            eprintln!("{argv0}: error: {out} is the input {path}: pass --in-place to rewrite it, or -o a new file");
            return 2;
        }
        args
    };
    let input = match offload_io::Input::open(path) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{argv0}: error: '{path}': {}", offload_io::error_text(&e));
            return 1;
        }
    };
    let data = input.bytes();
    if offload_inspect::layout::openmp::is_openmp_host(data) {
        return openmp::run(argv0, args, &rules, &input);
    }
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("{argv0}: error: {path}: {e}");
        1
    };
    // Explicit zero mode only: in the default mode a cut output (most
    // linked binaries) would make the early copy wasted work.
    let early_path = args.output.as_deref().filter(|p| args.mode == Some(Mode::Zero) && !args.dry_run && *p != "-");
    let (planned, early) = plan_copying_host_bytes(data, &rules, &input, early_path);
    let (kind, pruned) = match planned {
        Ok(p) => p,
        Err(e @ PruneError::Empty { .. }) => {
            return match keeps_nothing(path, data, &rules, &args.keep) {
                Some(advice) => fail(&advice),
                None => fail(&e),
            };
        }
        Err(e) => return fail(&e),
    };
    let (file_cut, cut, shrunk, reason) = match choose_mode(path, data, &kind, &pruned, args.mode) {
        Ok(chosen) => chosen,
        Err(e) => return fail(&e),
    };
    // Borrowed pieces only: cheap to plan even for a dry run's sizes.
    let plan = match (&cut, &file_cut) {
        (Some((_, c)), _) => c.output_plan(data, &pruned),
        (None, Some(c)) => c.output_plan(data, &pruned),
        // A PE image's checksum and a COFF object's section checksums
        // are recomputed.
        (None, None) => files::zero_output_plan(data, &kind, &pruned),
    };
    let written = Written {
        cut: cut.as_ref().map(|(_, c)| c),
        file_cut: file_cut.as_ref(),
        shrunk,
        reason: &reason,
        input_size: data.len() as u64,
        output_size: plan.len(),
    };
    keep_notes(argv0, &rules.keep, &pruned);
    let Some(out_path) = args.output.as_deref().filter(|_| !args.dry_run) else {
        report(path, &kind, &pruned, args.json, true, &written);
        return 0;
    };
    let mut outputs = offload_io::Outputs::new();
    let staged = match early {
        Some(HostCopy { staged, zeroed }) if cut.is_none() && copy_fits(&kind, &pruned, &zeroed, &plan, data) => {
            outputs.adopt(staged);
            outputs.fill_zeroed(0, &plan, &zeroed, &[&input])
        }
        _ => outputs.stage(out_path, &plan, &[&input]),
    };
    if let Err(e) = staged {
        return fail(&e);
    }
    if kind.in_place() && cut.is_none() && file_cut.is_none() {
        let freed = pruned.units.iter().filter(|u| u.changed());
        outputs.punch_holes(0, freed.map(|u| (u.unit.offset + u.new_used, u.unit.extent - u.new_used)));
    }
    if args.verify {
        let check = outputs.check_staged(0, |written| {
            match (&cut, &file_cut) {
                (Some((map, c)), _) => prune::verify_cut(written, data, map, &pruned, c),
                (None, Some(c)) => c.verify(written, data, &pruned),
                (None, None) => files::verify_file(written, data, &kind, &pruned),
            }
            .map_err(|e| e.to_string())
        });
        if let Err(e) = check {
            return fail(&e);
        }
    }
    if let Err(e) = outputs.commit() {
        return fail(&e);
    }
    keep_mode(path, out_path);
    if cut.is_some() {
        warn_cut(out_path);
    }
    if let Input::Pe(prune::files::PeInput { certificate: Some(c), .. }) = &kind {
        eprintln!(
            "warning: {out_path}: the Authenticode signature of {path} ({} bytes of certificate table) was removed: pruning changes the signed bytes; sign the output again if Windows must verify it",
            c.size
        );
    }
    // With `-o -` the pruned file is standard output: no report there.
    if out_path != "-" {
        report(path, &kind, &pruned, args.json, false, &written);
    }
    0
}

/// The cut of an object, archive or PE image.
type FileCutChoice = Option<FileCut>;
/// The cut of a linked HIP or CUDA binary, with the map it was planned on.
type LinkedCut = Option<(offload_inspect::layout::FileMap, CutPlan)>;

/// The mode of the output: with `--mode` the one asked for (an error where
/// cut cannot be done); without it the smallest output the file allows,
/// cut where it applies and zero elsewhere, as packages and folders are
/// pruned (docs/guide/pruning.md, "Which mode"). Returns the cut of a
/// file or of a linked binary (neither: zero mode), whether the output
/// shrinks anyway (a bundle, `.fatbin` or fat object rebuilt without the
/// dropped entries, counted as cut), and the reason for the report.
fn choose_mode(
    path: &str,
    data: &[u8],
    kind: &Input,
    pruned: &Pruned,
    mode: Option<Mode>,
) -> Result<(FileCutChoice, LinkedCut, bool, String), String> {
    if mode == Some(Mode::Zero) {
        return Ok((None, None, false, "--mode zero".into()));
    }
    let strict = mode == Some(Mode::Cut);
    // Cut refused: an error with --mode cut, zero mode (and why) without.
    let refused = |why: String| if strict { Err(why) } else { Ok((None, None, false, format!("zero: {why}"))) };
    match cut_file::plan_file_cut(data, kind, pruned) {
        Ok(Some(c)) => {
            let why = match kind {
                Input::Pe(_) => "a PE image: the dropped code is cut out",
                _ => "a relocatable object or archive: the dropped code is cut out",
            };
            return Ok((Some(c), None, false, format!("cut: {why}")));
        }
        Ok(None) => {}
        Err(e) if strict => return Err(e.to_string()),
        Err(e) => return refused(format!("cut refused ({e})")),
    }
    if !kind.in_place() {
        return Ok((
            None,
            None,
            true,
            "cut: nothing refers to it by address: rewritten without the dropped entries".into(),
        ));
    }
    let map = match kind {
        Input::Hip(map) => map.clone(),
        Input::Cuda => match prune::cuda::linked_map(data, pruned) {
            Ok(map) => map,
            Err(e) if strict => return Err(e.to_string()),
            Err(e) => return refused(format!("cut refused ({e})")),
        },
        _ => {
            let what = kind.name();
            return refused(match strict {
                true => format!(
                    "--mode cut rewrites linked HIP and CUDA host binaries, relocatable objects and archives only (this is a {what}); zero mode prunes it"
                ),
                false => format!("cut does not apply to a {what}"),
            });
        }
    };
    match prune::plan_cut(data, &map, pruned) {
        Ok(Cut::Planned(c)) => {
            Ok((None, Some((map, c)), false, "cut: a linked binary: the freed pages are cut out".into()))
        }
        Ok(Cut::TooSmall { saves, minimum }) => {
            if strict {
                eprintln!(
                    "note: {path}: cutting would remove only {saves} bytes (less than {minimum}); written in zero mode"
                );
            }
            let reason = match pruned.changed() {
                0 => "zero: nothing dropped, nothing to cut".to_string(),
                _ => format!("zero: cutting would save only {saves} bytes (under {minimum})"),
            };
            Ok((None, None, false, reason))
        }
        Err(e) if strict => Err(e.to_string()),
        Err(e) => refused(format!("cut refused ({e})")),
    }
}

/// The warning every cut output gets.
pub(crate) fn warn_cut(out_path: &str) {
    eprintln!(
        "warning: {out_path}: cut mode split a segment and moved the program headers: do not run GNU strip or objcopy on it (they corrupt such files); llvm-strip and llvm-objcopy are fine, and --mode zero keeps the layout"
    );
}

/// An output staged ahead of the plan: the input with the `zeroed` ranges
/// (its fat binary sections) as zeros.
struct HostCopy {
    staged: offload_io::StagedOutput,
    zeroed: Vec<(u64, u64)>,
}

/// Plans the prune of `data`; meanwhile, when an output path is given and
/// the input is an ELF file with fat binary sections, a second thread
/// stages a copy of the input with those sections zeroed. Zero mode keeps
/// every other byte, and those are most of a library (400 of the 520 MB of
/// ROCm 7's XLA plug-in are host code): copied while the fat binaries are
/// rebuilt, they no longer cost time of their own. The copy is dropped
/// (leaving nothing behind) if the plan turns out not to be in place, and
/// any error in making it is left for the ordinary staging to report.
fn plan_copying_host_bytes<'a>(
    data: &'a [u8],
    rules: &Rules,
    input: &offload_io::Input,
    out_path: Option<&str>,
) -> (Result<(Input, Pruned<'a>), PruneError>, Option<HostCopy>) {
    let zeroed = out_path.map(|_| files::device_sections(data)).unwrap_or_default();
    let Some(out_path) = out_path.filter(|_| !zeroed.is_empty()) else {
        return (files::plan_file(data, rules), None);
    };
    let ranges = &zeroed;
    let (planned, staged) = std::thread::scope(|scope| {
        let copier = scope.spawn(move || {
            let mut skeleton = Plan::new();
            let mut at = 0u64;
            for &(offset, len) in ranges {
                skeleton.borrow(data.get(at as usize..offset as usize).unwrap_or(&[]));
                skeleton.zeros(len);
                at = offset + len;
            }
            skeleton.borrow(data.get(at as usize..).unwrap_or(&[]));
            offload_io::Outputs::stage_detached(out_path, &skeleton, &[input]).ok()
        });
        let planned = files::plan_file(data, rules);
        (planned, copier.join().ok().flatten())
    });
    (planned, staged.map(|staged| HostCopy { staged, zeroed }))
}

/// Whether the early copy with `zeroed` sections is the output but for
/// those sections: an in-place plan of the input's length whose rewritten
/// units all lie inside them (else the output is staged afresh).
fn copy_fits(kind: &Input, pruned: &Pruned, zeroed: &[(u64, u64)], plan: &Plan, data: &[u8]) -> bool {
    let inside = |offset: u64, len: u64| {
        zeroed.iter().any(|&(o, l)| offset >= o && offset.saturating_add(len) <= o.saturating_add(l))
    };
    kind.in_place()
        && plan.len() == data.len() as u64
        && pruned.units.iter().filter(|u| u.changed()).all(|u| inside(u.unit.offset, u.unit.extent))
}

/// Gives the output the input's permission bits: a pruned executable or
/// library must stay executable (staged outputs get the default mode).
pub(crate) fn keep_mode(input: &str, output: &str) {
    use std::os::unix::fs::PermissionsExt;
    if output == "-" || input == "-" {
        return;
    }
    let (Ok(src), Ok(dst)) = (std::fs::metadata(input), std::fs::metadata(output)) else { return };
    if dst.is_file() && src.permissions().mode() != dst.permissions().mode() {
        let _ = std::fs::set_permissions(output, std::fs::Permissions::from_mode(src.permissions().mode() & 0o7777));
    }
}
