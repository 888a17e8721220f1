#![no_main]

use offload_inspect::package::Kind;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The first byte picks the compression, the rest is the stream.
    let kinds = [Kind::Gzip, Kind::Xz, Kind::Zstd, Kind::Bzip2];
    if let Some((first, rest)) = data.split_first() {
        offload_fuzz::package_walk(Some(kinds[usize::from(*first) % kinds.len()]), rest)
    }
});
