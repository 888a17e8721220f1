#!/usr/bin/env python3
"""Benchmark: `offload prune` on two real ROCm libraries, side by side with
`cp` and `offload verify` of the same file, against the goals of issue 15:

* (a) Debian's librocsparse0 5.3 (`apt-get download librocsparse0`: a
  94 MB .deb holding a 1.31 GB library of 111 uncompressed bundles, seven
  targets each). Goal: prune (either mode) at most 2x the time `cp` takes
  to copy the input; the cut output at most 30% of the input's size.
* (b) jax-rocm7-pjrt 0.10.0's `xla_rocm_plugin.so` (PyPI, a 137 MB wheel
  holding a 520 MB library of 41 compressed bundles, CCOB v3, that
  decompress to 1.2 GB). Goal: prune at most 1.5x the time of
  `offload verify` on the same file.
* Both: peak anonymous memory under 1 GiB (bounded by a few bundles per
  worker, never by the file); the zero-mode output compressed with
  `zstd -3` at most 30% of the input's `zstd -3` size.

Downloads are cached in ~/.cache/offload-binutils/bench/ (about 230 MB);
the libraries are unpacked into --dir (default /tmp/offload-prune-bench,
deleted at the end unless --keep-dir). For each library, --runs rounds
(default 3), alternating: `cp IN OUT`, `offload verify IN`,
`offload prune --keep T IN -o OUT` (zero mode), and `--mode cut` when the
binary has it (else "cut: not available in this build"); `sync` before
every timed run, so one run's writeback does not land in the next. Medians
are printed, with peak total and anonymous RSS (bench/measure.py: total RSS
counts the pages of memory-mapped files read, which are page cache, not
allocations). `--check` also runs bench/prune_check.py on each output
(offload verify, llvm-readelf, comgr, LLVM 19's bundler, dlopen with
Debian's libamdhip64.so.5). `--json FILE` writes the figures.

    cargo build --release -p offload-cli
    python3 bench/prune.py [--runs 3] [--check] [--json out.json] [--only rocsparse,xla]

Needs: apt-get (for the .deb), pip (for the wheel), zstd, and for --check
LLVM 19 and Debian's libamd-comgr2 and libamdhip64-5.
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile

import measure
import prune_check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFLOAD = os.path.join(ROOT, "target", "release", "offload")
CACHE = os.path.expanduser("~/.cache/offload-binutils/bench")
GIB = 1 << 30

# What to prune, and what comgr must (not) find afterwards. The targets are
# ones each library holds (`offload size` lists them).
LIBRARIES = {
    "rocsparse": {
        "title": "librocsparse.so.0.1 (Debian librocsparse0 5.3, uncompressed bundles)",
        "keep": "gfx90a",
        "keep_isas": ["amdgcn-amd-amdhsa--gfx90a:xnack-", "amdgcn-amd-amdhsa--gfx90a:xnack+"],
        "drop_isas": ["amdgcn-amd-amdhsa--gfx1030", "amdgcn-amd-amdhsa--gfx906:xnack-"],
        "goal": ("cp", 2.0),
        # The size goals are set for a 1 GB-class library of uncompressed
        # bundles, mostly device code.
        "size_goals": True,
    },
    "xla": {
        "title": "xla_rocm_plugin.so (jax-rocm7-pjrt 0.10.0, CCOB v3)",
        "keep": "gfx90a",
        "keep_isas": ["amdgcn-amd-amdhsa--gfx90a"],
        "drop_isas": ["amdgcn-amd-amdhsa--gfx1030"],
        "goal": ("verify", 1.5),
        # Most of this library is XLA's host code (25 MB of its 124 MB
        # zstd'd are device code): its sizes are reported, not judged.
        "size_goals": False,
    },
}


def fetch_rocsparse(work):
    debs = glob.glob(os.path.join(CACHE, "librocsparse0_5.3*.deb"))
    if not debs:
        subprocess.run(["apt-get", "download", "librocsparse0"], cwd=CACHE, check=True)
        debs = glob.glob(os.path.join(CACHE, "librocsparse0_*.deb"))
    dest = os.path.join(work, "rocsparse")
    subprocess.run(["dpkg-deb", "-x", debs[0], dest], check=True)
    return glob.glob(os.path.join(dest, "usr/lib/x86_64-linux-gnu/librocsparse.so.*.*"))[0]


def fetch_xla(work):
    wheels = glob.glob(os.path.join(CACHE, "jax_rocm7_pjrt-0.10.0-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "-d", CACHE,
                        "jax-rocm7-pjrt==0.10.0"], check=True)
        wheels = glob.glob(os.path.join(CACHE, "jax_rocm7_pjrt-0.10.0-*.whl"))
    dest = os.path.join(work, "xla_rocm_plugin.so")
    with zipfile.ZipFile(wheels[0]) as z, z.open("jax_plugins/xla_rocm7/xla_rocm_plugin.so") as src, \
            open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 16 << 20)
    os.chmod(dest, 0o755)
    return dest


def zstd3_size(path):
    """Bytes of `zstd -3` of the file (one thread per core; the level is
    what matters for the ratio)."""
    p = subprocess.Popen(["zstd", "-3", "-T0", "-q", "-c", path], stdout=subprocess.PIPE)
    total = 0
    while chunk := p.stdout.read(1 << 20):
        total += len(chunk)
    if p.wait() != 0:
        sys.exit(f"zstd failed on {path}")
    return total


def cut_available(path, keep):
    r = subprocess.run([OFFLOAD, "prune", "--mode", "cut", "--keep", keep, "--dry-run", path],
                       capture_output=True, text=True)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def timed(cmd, cwd):
    subprocess.run(["sync"], check=True)
    return measure.run(cmd, cwd)


def bench_library(name, lib, work, runs, check):
    spec = LIBRARIES[name]
    keep = spec["keep"]
    zero_out, cut_out, cp_out = (os.path.join(work, f"{name}.{s}") for s in ("zero.so", "cut.so", "cp.so"))
    has_cut, why = cut_available(lib, keep)
    ops = {
        "cp": ["cp", lib, cp_out],
        "verify": [OFFLOAD, "verify", lib],
        "prune zero": [OFFLOAD, "prune", "--keep", keep, lib, "-o", zero_out],
    }
    if has_cut:
        ops["prune cut"] = [OFFLOAD, "prune", "--mode", "cut", "--keep", keep, lib, "-o", cut_out]
    got = {op: [] for op in ops}
    for _ in range(runs):
        # Every command writes a new file, as `cp` does: replacing an
        # existing output costs prune its writeback, started before the
        # rename (ext4 starts it at the rename anyway), which cp never pays.
        for out in (zero_out, cut_out, cp_out):
            if os.path.exists(out):
                os.remove(out)
        for op, cmd in ops.items():
            got[op].append(timed(cmd, work))
    size = os.path.getsize(lib)
    row = {"library": spec["title"], "size": size, "keep": keep, "ops": {}}
    for op, ms in got.items():
        row["ops"][op] = {
            "wall_s": statistics.median(m.wall for m in ms),
            "cpu_s": statistics.median(m.cpu for m in ms),
            "total_mib": statistics.median(m.total_mib for m in ms),
            "anon_mib": max(m.anon_mib for m in ms),
        }
    row["zero_size"] = os.path.getsize(zero_out)
    row["zero_disk"] = os.stat(zero_out).st_blocks * 512
    row["zstd_input"] = zstd3_size(lib)
    row["zstd_zero"] = zstd3_size(zero_out)
    row["cut"] = None if not has_cut else {"size": os.path.getsize(cut_out), "zstd": zstd3_size(cut_out)}
    row["cut_note"] = None if has_cut else why
    base, limit = spec["goal"]
    prune_ops = [op for op in ops if op.startswith("prune")]
    goals = []
    for op in prune_ops:
        ratio = row["ops"][op]["wall_s"] / row["ops"][base]["wall_s"]
        goals.append((f"{op} / {base} time", ratio, limit))
        goals.append((f"{op} peak anonymous MiB", row["ops"][op]["anon_mib"], 1024.0))
    if spec["size_goals"]:
        goals.append(("zstd-3(zero) / zstd-3(input)", row["zstd_zero"] / row["zstd_input"], 0.30))
        if has_cut:
            goals.append(("cut size / input size", row["cut"]["size"] / size, 0.30))
    row["goals"] = [{"what": w, "value": v, "limit": lim, "met": v <= lim} for w, v, lim in goals]
    if check:
        print(f"checks of the zero-mode output of {name}:")
        row["checks_zero"] = prune_check.check_all(lib, zero_out, keep, spec["keep_isas"], spec["drop_isas"])
        if has_cut:
            print(f"checks of the cut output of {name}:")
            row["checks_cut"] = prune_check.check_all(lib, cut_out, keep, spec["keep_isas"], spec["drop_isas"],
                                                      same_headers=False)
    for f in (zero_out, cut_out):
        if os.path.exists(f):
            os.remove(f)
    return row


def mb(n):
    return f"{n / 1e6:.1f} MB"


def report(rows, runs):
    for row in rows:
        print(f"\n# {row['library']}: {mb(row['size'])}, --keep {row['keep']}; medians of {runs} alternating runs")
        print(f"{'operation':<12} {'wall s':>8} {'cpu s':>8} {'total MiB':>10} {'anon MiB':>9}")
        for op, m in row["ops"].items():
            print(f"{op:<12} {m['wall_s']:>8.2f} {m['cpu_s']:>8.2f} {m['total_mib']:>10.1f} {m['anon_mib']:>9.1f}")
        print(f"zero output: {mb(row['zero_size'])} ({mb(row['zero_disk'])} on disk); "
              f"zstd -3: input {mb(row['zstd_input'])}, zero output {mb(row['zstd_zero'])} "
              f"({row['zstd_zero'] / row['zstd_input']:.2f})")
        if row["cut"]:
            print(f"cut output: {mb(row['cut']['size'])}; zstd -3: {mb(row['cut']['zstd'])}")
        else:
            print(f"cut: not available in this build ({row['cut_note']})")
        for g in row["goals"]:
            print(f"  goal {g['what']:<34} {g['value']:>8.2f}  <= {g['limit']:<6} "
                  f"{'met' if g['met'] else 'NOT MET'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="rocsparse,xla", help="comma-separated: rocsparse, xla")
    ap.add_argument("--check", action="store_true", help="also run bench/prune_check.py on the outputs")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--dir", default="/tmp/offload-prune-bench")
    ap.add_argument("--keep-dir", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(OFFLOAD):
        subprocess.run(["cargo", "build", "--release", "-p", "offload-cli"], cwd=ROOT, check=True)
    os.makedirs(CACHE, exist_ok=True)
    os.makedirs(a.dir, exist_ok=True)
    rows = []
    try:
        for name in a.only.split(","):
            lib = {"rocsparse": fetch_rocsparse, "xla": fetch_xla}[name](a.dir)
            rows.append(bench_library(name, lib, a.dir, a.runs, a.check))
    finally:
        if not a.keep_dir:
            shutil.rmtree(a.dir, ignore_errors=True)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load average {' '.join(load)}")
    report(rows, a.runs)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": a.runs, "load": load, "libraries": rows}, f, indent=1)
    failed_checks = any(r.get("checks_zero") is False or r.get("checks_cut") is False for r in rows)
    sys.exit(1 if failed_checks else 0)


if __name__ == "__main__":
    main()
