#!/usr/bin/env python3
"""`offload list` against NVIDIA's `cuobjdump --list-elf` on a real CUDA
library, in one run: alternating runs, median wall time and peak memory
(max RSS) of each, and the ratio ours/NVIDIA's. Also checks that both
report the same number of cubins.

    bash scripts/install-cuda-tools.sh
    pip download --no-deps nvidia-curand==10.4.5.25 && unzip nvidia_curand-*.whl -d curand
    cargo build --release
    python3 bench/cuda.py curand/nvidia/cu13/lib/libcurand.so.10 [--runs 5]
"""
import argparse, os, statistics, subprocess, sys, time
import json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFLOAD = os.path.join(ROOT, "target", "release", "offload")
CUOBJDUMP = os.path.join(os.environ.get("OFFLOAD_CUDA_BIN", "/opt/cuda-wheels/nvidia/cu13/bin"), "cuobjdump")


def run_measured(cmd):
    """Wall seconds, max RSS in MiB and stdout of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{cmd} failed with status {status}")
    return wall, usage.ru_maxrss / 1024.0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    ours_cmd = [OFFLOAD, "list", "--json", args.library]
    theirs_cmd = [CUOBJDUMP, "--list-elf", args.library]
    ours, theirs = [], []
    for _ in range(args.runs):
        w, m, out = run_measured(theirs_cmd)
        theirs.append((w, m))
        cubins_theirs = sum(1 for l in out.decode().splitlines() if l.startswith("ELF file"))
        w, m, out = run_measured(ours_cmd)
        ours.append((w, m))
        # cuobjdump lists the executable fat binaries (.nv_fatbin) only.
        cubins_ours = sum(1 for r in json.loads(out) if r["image_kind"] == "elf" and ".nv_fatbin" in r["location"])
    if cubins_ours != cubins_theirs:
        sys.exit(f"cubin counts differ: ours {cubins_ours}, cuobjdump {cubins_theirs}")
    size = os.path.getsize(args.library) / (1 << 20)
    med = lambda rows, k: statistics.median(r[k] for r in rows)
    print(f"# {args.library}: {size:.0f} MiB, {cubins_theirs} cubins, medians of {args.runs} alternating runs")
    print(f"{'workload':28} {'cuobjdump s':>11} {'ours s':>8} {'ratio':>6} {'cuobjdump MiB':>13} {'ours MiB':>9} {'ratio':>6}")
    tw, ow, tm, om = med(theirs, 0), med(ours, 0), med(theirs, 1), med(ours, 1)
    print(f"{'list (cuobjdump --list-elf)':28} {tw:11.3f} {ow:8.3f} {ow / tw:6.2f} {tm:13.1f} {om:9.1f} {om / tm:6.2f}")


if __name__ == "__main__":
    main()
