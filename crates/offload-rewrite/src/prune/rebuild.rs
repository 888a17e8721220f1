//! Rebuilding the fat binaries that lose entries: the expensive part of a
//! prune (decompressing, recompressing), run over several cores.
//!
//! Each worker takes the next unit, keeps one decompression buffer from
//! unit to unit (no fresh pages to fault in for each), and drops nothing
//! but the new bytes into the result: at most one decompressed unit per
//! worker is alive, and the worker count is lowered so that the largest
//! units of all workers together fit in the decoder's memory budget
//! ([`offload_inspect::decode::MEMORY_BUDGET`]).
//!
//! A recompressed unit is checked here, while the input's decompressed
//! bundle is still at hand: the new bytes are decompressed again and must
//! give exactly the rebuilt bundle, under a header holding its hash and size, whose entries must be
//! exactly the kept entries of the input. The output check
//! ([`super::verify`]) then only compares the written bytes with these
//! checked ones, instead of decompressing the whole input a second time.

use super::{PruneError, UnitChange, alignment, unit_bytes};
use offload_format::bundle::md5_pair::truncated_md5_pair;
use offload_format::bundle::{binary, compressed};
use offload_format::plan::Plan;
use offload_inspect::decode::{decompress_into, run_jobs, worker_count};
use offload_inspect::layout::{FatBinary, UnitKind};

/// A unit's new bytes (before the zero fill) and, for a compressed unit,
/// the format version written.
pub(super) struct Rebuilt<'a> {
    pub plan: Plan<'a>,
    pub version: Option<u16>,
}

/// The per-worker buffers: the input unit decompressed, and a piece of the
/// new unit decompressed again for the round-trip check.
#[derive(Default)]
struct Buffers {
    input: Vec<u8>,
    piece: Vec<u8>,
}

/// Rebuilds `units[i]` with the kept entries `keep` for every `(i, keep)`
/// of `work`; the results come back in `work`'s order.
pub(super) fn all<'a>(
    data: &'a [u8],
    units: &[UnitChange<'a>],
    work: &[(usize, Vec<bool>)],
    level: Option<i32>,
) -> Vec<Result<Rebuilt<'a>, PruneError>> {
    // Going by the sizes the headers declare (the decoder never trusts
    // them for memory beyond its plausibility bound).
    let largest = work.iter().map(|(i, _)| units[*i].entries.iter().map(|e| e.size).sum::<u64>()).max().unwrap_or(0);
    let workers = worker_count(0, work.len(), largest);
    run_jobs(work.len(), workers, |bufs: &mut Buffers, j| {
        let (i, keep) = &work[j];
        one(data, &units[*i].unit, keep, level, bufs)
    })
}

fn one<'a>(
    data: &'a [u8],
    unit: &FatBinary,
    keep: &[bool],
    level: Option<i32>,
    bufs: &mut Buffers,
) -> Result<Rebuilt<'a>, PruneError> {
    let bytes = unit_bytes(data, unit)?;
    let fail = |reason: String| PruneError::Unit { offset: unit.offset, reason };
    let kept_of = |list: &[binary::BinaryEntry<'a>]| -> Vec<(&'a [u8], &'a [u8])> {
        list.iter().zip(keep).filter(|(_, k)| **k).map(|(e, _)| (e.id, e.payload)).collect()
    };
    match unit.kind {
        UnitKind::Bundle => {
            let list = binary::read(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?
                .unwrap_or_default();
            Ok(Rebuilt { plan: binary::write(&kept_of(&list), alignment(&list)), version: None })
        }
        UnitKind::Compressed { version } => {
            let blob = compressed::read_blob(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            decompress_into(&blob, &mut bufs.input)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            let inner = &bufs.input[..];
            if !binary::has_magic(inner) {
                return Err(fail("the compressed data is not a binary bundle".into()));
            }
            let list =
                binary::read(inner).map_err(|e| fail(format!("the decompressed bundle: {e}")))?.unwrap_or_default();
            let kept: Vec<(&[u8], &[u8])> =
                list.iter().zip(keep).filter(|(_, k)| **k).map(|(e, _)| (e.id, e.payload)).collect();
            let bundle = binary::write(&kept, alignment(&list)).to_vec();
            // The input's hash is checked before anything is written from
            // it; both hashes are computed in one pass.
            let (computed, hash) = truncated_md5_pair(inner, &bundle);
            if computed != blob.header.hash {
                let mismatch = compressed::CompressedError::HashMismatch { stored: blob.header.hash, computed };
                return Err(fail(mismatch.to_string()));
            }
            let method = blob.header.method;
            let opts = compressed::CompressOptions {
                method,
                level: level.unwrap_or(if method == compressed::Method::Zstd { 3 } else { 6 }),
                version: version.max(2),
                threads: 0,
            };
            let out = compressed::compress_hashed(&bundle, hash, &opts).map_err(|e| fail(e.to_string()))?;
            round_trip(&out.bytes, &bundle, out.hash, &kept, &mut bufs.piece)
                .map_err(|why| PruneError::Verify(format!("the fat binary at {:#x}: {why}", unit.offset)))?;
            let mut plan = Plan::new();
            plan.own(out.bytes);
            Ok(Rebuilt { plan, version: Some(out.version) })
        }
        UnitKind::Cuda | UnitKind::Object => Err(fail("is not a clang offload bundle".into())),
    }
}

/// Checks that `new` (a compressed bundle just made) decompresses to
/// `bundle`, that its header holds `hash` (the truncated MD5 of `bundle`,
/// computed before compressing: hashing the same bytes again would prove
/// nothing more), and that `bundle` holds exactly `kept`. The data is
/// compared piece by piece as it decompresses, in `piece`'s memory.
pub(super) fn round_trip(
    new: &[u8],
    bundle: &[u8],
    hash: u64,
    kept: &[(&[u8], &[u8])],
    piece: &mut Vec<u8>,
) -> Result<(), String> {
    let blob = compressed::read_blob(new).map_err(|e| format!("the recompressed bundle does not read back: {e}"))?;
    if blob.header.hash != hash || blob.header.uncompressed_size != bundle.len() as u64 {
        return Err("the recompressed bundle's header does not describe the rebuilt bundle".into());
    }
    let undo = |e: compressed::CompressedError| format!("the recompressed bundle does not decompress: {e}");
    let mut decoder = compressed::BlobDecoder::new(&blob).map_err(undo)?;
    let mut at = 0usize;
    while decoder.next_chunk(piece, 1 << 20).map_err(undo)? {
        let end = at.saturating_add(piece.len());
        if bundle.get(at..end) != Some(&piece[..]) {
            return Err(format!("the recompressed bundle decompresses to other bytes at {at:#x}"));
        }
        at = end;
    }
    if at != bundle.len() {
        return Err(format!("the recompressed bundle decompresses to {at} bytes, not {}", bundle.len()));
    }
    let list = binary::read(bundle).map_err(|e| e.to_string())?.unwrap_or_default();
    let held: Vec<(&[u8], &[u8])> = list.iter().map(|e| (e.id, e.payload)).collect();
    if held != kept {
        return Err("the rebuilt bundle does not hold exactly the kept entries".into());
    }
    Ok(())
}
