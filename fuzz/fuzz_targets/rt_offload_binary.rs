#![no_main]

libfuzzer_sys::fuzz_target!(|images: Vec<offload_fuzz::PackageImage>| offload_fuzz::rt_offload_binary(images));
