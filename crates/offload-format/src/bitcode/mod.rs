//! Reading LLVM bitcode files, as far as offloading needs: the symbols an
//! archive index lists for a bitcode member ([`archive_symbols`]), and the
//! packages Clang embeds in bitcode (used by `offload_binary`'s container
//! scan). Both stand on one bitstream reader (`stream`); the write side is
//! `wrapper::bitstream`.

pub(crate) mod embedded;
mod stream;
mod symtab;

pub use symtab::archive_symbols;

/// Whether `data` starts like LLVM bitcode (`BC C0 DE`, or the wrapper
/// magic `DE C0 17 0B`), as LLVM's `identify_magic` decides it.
pub fn is_bitcode(data: &[u8]) -> bool {
    data.starts_with(b"BC\xc0\xde") || data.starts_with(&[0xde, 0xc0, 0x17, 0x0b])
}
