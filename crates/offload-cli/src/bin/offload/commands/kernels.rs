//! `offload kernels`: one row per kernel per code object, with its
//! registers, memory, launch limits and an occupancy estimate (the records
//! are `offload_inspect::kernels::rows`; JSON schema in
//! docs/reference/kernels-json.md).

use crate::cli::{Context, GPU_HELP, GPU_SHORT, Kind, parse_gpu};
use crate::commands::select::kpack_select;
use crate::inputs;
use crate::output;
use clap::Args;
use offload_format::kpack::SearchOrder;
use offload_inspect::Options;
use offload_inspect::kernels::{KernelRow, RowKind, kernels, rows};
use offload_inspect::select::Gpu;
use serde::Serialize;

/// Widest table without `--wide`.
const WIDTH: usize = 100;

#[derive(Args, Debug)]
#[command(after_help = "\
Occupancy (OCC) is an estimate: waves per SIMD (AMDGPU) or warps per SM
(CUDA) at the kernel's largest work-group size, limited by registers,
LDS/shared memory and work-group slots (docs/formats/occupancy.md).

Examples:
  offload kernels libfoo.so
  offload kernels --gpu gfx90a:xnack- --wide libfoo.so
  offload kernels --json torch-2.5.0-cp312-cp312-linux_x86_64.whl")]
pub struct KernelsArgs {
    /// Only the code objects this GPU would load (the rules of `offload select`)
    #[arg(long, value_parser = parse_gpu, help = GPU_SHORT, long_help = GPU_HELP)]
    pub gpu: Option<Gpu>,
    /// With --gpu: the runtime that loads the code [default: cuda for an NVIDIA GPU, else hip]
    #[arg(long, value_enum, requires = "gpu")]
    pub kind: Option<Kind>,
    /// Only code objects for this target (gfx90a matches gfx90a:xnack+ too; sm_80); repeatable
    #[arg(long, value_name = "TARGET-ID")]
    pub target: Vec<String>,
    /// Show names as stored (mangled) instead of demangled
    #[arg(long)]
    pub mangled: bool,
    /// Every column, names not shortened
    #[arg(long)]
    pub wide: bool,
    /// Machine-readable output (schema in docs/reference/kernels-json.md)
    #[arg(long)]
    pub json: bool,
    /// Files, packages, folders or kpack archives (- for standard input)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
}

/// One row of the `--json` document.
#[derive(Serialize)]
struct JsonRow<'a> {
    file: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri: Option<String>,
    #[serde(flatten)]
    row: &'a KernelRow,
}

#[derive(Serialize)]
struct Unreadable {
    file: String,
    location: String,
    error: String,
}

/// What one item gave, made on a worker thread and printed on the main one.
#[derive(Default)]
struct ItemKernels {
    /// Diagnostics and errors, one per line, to print to standard error.
    messages: String,
    objects: usize,
    status: u8,
    rows: Vec<(String, Option<String>, KernelRow)>,
    unreadable: Vec<Unreadable>,
    /// Fat binaries nothing in which loads on `--gpu` (printed per file,
    /// identical errors collapsed, once every item of the file is in).
    failed: crate::commands::select::FailedUnits,
}

#[derive(Serialize)]
struct Document<'a> {
    kernels: Vec<JsonRow<'a>>,
    unreadable: Vec<Unreadable>,
}

/// Whether `target` (a row's) is named by `wanted` (exactly, or its
/// processor without features).
fn target_matches(target: &str, wanted: &[String]) -> bool {
    wanted.is_empty()
        || wanted.iter().any(|w| w == target || (!w.contains(':') && target.split(':').next() == Some(w.as_str())))
}

impl KernelsArgs {
    pub fn run(&self, ctx: &Context) -> u8 {
        let argv0 = &ctx.argv0;
        let mut status = 0;
        let mut all: Vec<(String, Option<String>, KernelRow)> = Vec::new();
        let mut unreadable = Vec::new();
        // Files are read on every core; what each item gives is printed and
        // kept here in the order of the command line (inputs::each_parallel).
        let found = inputs::each_parallel(&self.files, !self.json, &|item| self.item(argv0, item));
        for (path, found) in self.files.iter().zip(found) {
            let mut objects = 0;
            let mut failed = crate::commands::select::FailedUnits::default();
            for outcome in found.results {
                eprint!("{}", outcome.messages);
                objects += outcome.objects;
                status |= outcome.status;
                all.extend(outcome.rows);
                unreadable.extend(outcome.unreadable);
                failed.absorb(outcome.failed);
            }
            if let Some(gpu) = &self.gpu {
                failed.print(argv0, gpu, crate::cli::runtime(self.kind, Some(gpu)));
            }
            status |= inputs::report(argv0, &found.problems);
            if objects == 0 && !inputs::has_errors(&found.problems) {
                eprintln!("{argv0}: error: {path}: no offload code objects found");
                status = 1;
            }
        }
        all.sort_by(|a, b| {
            (&a.2.target, a.2.kind, &a.2.demangled, &a.0, &a.2.location).cmp(&(
                &b.2.target,
                b.2.kind,
                &b.2.demangled,
                &b.0,
                &b.2.location,
            ))
        });
        if self.json {
            let doc = Document {
                kernels: all.iter().map(|(file, uri, row)| JsonRow { file, uri: uri.clone(), row }).collect(),
                unreadable,
            };
            if let Err(code) = crate::output::print_pretty(argv0, &doc) {
                return code;
            }
        } else if !all.is_empty() {
            print!("{}", self.table(&all));
        }
        status
    }

    /// The kernels of one item, with the messages to print for it (on a
    /// worker thread: nothing is printed here).
    fn item(&self, argv0: &str, item: &inputs::Item<'_>) -> ItemKernels {
        use std::fmt::Write;
        let mut out = ItemKernels::default();
        let inv = item.scan(&Options::default());
        out.messages = inputs::diagnostics_text(argv0, item.file, &inv);
        out.objects = inv.objects.len();
        if inv.has_errors() {
            out.status = 1;
        }
        let chosen = self.gpu.as_ref().map(|gpu| {
            let runtime = crate::cli::runtime(self.kind, Some(gpu));
            let sel = kpack_select(&inv, gpu, runtime, SearchOrder::FallThrough);
            if out.failed.add(item.file, &inv, &sel) {
                out.status = 1;
            }
            sel.chosen
        });
        let found = kernels(&inv, 0);
        for o in &found {
            if let Err(e) = &o.result
                && chosen.as_ref().is_none_or(|c| c.contains(&o.object))
            {
                let location = inv.objects.get(o.object).map(|x| x.location.to_string()).unwrap_or_default();
                let _ = writeln!(out.messages, "{argv0}: error: {}: {location}: kernels not read: {e}", item.file);
                out.unreadable.push(Unreadable { file: item.file.to_string(), location, error: e.clone() });
                out.status = 1;
            }
        }
        for r in rows(&inv, &found) {
            if chosen.as_ref().is_some_and(|c| !c.contains(&r.object)) || !target_matches(&r.target, &self.target) {
                continue;
            }
            let uri = inv.objects.get(r.object).and_then(|o| item.record(r.object, o).uri);
            out.rows.push((item.file.to_string(), uri, r));
        }
        out
    }

    fn table(&self, all: &[(String, Option<String>, KernelRow)]) -> String {
        let name = |r: &KernelRow| if self.mangled { r.name.clone() } else { r.demangled.clone() };
        if self.wide {
            let header = [
                "FILE",
                "LOCATION",
                "KIND",
                "TARGET",
                "KERNEL",
                "VGPRS",
                "AGPRS",
                "SGPRS",
                "LDS",
                "SCRATCH",
                "DYN",
                "SPILLS",
                "WAVE",
                "MAX WG",
                "KERNARG",
                "UNIFORM",
                "COV",
                "REGS",
                "SHARED",
                "LOCAL",
                "STACK",
                "MAX THREADS",
                "MAXNREG",
                "CBANKS",
                "SM",
                "OCC",
            ];
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|(file, _, r)| {
                    let x = &r.resources;
                    vec![
                        file.clone(),
                        r.location.clone(),
                        r.kind.name().to_string(),
                        r.target.clone(),
                        name(r),
                        num(x.vgprs),
                        num(x.agprs),
                        num(x.sgprs),
                        bytes(x.lds),
                        bytes(x.scratch),
                        flag(x.dynamic_stack),
                        spills(r),
                        num(x.wavefront_size),
                        num(x.max_flat_workgroup_size),
                        bytes(x.kernarg_size),
                        flag(x.uniform_workgroup_size),
                        num(x.code_object_version.map(u64::from)),
                        num(x.registers),
                        bytes(x.shared),
                        bytes(x.local),
                        bytes(x.stack),
                        x.max_threads.or(x.reqntid).map_or_else(|| "-".into(), |[a, b, c]| format!("{a}x{b}x{c}")),
                        num(x.max_registers.map(u64::from)),
                        if x.constant_banks.is_empty() {
                            "-".into()
                        } else {
                            x.constant_banks
                                .iter()
                                .map(|c| format!("{}:{}", c.bank, c.size))
                                .collect::<Vec<_>>()
                                .join(",")
                        },
                        num(x.sm.map(u64::from)),
                        occ(r),
                    ]
                })
                .collect();
            return output::table(&header, &rows);
        }
        // Several files: which one each row comes from, first.
        let several = all.iter().any(|(f, _, _)| all.first().is_some_and(|(g, _, _)| f != g));
        let header = ["TARGET", "KERNEL", "REGS", "SGPRS", "LDS", "SCRATCH", "SPILLS", "WG", "OCC"];
        let mut rows: Vec<Vec<String>> = all
            .iter()
            .map(|(file, _, r)| {
                let x = &r.resources;
                let regs = match r.kind {
                    RowKind::Amdgpu => match (x.vgprs, x.agprs.filter(|&a| a > 0)) {
                        (Some(v), Some(a)) => format!("{v}+{a}a"),
                        (v, _) => num(v),
                    },
                    RowKind::Cuda => num(x.registers),
                    RowKind::Ptx => x.max_registers.map_or_else(|| "-".into(), |n| format!("<={n}")),
                };
                let wg = match r.kind {
                    RowKind::Amdgpu => num(x.max_flat_workgroup_size),
                    _ => x.reqntid.or(x.max_threads).map_or_else(
                        || "-".into(),
                        |[a, b, c]| (u64::from(a) * u64::from(b) * u64::from(c)).to_string(),
                    ),
                };
                let target = if r.kind == RowKind::Ptx { format!("{} ptx", r.target) } else { r.target.clone() };
                let mut row = vec![
                    target,
                    name(r),
                    regs,
                    num(x.sgprs),
                    bytes(x.lds.or(x.shared)),
                    bytes(x.scratch.or(x.local)),
                    spills(r),
                    wg,
                    occ(r),
                ];
                if several {
                    row.insert(0, file.clone());
                }
                row
            })
            .collect();
        let mut header = header.to_vec();
        if several {
            header.insert(0, "FILE");
        }
        let name_column = usize::from(several) + 1;
        // Shorten the names so that the table fits WIDTH columns.
        let mut widths = vec![0usize; header.len()];
        let head: Vec<String> = header.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&head).chain(&rows) {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let others: usize =
            widths.iter().enumerate().filter(|&(i, _)| i != name_column).map(|(_, w)| w + 2).sum::<usize>() + 2;
        let room = WIDTH.saturating_sub(others).max(16);
        for row in &mut rows {
            if let Some(n) = row.get_mut(name_column) {
                *n = shorten(n, room);
            }
        }
        output::table(&header, &rows)
    }
}

/// `text` cut to `room` characters, ending in `…` when cut.
fn shorten(text: &str, room: usize) -> String {
    if text.chars().count() <= room {
        return text.to_string();
    }
    let mut out: String = text.chars().take(room.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn num(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn flag(v: Option<bool>) -> String {
    v.map_or_else(|| "-".into(), |v| if v { "yes".into() } else { "no".into() })
}

/// A byte count: exact below 1 KiB, else KiB/MiB with one decimal.
fn bytes(v: Option<u64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v < 1024 => v.to_string(),
        Some(v) if v < 1024 * 1024 => format!("{:.1}K", v as f64 / 1024.0),
        Some(v) => format!("{:.1}M", v as f64 / (1024.0 * 1024.0)),
    }
}

/// AMDGPU: `VGPR spills/SGPR spills`; CUDA: `-` (local memory shows spills).
fn spills(r: &KernelRow) -> String {
    match (r.resources.vgpr_spills, r.resources.sgpr_spills) {
        (None, None) => "-".into(),
        (v, s) => format!("{}/{}", num(v), num(s)),
    }
}

/// `waves/max limiter`, e.g. `6/8 vgprs`.
fn occ(r: &KernelRow) -> String {
    r.occupancy.as_ref().map_or_else(|| "-".into(), |o| format!("{}/{} {}", o.waves, o.max_waves, o.limiter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(bytes(Some(1000)), "1000");
        assert_eq!(bytes(Some(65536)), "64.0K");
        assert_eq!(bytes(None), "-");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
        assert!(target_matches("gfx90a:xnack+", &["gfx90a".into()]));
        assert!(!target_matches("gfx90a:xnack+", &["gfx90a:xnack-".into()]));
        assert!(target_matches("sm_80", &[]));
    }
}
