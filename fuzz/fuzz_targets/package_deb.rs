#![no_main]

use offload_inspect::package::Kind;

libfuzzer_sys::fuzz_target!(|data: &[u8]| offload_fuzz::package_walk(Some(Kind::Deb), data));
