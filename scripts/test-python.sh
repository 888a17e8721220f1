#!/usr/bin/env bash
# Builds and installs the Python package (crates/offload-py, through pip and
# maturin as a PEP 517 backend) into a fresh venv under target/, then runs
# its pytest suite, which compares the module with the `offload` CLI's
# --json output on the same files. pytest's "no tests collected" (exit 5)
# counts as a failure.
#
#   scripts/test-python.sh [pytest args...]
#   PYTHON=python3.12 scripts/test-python.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=target/python-venv
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet ./crates/offload-py pytest
# The CLI the tests compare with.
cargo build --quiet -p offload-cli --bin offload
export OFFLOAD_BIN="$PWD/target/debug/offload"
status=0
"$venv/bin/python" -m pytest -q crates/offload-py/tests "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test-python: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
