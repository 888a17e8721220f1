#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| offload_fuzz::offload_binary_v3(data));
