//! `offload prune` in the hostile corpus: the clang-built HIP host binaries
//! of `offload-testkit/fixtures/prune` (GNU ld and lld, RELA and RELR,
//! non-PIE, `-fgpu-rdc` with compressed bundles, an object file), damaged
//! the corpus's usual ways plus where pruning looks: every 64-bit field of
//! the first 64 bytes of each fat binary and the fields of each wrapper
//! record. Each run of `offload prune --keep gfx90a --mode M in -o out`
//! must exit 0 with an output that is exactly what the library plans for
//! that input, re-parses, holds the kept entries byte for byte (zero mode)
//! or passes the library's cut check (cut mode), and passes `offload
//! verify`; or exit 1 with an `error:` line, leaving the pre-existing `out`
//! as it was (the corpus's own checks).

use super::{Damage, Job, Mode, OFFLOAD, damages, run_job};
use offload_format::bundle::{binary, compressed};
use offload_inspect::layout::{FileMap, UnitKind};
use offload_rewrite::prune;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// The modes to prune in.
pub const PRUNE_MODES: [&str; 2] = ["zero", "cut"];

/// What every run keeps.
pub const KEEP: &str = "gfx90a";

/// The prune fixtures, by base name.
pub fn bases() -> Vec<(&'static str, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune");
    [
        ("prune: gnu_rela.so", "gnu_rela.so"),
        ("prune: lld_relr.so", "lld_relr.so"),
        ("prune: nopie_gnu", "nopie_gnu"),
        ("prune: rdc_ccob_lld.so", "rdc_ccob_lld.so"),
        ("prune: tu1.o", "tu1.o"),
    ]
    .into_iter()
    .map(|(name, file)| (name, fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))))
    .chain(
        [
            ("prune: hip_kernels.dll", "pe/hip_kernels.dll"),
            ("prune: cuda.obj", "pe/cuda.obj"),
            ("prune: hip.obj", "pe/hip.obj"),
            ("prune: kernels.lib", "pe/kernels.lib"),
        ]
        .map(|(name, file)| (name, fs::read(crate::common::fixtures().join(file)).unwrap())),
    )
    .collect()
}

/// Damages where pruning reads: the headers of the fat binaries and the
/// wrapper records.
fn targeted(data: &[u8]) -> Vec<Damage> {
    let Ok(map) = FileMap::read(data) else { return vec![] };
    let size = data.len() as u64;
    let mut out = Vec::new();
    let u64s = |at: u64, out: &mut Vec<Damage>| {
        if at + 8 <= size {
            out.extend([0u64, u64::MAX, 1 << 40, size + 1, 4096].map(|v| Damage::U64(at as usize, v)));
        }
    };
    for unit in &map.units {
        for field in (0..64).step_by(8) {
            u64s(unit.offset + field, &mut out);
        }
    }
    for w in &map.wrappers {
        out.extend([0u32, u32::MAX, 2].map(|v| Damage::U32(w.offset as usize, v)));
        out.extend([0u32, 2].map(|v| Damage::U32(w.offset as usize + 4, v)));
        u64s(w.offset + 8, &mut out);
    }
    out
}

/// Every run: a quarter of the corpus's usual damages (the ELF files are
/// large for it) and every targeted one, in both modes.
pub fn jobs() -> Vec<Job> {
    let mut jobs = Vec::new();
    for (name, data) in bases() {
        let usual = damages(data.len()).into_iter().step_by(4);
        let all: Vec<Damage> = usual.chain(targeted(&data)).collect();
        let data = Arc::new(data);
        for damage in all {
            for mode in PRUNE_MODES {
                jobs.push(Job {
                    base: name.to_string(),
                    data: data.clone(),
                    damage,
                    what: None,
                    mode: Mode::Prune(mode),
                });
            }
        }
    }
    jobs
}

/// The checks of a cut-mode run that exited 0: the output is the planned
/// cut (or, where cutting gains too little, the zero-mode output), passes
/// the library's own check of it, and `offload verify`.
fn check_cut_success(work: &Path) -> Result<(), String> {
    use offload_rewrite::prune::{Cut, cut_file, files};
    let input = fs::read(work.join("in")).map_err(|e| e.to_string())?;
    let output = fs::read(work.join("out")).map_err(|e| format!("no output: {e}"))?;
    let rules = prune::Rules { keep: vec![prune::parse_target(KEEP).unwrap()], ..Default::default() };
    let (kind, pruned) =
        files::plan_file(&input, &rules).map_err(|e| format!("pruned an input the library refuses: {e}"))?;
    let refused = |e: prune::PruneError| format!("cut an input the library refuses to cut: {e}");
    let checked = if let Some(cut) = cut_file::plan_file_cut(&input, &kind, &pruned).map_err(refused)? {
        (output == cut.output_plan(&input, &pruned).to_vec()).then(|| cut.verify(&output, &input, &pruned))
    } else if let files::Input::Hip(map) = &kind {
        match prune::plan_cut(&input, map, &pruned).map_err(refused)? {
            Cut::Planned(cut) => (output == cut.output_plan(&input, &pruned).to_vec())
                .then(|| prune::verify_cut(&output, &input, map, &pruned, &cut)),
            Cut::TooSmall { .. } => (output == pruned.output_plan(&input).to_vec())
                .then(|| files::verify_file(&output, &input, &kind, &pruned)),
        }
    } else {
        return Err(format!("cut a {} the library does not cut", kind.name()));
    };
    match checked {
        None => return Err("the output is not the planned one".into()),
        Some(Err(e)) => return Err(format!("the output fails the library's check: {e}")),
        Some(Ok(())) => {}
    }
    let verify = Command::new(OFFLOAD).args(["verify", "out"]).current_dir(work).output().map_err(|e| e.to_string())?;
    if !verify.status.success() {
        return Err(format!("offload verify fails the output: {}", String::from_utf8_lossy(&verify.stdout)));
    }
    Ok(())
}

/// The checks of a zero-mode run that exited 0, on the input and output
/// it left in `work`.
fn check_success(work: &Path) -> Result<(), String> {
    let input = fs::read(work.join("in")).map_err(|e| e.to_string())?;
    let output = fs::read(work.join("out")).map_err(|e| format!("no output: {e}"))?;
    if offload_format::coff::pe::is_pe(&input) {
        return check_pe_success(work, &input, &output);
    }
    if offload_format::coff::is_object(&input) || input.starts_with(b"!<arch>\n") {
        return check_file_success(work, &input, &output);
    }
    let map = FileMap::read(&input).map_err(|e| format!("pruned an input with no map: {e}"))?;
    let rules = prune::Rules { keep: vec![prune::parse_target(KEEP).unwrap()], ..Default::default() };
    let pruned = prune::plan(&input, &map, &rules).map_err(|e| format!("pruned an input the library refuses: {e}"))?;
    if output != pruned.output_plan(&input).to_vec() {
        return Err("the output is not the planned one".into());
    }
    let again = FileMap::read(&output).map_err(|e| format!("the output does not re-parse: {e}"))?;
    if again.units.len() != map.units.len() {
        return Err(format!("the output has {} fat binaries, the input {}", again.units.len(), map.units.len()));
    }
    for change in pruned.units.iter().filter(|c| c.changed()) {
        let at = change.unit.offset as usize;
        let old = decode(&input[at..at + change.unit.used as usize], change.unit.kind)?;
        let new = decode(&output[at..at + change.new_used as usize], change.unit.kind)?;
        let read = |b: &[u8]| -> Result<Vec<Entry>, String> {
            let list = binary::read(b).map_err(|e| e.to_string())?.unwrap_or_default();
            Ok(list.iter().map(|e| (e.id.to_vec(), e.payload.to_vec())).collect())
        };
        let (old, new) = (read(&old)?, read(&new)?);
        let kept: Vec<_> = old.into_iter().zip(&change.entries).filter(|(_, f)| f.kept).map(|(e, _)| e).collect();
        if new != kept {
            return Err(format!("the fat binary at {at:#x} does not hold exactly the kept entries"));
        }
    }
    let verify = Command::new(OFFLOAD).args(["verify", "out"]).current_dir(work).output().map_err(|e| e.to_string())?;
    if !verify.status.success() {
        return Err(format!("offload verify fails the output: {}", String::from_utf8_lossy(&verify.stdout)));
    }
    Ok(())
}

/// The checks of a zero-mode run on a PE image that exited 0: the output
/// is the library's plan (checksum fixed) and passes its check and
/// `offload verify`.
fn check_pe_success(work: &Path, input: &[u8], output: &[u8]) -> Result<(), String> {
    use offload_rewrite::prune::{files, pe};
    let rules = prune::Rules { keep: vec![prune::parse_target(KEEP).unwrap()], ..Default::default() };
    let (kind, pruned) =
        files::plan_file(input, &rules).map_err(|e| format!("pruned an input the library refuses: {e}"))?;
    let files::Input::Pe(pe_input) = &kind else { return Err(format!("a PE image read as a {}", kind.name())) };
    if output != pe::output_plan(input, pe_input, &pruned).to_vec() {
        return Err("the output is not the planned one".into());
    }
    files::verify_file(output, input, &kind, &pruned)
        .map_err(|e| format!("the output fails the library's check: {e}"))?;
    let verify = Command::new(OFFLOAD).args(["verify", "out"]).current_dir(work).output().map_err(|e| e.to_string())?;
    if !verify.status.success() {
        return Err(format!("offload verify fails the output: {}", String::from_utf8_lossy(&verify.stdout)));
    }
    Ok(())
}

/// A bundle entry's ID and payload.
type Entry = (Vec<u8>, Vec<u8>);

fn decode(bytes: &[u8], kind: UnitKind) -> Result<Vec<u8>, String> {
    match kind {
        UnitKind::Bundle => Ok(bytes.to_vec()),
        UnitKind::Compressed { .. } => {
            let blob = compressed::read_blob(bytes).map_err(|e| e.to_string())?;
            compressed::decompress(&blob).map_err(|e| e.to_string())
        }
        UnitKind::Cuda | UnitKind::Object => Err(format!("{kind:?} is not a HIP fat binary")),
    }
}

/// Runs one job; a success is checked further.
pub fn run(job: &Job, work: &Path, logs: &Path) -> Result<i32, String> {
    let code = run_job(job, work, logs, &[])?;
    if code == 0 {
        let mode = if let super::Mode::Prune(mode) = job.mode { mode } else { "?" };
        let checked = if mode == "cut" { check_cut_success(work) } else { check_success(work) };
        checked
            .map_err(|problem| format!("{} / {} / prune --mode {mode}: {problem}", job.base, job.damage.describe()))?;
    }
    Ok(code)
}

/// Zero mode on a COFF object or a `.lib`: the planned output (section
/// checksums rewritten), passing the library's check and `offload verify`.
fn check_file_success(work: &Path, input: &[u8], output: &[u8]) -> Result<(), String> {
    use offload_rewrite::prune::files;
    let rules = prune::Rules { keep: vec![prune::parse_target(KEEP).unwrap()], ..Default::default() };
    let (kind, pruned) =
        files::plan_file(input, &rules).map_err(|e| format!("pruned an input the library refuses: {e}"))?;
    if output != files::zero_output_plan(input, &kind, &pruned).to_vec() {
        return Err(format!("the output of a {} is not the planned one", kind.name()));
    }
    files::verify_file(output, input, &kind, &pruned)
        .map_err(|e| format!("the output fails the library's check: {e}"))?;
    // A `.lib` cut short before its first member with device code is
    // copied as it is: `offload verify` rightly finds no code object there.
    if pruned.units.is_empty() {
        return Ok(());
    }
    let verify = Command::new(OFFLOAD).args(["verify", "out"]).current_dir(work).output().map_err(|e| e.to_string())?;
    if !verify.status.success() {
        return Err(format!("offload verify fails the output: {}", String::from_utf8_lossy(&verify.stdout)));
    }
    Ok(())
}
