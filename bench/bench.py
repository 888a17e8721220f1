#!/usr/bin/env python3
"""Benchmark: our clang-offload-bundler against LLVM 19's on the same files.

Generates a host file and N device files (default 8 x 64 MiB, partly
compressible like real code objects), then for each workload runs LLVM 19's
bundler and ours alternately, several times, and prints the median wall time
and peak memory (total and anonymous RSS: see measure.py) of each, the
ratio ours/LLVM, and the floor: a kernel copy (copy_file_range) of the
same bytes. Outputs are checked to be
byte-identical to LLVM's before anything is timed.

    bench/bench.py [--size-mib 64] [--devices 8] [--runs 5] [--only bundle,list]

Needs LLVM 19 (scripts/install-reference-llvm.sh) and a release build
(`cargo build --release`); it builds one if missing.
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLVM19 = os.environ.get("OFFLOAD_LLVM19_BIN", "/usr/lib/llvm-19/bin")
HOST = "host-x86_64-unknown-linux-gnu"


def device_target(i):
    gpus = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1200"]
    return f"hipv4-amdgcn-amd-amdhsa--{gpus[i % len(gpus)]}" + ("" if i < len(gpus) else f"-v{i}")


def make_payload(path, size, seed):
    """Code-object-like bytes: random blocks, runs and repeats (about 2-3x
    compressible with zstd)."""
    rng = random.Random(seed)
    block = 1 << 16
    with open(path, "wb") as f:
        written = 0
        recent = []
        while written < size:
            kind = rng.random()
            if kind < 0.35:
                chunk = os.urandom(block)
            elif kind < 0.6 and recent:
                chunk = rng.choice(recent)
            else:
                unit = bytes(rng.randrange(256) for _ in range(rng.choice([4, 8, 16, 64])))
                chunk = (unit * (block // len(unit) + 1))[:block]
            chunk = chunk[: size - written]
            f.write(chunk)
            written += len(chunk)
            recent = (recent + [chunk])[-32:]


def run_measured(cmd, cwd):
    """Runs cmd; returns (wall seconds, peak total RSS in MiB, peak anonymous
    RSS in MiB); see measure.py for the two memory figures.

    Dirty pages left by the previous run (576 MiB per run here) are written
    back first, outside the timing: otherwise the kernel's writeback of one
    tool's outputs lands in the next tool's run and the times measure the
    disk, not the tool (unbundling all varied from 0.15 to 0.9 s without it).
    """
    os.sync()
    m = measure.run(cmd, cwd)
    return m.wall, m.total_mib, m.anon_mib


def copy_floor(srcs, dst):
    """A kernel copy of the same bytes into one file."""
    os.sync()
    start = time.perf_counter()
    with open(dst, "wb") as out:
        for s in srcs:
            with open(s, "rb") as f:
                left = os.fstat(f.fileno()).st_size
                while left > 0:
                    n = os.copy_file_range(f.fileno(), out.fileno(), left)
                    if n <= 0:
                        break
                    left -= n
    return time.perf_counter() - start


def md5_time(path):
    """Seconds to MD5 a file already in the page cache, read in 8 MiB blocks."""
    import hashlib

    start = time.perf_counter()
    h = hashlib.md5()
    with open(path, "rb") as f:
        while block := f.read(8 << 20):
            h.update(block)
    return time.perf_counter() - start


def same_files(a, b):
    return subprocess.run(["cmp", "-s", a, b]).returncode == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="", help="comma list of workloads to run")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()

    llvm = os.path.join(LLVM19, "clang-offload-bundler")
    ours = os.path.join(ROOT, "target", "release", "clang-offload-bundler")
    if not os.path.exists(llvm):
        sys.exit(f"{llvm} not found: run scripts/install-reference-llvm.sh")
    if not os.path.exists(ours):
        subprocess.run(["cargo", "build", "--release", "-p", "offload-cli"], cwd=ROOT, check=True)

    work = args.dir or tempfile.mkdtemp(prefix="offload-bench-")
    os.makedirs(work, exist_ok=True)
    size = args.size_mib << 20
    n = args.devices
    print(f"# inputs: host + {n} devices of {args.size_mib} MiB in {work}", flush=True)
    files = ["host.bin"] + [f"dev{i}.bin" for i in range(n)]
    for i, name in enumerate(files):
        p = os.path.join(work, name)
        if not os.path.exists(p) or os.path.getsize(p) != size:
            make_payload(p, size, seed=i)
    # A host object for the -type=o workloads: the host bytes as .data of an ELF object.
    host_o = os.path.join(work, "host.o")
    have_objects = shutil.which("ld") is not None
    if have_objects and not os.path.exists(host_o):
        subprocess.run(["ld", "-r", "-b", "binary", "-o", "host.o", "host.bin"], cwd=work, check=True)

    targets = ",".join([HOST] + [device_target(i) for i in range(n)])
    inputs = [f"-input={f}" for f in files]
    one = device_target(n // 2)
    all_targets = targets.split(",")

    def bundle(ty, out, extra=(), host="host.bin"):
        ins = [f"-input={host}"] + inputs[1:]
        return [f"-type={ty}", f"-targets={targets}", *ins, f"-output={out}", *extra]

    def unbundle(ty, src, wanted, prefix):
        outs = [f"-output={prefix}{i}" for i in range(len(wanted))]
        return [f"-type={ty}", "-unbundle", f"-input={src}", f"-targets={','.join(wanted)}", *outs]

    # (name, args for both tools, output files to compare, prerequisite)
    workloads = [
        ("bundle", bundle("bc", "{tool}.bundle.bc"), ["{tool}.bundle.bc"]),
        ("unbundle one", unbundle("bc", "llvm.bundle.bc", [one], "{tool}.one."), ["{tool}.one.0"]),
        ("unbundle all", unbundle("bc", "llvm.bundle.bc", all_targets, "{tool}.all."),
         [f"{{tool}}.all.{i}" for i in range(len(all_targets))]),
        ("list", ["-type=bc", "-list", "-input=llvm.bundle.bc"], []),
        ("bundle -compress", bundle("bc", "{tool}.bundle.ccob", ["-compress"]), ["{tool}.bundle.ccob"]),
        ("unbundle one compressed", unbundle("bc", "llvm.bundle.ccob", [one], "{tool}.cone."), ["{tool}.cone.0"]),
    ]
    if have_objects:
        workloads += [
            ("bundle -type=o", bundle("o", "{tool}.fat.o", host="host.o"), ["{tool}.fat.o"]),
            ("unbundle one -type=o", unbundle("o", "llvm.fat.o", [one], "{tool}.oone."), ["{tool}.oone.0"]),
            ("list -type=o", ["-type=o", "-list", "-input=llvm.fat.o"], []),
        ]
    only = [w for w in args.only.split(",") if w]
    if only:
        workloads = [w for w in workloads if w[0] in only or any(o in w[0] for o in only)]

    # The inputs of the unbundle and list workloads, made once by LLVM.
    for out, extra, ty, host in [("llvm.bundle.bc", [], "bc", "host.bin"), ("llvm.bundle.ccob", ["-compress"], "bc", "host.bin"),
                                 ("llvm.fat.o", [], "o", "host.o")]:
        if (ty != "o" or have_objects) and not os.path.exists(os.path.join(work, out)):
            run_measured([llvm] + bundle(ty, out, extra, host), work)

    floor = statistics.median(copy_floor([os.path.join(work, f) for f in files], os.path.join(work, "floor.out"))
                              for _ in range(3))
    print(f"# floor: copy_file_range of the {len(files)} inputs into one file: {floor:.3f} s", flush=True)
    print("# MiB: peak total RSS (ru_maxrss, counts mapped input pages read) / peak anonymous RSS (sampled)")
    print(f"{'workload':26} {'LLVM s':>8} {'ours s':>8} {'ratio':>6} {'LLVM MiB':>13} {'ours MiB':>13} {'ratio':>9}")
    rows = []
    for name, wl_args, outputs in workloads:
        # Prerequisites (the LLVM bundle files) are made by the bundle workloads, which run first.
        times = {"llvm": [], "ours": []}
        mems = {"llvm": [], "ours": []}
        anons = {"llvm": [], "ours": []}
        for r in range(args.runs):
            order = [("llvm", llvm), ("ours", ours)] if r % 2 == 0 else [("ours", ours), ("llvm", llvm)]
            for tool, exe in order:
                cmd = [exe] + [a.replace("{tool}", tool) for a in wl_args]
                t, m, a = run_measured(cmd, work)
                times[tool].append(t)
                mems[tool].append(m)
                anons[tool].append(a)
        for o in outputs:
            a, b = os.path.join(work, o.replace("{tool}", "llvm")), os.path.join(work, o.replace("{tool}", "ours"))
            if not same_files(a, b):
                sys.exit(f"{name}: {o} differs between LLVM and ours")
        lt, ot = statistics.median(times["llvm"]), statistics.median(times["ours"])
        lm, om = statistics.median(mems["llvm"]), statistics.median(mems["ours"])
        la, oa = statistics.median(anons["llvm"]), statistics.median(anons["ours"])
        rows.append((name, lt, ot, lm, om))
        print(f"{name:26} {lt:8.3f} {ot:8.3f} {ot / lt:6.2f} {lm:6.0f}/{la:6.1f} {om:6.0f}/{oa:6.1f} "
              f"{om / lm:4.2f}/{oa / max(la, 1):4.2f}", flush=True)
    print("# all outputs byte-identical to LLVM 19's; medians of", args.runs, "alternating runs")
    compressed = [r for r in rows if r[0] == "unbundle one compressed"]
    if compressed:
        # What bounds unbundling from a compressed bundle: its stored hash is
        # an MD5 of the whole uncompressed bundle, which we always check
        # (LLVM 19 only under -verbose). MD5 is sequential; one core's speed
        # is the floor, measured here with OpenSSL's through hashlib.
        path = os.path.join(work, "llvm.bundle.bc")
        md5_s = statistics.median(md5_time(path) for _ in range(3))
        mib = os.path.getsize(path) / (1 << 20)
        print(f"# bound of 'unbundle one compressed': MD5 of the {mib:.0f} MiB uncompressed bundle takes "
              f"{md5_s:.3f} s on one core = {md5_s / compressed[0][1]:.2f} x LLVM's whole run")


if __name__ == "__main__":
    main()
