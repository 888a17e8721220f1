#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| offload_fuzz::coff_object(data));
