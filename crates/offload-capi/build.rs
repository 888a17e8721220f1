//! Finds the tools the C API's tests run (`cc`, `valgrind`) and sets
//! `has_cc` / `has_valgrind`, so that a test whose tool is missing is
//! reported as ignored, never as passed. `OFFLOAD_REQUIRE_LLVM=1` (as CI
//! runs) makes a missing tool a build error instead.

use std::path::Path;

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| Path::new(&d).join(tool).is_file()))
}

fn main() {
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=OFFLOAD_REQUIRE_LLVM");
    let required = std::env::var("OFFLOAD_REQUIRE_LLVM").is_ok_and(|v| v == "1");
    for (tool, cfg) in [("cc", "has_cc"), ("valgrind", "has_valgrind")] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if on_path(tool) {
            println!("cargo::rustc-cfg={cfg}");
        } else if required {
            panic!("OFFLOAD_REQUIRE_LLVM=1 but {tool} is missing (scripts/install-test-deps.sh installs it)");
        }
    }
}
