//! Drop-in `llvm-offload-binary` (LLVM 22), the successor of
//! `clang-offload-packager` (`offload_cli::packager`).

fn main() -> std::process::ExitCode {
    offload_cli::packager::main()
}
