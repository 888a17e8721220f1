//! `offload replace`: puts a new code object in place of one entry of a
//! HIP host binary or bundle file, of a CUDA fat binary or of an OpenMP
//! image (the library's
//! `replace` module does the work). The output is checked from its own bytes before it replaces
//! anything, and written atomically; the input is never modified.

use crate::cli::{Context, RewriteOutput};
use crate::output;
use clap::Args;
use offload_inspect::layout::UnitKind;
use offload_inspect::{self, Options, Severity};
use offload_rewrite::replace::{self, InputKind, Placement, Replaced};

/// `replace --json`: the report (key order is the schema's).
#[derive(serde::Serialize)]
struct Report<'a> {
    file: &'a str,
    member: Option<&'a str>,
    dry_run: bool,
    entry: &'a str,
    unit: usize,
    format: String,
    placement: &'static str,
    old_object_size: u64,
    new_object_size: u64,
    unit_offset: u64,
    new_unit_offset: u64,
    old_unit_size: u64,
    new_unit_size: u64,
    output_size: u64,
    fatbin_offset: Option<u64>,
    fatbin_address: Option<u64>,
    processor: &'a str,
    old_e_flags: String,
    new_e_flags: String,
    symbols: &'a [String],
    stored_uncompressed: bool,
}

#[derive(Args, Debug)]
pub struct ReplaceCli {
    /// The entry to replace: its bundle entry ID or target ID (gfx90a:xnack+)
    #[arg(long, value_name = "ID")]
    entry: String,
    /// The fat binary, where several hold the entry (0-based, in file order)
    #[arg(long, value_name = "N")]
    unit: Option<usize>,
    /// In a static archive, the member to replace in (default: the one
    /// member holding the entry)
    #[arg(long, value_name = "NAME")]
    member: Option<String>,
    /// The new code object (an AMDGPU ELF file, an NVIDIA cubin or PTX)
    #[arg(long = "with", value_name = "CODE-OBJECT")]
    with: String,
    #[command(flatten)]
    out: RewriteOutput,
    /// The HIP, CUDA or OpenMP host binary (executable, shared library or object),
    /// bundle, .fatbin file or static archive
    #[arg(value_name = "IN")]
    input: String,
}

/// `offload replace`'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaceArgs {
    pub entry: String,
    pub unit: Option<usize>,
    pub member: Option<String>,
    pub with: String,
    pub dry_run: bool,
    pub json: bool,
    pub verify: bool,
    pub input: String,
    pub output: Option<String>,
}

impl ReplaceCli {
    /// The options with every default applied.
    pub fn args(&self) -> ReplaceArgs {
        ReplaceArgs {
            entry: self.entry.clone(),
            unit: self.unit,
            member: self.member.clone(),
            with: self.with.clone(),
            dry_run: self.out.dry_run,
            json: self.out.json,
            verify: !self.out.no_verify,
            input: self.input.clone(),
            output: self.out.output.clone(),
        }
    }

    pub fn run(&self, ctx: &Context) -> u8 {
        run(&ctx.argv0, &self.args())
    }
}

fn format_name(r: &Replaced) -> String {
    if r.input == InputKind::OpenMp {
        return "offload-binary".into();
    }
    match (r.unit.kind, r.new_version) {
        (UnitKind::Bundle, _) => "bundle".into(),
        (UnitKind::Compressed { version: old }, Some(new)) if new != old => format!("compressed v{old}->v{new}"),
        (UnitKind::Compressed { version }, _) => format!("compressed v{version}"),
        (UnitKind::Cuda, _) => "cuda".into(),
        (UnitKind::Object, _) => "object".into(),
    }
}

fn report(path: &str, r: &Replaced, json: bool, dry_run: bool) {
    let (fatbin_offset, fatbin_address) = match r.placement {
        Placement::NewSegment { offset, addr, .. } => (Some(offset), Some(addr)),
        _ => (None, None),
    };
    let placement = match r.placement {
        Placement::InPlace => "in-place",
        Placement::NewSegment { .. } => "new-segment",
        Placement::Rewritten => "rewritten",
        Placement::MovedSection { .. } => "moved-section",
    };
    if fatbin_offset.is_some() {
        eprintln!(
            "warning: {path}: the output has a new segment and a moved program header table; run llvm-strip/llvm-objcopy on it, not GNU strip/objcopy"
        );
    }
    let new_unit_offset = r.new_unit_offsets.get(r.unit_index).copied().unwrap_or(r.unit.offset);
    if json {
        let report = Report {
            file: path,
            member: r.member.as_ref().map(|m| m.name.as_str()),
            dry_run,
            entry: &r.entry_id,
            unit: r.unit_index,
            format: format_name(r),
            placement,
            old_object_size: r.old_size,
            new_object_size: r.new_size,
            unit_offset: r.unit.offset,
            new_unit_offset,
            old_unit_size: r.unit.used,
            new_unit_size: r.new_unit_size,
            output_size: r.output().len(),
            fatbin_offset,
            fatbin_address,
            processor: &r.object.processor,
            old_e_flags: format!("{:#x}", r.object.old_flags),
            new_e_flags: format!("{:#x}", r.object.new_flags),
            symbols: &r.object.symbols,
            stored_uncompressed: r.stored_uncompressed,
        };
        println!("{}", output::json(&report));
        return;
    }
    let verb = if dry_run { "would replace" } else { "replaced" };
    let member = r.member.as_ref().map(|m| format!(" in member {}", m.name)).unwrap_or_default();
    println!(
        "{path}: {verb} entry {}{member} of fat binary {} ({}, offset {:#x}): code object {} -> {} bytes, fat binary {} -> {} bytes",
        r.entry_id,
        r.unit_index,
        format_name(r),
        r.unit.offset,
        r.old_size,
        r.new_size,
        r.unit.used,
        r.new_unit_size
    );
    let (cuda, ptx) = (r.unit.kind == UnitKind::Cuda, r.object.processor.starts_with("compute_"));
    let flags =
        if ptx { String::new() } else { format!(" (e_flags {:#x} -> {:#x})", r.object.old_flags, r.object.new_flags) };
    let symbols = match (cuda, ptx) {
        _ if r.input == InputKind::OpenMp && r.object.processor == "x86_64" => "functions and objects defined",
        (_, true) => ".entry kernels declared",
        (true, false) => "kernels and variables defined",
        _ => "kernel descriptors and variables defined",
    };
    println!("  target {}{flags}; {} {symbols} by both", r.object.processor, r.object.symbols.len());
    if r.stored_uncompressed {
        println!("  the entry was compressed; the new code object is stored uncompressed");
    }
    match r.placement {
        Placement::InPlace => println!("  written in place; the file keeps its size"),
        Placement::MovedSection { offset } => println!(
            "  it did not fit in place: its section moved to the end of the object (offset {offset:#x}); the file is {} bytes",
            r.output().len()
        ),
        Placement::Rewritten if cuda => println!("  the .fatbin file is rewritten ({} bytes)", r.output().len()),
        Placement::Rewritten => println!("  the bundle file is rebuilt ({} bytes)", r.output().len()),
        Placement::NewSegment { offset, addr, .. } => {
            println!(
                "  it did not fit in place: {} moved to a new segment at offset {offset:#x} (address {addr:#x}); the file is {} bytes",
                if cuda { ".nv_fatbin" } else { ".hip_fatbin" },
                r.output().len()
            );
        }
    }
}

/// What `offload verify` says of the output: an error it finds that it
/// does not find in the input stops the command.
fn deep_check(output: &[u8], input: &[u8], path: &str) -> Result<(), String> {
    let deep = Options { deep: true, ..Default::default() };
    let errors = |inv: &offload_inspect::Inventory| {
        inv.diagnostics.iter().filter(|d| d.severity == Severity::Error).map(|d| d.message.clone()).collect::<Vec<_>>()
    };
    let after = errors(&offload_inspect::scan(output, path, &deep));
    if after.is_empty() {
        return Ok(());
    }
    let before = errors(&offload_inspect::scan(input, path, &deep));
    match after.iter().find(|e| !before.contains(e)) {
        Some(e) => Err(format!("offload verify finds an error in the output: {e}")),
        None => Ok(()),
    }
}

fn open(argv0: &str, path: &str) -> Result<offload_io::Input, u8> {
    offload_io::Input::open(path).map_err(|e| {
        eprintln!("{argv0}: error: '{path}': {}", offload_io::error_text(&e));
        1
    })
}

/// Runs the command; returns the exit status.
fn run(argv0: &str, args: &ReplaceArgs) -> u8 {
    let path = &args.input;
    let (input, object) = match (open(argv0, path), open(argv0, &args.with)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let (data, new) = (input.bytes(), object.bytes());
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("{argv0}: error: {path}: {e}");
        1
    };
    let replaced = match replace::plan_in(data, new, &args.entry, args.unit, args.member.as_deref()) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let Some(out_path) = args.output.as_deref().filter(|_| !args.dry_run) else {
        report(path, &replaced, args.json, true);
        return 0;
    };
    let mut outputs = offload_io::Outputs::new();
    if let Err(e) = outputs.stage(out_path, replaced.output(), &[&input, &object]) {
        return fail(&e);
    }
    outputs.punch_holes(0, replaced.zeroed.iter().copied());
    if args.verify {
        let check = outputs.check_staged(0, |written| {
            replace::verify(written, data, &replaced, new).map_err(|e| e.to_string())?;
            deep_check(written, data, path)
        });
        if let Err(e) = check {
            return fail(&e);
        }
    }
    if let Err(e) = outputs.commit() {
        return fail(&e);
    }
    super::prune::keep_mode(path, out_path);
    // With `-o -` the output is standard output: no report there.
    if out_path != "-" {
        report(path, &replaced, args.json, false);
    }
    0
}
