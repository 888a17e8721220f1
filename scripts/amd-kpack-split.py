#!/usr/bin/env python3
"""Run AMD's kpack splitter (ROCm/rocm-systems shared/kpack, not part of
this repository) on one fat library, the way TheRock's build does, and lay
its output out as an installed tree.

    AMD_KPACK_SRC=/path/to/shared/kpack/python \
        python3 scripts/amd-kpack-split.py LIBRARY OUT [--runs N]
    AMD_KPACK_SRC=... python3 scripts/amd-kpack-split.py --wheel ROOT X.whl OUT [--runs N]

The library is put in an artifact folder (`artifact_manifest.txt` naming
one prefix, `stage`, the library at `stage/lib/`), split with
`rocm_kpack.artifact_splitter.ArtifactSplitter` (prefix `bench`), and the
generic artifact and every per-target artifact are overlaid into
`OUT/stage/` (`lib/LIBRARY` plus `.kpack/bench_<target>.kpack`), which is
what an install of the split artifacts gives. With `--runs N` the split is
timed N times (the output of the last run is kept) and one line per run is
printed: `wall_s cpu_s` (CPU = user + system of this process, AMD's
splitter runs in-process).

With `--wheel ROOT` the input is a wheel and AMD's wheel splitter
(`rocm_kpack.wheel_splitter.WheelSplitter`, one worker, zstd level 3, its
defaults) writes the host wheel and one device wheel per processor into
OUT; ROOT is the wheel's top-level package folder (AMD's `--overlay-root`)
and the device wheels are named `amd-<ROOT>-device-<processor>`. It needs
`rocm-bootstrap` from PyPI beside `msgpack` and `zstandard`.
"""
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def cpu_s() -> float:
    """User + system time of this process (getrusage: microseconds, where
    os.times counts clock ticks of 10 ms)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    args = sys.argv[1:]
    runs = 1
    wheel_root = None
    if "--wheel" in args:
        i = args.index("--wheel")
        wheel_root = args[i + 1]
        del args[i : i + 2]
    if "--runs" in args:
        i = args.index("--runs")
        runs = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = os.environ.get("AMD_KPACK_SRC")
    if not src:
        print("AMD_KPACK_SRC is not set", file=sys.stderr)
        return 2
    sys.path.insert(0, src)
    from rocm_kpack.artifact_splitter import ArtifactSplitter  # AMD's code
    from rocm_kpack.binutils import Toolchain

    lib = Path(args[0]).resolve()
    out = Path(args[1])
    if wheel_root is not None:
        return split_wheel(lib, out, wheel_root, runs)
    work = Path(tempfile.mkdtemp(prefix="amd-kpack-"))
    try:
        art = work / "artifact"
        (art / "stage" / "lib").mkdir(parents=True)
        (art / "artifact_manifest.txt").write_text("stage\n")
        shutil.copyfile(lib, art / "stage" / "lib" / lib.name)
        for _ in range(runs):
            split = work / "split"
            shutil.rmtree(split, ignore_errors=True)
            t0 = time.perf_counter()
            c0 = cpu_s()
            ArtifactSplitter("bench", Toolchain()).split(art, split)
            cpu = cpu_s() - c0
            t1 = time.perf_counter()
            if runs > 1 or "--quiet" not in args:
                print(f"{t1 - t0:.4f} {cpu:.4f}")
        shutil.rmtree(out, ignore_errors=True)
        for artifact in sorted(split.iterdir()):
            stage = artifact / "stage"
            if stage.is_dir():
                shutil.copytree(stage, out / "stage", dirs_exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def split_wheel(wheel: Path, out: Path, root: str, runs: int) -> int:
    from rocm_kpack.binutils import Toolchain  # AMD's code
    from rocm_kpack.wheel_splitter import WheelSplitter

    work = Path(tempfile.mkdtemp(prefix="amd-kpack-wheel-"))
    try:
        # AMD's splitter unpacks next to its input: give it a private copy.
        src = work / wheel.name
        shutil.copyfile(wheel, src)
        for _ in range(runs):
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            c0 = cpu_s()
            WheelSplitter(f"amd-{root}-device", root, Toolchain()).split(src, out)
            cpu = cpu_s() - c0
            t1 = time.perf_counter()
            print(f"{t1 - t0:.4f} {cpu:.4f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
