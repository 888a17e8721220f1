//! The `cli`, `interop`, `corpus` and `memory` harnesses compare the drop-in
//! tools with LLVM 19's (their fixtures were made by LLVM 19, their live
//! tests run LLVM 19's binaries): they run ours as LLVM 19, which
//! `OFFLOAD_LLVM_VERSION=19` selects (docs/llvm-releases.md). The variable
//! is set once, before the test threads start, so every child (ours, or a
//! clang driver running ours through `-B`) inherits it. The LLVM 22
//! behaviour, the default, is tested by the `llvm22_dropins` harness.

#[ctor::ctor(unsafe)]
fn follow_llvm19() {
    // SAFETY: runs before main, while the process has one thread.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("OFFLOAD_LLVM_VERSION", "19");
    }
}
