#![no_main]

libfuzzer_sys::fuzz_target!(|case: offload_fuzz::CompressCase| offload_fuzz::rt_compressed(case));
