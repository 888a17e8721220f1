#!/usr/bin/env bash
# Regenerates crates/offload-format/tests/fixtures/llvm19/ from the installed
# LLVM 19.1.7: the clang-offload-bundler binary (bundler_*.tsv) and, for facts
# the bundler cannot show, the libLLVM/libclang-cpp 19 libraries it loads
# (lib_*.tsv, through scripts/llvm19-oracle/oracle.cpp).
#
# Needs: /usr/lib/llvm-19 with clang-offload-bundler, clang++-19, the LLVM 19
# headers (llvm-19-dev) and libclang-cpp 19. See the fixture COMMANDS.md.
#
# Usage: scripts/gen-llvm19-fixtures.sh   (takes about two minutes)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LLVM="${LLVM19_DIR:-/usr/lib/llvm-19}"
BUNDLER="$LLVM/bin/clang-offload-bundler"
IN="$ROOT/scripts/llvm19-oracle/inputs"
OUT="$ROOT/crates/offload-format/tests/fixtures/llvm19"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"

"$BUNDLER" --version | grep -q 'version 19\.1\.7' || {
  echo "expected clang-offload-bundler 19.1.7 at $BUNDLER" >&2
  exit 1
}

# ---------------------------------------------------------------------------
# Library oracle
# ---------------------------------------------------------------------------
clang++-19 -std=c++17 -O1 -I"$LLVM/include" "$ROOT/scripts/llvm19-oracle/oracle.cpp" \
  -L"$LLVM/lib" -lLLVM-19 -l:libclang-cpp.so.19.1 -Wl,-rpath,"$LLVM/lib" -o "$WORK/oracle"
ORACLE="$WORK/oracle"

{
  echo "# text	arch	subarch	vendor	os	environment	objfmt  (llvm::Triple(text), LLVM 19.1.7)"
  cat "$IN/arch_spellings.txt" "$IN/triples.txt" | awk '!seen[$0]++' | "$ORACLE" triple
} >"$OUT/lib_triple_parse.tsv"

{
  echo "# arch	vendor	os	env	text	arch	subarch	vendor	os	environment	objfmt  (llvm::Triple(arch, vendor, os, env), LLVM 19.1.7)"
  "$ORACLE" parts <"$IN/from_parts.txt"
} >"$OUT/lib_triple_from_parts.tsv"

{
  echo "# name	amdgcn canonical	xnack	sramecc	r600 canonical  (parseArchAMDGCN/getArchNameAMDGCN/getArchAttrAMDGCN, parseArchR600/getArchNameR600)"
  { "$ORACLE" amdgcn-list; "$ORACLE" r600-list; grep -v ':' "$IN/offload_arch_candidates.txt"; } |
    awk '!seen[$0]++' >"$WORK/gpu_names"
  paste <("$ORACLE" amdgcn <"$WORK/gpu_names") <("$ORACLE" r600 <"$WORK/gpu_names" | cut -f2)
} >"$OUT/lib_amdgpu.tsv"

{
  echo "# every name of fillValidArchListAMDGCN, in LLVM's order"
  "$ORACLE" amdgcn-list
} >"$OUT/lib_amdgcn_list.txt"
{
  echo "# every name of fillValidArchListR600, in LLVM's order"
  "$ORACLE" r600-list
} >"$OUT/lib_r600_list.txt"
{
  echo "# every name clang 19.1.7's OffloadArch table holds, in enum order (the first line after this one is the empty name)"
  "$ORACLE" offload-arch-list
} >"$OUT/lib_offload_arch_list.txt"

# ---------------------------------------------------------------------------
# Bundler observations
# ---------------------------------------------------------------------------
cd "$WORK"
printf 'payload\n' >in.bc

# run_ok ARGS...: 1 if the bundler succeeds, 0 if it fails.
run_ok() { if "$BUNDLER" "$@" >out.txt 2>err.txt; then echo 1; else echo 0; fi; }

# 1. Architecture validity: an openmp entry with the spelling as arch.
{
  echo "# arch spelling	1 = accepted, 0 = 'unknown target triple'"
  while IFS= read -r arch; do
    r=$(run_ok -type=bc "-targets=host-x86_64-unknown-linux-gnu,openmp-$arch-unknown-linux-gnu" \
      -input=in.bc -input=in.bc -output=b.bc)
    if [ "$r" = 0 ] && ! grep -q "unknown target triple '$arch-unknown-linux-gnu'" err.txt; then
      echo "unexpected failure for arch '$arch':" >&2
      cat err.txt >&2
      exit 1
    fi
    printf '%s\t%s\n' "$arch" "$r"
  done <"$IN/arch_spellings.txt"
} >"$OUT/bundler_arch_validity.tsv"

# 2. Offload-arch names: what -list prints for hip-amdgcn-amd-amdhsa--<name>.
{
  echo "# name	ID listed after bundling -targets=hip-amdgcn-amd-amdhsa--<name>"
  while IFS= read -r name; do
    "$BUNDLER" -type=bc "-targets=hip-amdgcn-amd-amdhsa--$name" -input=in.bc -output=b.bc
    listed=$("$BUNDLER" -list -type=bc -input=b.bc)
    printf '%s\t%s\n' "$name" "$listed"
  done <"$IN/offload_arch_candidates.txt"
} >"$OUT/bundler_offload_arch_listing.tsv"

# 3. Triple compatibility: bundle hip-<A>-gfx906, request hip-<B>-gfx906.
{
  echo "# stored triple A	requested triple B	1 = unbundling hip-<B>-gfx906 from a bundle of hip-<A>-gfx906 finds it"
  group=()
  flush() {
    local a b
    for a in "${group[@]}"; do
      "$BUNDLER" -type=bc "-targets=hip-$a-gfx906" -input=in.bc -output=b.bc
      for b in "${group[@]}"; do
        r=$(run_ok -type=bc -unbundle "-targets=hip-$b-gfx906" -input=b.bc -output=o.bc)
        if [ "$r" = 0 ] && ! grep -q "Can't find bundles for" err.txt; then
          echo "unexpected failure for $a / $b:" >&2
          cat err.txt >&2
          exit 1
        fi
        printf '%s\t%s\t%s\n' "$a" "$b" "$r"
      done
    done
    group=()
  }
  while IFS= read -r line; do
    case "$line" in
    '#'*) ;;
    '='*) if [ ${#group[@]} -gt 0 ]; then flush; fi ;;
    *) group+=("$line") ;;
    esac
  done <"$IN/compat_groups.txt"
  flush
} >"$OUT/bundler_triple_compat.tsv"

# 4. Target-ID features: bundle --<proc>, request --<proc>:xnack+ / :sramecc+.
{
  echo "# name	xnack	sramecc  (1 = requesting hip-amdgcn-amd-amdhsa--<name>:<feature>+ finds a bundle of hip-amdgcn-amd-amdhsa--<name>)"
  grep -v ':' "$IN/offload_arch_candidates.txt" | while IFS= read -r name; do
    "$BUNDLER" -type=bc "-targets=hip-amdgcn-amd-amdhsa--$name" -input=in.bc -output=b.bc
    x=$(run_ok -type=bc -unbundle "-targets=hip-amdgcn-amd-amdhsa--$name:xnack+" -input=b.bc -output=o.bc)
    s=$(run_ok -type=bc -unbundle "-targets=hip-amdgcn-amd-amdhsa--$name:sramecc+" -input=b.bc -output=o.bc)
    printf '%s\t%s\t%s\n' "$name" "$x" "$s"
  done
} >"$OUT/bundler_processor_features.tsv"

# 5. Alternative processor names: stored ID, requested ID, found.
{
  echo "# stored ID	requested ID	1 = found  (alternative names are not offload-arch names in 19)"
  while IFS=' ' read -r stored requested; do
    [ -z "$stored" ] && continue
    "$BUNDLER" -type=bc "-targets=$stored" -input=in.bc -output=b.bc
    r=$(run_ok -type=bc -unbundle "-targets=$requested" -input=b.bc -output=o.bc)
    printf '%s\t%s\t%s\n' "$stored" "$requested" "$r"
  done <<'EOF'
hip-amdgcn-amd-amdhsa--gfx803 hip-amdgcn-amd-amdhsa--fiji
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--gfx803
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--fiji
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--fiji:xnack+
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--fiji:sramecc+
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--polaris10
hip-amdgcn-amd-amdhsa--fiji hip-amdgcn-amd-amdhsa--tahiti
hip-amdgcn-amd-amdhsa--tahiti hip-amdgcn-amd-amdhsa--gfx600
hip-amdgcn-amd-amdhsa--gfx600 hip-amdgcn-amd-amdhsa--tahiti
hip-amdgcn-amd-amdhsa--carrizo hip-amdgcn-amd-amdhsa--gfx801:xnack+
hip-amdgcn-amd-amdhsa--gfx801 hip-amdgcn-amd-amdhsa--carrizo:xnack+
hip-amdgcn-amd-amdhsa--gfx801 hip-amdgcn-amd-amdhsa--gfx801:xnack+
hip-amdgcn-amd-amdhsa--gfx803 hip-amdgcn-amd-amdhsa--gfx803:xnack+
hip-amdgcn-amd-amdhsa--gfx950 hip-amdgcn-amd-amdhsa--fiji
hip-amdgcn-amd-amdhsa--gfx950 hip-amdgcn-amd-amdhsa--gfx950:xnack+
hip-amdgcn-amd-amdhsa--gfx9000 hip-amdgcn-amd-amdhsa--gfx906
hip-amdgcn-amd-amdhsa--gfx906 hip-amdgcn-amd-amdhsa--gfx9000
hip-amdgcn-amd-amdhsa--stoney hip-amdgcn-amd-amdhsa--gfx810
hip-amdgcn-amd-amdhsa--gfx810 hip-amdgcn-amd-amdhsa--gfx810:xnack-
hip-amdgcn-amd-amdhsa--gfx90a hip-amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+
EOF
} >"$OUT/bundler_alias_requests.tsv"

wc -l "$OUT"/*.tsv "$OUT"/*.txt
