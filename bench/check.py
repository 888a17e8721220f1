#!/usr/bin/env python3
"""`offload check` on a folder of several GB of real GPU libraries, warm
cache: wall time, peak anonymous and total RSS (see measure.py for what each
means), and the summary lines, so the figures in docs/guide/checking.md
can be re-made.

The folder (default /tmp/offload-check-bench, about 3 GB, made of hard
links where it can, so it costs little disk) holds:

* three ROCm wheels from PyPI, unpacked: jax-rocm7-pjrt 0.10.0,
  jax-rocm60-pjrt 0.5.0 (the XLA plugins, about 0.5 GB each) and
  onnxruntime-rocm 1.22.2.post3;
* this machine's /usr/lib/x86_64-linux-gnu (Debian's ROCm 5.2 runtime
  libraries among about 1 GB of host libraries);
* NVIDIA's CUDA 13 wheels in /opt/cuda-wheels/nvidia and cuRAND's in
  /opt/bench-wheels/curand, when present;
* the real corpus files (scripts/fetch-real-corpus.sh), when present.

    cargo build --release -p offload-cli --bin offload   # or pass --offload
    python3 bench/check.py [--gpu gfx1030] [--runs 5] [--keep]

The folder is deleted afterwards unless --keep is given.
"""
import argparse, os, shutil, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import _rss_anon_kib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEELS = [
    ("jax-rocm7-pjrt==0.10.0", "3.11", "manylinux_2_28_x86_64"),
    ("jax-rocm60-pjrt==0.5.0", "3.11", "manylinux_2_28_x86_64"),
    ("onnxruntime-rocm==1.22.2.post3", "3.12", "manylinux_2_34_x86_64"),
]


def link_tree(src, dst):
    """Hard-links (or copies, across file systems) the files of src into dst."""
    try:
        shutil.copytree(src, dst, copy_function=os.link, symlinks=True)
    except (OSError, shutil.Error):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)


def make_folder(folder):
    os.makedirs(folder, exist_ok=True)
    wheels = os.path.join(folder, ".wheels")
    for spec, py, plat in WHEELS:
        name = spec.split("==")[0]
        dest = os.path.join(folder, name)
        if os.path.isdir(dest):
            continue
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", py, "--platform", plat, "-d", wheels, spec], check=True)
        whl = [w for w in os.listdir(wheels) if w.replace("_", "-").startswith(name.replace("_", "-"))][0]
        subprocess.run(["unzip", "-q", "-o", os.path.join(wheels, whl), "-d", dest], check=True)
    shutil.rmtree(wheels, ignore_errors=True)
    corpus = os.path.expanduser("~/.cache/offload-binutils/corpus/files")
    sources = [("/usr/lib/x86_64-linux-gnu", "usr-lib"), ("/opt/cuda-wheels/nvidia", "cuda"),
               ("/opt/bench-wheels/curand", "curand"), (corpus, "corpus")]
    for src, name in sources:
        dest = os.path.join(folder, name)
        if os.path.isdir(src) and not os.path.exists(dest):
            link_tree(src, dest)


def folder_size(folder):
    files, size = 0, 0
    for d, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                files += 1
                size += os.path.getsize(p)
    return files, size


def run(cmd):
    """Wall seconds, peak total and anonymous RSS (MiB), stdout; exit 0 or 1 accepted."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_anon_kib(proc.pid))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        sys.exit(f"{cmd} failed with status {code}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024.0, peak[0] / 1024.0, out.decode(errors="replace"), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", default="/tmp/offload-check-bench")
    ap.add_argument("--gpu", default="gfx1030")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--offload", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    offload = args.offload or next(
        (p for p in (os.path.join(ROOT, "target", b, "offload") for b in ("release", "debug")) if os.path.exists(p)))
    make_folder(args.folder)
    try:
        files, size = folder_size(args.folder)
        cmd = [offload, "check", "--gpu", args.gpu, args.folder]
        run(cmd)  # warm the page cache
        rows = [run(cmd) for _ in range(args.runs)]
        med = lambda k: statistics.median(r[k] for r in rows)
        print(f"# {offload}: check --gpu {args.gpu} on {args.folder}: {files} files, {size / (1 << 30):.2f} GiB; "
              f"medians of {args.runs} warm runs")
        print(f"wall {med(0):.3f} s (CPU {med(4):.3f} s; load average {os.getloadavg()[0]:.1f}), peak RSS {med(1):.1f} MiB total, {med(2):.1f} MiB anonymous")
        print("".join(l + "\n" for l in rows[-1][3].splitlines() if l.startswith((args.gpu + ":", "also:"))), end="")
    finally:
        if not args.keep:
            shutil.rmtree(args.folder, ignore_errors=True)


if __name__ == "__main__":
    main()
