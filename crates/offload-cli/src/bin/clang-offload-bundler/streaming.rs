//! Unbundling and listing compressed binary bundles while they decompress:
//! the entry table is read from the first bytes, every payload is written
//! to its output as it streams by, and the stored hash is checked before
//! anything is committed. Memory stays constant whatever the bundle's size,
//! and the hash is computed on one core while the other decompresses.

use crate::compression::print_decompression_stats;
use offload_cli::stream::{StreamError, for_each_chunk, peek};
use offload_cli::timers::TimerGroup;
use offload_format::bundle::compressed::{self, Blob, CompressedError};
use offload_format::bundle::{FileType, binary};
use offload_format::bundler::{self, BundlerError, DecompressionInfo, Fill, Targets, UnbundleOptions};
use offload_io::Outputs;

fn fail(e: CompressedError) -> String {
    BundlerError::Decompress(e).to_string()
}

/// The compressed bundle to stream, if `input` is one that can be handled
/// while it streams: a binary bundle can (its table comes first); text
/// bundles and objects need the whole input.
pub fn streamable(input: &[u8], file_type: FileType) -> Result<Option<Blob<'_>>, String> {
    if !compressed::is_compressed(input) || !matches!(file_type, FileType::Binary | FileType::Object) {
        return Ok(None);
    }
    let blob = compressed::read_single_blob(input).map_err(fail)?;
    if file_type == FileType::Object {
        // A compressed object would need the object handler.
        let head = peek(&blob, binary::MAGIC.len()).map_err(fail)?;
        if !binary::has_magic(&head) {
            return Ok(None);
        }
    }
    Ok(Some(blob))
}

/// Runs the stream, reports `-verbose` statistics and checks the hash.
fn run(
    blob: &Blob,
    verbose: bool,
    timers: &mut TimerGroup,
    sink: impl FnMut(u64, &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let (result, wall) = timers.time("Decompression time", || for_each_chunk(blob, sink));
    let computed_hash = match result {
        Ok(h) => h,
        Err(StreamError::Input(e)) => return Err(fail(e)),
        Err(StreamError::Sink(e)) => return Err(e),
    };
    let info = DecompressionInfo { header: blob.header, compressed_len: blob.data.len(), computed_hash };
    if verbose {
        print_decompression_stats(&info, wall);
    }
    if computed_hash != blob.header.hash {
        return Err(fail(CompressedError::HashMismatch { stored: blob.header.hash, computed: computed_hash }));
    }
    Ok(())
}

/// Reads the entry table from the first bytes of the stream. `None` until
/// the bytes seen hold all of it; a damaged table is an error.
fn table_of(prefix: &[u8], total: u64) -> Result<Option<Option<Vec<binary::TableEntry<'_>>>>, String> {
    match binary::read_table(prefix, total) {
        Ok(binary::Table::Incomplete) => Ok(None),
        Ok(binary::Table::NotABundle) => Ok(Some(None)),
        Ok(binary::Table::Complete(t)) => Ok(Some(Some(t))),
        Err(e) => Err(BundlerError::from(e).to_string()),
    }
}

/// Appends a piece to the collected prefix; the prefix can be as large as
/// the decompressed data, so running out of memory is an error, not an
/// abort.
fn append(prefix: &mut Vec<u8>, piece: &[u8]) -> Result<(), String> {
    prefix.try_reserve(piece.len()).map_err(|e| fail(CompressedError::Decompress(e.to_string())))?;
    prefix.extend_from_slice(piece);
    Ok(())
}

/// Whether the table should be parsed again now that the prefix holds
/// `len` bytes, having last been parsed at `parsed` bytes. Parsing only
/// when the prefix has doubled keeps the total work linear: a table of
/// millions of records (a few kilobytes of compressed input can inflate
/// to that) would otherwise be parsed afresh for every 4 MiB piece.
fn worth_parsing(len: usize, parsed: usize) -> bool {
    len >= parsed.saturating_mul(2).max(1 << 16)
}

enum State {
    /// Collecting the first bytes until the entry table is complete (and
    /// the length at which the table was last found incomplete).
    Table(Vec<u8>, usize),
    /// Writing: each output's handle and what goes into it.
    Writing(Vec<(usize, Fill<(u64, u64)>)>),
    /// The table or the request was refused; the stream still runs to the
    /// end so that damaged data is reported first, as LLVM would.
    Refused(String),
}

struct Unbundler<'r> {
    targets: &'r Targets,
    options: UnbundleOptions,
    outputs: &'r [String],
    staged: &'r mut Outputs,
    total: u64,
    state: State,
}

impl Unbundler<'_> {
    /// Decides every output from the table in `prefix` (`at_end`: the
    /// stream is over and `prefix` is all there is).
    fn decide(&mut self, prefix: Vec<u8>, at_end: bool) -> Result<(), String> {
        let total = if at_end { prefix.len() as u64 } else { self.total };
        let fills = match table_of(&prefix, total) {
            Ok(None) => {
                let parsed = prefix.len();
                self.state = State::Table(prefix, parsed);
                return Ok(());
            }
            Ok(Some(table)) => bundler::unbundle_table(self.targets, table.as_deref(), self.options),
            Err(message) => {
                self.state = State::Refused(message);
                return Ok(());
            }
        };
        match fills {
            Err(e) => self.state = State::Refused(e.to_string()),
            Ok(fills) => {
                let mut handles = Vec::with_capacity(fills.len());
                for (path, fill) in self.outputs.iter().zip(fills) {
                    handles.push((self.staged.stage_empty(path).map_err(|e| e.to_string())?, fill));
                }
                self.state = State::Writing(handles);
                self.write(0, &prefix)?;
            }
        }
        Ok(())
    }

    fn feed(&mut self, pos: u64, piece: &[u8]) -> Result<(), String> {
        match &mut self.state {
            State::Table(prefix, parsed) => {
                append(prefix, piece)?;
                if !worth_parsing(prefix.len(), *parsed) {
                    return Ok(());
                }
                let prefix = std::mem::take(prefix);
                self.decide(prefix, false)
            }
            State::Writing(_) => self.write(pos, piece),
            State::Refused(_) => Ok(()),
        }
    }

    /// Writes the parts of `piece` (at `pos` of the bundle) that belong to
    /// outputs.
    fn write(&mut self, pos: u64, piece: &[u8]) -> Result<(), String> {
        let State::Writing(handles) = &self.state else { return Ok(()) };
        let end = pos + piece.len() as u64;
        for &(handle, ref fill) in handles {
            let (at, bytes) = match *fill {
                Fill::Payload((offset, size)) => {
                    let (from, to) = (pos.max(offset), end.min(offset + size));
                    if from >= to {
                        continue;
                    }
                    (from - offset, &piece[(from - pos) as usize..(to - pos) as usize])
                }
                Fill::WholeInput => (pos, piece),
                Fill::Empty => continue,
            };
            self.staged.write_at(handle, at, bytes).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Unbundles a compressed binary bundle into `staged` (committed by the
/// caller), with the same decisions as the in-memory path.
pub fn unbundle(
    blob: &Blob,
    targets: &Targets,
    options: UnbundleOptions,
    outputs: &[String],
    staged: &mut Outputs,
    verbose: bool,
    timers: &mut TimerGroup,
) -> Result<(), String> {
    let mut u = Unbundler {
        targets,
        options,
        outputs,
        staged,
        total: blob.header.uncompressed_size,
        state: State::Table(Vec::new(), 0),
    };
    run(blob, verbose, timers, |pos, piece| u.feed(pos, piece))?;
    // A stream shorter than its table: decide on what there is.
    if let State::Table(prefix, _) = &mut u.state {
        let prefix = std::mem::take(prefix);
        u.decide(prefix, true)?;
    }
    match u.state {
        State::Refused(message) => Err(message),
        _ => Ok(()),
    }
}

/// The IDs `-list` prints for a compressed binary bundle, after the whole
/// bundle has streamed through the hash check.
pub fn list(blob: &Blob, verbose: bool, timers: &mut TimerGroup) -> Result<Vec<Vec<u8>>, String> {
    let total = blob.header.uncompressed_size;
    let mut prefix = Vec::new();
    let mut done = false;
    let mut parsed = 0;
    run(blob, verbose, timers, |_, piece| {
        if !done {
            append(&mut prefix, piece)?;
            if worth_parsing(prefix.len(), parsed) {
                // Errors in the table are reported once the stream is over.
                done = !matches!(table_of(&prefix, total), Ok(None));
                parsed = prefix.len();
            }
        }
        Ok(())
    })?;
    let table = table_of(&prefix, if done { total } else { prefix.len() as u64 })?;
    Ok(match table {
        Some(Some(t)) => bundler::table_in_map_order(&t).into_iter().map(|e| e.id.to_vec()).collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table that only completes after a gigabyte of 4 MiB pieces is
    /// parsed a handful of times, not once per piece (256 times, each over
    /// millions of records).
    #[test]
    fn the_table_is_parsed_a_logarithmic_number_of_times() {
        let (mut len, mut parsed, mut parses) = (0usize, 0usize, 0);
        while len < 1 << 30 {
            len += 4 << 20;
            if worth_parsing(len, parsed) {
                parsed = len;
                parses += 1;
            }
        }
        assert!(parses <= 10, "{parses} parses");
        // Small tables are parsed as soon as 64 KiB have arrived.
        assert!(worth_parsing(1 << 16, 0));
        assert!(!worth_parsing(100, 0));
    }
}
