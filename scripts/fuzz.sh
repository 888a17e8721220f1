#!/usr/bin/env bash
# Runs the cargo-fuzz targets in fuzz/ one after another, each for a fixed
# time, and prints a table of what ran.
#
#   scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]
#
# SECONDS-PER-TARGET defaults to 60; with no TARGET every target runs. Needs
# a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Each
# target keeps its growing corpus in fuzz/corpus/<target> (not checked in)
# and starts from the checked-in seeds in fuzz/seeds/<target>. Findings land
# in fuzz/artifacts/<target>/; the full libFuzzer output of each run is in
# fuzz/logs/<target>.log. Extra libFuzzer flags can be given in
# FUZZ_FLAGS (for example FUZZ_FLAGS="-jobs=4 -workers=4").
#
# Exit status: 0 when no target found anything, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/../fuzz"

secs=${1:-60}
shift || true
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Release build with debug assertions (integer overflow checks on) and
# AddressSanitizer, cargo-fuzz's default sanitizer.
# With chosen targets only those are built (linking every ASan binary takes
# a long time on a small machine).
if [ $# -gt 0 ]; then
    for t in "${targets[@]}"; do cargo +nightly fuzz build --debug-assertions "$t" || exit 1; done
else
    cargo +nightly fuzz build --debug-assertions || exit 1
fi

mkdir -p logs
status=0
printf '%-20s %8s %12s %10s %s\n' target seconds execs corpus result
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    dirs=("corpus/$t")
    [ -d "seeds/$t" ] && dirs+=("seeds/$t")
    # -timeout: one input running longer than 10 s is a hang finding.
    # -rss_limit_mb / -malloc_limit_mb: an allocation the input does not
    # justify is a finding (2 GiB, libFuzzer's default, made explicit).
    # shellcheck disable=SC2086
    cargo +nightly fuzz run --debug-assertions "$t" "${dirs[@]}" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -print_final_stats=1 ${FUZZ_FLAGS:-} >"logs/$t.log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | grep -o '[0-9]*$' | tail -1)
    took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "logs/$t.log" | grep -o 'in [0-9]*' | grep -o '[0-9]*' | tail -1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    if [ $rc -eq 0 ]; then result=ok; else result="FINDING (rc $rc, see fuzz/artifacts/$t, logs/$t.log)"; status=1; fi
    printf '%-20s %8s %12s %10s %s\n' "$t" "${took:-?}" "${execs:-?}" "$corpus" "$result"
done
exit $status
