//! Decompressing a compressed bundle on a second thread while the calling
//! thread hashes and writes each piece, so that memory stays constant and
//! the hash check overlaps the decompression.

use offload_format::bundle::compressed::{Blob, BlobDecoder, CompressedError, Hasher};
use std::sync::mpsc::{channel, sync_channel};

/// Bytes handed over per step; two steps may be in flight.
const CHUNK: usize = 4 << 20;

/// Why a stream stopped.
#[derive(Debug)]
pub enum StreamError {
    /// The compressed data is damaged or its size lies.
    Input(CompressedError),
    /// The consumer failed (an output could not be written).
    Sink(String),
}

/// Decompresses `blob` on a worker thread and hands every piece, with its
/// offset in the uncompressed data, to `sink` on the calling thread.
/// Returns the truncated MD5 of the whole uncompressed data; the caller
/// compares it with the stored hash.
pub fn for_each_chunk(blob: &Blob, mut sink: impl FnMut(u64, &[u8]) -> Result<(), String>) -> Result<u64, StreamError> {
    let (full_tx, full_rx) = sync_channel::<Result<Vec<u8>, CompressedError>>(2);
    let (empty_tx, empty_rx) = channel::<Vec<u8>>();
    // Charged on the calling thread, to its current decompression budget.
    let charged = offload_inspect::decode::charge_decoded(blob.header.uncompressed_size);
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if let Err(e) = charged {
                let _ = full_tx.send(Err(CompressedError::Decompress(e)));
                return;
            }
            let mut decoder = match BlobDecoder::new(blob) {
                Ok(d) => d,
                Err(e) => {
                    let _ = full_tx.send(Err(e));
                    return;
                }
            };
            loop {
                let mut buf = empty_rx.try_recv().unwrap_or_default();
                match decoder.next_chunk(&mut buf, CHUNK) {
                    Ok(true) => {
                        // The consumer has stopped: nothing more to do.
                        if full_tx.send(Ok(buf)).is_err() {
                            return;
                        }
                    }
                    Ok(false) => return,
                    Err(e) => {
                        let _ = full_tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        let mut hasher = Hasher::default();
        let mut pos = 0u64;
        // Returning drops the receiver, which stops the worker.
        for piece in full_rx {
            let piece = piece.map_err(StreamError::Input)?;
            hasher.update(&piece);
            sink(pos, &piece).map_err(StreamError::Sink)?;
            pos += piece.len() as u64;
            let _ = empty_tx.send(piece);
        }
        Ok(hasher.finish())
    })
}

/// The first `n` uncompressed bytes of `blob` (fewer if it is shorter),
/// decompressing no more than needed.
pub fn peek(blob: &Blob, n: usize) -> Result<Vec<u8>, CompressedError> {
    let mut decoder = BlobDecoder::new(blob)?;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n && decoder.next_chunk(&mut buf, n - out.len())? {
        out.extend_from_slice(&buf);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_format::bundle::compressed::{CompressOptions, compress, read_blob, truncated_md5};

    #[test]
    fn pieces_arrive_in_order_and_hash_like_the_whole() {
        let data: Vec<u8> = (0..10_000_000u32).map(|i| (i % 251) as u8 ^ (i >> 13) as u8).collect();
        let c = compress(&data, &CompressOptions::default()).unwrap().bytes;
        let blob = read_blob(&c).unwrap();
        let mut seen = Vec::new();
        let hash = for_each_chunk(&blob, |pos, piece| {
            assert_eq!(pos as usize, seen.len());
            seen.extend_from_slice(piece);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, data);
        assert_eq!(hash, truncated_md5(&data));
        assert_eq!(peek(&blob, 100).unwrap(), &data[..100]);
    }

    #[test]
    fn a_failing_sink_stops_the_stream() {
        let data = vec![7u8; 20 << 20];
        let c = compress(&data, &CompressOptions::default()).unwrap().bytes;
        let blob = read_blob(&c).unwrap();
        let mut calls = 0;
        let r = for_each_chunk(&blob, |_, _| {
            calls += 1;
            Err("disk full".into())
        });
        assert!(matches!(r, Err(StreamError::Sink(_))));
        assert_eq!(calls, 1);
    }
}
