#![no_main]

libfuzzer_sys::fuzz_target!(|text: &str| offload_fuzz::target_ids(text));
