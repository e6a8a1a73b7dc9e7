#!/usr/bin/env bash
# Builds the libFuzzer harnesses in build-fuzz (clang, ASan + UBSan) and runs every harness for
# a bounded time, starting from the committed seeds (fuzz/corpus/) and crash reproducers
# (fuzz/regressions/), which all run first. Exits non-zero on any crash, leak, timeout, memory
# limit or sanitizer report; the reproducer is left in build-fuzz/artifacts/.
#
# Usage: fuzz/run.sh [SECONDS_PER_HARNESS]   (default: $FUZZ_SECONDS or 40; CI uses 40)
# Longer runs that go on past a crash: scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-40}}
source fuzz/harnesses.sh

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSQAR_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build build-fuzz --target fuzzers -j"$(nproc)" | tail -1

mkdir -p build-fuzz/artifacts
for h in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus/$h  # grows across local runs; the first directory gets new inputs
  mkdir -p "$corpus"
  log=build-fuzz/$h.log
  start=$SECONDS
  if ! "build-fuzz/fuzz/$h" $(fuzz_flags "$h") -max_total_time="$secs" -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$h-" "$corpus" $(seed_dirs "$h") >"$log" 2>&1; then
    grep -v -E '^#[0-9]+' "$log" | tail -60
    echo "fuzz: $h FAILED after $((SECONDS - start)) s; reproducer: $(ls -t build-fuzz/artifacts/$h-* 2>/dev/null | head -1)"
    exit 1
  fi
  echo "fuzz: $h ok: $(grep -m1 -o 'Done [0-9]* runs' "$log") in $((SECONDS - start)) s," \
       "corpus $(ls "$corpus" | wc -l) inputs"
done
