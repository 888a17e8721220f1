//! Finds the vendor tools two unit tests compare with (`llvm-readelf` of
//! LLVM 19 or 22; CUDA's `cuobjdump`) and sets `has_readelf` /
//! `has_cuobjdump`, so that a comparison whose tool is missing is reported
//! as ignored, never as passed. The library itself uses no tool.

use std::path::Path;

fn main() {
    for var in ["CUOBJDUMP", "PATH"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let readelf = ["/usr/lib/llvm-19/bin/llvm-readelf", "/usr/lib/llvm-22/bin/llvm-readelf"];
    let on_path = |tool: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    let cuobjdump = std::env::var_os("CUOBJDUMP").is_some_and(|p| Path::new(&p).is_file())
        || Path::new("/opt/cuda-wheels/nvidia/cu13/bin/cuobjdump").is_file()
        || on_path("cuobjdump");
    for (cfg, found) in [("has_readelf", readelf.iter().any(|p| Path::new(p).is_file())), ("has_cuobjdump", cuobjdump)]
    {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if found {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
