#![no_main]

libfuzzer_sys::fuzz_target!(|spec: &str| offload_fuzz::image_args(spec));
