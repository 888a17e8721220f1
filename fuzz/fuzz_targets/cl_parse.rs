#![no_main]

libfuzzer_sys::fuzz_target!(|args: Vec<String>| offload_fuzz::cl_parse(args));
