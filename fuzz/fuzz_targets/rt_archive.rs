#![no_main]

libfuzzer_sys::fuzz_target!(|members: Vec<(String, &[u8])>| offload_fuzz::rt_archive(members));
