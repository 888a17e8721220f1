#!/usr/bin/env python3
"""Benchmark: `offload extract --all` and `offload verify` on a library full
of compressed bundles, against a pipeline of LLVM tools doing the same work.

Builds a ROCm-like shared library once (cached in the work folder): a small
`.so` made with gcc, plus a `.hip_fatbin` section (added with
llvm-objcopy-19, 4096-aligned) holding N compressed bundles (default 45,
CCOB version 3, zstd) made by our own `clang-offload-bundler -compress` with
COMPRESSED_BUNDLE_FORMAT_VERSION=3. Each bundle holds an empty host entry
and 5 device payloads of about 10 MiB, about 5:1 compressible (random
blocks, low-entropy blocks and runs: real code objects compress about that
much), so the section is about 440 MiB and decompresses to about 2.3 GiB.

Then, alternately, several times:

* ours: `offload extract --all --output-dir D lib.so`, `offload verify lib.so`;
* the LLVM pipeline: `llvm-objcopy-19 --dump-section .hip_fatbin=...`, the
  section split into its bundles (in this script, by the size fields; the
  CCOB v3 header is stripped because LLVM 19 cannot read version 3),
  `zstd -d` of each, and one `clang-offload-bundler -unbundle` (LLVM 19) per
  bundle writing every entry. No step checks the bundles' MD5; ours does.

Peak memory is reported two ways (bench/measure.py): total RSS (ru_maxrss;
it counts the pages of the memory-mapped input that were read, which are
page cache, not allocations) and anonymous RSS (RssAnon of /proc/PID/status
sampled every millisecond: the memory the process allocated). For the pipeline, the
largest peak of any of its processes. Our extracted files are checked to be
byte-identical to LLVM's before anything is reported.

    bench/decompress.py [--bundles 45] [--payloads 5] [--payload-mib 10] [--runs 3] [--dir DIR]

Needs LLVM 19 (scripts/install-reference-llvm.sh), gcc, zstd, and a release
build (`cargo build --release`; built if missing).
"""

import argparse
import hashlib
import mmap
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import measure

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLVM19 = os.environ.get("OFFLOAD_LLVM19_BIN", "/usr/lib/llvm-19/bin")
OURS = os.path.join(ROOT, "target", "release")
HOST = "host-x86_64-unknown-linux-gnu"
GPUS = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1200"]


def device_ids(count):
    return [f"hipv4-amdgcn-amd-amdhsa--{GPUS[i % len(GPUS)]}" + ("" if i < len(GPUS) else f"-v{i}")
            for i in range(count)]


def make_payload(path, size, rng):
    """Code-object-like bytes, about 5:1 with zstd level 3: 64 KiB blocks,
    one in ten random, two in ten drawn from 16 symbols, the rest runs of a
    short random unit."""
    block = 1 << 16
    low_entropy = bytes((b % 16) * 7 for b in range(256))
    with open(path, "wb") as f:
        written = 0
        while written < size:
            kind = rng.random()
            if kind < 0.10:
                chunk = rng.randbytes(block)
            elif kind < 0.30:
                chunk = rng.randbytes(block).translate(low_entropy)
            else:
                unit = rng.randbytes(rng.choice([4, 8, 16, 64]))
                chunk = (unit * (block // len(unit) + 1))[:block]
            chunk = chunk[: size - written]
            f.write(chunk)
            written += len(chunk)


def build_library(work, bundles, payloads, payload_mib):
    """The library, cached by its parameters; returns its path."""
    lib = os.path.join(work, f"lib{bundles}x{payloads}x{payload_mib}.so")
    if os.path.exists(lib):
        return lib
    bundler = os.path.join(OURS, "clang-offload-bundler")
    ids = device_ids(payloads)
    env = dict(os.environ, COMPRESSED_BUNDLE_FORMAT_VERSION="3")
    section = os.path.join(work, "fatbin.section")
    rng = random.Random(1)
    with open(section, "wb") as out:
        for b in range(bundles):
            inputs = []
            for p in range(payloads):
                path = os.path.join(work, f"payload{p}.bin")
                # Sizes vary a little, as code objects do.
                make_payload(path, (payload_mib << 20) + rng.randrange(1 << 20), rng)
                inputs.append(path)
            blob = os.path.join(work, "bundle.ccob")
            subprocess.run([bundler, "-type=o", "-compress", "-bundle-align=4096", f"-targets={HOST}," + ",".join(ids),
                            "-input=/dev/null", *[f"-input={i}" for i in inputs], f"-output={blob}"],
                           env=env, check=True)
            with open(blob, "rb") as f:
                data = f.read()
            if not data.startswith(b"CCOB") or struct.unpack_from("<H", data, 4)[0] != 3:
                sys.exit("the bundler did not write a version 3 compressed bundle")
            out.write(data)
            out.write(b"\0" * (-out.tell() % 4096))
            print(f"# bundle {b + 1}/{bundles}: {len(data) >> 20} MiB compressed", file=sys.stderr, flush=True)
    base = os.path.join(work, "base.so")
    src = os.path.join(work, "base.c")
    with open(src, "w") as f:
        f.write("int offload_bench_marker(void) { return 42; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", base, src], check=True)
    subprocess.run([os.path.join(LLVM19, "llvm-objcopy"), f"--add-section=.hip_fatbin={section}",
                    "--set-section-alignment=.hip_fatbin=4096", "--set-section-flags=.hip_fatbin=alloc,readonly",
                    base, lib + ".tmp"], check=True)
    os.rename(lib + ".tmp", lib)
    for name in ["bundle.ccob", section] + [f"payload{p}.bin" for p in range(payloads)]:
        os.remove(os.path.join(work, name))
    return lib


def run_measured(cmd, cwd, env=None):
    """(wall s, peak total RSS MiB, peak anonymous RSS MiB, CPU s); see measure.py."""
    return tuple(measure.run(cmd, cwd, env))


def split_section(section, folder):
    """The zstd frames of the compressed bundles in a dumped section (CCOB
    header stripped), one file each; returns their paths."""
    frames = []
    with open(section, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        pos = 0
        while pos < len(m):
            if m[pos] == 0:
                pos += 1
                continue
            magic, version, method, total = struct.unpack_from("<4sHHQ", m, pos)
            if magic != b"CCOB" or version != 3 or method != 1:
                sys.exit(f"unexpected data at section offset {pos:#x}")
            path = os.path.join(folder, f"b{len(frames)}.zst")
            with open(path, "wb") as out:
                out.write(m[pos + 32:pos + total])
            frames.append(path)
            pos += total
    return frames


def llvm_pipeline(lib, folder, ids):
    """The LLVM tools doing what `extract --all` does; returns (wall s, peak
    total RSS MiB, peak anonymous RSS MiB, CPU s) of the whole (the split,
    done in this script, counts in the wall time only)."""
    start = time.perf_counter()
    peaks = []
    section = os.path.join(folder, "section.bin")
    peaks.append(run_measured([os.path.join(LLVM19, "llvm-objcopy"), f"--dump-section=.hip_fatbin={section}",
                               lib, os.path.join(folder, "discard.so")], folder))
    frames = split_section(section, folder)
    targets = [HOST] + ids
    for k, frame in enumerate(frames):
        bundle = frame[:-4] + ".bundle"
        peaks.append(run_measured(["zstd", "-q", "-d", "-f", frame, "-o", bundle], folder))
        outs = [f"-output={os.path.join(folder, f'b{k}.{t}')}" for t in targets]
        peaks.append(run_measured([os.path.join(LLVM19, "clang-offload-bundler"), "-type=o", "-unbundle",
                                   f"-input={bundle}", "-targets=" + ",".join(targets), *outs], folder))
    wall = time.perf_counter() - start
    return wall, max(p[1] for p in peaks), max(p[2] for p in peaks), sum(p[3] for p in peaks)


def fresh(folder):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)


def md5_seconds(paths):
    """CPU seconds to MD5 files in the page cache on one core (OpenSSL's
    MD5), reading included; CPU time, so that other load on the machine
    does not count."""
    start = time.process_time()
    for p in paths:
        h = hashlib.md5()
        with open(p, "rb") as f:
            while block := f.read(8 << 20):
                h.update(block)
    return time.process_time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundles", type=int, default=45)
    ap.add_argument("--payloads", type=int, default=5)
    ap.add_argument("--payload-mib", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()

    for tool in ["llvm-objcopy", "clang-offload-bundler"]:
        if not os.path.exists(os.path.join(LLVM19, tool)):
            sys.exit(f"{os.path.join(LLVM19, tool)} not found: run scripts/install-reference-llvm.sh")
    for tool in ["gcc", "zstd"]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found")
    if not all(os.path.exists(os.path.join(OURS, b)) for b in ["offload", "clang-offload-bundler"]):
        subprocess.run(["cargo", "build", "--release", "-p", "offload-cli"], cwd=ROOT, check=True)

    work = args.dir or tempfile.mkdtemp(prefix="offload-decompress-bench-")
    os.makedirs(work, exist_ok=True)
    lib = build_library(work, args.bundles, args.payloads, args.payload_mib)
    ids = device_ids(args.payloads)
    offload = os.path.join(OURS, "offload")
    ours_dir, llvm_dir = os.path.join(work, "ours"), os.path.join(work, "llvm")
    print(f"# {lib}: {os.path.getsize(lib) / (1 << 20):.0f} MiB, {args.bundles} CCOB v3 bundles of "
          f"{args.payloads} payloads of ~{args.payload_mib} MiB", file=sys.stderr, flush=True)

    load_before = os.getloadavg()[0]
    results = {"extract": [], "verify": [], "pipeline": []}
    for r in range(args.runs):
        jobs = ["pipeline", "extract", "verify"]
        if r % 2:
            jobs.reverse()
        for job in jobs:
            if job != "verify":
                fresh(ours_dir if job == "extract" else llvm_dir)
            os.sync()
            if job == "pipeline":
                results[job].append(llvm_pipeline(lib, llvm_dir, ids))
            elif job == "extract":
                results[job].append(run_measured([offload, "extract", "--all", "--output-dir", ours_dir, lib], work))
            else:
                results[job].append(run_measured([offload, "verify", lib], work))
        if r == 0:
            check_same(lib, ours_dir, llvm_dir, offload, work, ids, args.bundles)

    # What bounds ours: the MD5 of every decompressed bundle, and zstd.
    bundles = sorted(os.path.join(llvm_dir, f) for f in os.listdir(llvm_dir) if f.endswith(".bundle"))
    if not bundles:
        fresh(llvm_dir)
        llvm_pipeline(lib, llvm_dir, ids)
        bundles = sorted(os.path.join(llvm_dir, f) for f in os.listdir(llvm_dir) if f.endswith(".bundle"))
    total = sum(os.path.getsize(b) for b in bundles)
    md5_s = min(md5_seconds(bundles) for _ in range(2))
    frames = sorted(os.path.join(llvm_dir, f) for f in os.listdir(llvm_dir) if f.endswith(".zst"))
    zstd_s = min(run_measured(["zstd", "-q", "-d", "-c", *frames], work)[3] for _ in range(2)) if frames else 0.0

    def med(job, k):
        return statistics.median(x[k] for x in results[job])

    pt = med("pipeline", 0)
    print(f"{'run':22} {'time s':>8} {'ratio':>6} {'CPU s':>7} {'total RSS MiB':>14} {'anon RSS MiB':>13}")
    for job, name in [("pipeline", "LLVM pipeline"), ("extract", "offload extract --all"), ("verify", "offload verify")]:
        t = med(job, 0)
        print(f"{name:22} {t:8.3f} {t / pt:6.2f} {med(job, 3):7.2f} {med(job, 1):14.1f} {med(job, 2):13.1f}")
    print(f"# medians of {args.runs} alternating runs; extracted files byte-identical to LLVM 19's; "
          f"CPU ratios: extract {med('extract', 3) / med('pipeline', 3):.2f}, verify {med('verify', 3) / med('pipeline', 3):.2f}")
    print(f"# decompressed: {total / (1 << 30):.2f} GiB; CPU time of MD5 (OpenSSL) {md5_s:.3f} s "
          f"({total / md5_s / (1 << 20):.0f} MiB/s), of zstd -d to /dev/null {zstd_s:.3f} s; "
          f"cores: {os.cpu_count()}, load average before: {load_before:.1f}")


def check_same(lib, ours_dir, llvm_dir, offload, work, ids, bundles):
    """Every file ours extracted equals the entry LLVM's bundler wrote."""
    out = subprocess.run([offload, "list", "--json", lib], capture_output=True, check=True, text=True).stdout
    import json

    objects = json.loads(out)
    name = os.path.basename(lib)
    compared = 0
    for index, o in enumerate(objects):
        bundle, entry = divmod(index, len(ids) + 1)
        mine = os.path.join(ours_dir, f"{name}-{index}-{o['id']}")
        theirs = os.path.join(llvm_dir, f"b{bundle}.{([HOST] + ids)[entry]}")
        if subprocess.run(["cmp", "-s", mine, theirs]).returncode != 0:
            sys.exit(f"{mine} differs from {theirs}")
        compared += 1
    if compared != bundles * (len(ids) + 1):
        sys.exit(f"compared {compared} files, expected {bundles * (len(ids) + 1)}")


if __name__ == "__main__":
    main()
