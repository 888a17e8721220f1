//! Drop-in `clang-offload-packager`: LLVM 22's `llvm-offload-binary` run
//! under its old name (with LLVM 22's deprecation warning), or LLVM 19's
//! packager under `clang-offload-packager-19` / `OFFLOAD_LLVM_VERSION=19`
//! (`offload_cli::packager`).

fn main() -> std::process::ExitCode {
    offload_cli::packager::main()
}
