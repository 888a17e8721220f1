#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/**/*.md: every linked file
exists and every #anchor names a heading of the target, slugged as GitHub
does. Links inside fenced code and inline code are ignored.
Usage: python3 scripts/check-doc-links.py   (exit status 1 on a broken link)"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)\)')
HEADING = re.compile(r'#{1,6} +(.*?)[ #]*$')


def prose(path):
    """(line number, line) for the lines outside fenced code blocks."""
    fence = False
    for n, line in enumerate(path.read_text().split('\n'), 1):
        if line.lstrip().startswith('```'):
            fence = not fence
        elif not fence:
            yield n, line


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to
    dashes, repeated headings numbered -1, -2, ..."""
    out, seen = set(), {}
    for _, line in prose(path):
        m = HEADING.match(line)
        if m:
            text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', m.group(1))
            slug = re.sub(r'[^\w\- ]', '', text.lower()).replace(' ', '-')
            k = seen.get(slug, 0)
            seen[slug] = k + 1
            out.add(slug if k == 0 else f'{slug}-{k}')
    return out


def main():
    files = [ROOT / 'README.md'] + sorted((ROOT / 'docs').rglob('*.md'))
    bad = 0
    for f in files:
        for n, line in prose(f):
            for target in LINK.findall(re.sub(r'`[^`]*`', '', line)):
                if re.match(r'[a-z]+:', target):
                    continue  # https:, mailto:
                path, _, anchor = target.partition('#')
                dest = (f.parent / path).resolve() if path else f
                where = f'{f.relative_to(ROOT)}:{n}: {target}'
                if not dest.exists():
                    print(f'{where}: no such file')
                    bad += 1
                elif anchor and dest.suffix == '.md' and anchor not in anchors(dest):
                    print(f'{where}: no heading with that anchor')
                    bad += 1
    print(f'{len(files)} files checked, {bad} broken links')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
