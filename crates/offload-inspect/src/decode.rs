//! Producing the bytes of many code objects at once, over several cores,
//! with bounded memory.
//!
//! A compressed bundle is decoded as a whole (its hash covers the whole
//! decompressed bundle), so the code objects asked for are grouped by the
//! compressed bundle holding them: each bundle is decompressed once, by one
//! worker, its objects are handed to the caller, and the buffer is dropped
//! before the worker takes the next bundle. At most one decompressed bundle
//! per worker is alive at any time, and the number of workers is lowered so
//! that the largest bundles of all workers together fit in
//! [`MEMORY_BUDGET`].

#[cfg(test)]
use super::Severity;
use super::{BytesError, Inventory, Payload};
use offload_format::bundle::compressed::{Blob, BlobDecoder, CompressedError, Method, read_blob, truncated_md5};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// How many bytes of decompressed bundles all workers together may hold
/// (going by the sizes their headers declare). One worker always runs,
/// however large its bundle.
pub const MEMORY_BUDGET: u64 = 384 << 20;

/// The size of the pieces a bundle is decoded and hashed in: small enough
/// to be hashed while still in the cache, large enough that the per-piece
/// overhead does not show.
const PIECE: usize = 1 << 20;

/// What a call of [`visit_objects`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Worker threads used.
    pub workers: usize,
    /// Compressed bundles decompressed.
    pub bundles_decoded: usize,
    /// The most decompressed bundles held in memory at the same time.
    pub peak_buffers: usize,
}

/// The number of workers to use when the caller leaves it open (0): one per
/// core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How many workers to run for `jobs` jobs when the largest holds
/// `largest` decompressed bytes: at most `wanted` (0: one per core), at most
/// one per job, and few enough for [`MEMORY_BUDGET`].
pub fn worker_count(wanted: usize, jobs: usize, largest: u64) -> usize {
    let wanted = if wanted == 0 { default_workers() } else { wanted };
    let fit = usize::try_from(MEMORY_BUDGET / largest.max(1)).unwrap_or(usize::MAX).max(1);
    wanted.min(jobs).min(fit).max(1)
}

/// Compressed bundles declaring more than this many times their compressed
/// size are decoded piece by piece, growing with the data actually
/// produced; below it, the declared size is reserved up front and decoded
/// into in one go. Real bundles compress 2 to 20 times.
const MAX_RATIO_UP_FRONT: u64 = 1 << 10;

/// A decompression budget (docs/reliability.md, "Decompression budget of
/// packages"): the bytes that decoders may still produce for one walk of a
/// package. A [`package::walk`](crate::package::walk) makes one and charges
/// to it every byte its own decoders produce; while it visits a member the
/// budget is the *current* one of the visiting thread ([`DecodeBudget::enter`]),
/// and every compressed bundle decoded for the member charges its declared
/// size to it first ([`charge_decoded`]): one that does not fit is not
/// decoded.
///
/// A handle, not process state: two walks running on two threads at the same
/// time each have their own, and the worker threads a member's visit starts
/// ([`run_jobs`]) charge the budget of the thread that started them. A
/// budget made while another is current ([`DecodeBudget::nested`]) also
/// charges the outer one, so that a walk inside a walk cannot spend more
/// than its parent has left.
#[derive(Clone, Debug)]
pub struct DecodeBudget(Arc<BudgetNode>);

#[derive(Debug)]
struct BudgetNode {
    left: AtomicU64,
    refused: AtomicBool,
    parent: Option<DecodeBudget>,
}

thread_local! {
    static CURRENT: RefCell<Option<DecodeBudget>> = const { RefCell::new(None) };
}

/// Puts back the thread's previous budget when an [`DecodeBudget::enter`]
/// ends, even by a panic.
struct Restore(Option<DecodeBudget>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

impl DecodeBudget {
    /// A budget of `limit` bytes, alone.
    pub fn new(limit: u64) -> DecodeBudget {
        DecodeBudget(Arc::new(BudgetNode {
            left: AtomicU64::new(limit),
            refused: AtomicBool::new(false),
            parent: None,
        }))
    }

    /// A budget of `limit` bytes that also charges the calling thread's
    /// current budget, if any.
    pub fn nested(limit: u64) -> DecodeBudget {
        let parent = DecodeBudget::current();
        DecodeBudget(Arc::new(BudgetNode { left: AtomicU64::new(limit), refused: AtomicBool::new(false), parent }))
    }

    /// The calling thread's current budget (set by [`DecodeBudget::enter`]).
    pub fn current() -> Option<DecodeBudget> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Runs `f` with this budget as the calling thread's current one (the
    /// previous one is put back afterwards).
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        f()
    }

    /// Bytes still allowed (by this budget; an outer one may allow fewer).
    pub fn left(&self) -> u64 {
        self.0.left.load(SeqCst)
    }

    /// Whether a charge did not fit (in this budget or one it is nested in).
    pub fn refused(&self) -> bool {
        self.0.refused.load(SeqCst)
    }

    /// Charges `bytes` to this budget and every one it is nested in, all or
    /// nothing: `false` (and [`refused`](Self::refused) from then on, for
    /// every budget of the chain) when one of them has not enough left.
    pub fn charge(&self, bytes: u64) -> bool {
        let mut charged: Vec<&BudgetNode> = Vec::new();
        let mut node = Some(self);
        while let Some(b) = node {
            if b.0.left.fetch_update(SeqCst, SeqCst, |left| left.checked_sub(bytes)).is_err() {
                for c in charged {
                    c.left.fetch_add(bytes, SeqCst);
                }
                let mut node = Some(self);
                while let Some(b) = node {
                    b.0.refused.store(true, SeqCst);
                    node = b.0.parent.as_ref();
                }
                return false;
            }
            charged.push(&b.0);
            node = b.0.parent.as_ref();
        }
        true
    }
}

/// Charges `declared` decompressed bytes of a compressed bundle to the
/// calling thread's current [`DecodeBudget`], if any: an error (to show as
/// the bundle's problem) when they do not fit. Every decoder of a
/// compressed bundle read from an input calls this before decoding.
pub fn charge_decoded(declared: u64) -> Result<(), String> {
    if DecodeBudget::current().is_none_or(|b| b.charge(declared)) {
        return Ok(());
    }
    Err(format!(
        "the bundle declares {declared} decompressed bytes, past what is left of the package's decompression budget (a compression bomb?); not decompressed"
    ))
}

/// Decompresses a blob into `out` (replacing its contents, reusing its
/// memory) and returns the truncated MD5 of the data, which the caller
/// compares with the stored hash.
pub(crate) fn decode_into(blob: &Blob, out: &mut Vec<u8>) -> Result<u64, CompressedError> {
    decompress_into(blob, out)?;
    Ok(truncated_md5(out))
}

/// Decompresses a blob into `out` (replacing its contents, reusing its
/// memory), leaving the hash to the caller: `prune` hashes it together
/// with the bundle it writes ([`offload_format::bundle::md5_pair`]).
///
/// A zstd bundle whose declared size is plausible for its compressed size
/// is decoded in one call straight into `out`: no window buffer, no copy,
/// and no page faults when `out` is reused. Anything else, and anything
/// that fails that way, goes through the piecewise decoder, which never
/// trusts the declared size for memory and gives the error (so messages do
/// not depend on the path taken).
pub fn decompress_into(blob: &Blob, out: &mut Vec<u8>) -> Result<(), CompressedError> {
    out.clear();
    charge_decoded(blob.header.uncompressed_size).map_err(CompressedError::Decompress)?;
    let declared = blob.header.uncompressed_size;
    let plausible = declared <= (blob.data.len() as u64).saturating_mul(MAX_RATIO_UP_FRONT);
    if blob.header.method == Method::Zstd
        && plausible
        && let Ok(size) = usize::try_from(declared)
        && out.try_reserve_exact(size).is_ok()
        && let Ok(mut decompressor) = zstd::bulk::Decompressor::new()
        && let Ok(n) = decompressor.decompress_to_buffer(blob.data, out)
        && n == size
    {
        return Ok(());
    }
    out.clear();
    let mut decoder = BlobDecoder::new(blob)?;
    let mut piece = Vec::new();
    while decoder.next_chunk(&mut piece, PIECE)? {
        // Exact growth: large blocks are moved by the allocator without
        // copying, and a bomb that inflates past the memory there is fails
        // cleanly instead of aborting.
        out.try_reserve_exact(piece.len()).map_err(|e| CompressedError::Decompress(e.to_string()))?;
        out.extend_from_slice(&piece);
    }
    Ok(())
}

/// Decompresses a blob into `out` and checks its size and hash.
pub(crate) fn decode_checked_into(blob: &Blob, out: &mut Vec<u8>) -> Result<(), CompressedError> {
    let computed = decode_into(blob, out)?;
    if computed != blob.header.hash {
        return Err(CompressedError::HashMismatch { stored: blob.header.hash, computed });
    }
    Ok(())
}

/// Runs `work(state, i)` for every `i < jobs` on `workers` threads, each
/// thread taking the next job when it is done with one and keeping its own
/// `state` (a buffer to reuse) from job to job; the results come back in
/// job order, whatever order they were computed in.
pub fn run_jobs<S: Default, R: Send>(jobs: usize, workers: usize, work: impl Fn(&mut S, usize) -> R + Sync) -> Vec<R> {
    if workers <= 1 || jobs <= 1 {
        let mut state = S::default();
        return (0..jobs).map(|i| work(&mut state, i)).collect();
    }
    let next = AtomicUsize::new(0);
    let (work, next) = (&work, &next);
    // The workers charge the decompression budget of the caller's thread.
    let budget = DecodeBudget::current();
    let budget = &budget;
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..workers.min(jobs))
            .map(|_| {
                scope.spawn(move || {
                    let all = || {
                        let (mut state, mut mine) = (S::default(), Vec::new());
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= jobs {
                                break mine;
                            }
                            mine.push((i, work(&mut state, i)));
                        }
                    };
                    match budget {
                        Some(b) => b.enter(all),
                        None => all(),
                    }
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Counts the decompressed bundles alive, and the most at once.
#[derive(Default)]
struct Live {
    now: AtomicUsize,
    peak: AtomicUsize,
}

/// A worker's decompressed bundle, counted while it is in use.
struct Counted<'l> {
    live: &'l Live,
}

impl<'l> Counted<'l> {
    fn new(live: &'l Live) -> Self {
        let now = live.now.fetch_add(1, Ordering::SeqCst) + 1;
        live.peak.fetch_max(now, Ordering::SeqCst);
        Counted { live }
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.live.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where the bytes of one group of requested objects come from.
enum Source<'b> {
    /// Stored as is: one object.
    Plain(&'b [u8]),
    /// The compressed bundle (header included) holding every object of the
    /// group.
    Compressed(&'b [u8]),
    /// A CUDA fat binary entry's compressed stream, holding every object of
    /// the group (one, or the children of a concatenated entry).
    Cuda { stream: &'b [u8], codec: offload_format::cuda::Codec, uncompressed: u64 },
    /// One kpack archive entry's stored bytes: one object.
    Kpack { stored: &'b [u8], scheme: offload_format::kpack::Scheme, ordinal: u32, len: u64 },
    /// Not an object of the inventory: one position.
    Missing,
}

struct Group<'b> {
    source: Source<'b>,
    /// Positions in the caller's list, in increasing order.
    positions: Vec<usize>,
}

/// Hands the bytes of every code object in `wanted` (indices into
/// `inv.objects`) to `visit`, with the object's index: `Ok(bytes)`, or why
/// its bytes cannot be produced (a compressed bundle that does not
/// decompress or whose hash does not match). Up to `workers` threads (0:
/// one per core) call `visit` at the same time, for different objects, in
/// no particular order; each compressed bundle is decompressed once and
/// dropped as soon as its objects have been visited.
///
/// When `visit` fails, the call stops taking new work and returns the
/// failure of the object that comes first in `wanted` (the same one a
/// one-by-one loop would stop at), with its position in `wanted`.
///
/// ```
/// use offload_inspect::decode::visit_objects;
/// use offload_inspect::{Options, scan};
/// use std::sync::Mutex;
///
/// let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.compressed.bc");
/// let inventory = scan(data, "sample", &Options::default());
/// let device: Vec<usize> =
///     (0..inventory.objects.len()).filter(|&i| inventory.objects[i].offload_kind != "host").collect();
/// let sizes = Mutex::new(Vec::new());
/// let stats = visit_objects(&inventory, &device, 0, |index, bytes| {
///     // Write the bytes out here; `bytes` is only valid during the call.
///     let bytes = bytes?;
///     sizes.lock().unwrap().push((index, bytes.len() as u64));
///     Ok::<(), offload_inspect::BytesError>(())
/// })
/// .map_err(|(_, e)| e)?;
/// let mut sizes = sizes.into_inner().unwrap();
/// sizes.sort();
/// assert_eq!(sizes, [(1, inventory.objects[1].size), (2, inventory.objects[2].size)]);
/// // Both objects live in one compressed bundle, decompressed once.
/// assert_eq!(stats.bundles_decoded, 1);
/// # Ok::<(), offload_inspect::BytesError>(())
/// ```
pub fn visit_objects<'a, E: Send>(
    inv: &Inventory<'a>,
    wanted: &[usize],
    workers: usize,
    visit: impl Fn(usize, Result<&[u8], BytesError>) -> Result<(), E> + Sync,
) -> Result<Stats, (usize, E)> {
    let groups = group(inv, wanted);
    let largest = groups
        .iter()
        .filter_map(|g| match g.source {
            Source::Compressed(blob) => read_blob(blob).ok().map(|b| b.header.uncompressed_size),
            Source::Cuda { uncompressed, .. } => Some(uncompressed),
            Source::Kpack { len, .. } => Some(len),
            Source::Plain(_) | Source::Missing => None,
        })
        .max()
        .unwrap_or(0);
    let workers = worker_count(workers, groups.len(), largest);
    let live = Live::default();
    let decoded = AtomicUsize::new(0);
    // The position of the first failure found so far: groups that start
    // after it are skipped, groups before it still run, so the failure
    // reported is the first in `wanted` order, however the work was spread.
    let first_failure = AtomicUsize::new(usize::MAX);
    let visit_one = |position: usize, bytes: Result<&[u8], BytesError>| -> Result<(), E> {
        let index = wanted.get(position).copied().unwrap_or(usize::MAX);
        visit(index, bytes).inspect_err(|_| {
            first_failure.fetch_min(position, Ordering::SeqCst);
        })
    };
    // Hands each object of one decoded group (or the group's decoding
    // failure) to the visitor; the first failing position stops the group.
    let visit_decoded = |positions: &[usize], data: Result<&[u8], BytesError>| -> Option<(usize, E)> {
        for &p in positions {
            let bytes = match &data {
                Ok(d) => object_range(inv, wanted.get(p).copied(), d),
                Err(e) => Err(e.clone()),
            };
            if let Err(e) = visit_one(p, bytes) {
                return Some((p, e));
            }
        }
        None
    };
    // Each worker decodes into one buffer, reused from bundle to bundle.
    let results = run_jobs(groups.len(), workers, |buffer: &mut Vec<u8>, g| -> Option<(usize, E)> {
        let group = groups.get(g)?;
        let start = *group.positions.first()?;
        if start > first_failure.load(Ordering::SeqCst) {
            return None;
        }
        match group.source {
            Source::Plain(bytes) => visit_one(start, Ok(bytes)).err().map(|e| (start, e)),
            Source::Missing => visit_one(start, Err(BytesError::OutOfRange)).err().map(|e| (start, e)),
            Source::Kpack { stored, scheme, ordinal, len } => {
                let _in_use = Counted::new(&live);
                let data = crate::kpack::decode(stored, scheme, ordinal, len);
                decoded.fetch_add(1, Ordering::Relaxed);
                visit_one(start, data.as_deref().map_err(Clone::clone)).err().map(|e| (start, e))
            }
            Source::Cuda { stream, codec, uncompressed } => {
                let _in_use = Counted::new(&live);
                let data = offload_format::cuda::decompress(codec, stream, uncompressed).map_err(BytesError::from);
                decoded.fetch_add(1, Ordering::Relaxed);
                visit_decoded(&group.positions, data.as_deref().map_err(Clone::clone))
            }
            Source::Compressed(blob) => {
                let _in_use = Counted::new(&live);
                let data = read_blob(blob)
                    .and_then(|b| decode_checked_into(&b, buffer))
                    .map(|()| buffer.as_slice())
                    .map_err(BytesError::from);
                decoded.fetch_add(1, Ordering::Relaxed);
                visit_decoded(&group.positions, data)
            }
        }
    });
    match results.into_iter().flatten().min_by_key(|(p, _)| *p) {
        Some(failure) => Err(failure),
        None => Ok(Stats { workers, bundles_decoded: decoded.into_inner(), peak_buffers: live.peak.into_inner() }),
    }
}

/// The bytes of a compressed object inside its decompressed bundle.
fn object_range<'d>(inv: &Inventory, index: Option<usize>, data: &'d [u8]) -> Result<&'d [u8], BytesError> {
    let (start, len) = match index.and_then(|i| inv.objects.get(i)).map(|o| o.payload) {
        Some(Payload::Compressed { start, len, .. } | Payload::Cuda { start, len, .. }) => (start, len),
        _ => return Err(BytesError::OutOfRange),
    };
    let range = usize::try_from(start)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(s, l)| Some(s..s.checked_add(l)?))
        .ok_or(BytesError::OutOfRange)?;
    data.get(range).ok_or(BytesError::OutOfRange)
}

/// Groups the requested objects by compressed bundle, in the order of each
/// group's first object.
fn group<'i>(inv: &'i Inventory, wanted: &[usize]) -> Vec<Group<'i>> {
    let mut groups: Vec<Group> = Vec::new();
    let mut by_blob: HashMap<(usize, usize), usize> = HashMap::new();
    for (position, &index) in wanted.iter().enumerate() {
        let Some(object) = inv.objects.get(index) else {
            groups.push(Group { source: Source::Missing, positions: vec![position] });
            continue;
        };
        match object.payload {
            Payload::Plain(b) => {
                groups.push(Group { source: Source::Plain(inv.resolve(b)), positions: vec![position] })
            }
            Payload::Cuda { stream, codec, uncompressed, .. } => {
                let stream = inv.resolve(stream);
                let key = (stream.as_ptr() as usize, stream.len());
                match by_blob.get(&key).and_then(|&g| groups.get_mut(g)) {
                    Some(g) => g.positions.push(position),
                    None => {
                        by_blob.insert(key, groups.len());
                        groups.push(Group {
                            source: Source::Cuda { stream, codec, uncompressed },
                            positions: vec![position],
                        });
                    }
                }
            }
            Payload::Kpack { stored, scheme, ordinal, len } => groups.push(Group {
                source: Source::Kpack { stored: inv.resolve(stored), scheme, ordinal, len },
                positions: vec![position],
            }),
            Payload::Compressed { blob, .. } => {
                let blob = inv.resolve(blob);
                let key = (blob.as_ptr() as usize, blob.len());
                match by_blob.get(&key).and_then(|&g| groups.get_mut(g)) {
                    Some(g) => g.positions.push(position),
                    None => {
                        by_blob.insert(key, groups.len());
                        groups.push(Group { source: Source::Compressed(blob), positions: vec![position] });
                    }
                }
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, scan};
    use offload_format::bundle::compressed::{CompressOptions, compress};
    use std::num::NonZeroU64;
    use std::sync::Mutex;

    /// The device payload `e` of bundle `b`: distinct bytes for every pair.
    fn payload(b: usize, e: usize) -> Vec<u8> {
        (0..3000 + 97 * b + e).map(|i| (i * (b + 3) + e * 31) as u8).collect()
    }

    /// `count` compressed bundles back to back (4096-aligned), each a host
    /// entry and two device entries; the stored hash of those in `damaged`
    /// is wrong.
    fn library(count: usize, damaged: &[usize]) -> Vec<u8> {
        let mut data = Vec::new();
        for b in 0..count {
            let (p0, p1) = (payload(b, 0), payload(b, 1));
            let entries: [(&[u8], &[u8]); 3] = [
                (b"host-x86_64-unknown-linux-gnu-", b""),
                (b"hipv4-amdgcn-amd-amdhsa--gfx906", &p0),
                (b"hipv4-amdgcn-amd-amdhsa--gfx90a", &p1),
            ];
            let raw = offload_format::bundle::binary::write(&entries, NonZeroU64::new(64).unwrap()).to_vec();
            let mut blob = compress(&raw, &CompressOptions::default()).unwrap().bytes;
            if damaged.contains(&b) {
                blob[16] ^= 0xff; // the hash of a version 2 header
            }
            data.extend_from_slice(&blob);
            data.resize(data.len().next_multiple_of(4096), 0);
        }
        data
    }

    #[test]
    fn every_object_gets_its_bytes_and_each_bundle_is_decoded_once() {
        let data = library(12, &[]);
        let inv = scan(&data, "lib", &Options::default());
        assert_eq!(inv.objects.len(), 36);
        let wanted: Vec<usize> = (0..inv.objects.len()).collect();
        let seen = Mutex::new(vec![None; wanted.len()]);
        let stats = visit_objects(&inv, &wanted, 3, |i, bytes| -> Result<(), ()> {
            seen.lock().unwrap()[i] = Some(bytes.unwrap().to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(stats.bundles_decoded, 12);
        for (i, got) in seen.into_inner().unwrap().into_iter().enumerate() {
            let expected = match i % 3 {
                0 => Vec::new(),
                e => payload(i / 3, e - 1),
            };
            assert_eq!(got.as_deref(), Some(&expected[..]), "object {i}");
        }
    }

    /// Not a timed test: the visitor holds each worker for a while, so the
    /// workers overlap, and the count of live decompressed bundles shows
    /// that no more than one per worker was ever held.
    #[test]
    fn memory_holds_at_most_one_decompressed_bundle_per_worker() {
        let data = library(16, &[]);
        let inv = scan(&data, "lib", &Options::default());
        let wanted: Vec<usize> = (0..inv.objects.len()).filter(|i| i % 3 != 0).collect();
        for workers in [1, 2, 4] {
            let stats = visit_objects(&inv, &wanted, workers, |_, bytes| -> Result<(), ()> {
                assert!(bytes.is_ok());
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok(())
            })
            .unwrap();
            assert_eq!(stats.workers, workers);
            assert_eq!(stats.bundles_decoded, 16);
            assert!(stats.peak_buffers >= 1 && stats.peak_buffers <= workers, "{workers}: {stats:?}");
        }
    }

    #[test]
    fn the_first_failure_in_request_order_is_reported_whatever_the_threads() {
        let data = library(10, &[3, 7]);
        let inv = scan(&data, "lib", &Options::default());
        // Requested in reverse: the first failure in request order is in
        // bundle 7.
        let wanted: Vec<usize> = (0..inv.objects.len()).rev().collect();
        for round in 0..20 {
            let workers = 1 + round % 4;
            let failure = visit_objects(&inv, &wanted, workers, |i, bytes| bytes.map(|_| ()).map_err(|e| (i, e)));
            let (position, (index, error)) = failure.unwrap_err();
            assert_eq!(wanted[position], index);
            assert_eq!(index, 7 * 3 + 2, "workers {workers}");
            assert!(matches!(error, BytesError::Compressed(CompressedError::HashMismatch { .. })), "{error}");
        }
    }

    #[test]
    fn plain_objects_and_bad_indices_are_visited_too() {
        let entries: [(&[u8], &[u8]); 2] =
            [(b"host-x86_64-unknown-linux-gnu-", b""), (b"hip-amdgcn-amd-amdhsa--gfx906", b"CODE")];
        let data = offload_format::bundle::binary::write(&entries, NonZeroU64::new(8).unwrap()).to_vec();
        let inv = scan(&data, "b", &Options::default());
        let got = Mutex::new(Vec::new());
        visit_objects(&inv, &[1], 0, |i, b| -> Result<(), ()> {
            got.lock().unwrap().push((i, b.unwrap().to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.into_inner().unwrap(), vec![(1, b"CODE".to_vec())]);
        let bad = visit_objects(&inv, &[1, 99], 2, |_, b| b.map(|_| ()));
        assert_eq!(bad.unwrap_err(), (1, BytesError::OutOfRange));
    }

    /// Both ways of decoding (up front into the buffer, or piece by piece for
    /// an implausible ratio) give the data, its hash, and for lying sizes
    /// the error the piecewise decoder of `bundle::compressed` gives.
    #[test]
    fn both_decoding_paths_agree_with_the_reference_decoder() {
        let varied: Vec<u8> = (0..3u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let zeros = vec![0u8; 8 << 20]; // compresses far more than 1024 times
        let mut buffer = vec![1u8; 100]; // reused: old contents must go
        for data in [&varied, &zeros] {
            for method in [Method::Zstd, Method::Zlib] {
                let c = compress(data, &CompressOptions { method, ..Default::default() }).unwrap().bytes;
                let blob = read_blob(&c).unwrap();
                assert_eq!(decode_into(&blob, &mut buffer).unwrap(), truncated_md5(data));
                assert!(buffer == *data);
                for delta in [-1i64, 1] {
                    let mut lying = blob;
                    lying.header.uncompressed_size = (data.len() as i64 + delta) as u64;
                    let reference = offload_format::bundle::compressed::decompress_unverified(&lying).unwrap_err();
                    assert_eq!(decode_into(&lying, &mut buffer).unwrap_err(), reference);
                }
            }
        }
    }

    #[test]
    fn inventories_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Inventory<'static>>();
    }

    #[test]
    fn worker_counts_respect_the_memory_budget() {
        assert_eq!(worker_count(8, 100, 1 << 20), 8);
        assert_eq!(worker_count(8, 3, 1 << 20), 3);
        assert_eq!(worker_count(8, 100, MEMORY_BUDGET / 2), 2);
        assert_eq!(worker_count(8, 100, u64::MAX), 1);
        assert_eq!(worker_count(8, 0, 0), 1);
        assert!(worker_count(0, 100, 1) >= 1);
    }

    #[test]
    fn deep_scans_report_the_same_findings_in_the_same_order_on_any_number_of_cores() {
        let data = library(9, &[1, 4, 8]);
        let (one, prechecked) =
            crate::scan::scan_counted(&data, "lib", &Options { deep: true, workers: 1, ..Options::default() });
        assert_eq!(prechecked, 9, "every bundle is checked before the deep scan, none twice");
        let errors: Vec<_> = one.diagnostics.iter().filter(|d| d.severity == Severity::Error).collect();
        assert_eq!(errors.len(), 3, "{:?}", one.diagnostics);
        let offsets: Vec<Option<u64>> = errors.iter().map(|d| d.offset).collect();
        let mut sorted = offsets.clone();
        sorted.sort();
        assert_eq!(offsets, sorted, "findings in file order");
        for round in 0..10 {
            let many = scan(&data, "lib", &Options { deep: true, workers: 2 + round % 3, ..Options::default() });
            assert_eq!(many.diagnostics, one.diagnostics);
            assert_eq!(many.objects, one.objects);
        }
    }
}

#[cfg(test)]
mod budget_tests {
    use super::{DecodeBudget, charge_decoded, run_jobs};

    #[test]
    fn a_budget_is_charged_only_on_the_threads_that_entered_it() {
        // No current budget: nothing is refused.
        assert!(charge_decoded(u64::MAX).is_ok());
        let a = DecodeBudget::new(100);
        let b = DecodeBudget::new(1000);
        std::thread::scope(|s| {
            s.spawn(|| a.enter(|| assert!(charge_decoded(60).is_ok())));
            s.spawn(|| b.enter(|| assert!(charge_decoded(600).is_ok())));
        });
        assert_eq!((a.left(), b.left()), (40, 400));
        // Workers started by run_jobs charge the budget of their starter.
        a.enter(|| {
            let ok = run_jobs::<(), bool>(4, 4, |_, _| charge_decoded(10).is_ok());
            assert_eq!(ok, [true, true, true, true]);
            let e = charge_decoded(1).unwrap_err();
            assert!(e.contains("decompression budget"), "{e}");
        });
        assert_eq!(a.left(), 0);
        assert!(a.refused() && !b.refused());
        // Left as it was after the scope.
        assert!(DecodeBudget::current().is_none());
    }

    #[test]
    fn a_nested_budget_charges_the_outer_one_all_or_nothing() {
        let outer = DecodeBudget::new(100);
        outer.enter(|| {
            let inner = DecodeBudget::nested(1000);
            assert!(inner.charge(70));
            assert_eq!((inner.left(), outer.left()), (930, 30));
            // Fits the inner one, not the outer: neither is charged.
            assert!(!inner.charge(50));
            assert_eq!((inner.left(), outer.left()), (930, 30));
            assert!(inner.refused() && outer.refused());
        });
    }
}
