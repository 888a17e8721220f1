//! End to end: a real OpenMP offloading build by clang 19's new driver whose
//! packaging step runs our clang-offload-packager (found through `-B`),
//! linked by clang-linker-wrapper (which reads our package back from the
//! host object) and run on libomptarget 19's host (x86_64) plugin.
//!
//! Needs clang 19 and LLVM 19's OpenMP runtime (`libomp.so`,
//! `libomptarget.so`, `libomptarget.devicertl.a`; /opt/omp19/lib as
//! `scripts/install-reference-llvm.sh` installs it, or OFFLOAD_OMP19_LIB).
//! Ignored when missing; a failure under OFFLOAD_REQUIRE_LLVM=1.

use crate::common;

use offload_format::offload_binary::{ImageKind, OffloadBinary, OffloadKind, container};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_omp19)),
    ignore = "needs LLVM 19 and LLVM 19's OpenMP runtime: run scripts/install-reference-llvm.sh"
)]
fn openmp_offload_build_uses_our_packager_and_runs_on_device_0() {
    let (clang, llvm_packager, omp) =
        (common::llvm_tool(19, "clang"), common::llvm_tool(19, "clang-offload-packager"), common::omp19_runtime(false));
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    // A -B directory whose clang-offload-packager logs its arguments and
    // runs ours, so the test can tell which packager the driver used.
    let bin = dir.join("bin");
    fs::create_dir(&bin).unwrap();
    let log = dir.join("packager.log");
    let wrapper = bin.join("clang-offload-packager");
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            env!("CARGO_BIN_EXE_clang-offload-packager")
        ),
    )
    .unwrap();
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("t.c"), offload_testkit::OPENMP_TARGET_PROGRAM).unwrap();

    let compile = common::run(
        Command::new(&clang)
            .current_dir(dir)
            .args(["-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu", "--offload-new-driver", "-save-temps"])
            .arg(format!("-B{}", bin.display()))
            .arg(format!("-L{}", omp.display()))
            .arg(format!("-Wl,-rpath,{}", omp.display()))
            .args(["t.c", "-o", "t"]),
    );
    assert!(compile.status.success(), "compile failed:\n{}", String::from_utf8_lossy(&compile.stderr));

    // 1. The driver's packaging step ran our binary.
    let logged = fs::read_to_string(&log).expect("our clang-offload-packager was not run");
    let args: Vec<&str> = logged.lines().collect();
    assert_eq!(args.len(), 1, "{logged}");
    assert!(args[0].contains("--image=file=") && args[0].contains("triple=x86_64-pc-linux-gnu"), "{logged}");
    assert!(args[0].contains("kind=openmp"), "{logged}");

    // 2. What it wrote is what LLVM's packager writes for the same input.
    let saved = dir.join("t-openmp-x86_64-pc-linux-gnu.out");
    let ours = fs::read(&saved).expect("-save-temps kept the package");
    let again = common::run(Command::new(&llvm_packager).current_dir(dir).args([
        "-o",
        "llvm.out",
        "--image=file=t-openmp-x86_64-pc-linux-gnu.o,triple=x86_64-pc-linux-gnu,arch=,kind=openmp",
    ]));
    assert!(again.status.success());
    assert!(ours == fs::read(dir.join("llvm.out")).unwrap(), "the package differs from LLVM 19's");
    let bins = OffloadBinary::parse_all(&ours).unwrap();
    assert_eq!(bins.len(), 1);
    assert_eq!((bins[0].offload_kind(), bins[0].image_kind()), (OffloadKind::OpenMp, ImageKind::Object));

    // 3. The host object carries it in .llvm.offloading.
    let host = fs::read(dir.join("t-host-x86_64-pc-linux-gnu.o")).unwrap();
    let scan = container::scan(&host, "host.o");
    assert_eq!(scan.packages.len(), 1);
    assert_eq!(&scan.packages[0].data[..], &ours[..]);

    // 4. The program offloads its kernel to device 0 and gets it right.
    let run = common::run(
        Command::new(dir.join("t"))
            .current_dir(dir)
            .env("OMP_TARGET_OFFLOAD", "MANDATORY")
            .env("LIBOMPTARGET_INFO", "-1")
            .env("LD_LIBRARY_PATH", &omp),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "program failed:\n{stdout}\n{stderr}");
    assert_eq!(stdout, "sum=500500 square15=225\n");
    assert!(stderr.contains("omptarget device 0 info: Entering OpenMP kernel"), "{stderr}");
    assert!(stderr.contains("device 0 info: Launching kernel __omp_offloading_"), "{stderr}");
}
