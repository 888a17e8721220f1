//! Rebuilding one fat binary with one payload swapped, laid out as
//! `prune` lays out what it keeps (its `alignment` and `read_contents`):
//! original entry order, the input's payload alignment (so the header stays
//! under the 4 KiB the runtime reads and the last entry ends where the
//! bundle ends). A compressed bundle is decompressed (hash checked),
//! rebuilt and recompressed with its own method and format version
//! (version 1 becomes 2: the runtime needs the total size), zstd level 3
//! with long-distance matching, LLVM's default (docs/formats/host-references.md §5).
//!
//! `prune`'s own rebuilder (`prune/rebuild.rs`) runs many units in
//! parallel with reused buffers and only drops entries; one unit with a
//! swapped payload is this much simpler function. They could share a
//! "(id, payload) list → unit bytes" core.

use crate::prune::{Contents, PruneError, alignment, read_contents};
use offload_format::bundle::{binary, compressed};
use offload_format::plan::Plan;
use offload_inspect::layout::FatBinary;

/// The (id, payload) pairs of the new bundle: entry `i` is kept when
/// `keep[i]` (missing flags keep), with `swap`'s payload for its index.
fn chosen<'p>(
    list: &[binary::BinaryEntry<'p>],
    keep: &[bool],
    swap: Option<(usize, &'p [u8])>,
) -> Vec<(&'p [u8], &'p [u8])> {
    list.iter()
        .enumerate()
        .filter(|(i, _)| keep.get(*i).copied().unwrap_or(true))
        .map(|(i, e)| match swap {
            Some((at, payload)) if at == i => (e.id, payload),
            _ => (e.id, e.payload),
        })
        .collect()
}

/// Rebuilds `unit` (a fat binary of `data`) keeping the entries `keep`
/// marks and putting `swap.1` in place of entry `swap.0`'s payload.
/// Returns the new unit's bytes and, for a compressed unit, the format
/// version written.
pub(crate) fn rebuild<'a>(
    data: &'a [u8],
    unit: &FatBinary,
    keep: &[bool],
    swap: Option<(usize, &'a [u8])>,
) -> Result<(Plan<'a>, Option<u16>), PruneError> {
    match read_contents(data, unit)? {
        Contents::Bundle(list) => Ok((binary::write(&chosen(&list, keep, swap), alignment(&list)), None)),
        Contents::Compressed { inner } => {
            let bytes = crate::prune::unit_bytes(data, unit)?;
            let method = compressed::read_blob(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?
                .header
                .method;
            let version = match unit.kind {
                offload_inspect::layout::UnitKind::Compressed { version } => version,
                _ => 2,
            };
            let list = binary::read(&inner).ok().flatten().unwrap_or_default();
            let bundle = binary::write(&chosen(&list, keep, swap), alignment(&list)).to_vec();
            let opts = compressed::CompressOptions {
                method,
                level: if method == compressed::Method::Zstd { 3 } else { 6 },
                version: version.max(2),
                threads: 0,
            };
            let out = compressed::compress(&bundle, &opts)
                .map_err(|e| PruneError::Unit { offset: unit.offset, reason: e.to_string() })?;
            let mut p = Plan::new();
            p.own(out.bytes);
            Ok((p, Some(out.version)))
        }
    }
}
