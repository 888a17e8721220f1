#!/usr/bin/env python3
"""Benchmark: our clang-offload-bundler against LLVM 19's and LLVM 22's on
the same files.

Generates a host file and N device files (default 8 x 64 MiB, partly
compressible like real code objects), then for each workload runs LLVM 19's
bundler, LLVM 22's (when installed) and ours in turn, several times, and
prints the median wall time and peak memory (total and anonymous RSS: see
measure.py) of each, the ratios ours/LLVM 19 and ours/LLVM 22, and the
floor: a kernel copy (copy_file_range) of the same bytes. Ours runs as the
LLVM release it is compared with (OFFLOAD_LLVM_VERSION=19 beside LLVM 19,
its default, 22, beside LLVM 22), and its outputs are checked to be
byte-identical to that release's.

    bench/bench.py [--size-mib 64] [--devices 8] [--runs 5] [--only bundle,list]

OFFLOAD_BUNDLER=PATH times another build of ours (a copy of an older
release binary, to compare before and after a change in the same
conditions); --baseline PATH adds that binary as a third tool beside ours
and prints ours/baseline, run alternately with ours in every workload.

Needs LLVM 19 (scripts/install-reference-llvm.sh) and a release build
(`cargo build --release`); it builds one if missing.
"""

import argparse
import atexit
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
LLVM22 = os.environ.get("OFFLOAD_LLVM22_BIN", "/usr/lib/llvm-22/bin")
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


def run_as(release, cmd, cwd):
    """run_measured with OFFLOAD_LLVM_VERSION set to release (None: unset)."""
    old = os.environ.pop("OFFLOAD_LLVM_VERSION", None)
    if release:
        os.environ["OFFLOAD_LLVM_VERSION"] = release
    try:
        return run_measured(cmd, cwd)
    finally:
        os.environ.pop("OFFLOAD_LLVM_VERSION", None)
        if old is not None:
            os.environ["OFFLOAD_LLVM_VERSION"] = old


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
    ap.add_argument("--baseline", default=None, help="another build of ours to time beside it (ours/baseline)")
    args = ap.parse_args()

    llvm = os.path.join(LLVM19, "clang-offload-bundler")
    llvm22 = os.path.join(LLVM22, "clang-offload-bundler")
    ours = os.environ.get("OFFLOAD_BUNDLER") or os.path.join(ROOT, "target", "release", "clang-offload-bundler")
    if not os.path.exists(llvm):
        sys.exit(f"{llvm} not found: run scripts/install-reference-llvm.sh")
    # (name, program, OFFLOAD_LLVM_VERSION for ours): LLVM 22 when present.
    refs = [("llvm", llvm, "19")]
    if os.path.exists(llvm22):
        refs.append(("llvm22", llvm22, None))
    else:
        print(f"# {llvm22} not found: comparing with LLVM 19 only", flush=True)
    if not os.path.exists(ours):
        subprocess.run(["cargo", "build", "--release", "-p", "offload-cli"], cwd=ROOT, check=True)

    work = args.dir or tempfile.mkdtemp(prefix="offload-bench-")
    if not args.dir:
        # Its inputs and outputs take about 10 GiB: never left behind.
        atexit.register(shutil.rmtree, work, True)
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
    print("# ours runs as LLVM 19 beside LLVM 19 and as LLVM 22 (its default) beside LLVM 22")
    head = f"{'workload':26} {'LLVM19 s':>8} {'ours s':>8} {'ratio':>6} {'LLVM19 MiB':>13} {'ours MiB':>13} {'ratio':>9}"
    if len(refs) > 1:
        head += f" {'LLVM22 s':>8} {'ours22 s':>8} {'ratio':>6} {'LLVM22 MiB':>13} {'ours22 MiB':>13} {'ratio':>9}"
    if args.baseline:
        head += "   baseline s (beside LLVM 19[, 22]), ours/baseline"
        print(f"# baseline: {args.baseline}")
    print(head)
    rows = []
    for name, wl_args, outputs in workloads:
        # Prerequisites (the LLVM bundle files) are made by the bundle workloads, which run first.
        line = f"{name:26}"
        versus_base = ""
        for ref, exe_ref, release in refs:
            mine = "ours" if ref == "llvm" else "ours22"
            base = "base" if ref == "llvm" else "base22"
            times = {ref: [], mine: [], base: []}
            mems = {ref: [], mine: [], base: []}
            anons = {ref: [], mine: [], base: []}
            for r in range(args.runs):
                order = [(ref, exe_ref, None), (mine, ours, release)]
                if args.baseline:
                    order.insert(1, (base, args.baseline, release))
                if r % 2:
                    order.reverse()
                for tool, exe, rel in order:
                    # The unbundle and list inputs are LLVM 19's files for both.
                    cmd = [exe] + [a.replace("{tool}", tool) for a in wl_args]
                    t, m, a = run_as(rel, cmd, work)
                    times[tool].append(t)
                    mems[tool].append(m)
                    anons[tool].append(a)
            for o in outputs:
                a, b = os.path.join(work, o.replace("{tool}", ref)), os.path.join(work, o.replace("{tool}", mine))
                if not same_files(a, b):
                    sys.exit(f"{name}: {o} differs between {ref} and ours")
                if args.baseline and not same_files(a, os.path.join(work, o.replace("{tool}", base))):
                    sys.exit(f"{name}: {o} differs between {ref} and the baseline")
            if args.baseline:
                bt = statistics.median(times[base])
                versus_base += f" {bt:8.3f} {statistics.median(times[mine]) / bt:5.2f}"
            lt, ot = statistics.median(times[ref]), statistics.median(times[mine])
            lm, om = statistics.median(mems[ref]), statistics.median(mems[mine])
            la, oa = statistics.median(anons[ref]), statistics.median(anons[mine])
            if ref == "llvm":
                rows.append((name, lt, ot, lm, om))
            line += (f" {lt:8.3f} {ot:8.3f} {ot / lt:6.2f} {lm:6.0f}/{la:6.1f} {om:6.0f}/{oa:6.1f} "
                     f"{om / lm:4.2f}/{oa / max(la, 1):4.2f}")
        print(line + versus_base, flush=True)
    print("# all outputs byte-identical to those of the LLVM release compared; medians of", args.runs,
          "alternating runs")
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
