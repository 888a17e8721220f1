//! The file names `extract` gives the code objects it writes.

/// A file name for an extracted code object.
pub fn output_name(file: &str, index: usize, id: &str, bytes: &[u8]) -> String {
    let clean: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.+".contains(c) { c } else { '_' }).collect();
    // CUDA entries take the names cuobjdump gives them (`.cubin`, `.ptx`).
    let ext = if id.starts_with("cuda-elf-") {
        ".cubin"
    } else if id.starts_with("cuda-ptx-") {
        ".ptx"
    } else if bytes.starts_with(b"\x7fELF") {
        ".co"
    } else if offload_format::offload_binary::is_bitcode(bytes) {
        ".bc"
    } else {
        ""
    };
    fit_name(&format!("{}-{index}-{clean}{ext}", crate::inputs::display_name(file)))
}

/// The longest file name written (Linux's NAME_MAX is 255 bytes).
const MAX_NAME: usize = 255;

/// `name` if it fits in a file name; else its first 200 bytes (cut at a
/// character boundary), `-` and a 16-digit hash of the whole name, and the
/// extension kept, so that long entry IDs still give distinct, writable
/// names (docs/reliability.md).
pub fn fit_name(name: &str) -> String {
    if name.len() <= MAX_NAME {
        return name.to_string();
    }
    // FNV-1a, 64 bits: stable across runs and releases.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let ext = match name.rfind('.') {
        Some(dot) if name.len() - dot <= 8 => &name[dot..],
        _ => "",
    };
    let mut cut = 200;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{hash:016x}{ext}", &name[..cut])
}
