#!/usr/bin/env python3
"""Checks every installed distribution's RECORD under a virtual environment
against the files, with Python's own hashlib (sha256, urlsafe base64, size).

    python3 scripts/check_installed_records.py VENV

Prints "LINES MISMATCHES NAME..." on one line (the lines checked, how many
do not match their files, and those files' names) and exits 0; used by
scripts/real-env-prune.sh and the `real_venv_prune` corpus test.
"""
import base64, csv, glob, hashlib, os, sys

checked, bad = 0, []
for record in glob.glob(os.path.join(sys.argv[1], "lib/python*/site-packages/*.dist-info/RECORD")):
    base = os.path.dirname(os.path.dirname(record))
    for row in csv.reader(open(record, newline="")):
        if len(row) < 3 or not row[1]:
            continue
        data = open(os.path.normpath(os.path.join(base, row[0])), "rb").read()
        digest = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        checked += 1
        if (digest, str(len(data))) != (row[1], row[2]):
            bad.append(row[0])
print(checked, len(bad), " ".join(bad))
