//! Decompression (docs/formats/cuda-fatbin.md §6) and the code-object bytes of an entry (docs/formats/cuda-fatbin.md §4,
//! "Payload"): a cubin at its ELF extent, PTX text without its NUL.

use super::{Codec, CudaError, Entry, EntryKind, cubin_extent};
use std::borrow::Cow;
use std::io::Read;

/// Decodes a compressed stream that the header says holds `declared`
/// bytes. The output grows with what the stream really produces and is cut
/// off one byte past `declared`; a different length is an error.
pub fn decompress(codec: Codec, stream: &[u8], declared: u64) -> Result<Vec<u8>, CudaError> {
    let fail = |problem: String| CudaError::Decompress { codec, problem };
    let out = match codec {
        Codec::Lz4 => {
            // A raw LZ4 block expands at most 255 times (one token byte plus
            // extension bytes of 255 per 255 output bytes), so a declared
            // size beyond that is a lie and nothing is allocated for it.
            let bound = (stream.len() as u64).saturating_mul(255).saturating_add(16);
            if declared > bound {
                return Err(fail(format!("{declared} bytes cannot come from a {}-byte block", stream.len())));
            }
            // Within that bound the size is still the file's word: the
            // memory is asked for fallibly, so a size this process cannot
            // hold (a memory limit, `ulimit -v`) is an error, not an abort.
            let len = usize::try_from(declared).map_err(|_| fail("too large".into()))?;
            let mut out = Vec::new();
            out.try_reserve_exact(len)
                .map_err(|_| fail(format!("cannot allocate the {declared} bytes the entry declares")))?;
            out.resize(len, 0);
            let n = lz4_flex::block::decompress_into(stream, &mut out).map_err(|e| fail(e.to_string()))?;
            out.truncate(n);
            out
        }
        Codec::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(stream).map_err(|e| fail(e.to_string()))?;
            decoder
                .window_log_max(crate::bundle::compressed::zstd_window_log_max(declared))
                .map_err(|e| fail(e.to_string()))?;
            let mut out = Vec::new();
            decoder.take(declared.saturating_add(1)).read_to_end(&mut out).map_err(|e| fail(e.to_string()))?;
            out
        }
        Codec::Obfuscated => return Err(CudaError::Obfuscated),
        Codec::Unknown(bits) => return Err(CudaError::UnknownCodec(bits)),
    };
    if out.len() as u64 != declared {
        return Err(CudaError::SizeMismatch { declared, actual: out.len() as u64 });
    }
    Ok(out)
}

/// PTX text: up to (without) the first NUL.
pub fn ptx_text(data: &[u8]) -> &[u8] {
    memchr::memchr(0, data).map_or(data, |n| &data[..n])
}

/// The code object an entry holds, as `cuobjdump -xelf`/`-xptx` would
/// write it: decompressed, a cubin cut at its ELF extent, PTX cut at its
/// NUL. NVVM and unknown kinds: the decoded payload. Concatenated entries:
/// the whole decoded stream (their children are sliced from it).
pub fn code_object_bytes<'a>(entry: &Entry<'a>) -> Result<Cow<'a, [u8]>, CudaError> {
    let data: Cow<'a, [u8]> = match entry.header.codec() {
        None => Cow::Borrowed(entry.stored),
        Some(codec) => Cow::Owned(decompress(codec, entry.stream()?, entry.header.uncompressed_size)?),
    };
    Ok(match entry.header.kind() {
        EntryKind::Elf => match data {
            Cow::Borrowed(b) => Cow::Borrowed(cut_elf(b)),
            Cow::Owned(v) => {
                let n = cut_elf(&v).len();
                let mut v = v;
                v.truncate(n);
                Cow::Owned(v)
            }
        },
        EntryKind::Ptx => match data {
            Cow::Borrowed(b) => Cow::Borrowed(ptx_text(b)),
            Cow::Owned(v) => {
                let n = ptx_text(&v).len();
                let mut v = v;
                v.truncate(n);
                Cow::Owned(v)
            }
        },
        _ => data,
    })
}

/// A cubin at its extent; bytes whose ELF tables cannot be read are kept
/// whole.
fn cut_elf(data: &[u8]) -> &[u8] {
    match cubin_extent(data).and_then(|n| usize::try_from(n).ok()) {
        Some(n) => &data[..n.min(data.len())],
        None => data,
    }
}
