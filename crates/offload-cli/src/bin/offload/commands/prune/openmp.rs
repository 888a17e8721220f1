//! `offload prune` on an OpenMP offloading program or library (clang's new
//! driver): drops whole device images in zero mode, or in cut mode (the
//! default where it applies) packs the kept ones and cuts the freed pages
//! out (the library's
//! `prune::openmp` does the work). Like the HIP path, the output is
//! checked from its own bytes before it replaces anything, and written
//! atomically.

use super::{Mode, PruneArgs};
use crate::output;
use offload_inspect::layout::openmp::OpenMpMap;
use offload_rewrite::prune::openmp::{self, Edit, OpenMpCut, OpenMpPruned};
use offload_rewrite::prune::{Cut, CutPlan, Rules};

/// `prune --json` for OpenMP files (key order is the schema's).
#[derive(serde::Serialize)]
struct Report<'a> {
    file: &'a str,
    dry_run: bool,
    format: &'static str,
    images: Vec<ImageReport<'a>>,
    descriptors: Vec<DescriptorReport>,
    unreferenced: usize,
    dropped_bytes: u64,
    mode: &'static str,
    mode_reason: &'a str,
    input_size: u64,
    output_size: u64,
    saved_bytes: i64,
}

#[derive(serde::Serialize)]
struct ImageReport<'a> {
    offset: u64,
    triple: &'a str,
    arch: &'a str,
    size: u64,
    kept: bool,
    /// Where a kept image is in the output (`null` for a dropped one).
    new_offset: Option<u64>,
}

/// What was (or would be) written, for the report.
struct Written<'c> {
    cut: Option<&'c CutPlan>,
    /// Why this mode.
    reason: &'c str,
    input_size: u64,
    output_size: u64,
}

#[derive(serde::Serialize)]
struct DescriptorReport {
    address: u64,
    old_count: u32,
    new_count: u32,
}

fn report(path: &str, pruned: &OpenMpPruned, json: bool, dry_run: bool, written: &Written) {
    if json {
        let images = pruned
            .images
            .iter()
            .enumerate()
            .map(|(i, f)| ImageReport {
                offset: f.image.offset,
                triple: &f.image.triple,
                arch: &f.image.arch,
                size: f.image.size,
                kept: f.kept,
                // Zero mode leaves a kept image where it was.
                new_offset: f
                    .kept
                    .then(|| written.cut.and_then(|c| c.unit_offsets.get(i).copied()).unwrap_or(f.image.offset)),
            })
            .collect();
        let descriptors = pruned
            .descriptors
            .iter()
            .map(|d| DescriptorReport { address: d.addr, old_count: d.old_count, new_count: d.new_count })
            .collect();
        let report = Report {
            file: path,
            dry_run,
            format: "openmp",
            images,
            descriptors,
            unreferenced: pruned.unreferenced.len(),
            dropped_bytes: pruned.dropped_bytes(),
            mode: if written.cut.is_some() { "cut" } else { "zero" },
            mode_reason: written.reason,
            input_size: written.input_size,
            output_size: written.output_size,
            saved_bytes: super::saved(written.input_size, written.output_size),
        };
        println!("{}", output::json(&report));
        return;
    }
    let rows: Vec<Vec<String>> = pruned
        .images
        .iter()
        .map(|f| {
            vec![
                format!("{:#x}", f.image.offset),
                f.image.triple.clone(),
                if f.image.arch.is_empty() { "-".into() } else { f.image.arch.clone() },
                output::size(f.image.size),
                if f.kept { "kept".into() } else { "dropped".into() },
            ]
        })
        .collect();
    if !rows.is_empty() {
        print!("{}", output::table(&["IMAGE", "TRIPLE", "ARCH", "SIZE", "FATE"], &rows));
    }
    if !pruned.unreferenced.is_empty() {
        eprintln!(
            "warning: {path}: {} OpenMP images are registered by no table this tool understands (kept)",
            pruned.unreferenced.len()
        );
    }
    let verb = if dry_run { "would drop" } else { "dropped" };
    let counts: Vec<String> =
        pruned.descriptors.iter().map(|d| format!("{} -> {}", d.old_count, d.new_count)).collect();
    let (input_size, output_size) = (written.input_size, written.output_size);
    let mut effect = super::effect(input_size, output_size);
    if written.cut.is_none() {
        effect.push_str(&format!(" ({}{} zeroed)", output::size(pruned.dropped_bytes()), output::bytes_unit()));
    }
    println!(
        "{path}: {verb} {} of {} OpenMP images; images registered: {}; {effect}; {}",
        pruned.dropped(),
        pruned.images.len(),
        if counts.is_empty() { "none".into() } else { counts.join(", ") },
        written.reason,
    );
}

/// Runs `prune` on an OpenMP file; returns the exit status.
pub fn run(argv0: &str, args: &PruneArgs, rules: &Rules, input: &offload_io::Input) -> u8 {
    let path = &args.input;
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("{argv0}: error: {path}: {e}");
        1
    };
    let data = input.bytes();
    let map = match OpenMpMap::read(data) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let zero_mode = || openmp::plan(&map, rules);
    // Explicit --mode zero, else cut where it applies: an error with
    // --mode cut, zero mode (and why) without.
    let planned = match args.mode {
        Some(Mode::Zero) => zero_mode().map(|p| (p, None, "--mode zero".to_string())),
        mode => match openmp::plan_cut(data, &map, rules) {
            Ok(OpenMpCut { pruned, cut: Cut::Planned(c) }) => {
                Ok((pruned, Some(c), "cut: a linked binary: the freed pages are cut out".to_string()))
            }
            Ok(OpenMpCut { cut: Cut::TooSmall { saves, minimum }, .. }) => {
                if mode == Some(Mode::Cut) {
                    eprintln!(
                        "note: {path}: cutting would remove only {saves} bytes (less than {minimum}); written in zero mode"
                    );
                }
                zero_mode().map(|p| (p, None, format!("zero: cutting would save only {saves} bytes (under {minimum})")))
            }
            Err(e) if mode == Some(Mode::Cut) => Err(e),
            Err(e) => zero_mode().map(|p| (p, None, format!("zero: cut refused ({e})"))),
        },
    };
    let (pruned, cut, reason) = match planned {
        Ok(p) => p,
        // `--keep` matching no image anywhere: name what the file holds
        // rather than advise `--allow-empty`, which would strip it all.
        Err(e @ openmp::OpenMpPruneError::Empty { .. }) => {
            let alone = !args.keep.is_empty() && rules.drop.is_empty() && !rules.allow_empty;
            let none_kept = !map.images.iter().any(|im| rules.keeps_image(&im.triple, &im.arch));
            let mut held: Vec<&str> = Vec::new();
            for im in &map.images {
                let target = if im.arch.is_empty() { im.triple.as_str() } else { im.arch.as_str() };
                if !held.contains(&target) {
                    held.push(target);
                }
            }
            let advice = if alone && none_kept { super::nothing_kept_advice(path, &args.keep, held) } else { None };
            return match advice {
                Some(advice) => fail(&advice),
                None => fail(&e),
            };
        }
        Err(e) => return fail(&e),
    };
    let plan = match &cut {
        Some(c) => openmp::cut_output_plan(c, data, &pruned),
        None => pruned.output_plan(data),
    };
    let written =
        Written { cut: cut.as_ref(), reason: &reason, input_size: data.len() as u64, output_size: plan.len() };
    let Some(out_path) = args.output.as_deref().filter(|_| !args.dry_run) else {
        report(path, &pruned, args.json, true, &written);
        return 0;
    };
    let mut outputs = offload_io::Outputs::new();
    if let Err(e) = outputs.stage(out_path, &plan, &[input]) {
        return fail(&e);
    }
    if cut.is_none() {
        let zeroed = pruned.edits.iter().filter_map(|(offset, edit)| match edit {
            Edit::Zeros(len) => Some((*offset, *len)),
            _ => None,
        });
        outputs.punch_holes(0, zeroed);
    }
    if args.verify {
        let check = outputs.check_staged(0, |written| {
            match &cut {
                Some(c) => openmp::verify_cut(written, data, &map, &pruned, c),
                None => openmp::verify(written, data, &map, &pruned),
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
    super::keep_mode(path, out_path);
    if cut.is_some() {
        super::warn_cut(out_path);
    }
    if out_path != "-" {
        report(path, &pruned, args.json, false, &written);
    }
    0
}
