//! Tarballs and container layers (docs/guide/prune-trees.md, "Tarballs"):
//! read as one stream and written as a new one, compressed as the input
//! was. Every header is copied as it is (modes, owners, times, long-name
//! and pax records) except a rewritten file's size and checksum; files
//! that may hold code are read whole and pruned by a pool of workers, several
//! at a time, while the output is written in the input's order; all others
//! stream through (or, while files before them are being pruned, wait in
//! memory when they are small). See [`prune_tar`] for the memory bound.

use super::file::{self, Outcome};
use super::{FileReport, Options, TreeError, TreeReport};
use std::io::{self, BufWriter, Read, Write};
use tar::{EntryType, Header};

/// How a tarball is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// `.tar`.
    None,
    /// `.tar.gz`.
    Gzip,
    /// `.tar.zst`.
    Zstd,
    /// `.tar.xz`.
    Xz,
}

impl Compression {
    /// `tar`, `tar.gz`, `tar.zst`, `tar.xz`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "tar",
            Compression::Gzip => "tar.gz",
            Compression::Zstd => "tar.zst",
            Compression::Xz => "tar.xz",
        }
    }
}

/// Files above this size are not read into memory (a real library is a
/// few GiB at most).
const MAX_FILE: u64 = 16 << 30;
/// Long-name and pax records above this size are malformed.
const MAX_RECORD: u64 = 1 << 20;

/// The compression of a tarball starting with `head`, `None` when `head`
/// is not a tarball (a compressed stream is looked into: its first 512
/// bytes must be a tar header).
pub fn detect(head: &[u8]) -> Option<Compression> {
    let is_tar = |b: &[u8]| b.get(257..262) == Some(&b"ustar"[..]);
    if is_tar(head) {
        return Some(Compression::None);
    }
    let kind = if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Compression::Xz
    } else {
        return None;
    };
    let mut first = Vec::with_capacity(512);
    let reader = decoder(kind, head).ok()?;
    let _ = reader.take(512).read_to_end(&mut first);
    is_tar(&first).then_some(kind)
}

fn decoder<'a>(kind: Compression, data: &'a [u8]) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match kind {
        Compression::None => Box::new(data),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Zstd => {
            let mut d = zstd::Decoder::with_buffer(data)?;
            d.window_log_max(31)?;
            Box::new(d)
        }
        Compression::Xz => Box::new(lzma_rust2::XzReader::new(data, true)),
    })
}

/// The writer of a compressed stream, finished explicitly.
enum Encoder<W: Write> {
    Plain(W),
    Gzip(flate2::write::GzEncoder<W>),
    Zstd(zstd::Encoder<'static, W>),
    Xz(lzma_rust2::XzWriter<W>),
}

impl<W: Write> Encoder<W> {
    fn new(kind: Compression, w: W, threads: usize) -> io::Result<Self> {
        Ok(match kind {
            Compression::None => Encoder::Plain(w),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(w, flate2::Compression::default())),
            Compression::Zstd => {
                let mut e = zstd::Encoder::new(w, 3)?;
                let _ = e.multithread(threads as u32);
                Encoder::Zstd(e)
            }
            Compression::Xz => Encoder::Xz(
                lzma_rust2::XzWriter::new(w, lzma_rust2::XzOptions::with_preset(6)).map_err(io::Error::other)?,
            ),
        })
    }
    fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Plain(w) => Ok(w),
            Encoder::Gzip(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
            Encoder::Xz(e) => e.finish().map_err(io::Error::other),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Plain(w) => w.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
            Encoder::Xz(e) => e.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Plain(w) => w.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
            Encoder::Xz(e) => e.flush(),
        }
    }
}

/// Reads a record or file of `size` bytes, allocating as the bytes come.
fn read_all(r: impl Read, size: u64, what: &str) -> Result<Vec<u8>, TreeError> {
    let mut buf = Vec::with_capacity(size.min(64 << 20) as usize);
    r.take(size).read_to_end(&mut buf).map_err(|e| TreeError::Malformed(format!("{what}: {e}")))?;
    if buf.len() as u64 != size {
        return Err(TreeError::Malformed(format!("{what}: the tarball ends inside it")));
    }
    Ok(buf)
}

/// A pax record's value for `key` (`path`, `size`).
fn pax_value(records: &[u8], key: &str) -> Option<String> {
    let text = String::from_utf8_lossy(records);
    text.lines().find_map(|l| {
        let (_, kv) = l.split_once(' ')?;
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.to_string())
    })
}

fn trim_nul(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Entries of at most this size that come while files are being pruned
/// are held in memory until their turn (up to [`HELD_SMALL`] bytes in all);
/// a larger one waits for the files before it to be written, then streams.
const SMALL: u64 = 1 << 20;
/// The most bytes of small entries held in memory at once.
const HELD_SMALL: u64 = 64 << 20;
/// Files being pruned at the same time may come to this many bytes in all
/// (read, not counting what they grow into), or twice the largest of
/// them if more: many small libraries are pruned on every core, two large
/// ones at a time.
const IN_FLIGHT: u64 = 256 << 20;

/// An entry waiting for its turn in the output, with the long-name and pax
/// records before it.
struct Queued {
    records: Vec<(Header, Vec<u8>)>,
    header: Header,
    name: String,
    size: u64,
    what: Pending,
}

enum Pending {
    /// Bytes at hand, written as they are.
    Ready(Vec<u8>),
    /// A file left out by its name (reported in its turn).
    Removed(Outcome),
    /// A file being pruned by a worker: its bytes (written as they are when
    /// it is not rewritten), whether a pax record gives its size, and the
    /// worker's answer to come.
    Pruning {
        bytes: std::sync::Arc<Vec<u8>>,
        pax_size: bool,
        answer: std::sync::mpsc::Receiver<Result<Outcome, crate::prune::PruneError>>,
        /// The answer, once taken from `answer` before the entry's turn.
        got: Option<Result<Outcome, crate::prune::PruneError>>,
    },
}

/// A file for a worker to prune, and where to send the answer.
type Job = (String, std::sync::Arc<Vec<u8>>, std::sync::mpsc::SyncSender<Result<Outcome, crate::prune::PruneError>>);

/// What is written, and what it saved, in the order of the input.
struct Output<'o, W: Write> {
    builder: Option<tar::Builder<W>>,
    report: &'o mut TreeReport,
    removed_paths: std::collections::HashSet<String>,
    saved: u64,
}

impl<W: Write> Output<'_, W> {
    fn append(
        &mut self,
        records: Vec<(Header, Vec<u8>)>,
        header: &Header,
        body: &mut dyn Read,
    ) -> Result<(), TreeError> {
        let werr = |e: io::Error| TreeError::io("the output", e);
        if let Some(b) = self.builder.as_mut() {
            for (h, rec) in records {
                b.append(&h, rec.as_slice()).map_err(werr)?;
            }
            b.append(header, body).map_err(werr)?;
        }
        Ok(())
    }

    /// Writes the entry at the front of the queue, waiting for its worker
    /// if it is being pruned.
    fn write(&mut self, q: Queued) -> Result<(), TreeError> {
        let Queued { records, mut header, name, size, what } = q;
        let (bytes, pax_size, answer, got) = match what {
            Pending::Ready(body) => return self.append(records, &header, &mut body.as_slice()),
            Pending::Removed(outcome) => {
                self.report.files.extend(FileReport::new(name.clone(), &outcome, size));
                self.removed_paths.insert(name);
                self.saved += size;
                return Ok(());
            }
            Pending::Pruning { bytes, pax_size, answer, got } => (bytes, pax_size, answer, got),
        };
        let outcome = match got {
            Some(r) => r,
            None => {
                answer.recv().map_err(|_| TreeError::Malformed(format!("{name}: the worker pruning it stopped")))?
            }
        }
        .map_err(|source| TreeError::Prune { path: name.clone(), source })?;
        let mut file_report = FileReport::new(name.clone(), &outcome, size);
        match outcome {
            Outcome::Removed { .. } => {
                self.removed_paths.insert(name);
                self.saved += size;
            }
            Outcome::Rewritten(_) if pax_size => {
                if let Some(r) = file_report.as_mut() {
                    r.action = super::Action::Untouched;
                    r.reason = "its size is in a pax record, which this does not rewrite; left as it is".into();
                    r.new_size = size;
                }
                self.append(records, &header, &mut bytes.as_slice())?;
            }
            Outcome::Rewritten(w) => {
                self.saved += size - (w.bytes.len() as u64).min(size);
                header.set_size(w.bytes.len() as u64);
                header.set_cksum();
                self.append(records, &header, &mut w.bytes.as_slice())?;
            }
            _ => self.append(records, &header, &mut bytes.as_slice())?,
        }
        self.report.files.extend(file_report);
        Ok(())
    }
}

/// The entries waiting for their turn, and the memory they hold.
struct Queue {
    entries: std::collections::VecDeque<Queued>,
    /// Bytes of files being pruned (as read).
    pruning: u64,
    /// The largest of them.
    largest: u64,
    /// Bytes of small entries held.
    small: u64,
}

impl Queue {
    fn push(&mut self, q: Queued) {
        match &q.what {
            Pending::Ready(b) => self.small += b.len() as u64,
            Pending::Removed(_) => {}
            Pending::Pruning { .. } => {
                self.pruning += q.size;
                self.largest = self.largest.max(q.size);
            }
        }
        self.entries.push_back(q);
    }

    /// Writes the entry at the front.
    fn pop<W: Write>(&mut self, out: &mut Output<'_, W>) -> Result<bool, TreeError> {
        let Some(q) = self.entries.pop_front() else { return Ok(false) };
        match &q.what {
            Pending::Ready(b) => self.small -= b.len() as u64,
            Pending::Removed(_) => {}
            Pending::Pruning { .. } => self.pruning -= q.size,
        }
        if self.pruning == 0 {
            self.largest = 0;
        }
        out.write(q)?;
        Ok(true)
    }

    /// Writes the entries at the front that need no waiting.
    fn pop_done<W: Write>(&mut self, out: &mut Output<'_, W>) -> Result<(), TreeError> {
        while let Some(front) = self.entries.front_mut() {
            if let Pending::Pruning { answer, got: got @ None, .. } = &mut front.what {
                match answer.try_recv() {
                    Ok(r) => *got = Some(r),
                    Err(std::sync::mpsc::TryRecvError::Empty) => break,
                    // The worker is gone: `write` says so.
                    Err(std::sync::mpsc::TryRecvError::Disconnected) => {}
                }
            }
            self.pop(out)?;
        }
        Ok(())
    }

    /// Writes everything.
    fn drain<W: Write>(&mut self, out: &mut Output<'_, W>) -> Result<(), TreeError> {
        while self.pop(out)? {}
        Ok(())
    }
}

/// Prunes the tarball `data` (compressed as `kind`) into `out` (a dry run
/// when `None`), compressed the same way. The caller stages `out` and
/// commits it when this returns `Ok`.
///
/// The stream is read on the calling thread; each file that may hold code
/// is read whole and handed to one of `opts.threads` workers (0: one per
/// core), and the entries are written in their input order as their turn
/// comes (docs/guide/prune-trees.md, "Tarballs"). Memory: the files being
/// pruned together come to at most `IN_FLIGHT` (256 MiB) or twice the
/// largest of them, each with its rewritten copy, plus at most
/// `HELD_SMALL` (64 MiB) of small entries waiting behind them.
pub fn prune_tar(
    data: &[u8],
    kind: Compression,
    out: Option<&std::fs::File>,
    opts: &Options,
) -> Result<TreeReport, TreeError> {
    let mut report = TreeReport { input_size: data.len() as u64, ..Default::default() };
    let threads =
        if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
    let builder = match out {
        Some(f) => Some(tar::Builder::new(
            Encoder::new(kind, BufWriter::with_capacity(1 << 20, f), threads)
                .map_err(|e| TreeError::io("the output", e))?,
        )),
        None => None,
    };
    let werr = |e: io::Error| TreeError::io("the output", e);
    let mut output = Output { builder, report: &mut report, removed_paths: Default::default(), saved: 0 };
    let (jobs, queue_rx) = std::sync::mpsc::channel::<Job>();
    let queue_rx = std::sync::Mutex::new(queue_rx);
    let rules = &opts.rules;
    let unpacked = std::thread::scope(|scope| {
        for _ in 0..threads {
            let queue_rx = &queue_rx;
            scope.spawn(move || {
                loop {
                    let job = match queue_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((name, bytes, answer)) = job else { return };
                    let _ = answer.send(file::prune_file(&name, &bytes, rules));
                }
            });
        }
        // Dropping `jobs` when this returns stops the workers.
        let jobs = jobs;
        read_entries(data, kind, rules, &jobs, &mut output)
    })?;
    let saved = output.saved;
    if let Some(b) = output.builder {
        let enc = b.into_inner().map_err(werr)?;
        let mut w = enc.finish().map_err(werr)?;
        w.flush().map_err(werr)?;
        drop(w);
        report.output_size = out.and_then(|f| f.metadata().ok()).map_or(0, |m| m.len());
    } else {
        // A dry run: the saving scaled by the compression ratio.
        let ratio = data.len() as f64 / unpacked.max(1) as f64;
        report.output_size = data.len() as u64 - ((saved as f64 * ratio.min(1.0)) as u64).min(data.len() as u64);
    }
    report.notes.push(format!(
        "a tarball is one stream: its files are read in order, pruned on {threads} workers and written in order"
    ));
    Ok(report)
}

/// Reads every entry of the tarball, queueing files for `jobs` and
/// writing the entries in order through `output`; returns the bytes of
/// the entries read.
fn read_entries<W: Write>(
    data: &[u8],
    kind: Compression,
    rules: &crate::prune::Rules,
    jobs: &std::sync::mpsc::Sender<Job>,
    output: &mut Output<'_, W>,
) -> Result<u64, TreeError> {
    let mut archive = tar::Archive::new(decoder(kind, data).map_err(|e| TreeError::io("the input", e))?);
    let entries = archive.entries().map_err(|e| TreeError::Malformed(format!("malformed tarball: {e}")))?.raw(true);
    let mut queue = Queue { entries: Default::default(), pruning: 0, largest: 0, small: 0 };
    // Long-name and pax records wait for the entry they describe, which
    // may be left out.
    let mut pending: Vec<(Header, Vec<u8>)> = Vec::new();
    let mut unpacked: u64 = 0;
    for entry in entries {
        queue.pop_done(output)?;
        let mut entry = entry.map_err(|e| TreeError::Malformed(format!("malformed tarball: {e}")))?;
        let header = entry.header().clone();
        let size = header.entry_size().map_err(|e| TreeError::Malformed(format!("malformed tar header: {e}")))?;
        let etype = header.entry_type();
        if matches!(etype, EntryType::GNULongName | EntryType::XHeader | EntryType::GNULongLink) {
            if size > MAX_RECORD {
                return Err(TreeError::Malformed(format!("a tar record of {size} bytes")));
            }
            let body = read_all(&mut entry, size, "a tar record")?;
            pending.push((header, body));
            continue;
        }
        let long_name =
            pending.iter().find(|(h, _)| h.entry_type() == EntryType::GNULongName).map(|(_, b)| trim_nul(b));
        let pax = pending.iter().find(|(h, _)| h.entry_type() == EntryType::XHeader).map(|(_, b)| b.clone());
        let name = long_name
            .or_else(|| pax.as_deref().and_then(|p| pax_value(p, "path")))
            .unwrap_or_else(|| trim_nul(&header.path_bytes()));
        let name = name.trim_start_matches("./").to_string();
        output.report.scanned += 1;
        unpacked += size;
        let records = std::mem::take(&mut pending);
        let is_file = matches!(etype, EntryType::Regular | EntryType::Continuous);
        if etype == EntryType::Link {
            // Whether its target was removed is known once the files
            // before it are written.
            queue.drain(output)?;
            let target = header.link_name_bytes().map(|b| trim_nul(&b)).unwrap_or_default();
            if output.removed_paths.contains(target.trim_start_matches("./")) {
                output.removed_paths.insert(name);
                continue;
            }
        }
        if !is_file {
            if size == 0 {
                queue.push(Queued { records, header, name, size, what: Pending::Ready(Vec::new()) });
            } else {
                // Another entry with a body (rare): streamed in its turn.
                queue.drain(output)?;
                output.append(records, &header, &mut entry)?;
            }
            continue;
        }
        if let Some(outcome) = file::removed_by_name(&name, rules, size) {
            queue.push(Queued { records, header, name, size, what: Pending::Removed(outcome) });
            continue;
        }
        let mut head = Vec::with_capacity(offload_inspect::package::HEAD_LEN);
        (&mut entry)
            .take(offload_inspect::package::HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| TreeError::Malformed(format!("{name}: {e}")))?;
        if !file::worth_reading(&name, &head) || size > MAX_FILE {
            if queue.entries.is_empty() {
                output.append(records, &header, &mut head.as_slice().chain(&mut entry))?;
            } else if size <= SMALL && queue.small + size <= HELD_SMALL {
                let mut body = head;
                let rest = read_all(&mut entry, size - body.len() as u64, &name)?;
                body.extend_from_slice(&rest);
                queue.push(Queued { records, header, name, size, what: Pending::Ready(body) });
            } else {
                queue.drain(output)?;
                output.append(records, &header, &mut head.as_slice().chain(&mut entry))?;
            }
            continue;
        }
        // Room for this file among those being pruned: wait for the
        // oldest ones to be written until there is.
        while !queue.entries.is_empty() && queue.pruning + size > IN_FLIGHT.max(2 * queue.largest.max(size)) {
            queue.pop(output)?;
        }
        let mut bytes = head;
        let rest = read_all(&mut entry, size - bytes.len() as u64, &name)?;
        bytes.extend_from_slice(&rest);
        drop(rest);
        let bytes = std::sync::Arc::new(bytes);
        let (answer_tx, answer) = std::sync::mpsc::sync_channel(1);
        jobs.send((name.clone(), bytes.clone(), answer_tx))
            .map_err(|_| TreeError::Malformed(format!("{name}: no worker left to prune it")))?;
        let pax_size = pax.as_deref().and_then(|p| pax_value(p, "size")).is_some();
        queue.push(Queued {
            records,
            header,
            name,
            size,
            what: Pending::Pruning { bytes, pax_size, answer, got: None },
        });
    }
    queue.drain(output)?;
    Ok(unpacked)
}
