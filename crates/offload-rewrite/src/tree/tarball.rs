//! Tarballs and container layers (docs/guide/prune-trees.md, "Tarballs"):
//! read as one stream and written as a new one, compressed as the input
//! was. Every header is copied as it is (modes, owners, times, long-name
//! and pax records) except a rewritten file's size and checksum; files
//! that may hold code are read whole and pruned (one at a time: the
//! stream has one order; each file's fat binaries are rebuilt on all
//! cores), all others stream through.

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

/// Prunes the tarball `data` (compressed as `kind`) into `out` (a dry run
/// when `None`), compressed the same way. The caller stages `out` and
/// commits it when this returns `Ok`.
pub fn prune_tar(
    data: &[u8],
    kind: Compression,
    out: Option<&std::fs::File>,
    opts: &Options,
) -> Result<TreeReport, TreeError> {
    let mut report = TreeReport { input_size: data.len() as u64, ..Default::default() };
    let threads =
        if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
    let mut archive = tar::Archive::new(decoder(kind, data).map_err(|e| TreeError::io("the input", e))?);
    let entries = archive.entries().map_err(|e| TreeError::Malformed(format!("malformed tarball: {e}")))?.raw(true);
    let mut builder = match out {
        Some(f) => Some(tar::Builder::new(
            Encoder::new(kind, BufWriter::with_capacity(1 << 20, f), threads)
                .map_err(|e| TreeError::io("the output", e))?,
        )),
        None => None,
    };
    let werr = |e: io::Error| TreeError::io("the output", e);
    // Long-name and pax records wait for the entry they describe, which
    // may be left out.
    let mut pending: Vec<(Header, Vec<u8>)> = Vec::new();
    let mut removed_paths = std::collections::HashSet::new();
    let mut saved: u64 = 0;
    let mut unpacked: u64 = 0;
    for entry in entries {
        let mut entry = entry.map_err(|e| TreeError::Malformed(format!("malformed tarball: {e}")))?;
        let mut header = entry.header().clone();
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
        report.scanned += 1;
        unpacked += size;
        let mut write = |header: &Header, body: &mut dyn Read, pending: &mut Vec<(Header, Vec<u8>)>| {
            if let Some(b) = builder.as_mut() {
                for (h, rec) in pending.drain(..) {
                    b.append(&h, rec.as_slice()).map_err(werr)?;
                }
                b.append(header, body).map_err(werr)?;
            }
            pending.clear();
            Ok::<(), TreeError>(())
        };
        let is_file = matches!(etype, EntryType::Regular | EntryType::Continuous);
        if etype == EntryType::Link {
            let target = header.link_name_bytes().map(|b| trim_nul(&b)).unwrap_or_default();
            if removed_paths.contains(target.trim_start_matches("./")) {
                pending.clear();
                removed_paths.insert(name);
                continue;
            }
        }
        if !is_file {
            write(&header, &mut entry, &mut pending)?;
            continue;
        }
        if let Some(outcome) = file::removed_by_name(&name, &opts.rules, size) {
            report.files.extend(FileReport::new(name.clone(), &outcome, size));
            removed_paths.insert(name);
            saved += size;
            pending.clear();
            continue;
        }
        let mut head = Vec::with_capacity(offload_inspect::package::HEAD_LEN);
        (&mut entry)
            .take(offload_inspect::package::HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| TreeError::Malformed(format!("{name}: {e}")))?;
        if !file::worth_reading(&name, &head) || size > MAX_FILE {
            write(&header, &mut head.as_slice().chain(&mut entry), &mut pending)?;
            continue;
        }
        let mut bytes = head;
        let rest = read_all(&mut entry, size - bytes.len() as u64, &name)?;
        bytes.extend_from_slice(&rest);
        drop(rest);
        let outcome = file::prune_file(&name, &bytes, &opts.rules)
            .map_err(|source| TreeError::Prune { path: name.clone(), source })?;
        let mut file_report = FileReport::new(name.clone(), &outcome, size);
        match outcome {
            Outcome::Removed { .. } => {
                removed_paths.insert(name);
                saved += size;
                pending.clear();
            }
            Outcome::Rewritten(w) if pax.as_deref().and_then(|p| pax_value(p, "size")).is_some() => {
                if let Some(r) = file_report.as_mut() {
                    r.action = super::Action::Untouched;
                    r.reason = "its size is in a pax record, which this does not rewrite; left as it is".into();
                    r.new_size = size;
                }
                drop(w);
                write(&header, &mut bytes.as_slice(), &mut pending)?;
            }
            Outcome::Rewritten(w) => {
                saved += size - (w.bytes.len() as u64).min(size);
                header.set_size(w.bytes.len() as u64);
                header.set_cksum();
                write(&header, &mut w.bytes.as_slice(), &mut pending)?;
            }
            _ => write(&header, &mut bytes.as_slice(), &mut pending)?,
        }
        report.files.extend(file_report);
    }
    if let Some(b) = builder {
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
    report.notes.push(
        "a tarball is one stream: its files are pruned one after another (each one's fat binaries on all cores)".into(),
    );
    Ok(report)
}
