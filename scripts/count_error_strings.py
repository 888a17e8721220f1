#!/usr/bin/env python3
"""Counts how errors are built in the workspace's Rust code outside the
`tests/` folders (the figures of docs/development.md, "Errors (issue
22)"):

- `Variant(String),` lines: error variants (and other enum variants)
  that carry free text;
- `map_err(...)` calls whose closure flattens an error with
  `to_string()`, per crate;
- public error enums (named `...Error` or deriving `thiserror::Error`)
  and how many of them are `#[non_exhaustive]`, listing the others.

Run from the repository root: `python3 scripts/count_error_strings.py`
(`--rev REV` counts a commit's files instead of the working tree's).
"""

import argparse
import re
import subprocess


def sources(rev):
    names = subprocess.check_output(["git", "ls-files", "crates/*.rs"], text=True).split()
    for name in names:
        if "/tests/" in name:
            continue
        if rev:
            try:
                text = subprocess.check_output(
                    ["git", "show", f"{rev}:{name}"], text=True, stderr=subprocess.DEVNULL
                )
            except subprocess.CalledProcessError:
                continue
        else:
            try:
                with open(name, encoding="utf-8") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
        yield name, text


def flattening_map_errs(text):
    count = 0
    at = 0
    while (at := text.find("map_err(", at)) >= 0:
        end, depth = at + len("map_err("), 1
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        count += "to_string()" in text[at:end]
        at = end
    return count


def error_enums(text):
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*pub enum (\w+)", line)
        if not m:
            continue
        attrs = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith(("#[", "///", "//", ")]")):
            attrs.append(lines[j])
            j -= 1
        attrs = "\n".join(attrs)
        if "thiserror::Error" in attrs or m.group(1).endswith("Error"):
            yield i + 1, m.group(1), "non_exhaustive" in attrs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", help="count this commit's files")
    args = parser.parse_args()
    strings = 0
    map_errs = {}
    enums = []
    for name, text in sources(args.rev):
        strings += len(re.findall(r"(?m)^\s+[A-Z][A-Za-z]*\(String\),", text))
        crate = name.split("/")[1]
        map_errs[crate] = map_errs.get(crate, 0) + flattening_map_errs(text)
        enums += [(name, line, enum, ne) for line, enum, ne in error_enums(text)]
    print(f"(String) variants: {strings}")
    print(f"map_err(... to_string()): {sum(map_errs.values())}")
    for crate, n in sorted(map_errs.items()):
        if n:
            print(f"  {crate}: {n}")
    marked = sum(ne for *_, ne in enums)
    print(f"public error enums: {len(enums)}, #[non_exhaustive]: {marked}")
    for name, line, enum, ne in enums:
        if not ne:
            print(f"  not marked: {name}:{line}: {enum}")


if __name__ == "__main__":
    main()
