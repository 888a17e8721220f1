#!/usr/bin/env python3
"""Runs LLVM's own lit tests of the offload tools twice: with LLVM's tools,
then with ours in their place, and reports per file and per RUN line.

Used by scripts/llvm-lit-tests.sh, which fetches and extracts the tests;
docs/llvm-tests.md describes both and records the latest result.

The test files are copied into a suite folder of our own (with the
lit.cfg.py written below, not LLVM's, which needs a CMake build tree), so
that only what the tests name is looked up: `%clang`, FileCheck, not and
the LLVM tools from that release's bin folder, and, in the "ours" runs, the
drop-ins from a folder of links put first on PATH.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

# The file lit loads as the suite's configuration. It names the features
# LLVM's own configuration would set for this installation and a test
# format that, besides lit's verdict for the whole file, runs each RUN line
# on its own (in order, sharing the files of the earlier ones) to count the
# lines that fail.
LIT_CFG = r'''
import json, os, sys
import lit.formats

cfg = json.loads(os.environ["OFFLOAD_LIT_SETTINGS"])
config.name = "offload-" + cfg["label"]
config.suffixes = [".c", ".cpp", ".cu", ".hip", ".ll", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = cfg["exec_root"]
config.target_triple = "x86_64-unknown-linux-gnu"
config.host_triple = "x86_64-unknown-linux-gnu"
config.available_features.update(cfg["features"])
config.environment["PATH"] = os.pathsep.join(cfg["path"])
config.environment["HOME"] = os.environ.get("HOME", "/tmp")
config.environment["CLANG_NO_DEFAULT_CONFIG"] = "1"
for k, v in cfg["env"].items():
    config.environment[k] = v
for k, v in cfg["substitutions"]:
    config.substitutions.append((k, v))
# The format lives in a module of its own: lit sends it to its workers.
sys.path.insert(0, os.path.dirname(__file__))
from offload_lit_format import PerLine
config.test_format = PerLine(cfg["results"], cfg["external"])
'''

# The test format: besides lit's verdict for the whole file, it runs each
# RUN line on its own (in order, sharing the files of the earlier ones) to
# count the lines that fail, and writes both to a JSON file per test.
LIT_FORMAT = r'''
import json, os, re
import lit.formats, lit.Test
from lit import TestRunner


class PerLine(lit.formats.ShTest):
    def __init__(self, results, external):
        super().__init__(execute_external=external)
        self.results = results
        self.external = external

    def execute(self, test, litConfig):
        whole = super().execute(test, litConfig)
        record = {"file": "/".join(test.path_in_suite), "code": whole.code.name, "lines": []}
        # Each line on its own only when the file fails: run apart, a line
        # loses the shell state (cd, export) of the lines before it.
        if whole.code in (lit.Test.PASS, lit.Test.FAIL):
            record["lines"] = self.per_line(test, litConfig, run=whole.code == lit.Test.FAIL)
        if whole.code != lit.Test.PASS:
            record["output"] = whole.output[-4000:]
        out = os.path.join(self.results, "__".join(test.path_in_suite) + ".json")
        with open(out, "w") as f:
            json.dump(record, f)
        return whole

    def per_line(self, test, litConfig, run):
        parsed = TestRunner.parseIntegratedTestScript(test, require_script=True)
        if isinstance(parsed, lit.Test.Result):
            return []
        tmpDir, tmpBase = TestRunner.getTempPaths(test)
        subs = TestRunner.getDefaultSubstitutions(test, tmpDir, tmpBase, normalize_slashes=self.external)
        conditions = {f: True for f in test.config.available_features}
        script = TestRunner.applySubstitutions(
            parsed, subs, conditions, recursion_limit=test.config.recursiveExpansionLimit
        )
        execdir = os.path.dirname(test.getExecPath())
        os.makedirs(os.path.dirname(tmpBase), exist_ok=True)
        lines = []
        for cmd in script:
            m = re.fullmatch(TestRunner.kPdbgRegex, cmd)
            where = m.group(1) if m else "?"
            n = re.search(r"line (\d+)", where)
            if not run:
                lines.append([int(n.group(1)) if n else 0, True])
                continue
            try:
                run_one = TestRunner.executeScript if self.external else TestRunner.executeScriptInternal
                _, _, code, _ = run_one(test, litConfig, tmpBase, [cmd], execdir)
            except Exception:
                code = 1
            lines.append([int(n.group(1)) if n else 0, code == 0])
        return lines
'''


def sh(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""


def features(llvm_bin):
    """The features LLVM's lit configuration would set for this build."""
    feats = {"system-linux", "shell", "linux", "host-byteorder-little-endian"}
    targets = {
        "x86-64": "x86-registered-target",
        "nvptx64": "nvptx-registered-target",
        "amdgcn": "amdgpu-registered-target",
        "ppc64": "powerpc-registered-target",
        "spirv64": "spirv-registered-target",
    }
    for line in sh([os.path.join(llvm_bin, "llc"), "--version"]).splitlines():
        word = line.strip().split(" ")[0]
        if word in targets:
            feats.add(targets[word])
    if sh([os.path.join(llvm_bin, "llvm-config"), "--assertion-mode"]).strip() == "ON":
        feats.add("asserts")
    libdir = sh([os.path.join(llvm_bin, "llvm-config"), "--libdir"]).strip()
    libs = ""
    if libdir and os.path.isdir(libdir):
        for name in os.listdir(libdir):
            if name.startswith("libLLVM") and ".so" in name:
                libs += sh(["ldd", os.path.join(libdir, name)])
                break
    if re.search(r"\blibz\.so", libs):
        feats.add("zlib")
    if "libzstd.so" in libs:
        feats.add("zstd")
    if os.path.exists(os.path.join(llvm_bin, "ld.lld")):
        feats.add("lld")
    return sorted(feats)


def substitutions(llvm_bin):
    clang = os.path.join(llvm_bin, "clang")
    resource = sh([clang, "-print-resource-dir"]).strip()
    return [
        ("%clang_cc1", f"{clang} -cc1 -internal-isystem {resource}/include -nostdsysteminc"),
        ("%clangxx", clang + "++"),
        ("%clang", clang),
        ("%itanium_abi_triple", "x86_64-unknown-linux-gnu"),
        ("%errc_ENOENT", "'No such file or directory'"),
        ("%errc_EISDIR", "'Is a directory'"),
        ("%errc_EINVAL", "'Invalid argument'"),
        ("%errc_EACCES", "'Permission denied'"),
    ]


def run_suite(args, version, src, files, mode):
    """Runs `files` (paths inside `src`) with LLVM's tools or ours; returns
    {file: record}."""
    label = f"{version}-{mode}"
    base = os.path.join(args.work, label)
    shutil.rmtree(base, ignore_errors=True)
    suite, results, ours = (os.path.join(base, d) for d in ("suite", "results", "ours-bin"))
    for d in (suite, results, ours):
        os.makedirs(d)
    with open(os.path.join(suite, "lit.cfg.py"), "w") as f:
        f.write(LIT_CFG)
    with open(os.path.join(suite, "offload_lit_format.py"), "w") as f:
        f.write(LIT_FORMAT)
    tests = []
    for rel in files:
        dst = os.path.join(suite, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.join(src, rel), dst)
        inputs = os.path.join(os.path.dirname(os.path.join(src, rel)), "Inputs")
        link = os.path.join(os.path.dirname(dst), "Inputs")
        if os.path.isdir(inputs) and not os.path.exists(link):
            os.symlink(inputs, link)
        tests.append(dst)
    llvm_bin = f"/usr/lib/llvm-{version}/bin"
    path = [llvm_bin] + os.environ.get("PATH", "").split(os.pathsep)
    env = {}
    substituted = []
    if mode == "ours":
        for tool in DROPINS[version]:
            binary = os.path.join(args.ours, tool)
            if os.path.exists(binary):
                os.symlink(os.path.abspath(binary), os.path.join(ours, tool))
                substituted.append(tool)
        path.insert(0, ours)
        if version == "19":
            env["OFFLOAD_LLVM_VERSION"] = "19"
    settings = {
        "label": label,
        "exec_root": os.path.join(base, "exec"),
        "results": results,
        "features": features(llvm_bin),
        "path": path,
        "env": env,
        "substitutions": substitutions(llvm_bin),
        # LLVM 14 and 19 ran clang's tests with bash (some RUN lines need
        # it); LLVM 22's use lit's internal shell.
        "external": version != "22",
    }
    lit_env = dict(os.environ, OFFLOAD_LIT_SETTINGS=json.dumps(settings))
    lit = args.lits[version]
    cmd = (["python3", lit] if lit.endswith(".py") else [lit]) + ["-q", "-j", str(args.jobs), "--no-progress-bar"]
    if args.verbose:
        cmd.append("-v")
    with open(os.path.join(base, "lit.log"), "w") as log:
        subprocess.run(cmd + tests, env=lit_env, stdout=log, stderr=subprocess.STDOUT, check=False)
    out = {}
    for rel in files:
        name = "__".join(rel.split("/")) + ".json"
        try:
            with open(os.path.join(results, name)) as f:
                out[rel] = json.load(f)
        except OSError:
            out[rel] = {"file": rel, "code": "UNSUPPORTED", "lines": []}
        with open(os.path.join(src, rel), errors="replace") as f:
            text = f.read()
        runs = [t for t in DROPINS[version] if re.search(r"RUN:.*\b" + re.escape(t) + r"\b", text)]
        out[rel]["runs"] = runs
        out[rel]["substituted"] = [t for t in runs if t in substituted]
    return out


# Why LLVM's own tools do not run some files here (lit: UNSUPPORTED).
UNSUPPORTED_WHY = {
    "clang-offload-bundler-asserts-on.c": "REQUIRES: asserts (an assertions build of LLVM; Debian's is not)",
    "clang-offload-bundler-standardize.c": "REQUIRES: asserts, and -debug-only, an option of assertions builds",
    "clang-offload-bundler-zlib.c": "REQUIRES: zlib && !zstd (this LLVM has zstd)",
}

# The tools each release's runs replace with ours (when the binary exists).
DROPINS = {
    "14": ["clang-offload-wrapper"],
    "19": ["clang-offload-bundler", "clang-offload-packager"],
    "22": ["clang-offload-bundler", "clang-offload-packager", "llvm-offload-binary", "llvm-offload-wrapper"],
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lit", action="append", required=True, help="VERSION=LIT: the lit that runs that release's tests")
    p.add_argument("--ours", required=True, help="folder with our binaries (target/debug)")
    p.add_argument("--work", required=True, help="scratch folder for the suites")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--verbose", action="store_true", help="lit -v (logs under --work)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--skip", action="append", default=[], help="FILE=REASON: listed, not run")
    p.add_argument("set", nargs="+", help="VERSION:SRC:FILE[,FILE...] (FILE relative to SRC)")
    args = p.parse_args()
    skip = dict(s.split("=", 1) for s in args.skip)
    args.lits = dict(x.split("=", 1) for x in args.lit)
    report = []
    for spec in args.set:
        version, src, files = spec.split(":", 2)
        files = [f for f in files.split(",") if f]
        run = [f for f in files if os.path.basename(f) not in skip]
        llvm = run_suite(args, version, src, run, "llvm")
        ours = run_suite(args, version, src, run, "ours")
        for f in files:
            base = os.path.basename(f)
            if base in skip:
                report.append({"llvm": version, "file": f, "skipped": skip[base]})
                continue
            a, b = llvm[f], ours[f]
            good_a = {n for n, ok in a["lines"] if ok}
            bad_b = sorted(n for n, ok in b["lines"] if not ok)
            report.append(
                {
                    "llvm": version,
                    "file": f,
                    "run_lines": len(a["lines"]) or len(b["lines"]),
                    "with_llvm": a["code"],
                    "llvm_lines_passed": len(good_a),
                    "with_ours": b["code"],
                    "ours_lines_passed": sum(1 for _, ok in b["lines"] if ok),
                    "ours_fail_where_llvm_passes": [n for n in bad_b if n in good_a],
                    "runs": b["runs"],
                    "substituted": b["substituted"],
                }
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    print("| LLVM | test file | tools run (ours substituted) | RUN lines | with LLVM's tools | with ours | lines failing only with ours |")
    print("|---|---|---|---|---|---|---|")
    regress = 0
    for r in report:
        name = os.path.basename(r["file"])
        if "skipped" in r:
            print(f"| {r['llvm']} | `{name}` | | – | not run | not run | {r['skipped']} |")
            continue
        tools = ", ".join(t if t in r["substituted"] else f"{t} (LLVM's: no drop-in built)" for t in r["runs"])
        if r["with_llvm"] == "UNSUPPORTED":
            why = UNSUPPORTED_WHY.get(name, "lit: UNSUPPORTED here")
            print(f"| {r['llvm']} | `{name}` | {tools} | – | not applicable | not applicable | {why} |")
            continue
        la = f"{r['with_llvm']} ({r['llvm_lines_passed']}/{r['run_lines']})"
        lb = f"{r['with_ours']} ({r['ours_lines_passed']}/{r['run_lines']})"
        if not r["substituted"]:
            lb = "– (no drop-in built)"
        bad = ", ".join(str(n) for n in r["ours_fail_where_llvm_passes"]) or "–"
        print(f"| {r['llvm']} | `{name}` | {tools} | {r['run_lines']} | {la} | {lb} | {bad} |")
        if r["substituted"] and (
            (r["with_llvm"] == "PASS" and r["with_ours"] != "PASS") or r["ours_fail_where_llvm_passes"]
        ):
            regress += 1
    return 1 if regress else 0


if __name__ == "__main__":
    sys.exit(main())
