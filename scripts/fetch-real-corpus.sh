#!/usr/bin/env bash
# Fetches a small corpus of real ROCm files that other people built, for
# crates/offload-cli/tests/corpus/real_corpus.rs (see docs/development.md, "Real-world corpus").
#
# Every download is pinned by exact version and sha256 and comes from PyPI
# (pip) or Debian (apt-get download), the registries CI can reach. Only the
# few shared libraries the tests read are unpacked; downloads are deleted
# once unpacked. Idempotent: an artifact whose files are already unpacked
# (and whose stamp records the same sha256) is not fetched again.
#
#   scripts/fetch-real-corpus.sh            # into $OFFLOAD_CORPUS_DIR or
#                                           # ~/.cache/offload-binutils/corpus
#
# Layout: files/<artifact>/<name> (the corpus), tools/librocmllvm.so (ROCm 7's
# LLVM library, the reference that reads CCOB v3), .stamp-<artifact>.
set -euo pipefail

dir=${OFFLOAD_CORPUS_DIR:-$HOME/.cache/offload-binutils/corpus}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# name | registry | package==version | exact file | sha256 | destination | members to unpack
# Wheels are requested for CPython 3.11 on x86_64 whatever python3 runs this.
artifacts=(
  # ROCm 7 (AMD clang 23, TheRock): one uncompressed bundle per library, 30
  # targets gfx900..gfx950, gfx1150..gfx1153, gfx1200/1201, gfx1250, gfx1251.
  "rocm7-torch-cluster|pypi|torch-cluster-rocm==1.6.3.post7|torch_cluster_rocm-1.6.3.post7-cp311-cp311-manylinux_2_32_x86_64.whl|49c50320e24ecb340ed8928d6c0dfba3d6af417aa9ee68919698c5d9583e12cf|files|torch_cluster/_fps_cuda.so"
  # ROCm 7.2.0 (AMD clang 22): CCOB v3 (zstd), 27 targets gfx900..gfx950,
  # gfx1150..gfx1153, gfx1200/1201; _solver.so has two CCOBs back to back.
  "rocm7-jax-plugin|pypi|jax-rocm7-plugin==0.10.2|jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl|fc6c3f6641d99916ea1896353a0c27187f1fcddb811768d4607d7e78834571a3|files|jax_rocm7_plugin/_prng.so jax_rocm7_plugin/_solver.so"
  # ROCm 6.2.4 (AMD clang 18): uncompressed bundles, gfx900..gfx942 with
  # gfx940/gfx941, gfx1030, gfx1100, gfx1200/1201.
  "rocm6-jax-plugin|pypi|jax-rocm60-plugin==0.5.0|jax_rocm60_plugin-0.5.0-cp311-cp311-manylinux_2_28_x86_64.whl|05414df017d473b77cae3b04e69d199cbdaa2ddb7cff0801edbae84f37a74308|files|jax_rocm60_plugin/_prng.so jax_rocm60_plugin/_solver.so"
  # ROCm 6.3.3 (AMD clang 18): two uncompressed bundles back to back in one
  # .hip_fatbin (24 MB of code), gfx906..gfx942, gfx1030, gfx1100/1101.
  "rocm6-fastllm|pypi|ftllm-rocm==0.1.5.1|ftllm_rocm-0.1.5.1-py3-none-manylinux2014_x86_64.whl|eed34b2fb5cfb889d76dc3f2282bc2a55e69ebe3be5c936202b44aa2f7bd8404|files|ftllm/libfastllm_tools.so"
  # Debian 12's rocRAND (ROCm 5.3, Debian's clang 15): uncompressed, targets
  # with xnack settings (gfx900:xnack-, gfx90a:xnack+ and gfx90a:xnack-).
  "debian-rocrand|deb|librocrand1=5.3.3-4|librocrand1_5.3.3-4_amd64.deb|b145d4e47a26ce14da5f8550a092db8d3c7e2d84174c68885336de40f51b7b81|files|./usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
  # NVIDIA cuRAND 10.3.10.19 for Windows (69 MB wheel): 11 CUDA fat binaries
  # (153 entries, sm_50..sm_121, PTX for sm_121) in the DLL's .nv_fatb
  # section, registered by .nvFatBi records (tests/cli/windows_pe.rs).
  "curand-win|pypi|nvidia-curand-cu12==10.3.10.19|nvidia_curand_cu12-10.3.10.19-py3-none-win_amd64.whl|e8129e6ac40dc123bd948e33d3e11b4aa617d87a583fa2f21b3210e90c743cde|files|nvidia/curand/bin/curand64_10.dll"
  # The same cuRAND for Linux (68 MB wheel), the reference the DLL is
  # compared with; only the wheel is kept (offload reads it as a package).
  "curand-linux|pypi|nvidia-curand-cu12==10.3.10.19|nvidia_curand_cu12-10.3.10.19-py3-none-manylinux_2_27_x86_64.whl|49b274db4780d421bd2ccd362e1415c13887c53c214f0d4b761752b8f9f6aa1e|files|"
  # ROCm 7.2.2's LLVM as one library (62 MB wheel): the reference decoder of
  # CCOB v3, which LLVM 19 cannot read. Not part of the corpus itself.
  "rocm-llvm|pypi|rocm-llvm-python==7.2.2.562.46|rocm_llvm_python-7.2.2.562.46-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl|e96118552366a135ff9c3d8b9d8dc2d5889eca1b457986f5546861f3e9a19762|tools|rocm/llvm/librocmllvm.so"
)

unpacked_ok() { # name sha dest file members...
  local name=$1 sha=$2 dest=$3 file=$4 m
  shift 4
  [ "$(cat "$dir/.stamp-$name" 2>/dev/null)" = "$sha" ] || return 1
  # The packages themselves are kept too: `offload list x.whl` is tested on them.
  [ "$dest" = tools ] || [ -s "$dir/packages/$name/$file" ] || return 1
  for m in "$@"; do
    [ -n "$m" ] || continue
    [ -s "$(target_path "$name" "$dest" "$m")" ] || return 1
  done
}

target_path() { # name dest member
  if [ "$2" = tools ]; then echo "$dir/tools/$(basename "$3")"; else echo "$dir/files/$1/$(basename "$3")"; fi
}

fetch() { # registry spec file sha workdir
  local registry=$1 spec=$2 file=$3 sha=$4 work=$5
  local platforms=(--platform manylinux_2_32_x86_64 --platform manylinux_2_28_x86_64
    --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64)
  case $file in *-win_amd64.whl) platforms=(--platform win_amd64) ;; esac
  case $registry in
    pypi)
      python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --implementation cp --abi cp311 "${platforms[@]}" \
        -d "$work" "$spec" ;;
    deb)
      # apt-get download writes into the current folder, as the _apt user
      # where it can; a world-writable work folder keeps it quiet.
      chmod 777 "$work"
      (cd "$work" && apt-get download -qq "$spec") || {
        apt-get update -qq && (cd "$work" && apt-get download -qq "$spec"); } ;;
  esac
  [ -f "$work/$file" ] || { echo "fetch-real-corpus: $spec did not give $file" >&2; ls -l "$work" >&2; return 1; }
  echo "$sha  $work/$file" | sha256sum -c --quiet - || {
    echo "fetch-real-corpus: sha256 mismatch for $file (pinned $sha)" >&2; return 1; }
}

total=0
for a in "${artifacts[@]}"; do
  IFS='|' read -r name registry spec file sha dest members <<<"$a"
  read -r -a list <<<"$members"
  if unpacked_ok "$name" "$sha" "$dest" "$file" "${list[@]}"; then
    continue
  fi
  # Outside the cache: apt-get download drops to the _apt user, who may not
  # reach a folder under root's home.
  work=$(mktemp -d "${TMPDIR:-/tmp}/fetch-real-corpus.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "fetch-real-corpus: $spec ($file)"
  fetch "$registry" "$spec" "$file" "$sha" "$work"
  mkdir -p "$work/x"
  case $registry in
    pypi) [ ${#list[@]} = 0 ] || unzip -q -o -j "$work/$file" "${list[@]}" -d "$work/x" ;;
    deb) dpkg-deb --fsys-tarfile "$work/$file" | tar -x -C "$work/x" --transform='s,.*/,,' "${list[@]}" ;;
  esac
  for m in "${list[@]}"; do
    out=$(target_path "$name" "$dest" "$m")
    mkdir -p "$(dirname "$out")"
    mv -f "$work/x/$(basename "$m")" "$out"
  done
  if [ "$dest" != tools ]; then
    mkdir -p "$dir/packages/$name"
    mv -f "$work/$file" "$dir/packages/$name/$file"
    total=$((total + $(stat -c %s "$dir/packages/$name/$file")))
  else
    total=$((total + $(stat -c %s "$work/$file")))
  fi
  echo "$sha" >"$dir/.stamp-$name"
  rm -rf "$work"
  trap - EXIT
done
[ "$total" = 0 ] || echo "fetch-real-corpus: downloaded $((total / 1048576)) MiB"
echo "fetch-real-corpus: corpus ready in $dir"
(cd "$dir" && find files tools packages -type f -printf '  %p  %s bytes\n' | sort)
