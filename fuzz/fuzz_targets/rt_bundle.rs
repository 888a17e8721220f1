#![no_main]

libfuzzer_sys::fuzz_target!(|case: offload_fuzz::BundleCase| offload_fuzz::rt_bundle(case));
