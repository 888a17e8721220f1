#!/usr/bin/env python3
"""Checks a pruned real library against its input with tools other than
ours, the way the runtime would see it (docs/formats/host-references.md
§6.8, "Verification without a GPU"):

* `offload verify OUT` finds no error or warning;
* `llvm-readelf-19 -lS --dyn-relocations OUT` prints no warning (in zero
  mode its output is the input's, word for word: no header moved);
* comgr (Debian's libamd-comgr2, through ctypes): for every fat binary,
  `amd_comgr_lookup_code_object` on the 4096 bytes the HIP runtime hands it
  finds a code object for each kept ISA, the same bytes as in the input,
  and none for a dropped ISA. comgr 2.4 predates compressed bundles, so
  for those LLVM 19's `clang-offload-bundler -list` reads each rewritten
  compressed bundle instead and must list exactly the kept entries;
* `dlopen(OUT, RTLD_NOW)` after Debian's real `libamdhip64.so.5` (which
  registers every fat binary) succeeds whenever the input's does (a library
  built against another ROCm may not load at all here: then both fail the
  same way, and that is reported, not hidden).

    bench/prune_check.py IN OUT --keep-isa amdgcn-amd-amdhsa--gfx90a:xnack- \\
        --drop-isa amdgcn-amd-amdhsa--gfx1030

Exit status 0 when every check passes; each check prints one line.
"""

import argparse
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFFLOAD = os.path.join(ROOT, "target", "release", "offload")
LLVM19 = os.environ.get("OFFLOAD_LLVM19_BIN", "/usr/lib/llvm-19/bin")
HIP = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"
COMGR = "libamd_comgr.so.2"
WINDOW = 4096  # what the HIP runtime passes comgr for an uncompressed bundle


def fat_binaries(path, keep):
    """The fat binaries of `path` as `offload prune --dry-run --json` sees
    them: offset, format, sizes, kept and dropped IDs."""
    out = subprocess.run([OFFLOAD, "prune", "--keep", keep, "--allow-empty", "--dry-run", "--json", path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"offload prune --dry-run: {out.stderr.strip()}")
    return json.loads(out.stdout)["units"]


class Comgr:
    """The one comgr call the HIP runtime makes for an uncompressed bundle."""

    class Info(ctypes.Structure):
        _fields_ = [("isa", ctypes.c_char_p), ("size", ctypes.c_uint64), ("offset", ctypes.c_uint64)]

    def __init__(self):
        self.lib = ctypes.CDLL(COMGR)
        self.data_kind_fatbin = 0x10  # AMD_COMGR_DATA_KIND_FATBIN (amd_comgr.h)

    def lookup(self, window, isa):
        """(offset, size) of the code object comgr picks for `isa` in the
        bundle whose first bytes are `window`; (0, 0) when none fits."""
        data = ctypes.c_uint64()
        if self.lib.amd_comgr_create_data(self.data_kind_fatbin, ctypes.byref(data)) != 0:
            raise RuntimeError("amd_comgr_create_data failed")
        try:
            if self.lib.amd_comgr_set_data(data, ctypes.c_size_t(len(window)), window) != 0:
                raise RuntimeError("amd_comgr_set_data failed")
            info = Comgr.Info(isa.encode(), 0, 0)
            status = self.lib.amd_comgr_lookup_code_object(data, ctypes.byref(info), ctypes.c_size_t(1))
            if status != 0:
                raise RuntimeError(f"amd_comgr_lookup_code_object: status {status}")
            return info.offset, info.size
        finally:
            self.lib.amd_comgr_release_data(data)


def check_verify(out):
    r = subprocess.run([OFFLOAD, "verify", out], capture_output=True, text=True)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    ok = r.returncode == 0 and " 0 errors, 0 warnings" in last
    return ok, f"offload verify: {last or r.stderr.strip()}"


def check_readelf(inp, out, same_headers):
    def readelf(path):
        return subprocess.run([f"{LLVM19}/llvm-readelf", "-lS", "--dyn-relocations", path],
                              capture_output=True, text=True)
    a, b = readelf(inp), readelf(out)
    warned = "warning" in b.stderr.lower() or b.returncode != 0
    if warned:
        return False, f"llvm-readelf -lS --dyn-relocations: {b.stderr.strip()[:300]}"
    if same_headers and a.stdout.replace(inp, "X") != b.stdout.replace(out, "X"):
        return False, "llvm-readelf: program/section headers or dynamic relocations differ from the input's"
    extra = ", headers and relocations identical to the input's" if same_headers else ""
    return True, f"llvm-readelf -lS --dyn-relocations: no warning{extra}"


def check_comgr(inp, out, pairs, keep_isas, drop_isas):
    """`pairs`: (input unit, output unit) of each fat binary, in order (in
    cut mode the output's sit at other offsets)."""
    comgr = Comgr()
    found = missing = 0
    with open(inp, "rb") as fin, open(out, "rb") as fout:
        for ui, uo in pairs:
            if ui["format"] != "bundle":
                continue
            fout.seek(uo["offset"])
            window = fout.read(WINDOW)
            fin.seek(ui["offset"])
            window_in = fin.read(WINDOW)
            at = uo["offset"]
            for isa in keep_isas:
                o, s = comgr.lookup(window, isa)
                oi, si = comgr.lookup(window_in, isa)
                if s == 0:
                    return False, f"comgr: no code object for {isa} in the fat binary at {at:#x}"
                if o + s > uo["old_size"]:
                    return False, f"comgr: {isa} at {at:#x} lies past the rewritten bundle"
                fout.seek(at + o)
                fin.seek(ui["offset"] + oi)
                if s != si or fout.read(s) != fin.read(si):
                    return False, f"comgr: {isa} at {at:#x} is not the input's code object"
                found += 1
            for isa in drop_isas:
                if comgr.lookup(window_in, isa)[1] == 0:
                    return False, f"comgr: the input has no {isa} at {ui['offset']:#x} either: a vacuous check"
                if comgr.lookup(window, isa)[1] != 0:
                    return False, f"comgr: {isa} still found in the fat binary at {at:#x}"
                missing += 1
    if found == 0:
        return None, "comgr: no uncompressed bundle to look up (compressed: see the bundler check)"
    return True, (f"comgr lookup_code_object: {found} lookups of {', '.join(keep_isas)} give the input's code "
                  f"object; {missing} lookups of {', '.join(drop_isas)} find nothing (each found one in the input)")


# CCOB header: (header length, offset of the truncated MD5) by version.
CCOB_LAYOUT = {1: (20, 12), 2: (24, 16), 3: (32, 24)}


def ccob_decoded(blob):
    """The bundle inside a compressed bundle, decoded by the zstd CLI (not
    our decoder), with LLVM's truncated MD5 (the first 8 bytes of the
    digest, little-endian) checked by hashlib."""
    version = int.from_bytes(blob[4:6], "little")
    method = int.from_bytes(blob[6:8], "little")
    if blob[:4] != b"CCOB" or version not in CCOB_LAYOUT or method != 1:
        raise RuntimeError(f"not a zstd compressed bundle of a known version ({blob[:8]!r})")
    header, hash_at = CCOB_LAYOUT[version]
    inner = subprocess.run(["zstd", "-d", "-c", "-q"], input=blob[header:], capture_output=True, check=True).stdout
    stored = int.from_bytes(blob[hash_at:hash_at + 8], "little")
    if int.from_bytes(hashlib.md5(inner).digest()[:8], "little") != stored:
        raise RuntimeError("the MD5 of the decompressed bundle does not match its header")
    return version, inner


def check_bundler(out, units):
    """Each rewritten compressed bundle, decompressed by the zstd CLI (LLVM
    19 reads no version 3) and listed by LLVM 19's bundler."""
    checked, versions = 0, set()
    with open(out, "rb") as f, tempfile.TemporaryDirectory() as tmp:
        for u in units:
            if not u["format"].startswith("compressed") or not u["dropped"]:
                continue
            f.seek(u["offset"])
            try:
                version, inner = ccob_decoded(f.read(u["new_size"]))
            except (RuntimeError, subprocess.CalledProcessError) as e:
                return False, f"the compressed bundle at {u['offset']:#x}: {e}"
            versions.add(version)
            path = os.path.join(tmp, "unit.bc")
            with open(path, "wb") as w:
                w.write(inner)
            r = subprocess.run([f"{LLVM19}/clang-offload-bundler", "-list", "-type=bc", f"-input={path}"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                return False, f"LLVM 19 bundler cannot list the bundle at {u['offset']:#x}: {r.stderr.strip()[:200]}"
            if sorted(r.stdout.split()) != sorted(u["kept"]):
                return False, f"LLVM 19 bundler lists {r.stdout.split()} at {u['offset']:#x}, kept {u['kept']}"
            checked += 1
    if checked == 0:
        return None, "LLVM 19 bundler: no rewritten compressed bundle"
    return True, (f"{checked} recompressed bundles (CCOB v{','.join(map(str, sorted(versions)))}): zstd -d and "
                  "MD5 match, LLVM 19 clang-offload-bundler -list gives exactly the kept entries")


def load(path):
    """dlopen(path, RTLD_NOW) in a child after Debian's libamdhip64.so.5:
    (ok, message)."""
    code = ("import ctypes, os, sys\n"
            f"ctypes.CDLL({HIP!r}, mode=ctypes.RTLD_GLOBAL)\n"
            "ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)\n")
    r = subprocess.run([sys.executable, "-c", code, os.path.abspath(path)], capture_output=True, text=True, timeout=300)
    return r.returncode == 0, (r.stderr.strip().splitlines() or [""])[-1]


def check_load(inp, out):
    if not os.path.exists(HIP):
        return None, "dlopen: libamdhip64-5 is not installed (apt-get install libamdhip64-5)"
    ok_out, msg_out = load(out)
    if ok_out:
        return True, "dlopen(RTLD_NOW) with Debian's libamdhip64.so.5: loads and registers its fat binaries"
    ok_in, msg_in = load(inp)
    if not ok_in:
        return None, f"dlopen: the input does not load here either ({msg_in[:160]}); not checkable"
    return False, f"dlopen: the input loads, the output does not: {msg_out}"


def unit_pairs(inp, out, keep):
    """Each fat binary of the input with the output's, in order (the output
    is read as it is: nothing left to drop, its sizes are the new ones)."""
    before, after = fat_binaries(inp, keep), fat_binaries(out, keep)
    if len(before) != len(after):
        raise RuntimeError(f"the output has {len(after)} fat binaries, the input {len(before)}")
    return list(zip(before, after))


def check_all(inp, out, keep, keep_isas, drop_isas, same_headers=True):
    """Runs every check; prints one line each; returns True when none failed."""
    try:
        pairs = unit_pairs(inp, out, keep)
    except RuntimeError as e:
        print(f"  [FAIL] {e}")
        return False
    checks = [check_verify(out), check_readelf(inp, out, same_headers)]
    if any(ui["format"] == "bundle" for ui, _ in pairs):
        checks.append(check_comgr(inp, out, pairs, keep_isas, drop_isas))
    if any(ui["format"].startswith("compressed") for ui, _ in pairs):
        rewritten = [dict(ui, offset=uo["offset"], new_size=uo["old_size"]) for ui, uo in pairs]
        checks.append(check_bundler(out, rewritten))
    checks.append(check_load(inp, out))
    failed = False
    for ok, msg in checks:
        tag = {True: "ok  ", False: "FAIL", None: "skip"}[ok]
        print(f"  [{tag}] {msg}")
        failed |= ok is False
    return not failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--keep", default="gfx90a", help="the --keep given to prune")
    ap.add_argument("--keep-isa", action="append", required=True, help="a full ISA comgr must find")
    ap.add_argument("--drop-isa", action="append", required=True, help="a full ISA comgr must not find")
    ap.add_argument("--cut", action="store_true", help="the output was cut (headers differ)")
    a = ap.parse_args()
    sys.exit(0 if check_all(a.input, a.output, a.keep, a.keep_isa, a.drop_isa, not a.cut) else 1)


if __name__ == "__main__":
    main()
