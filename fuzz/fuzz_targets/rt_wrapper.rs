#![no_main]

libfuzzer_sys::fuzz_target!(|case: offload_fuzz::WrapperCase| offload_fuzz::rt_wrapper(case));
