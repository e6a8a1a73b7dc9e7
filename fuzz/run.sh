#!/usr/bin/env bash
# Builds the libFuzzer harnesses in build-fuzz (clang, ASan + UBSan), generates the seed corpus
# and runs every harness for a bounded time. Committed crash reproducers in fuzz/regressions/
# and the seeds run first as regression cases. Exits non-zero on any crash, leak, timeout or
# sanitizer report; the reproducer is left in build-fuzz/artifacts/.
#
# Usage: fuzz/run.sh [SECONDS_PER_HARNESS]   (default: $FUZZ_SECONDS or 40)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-40}}
harnesses=(fuzz_image fuzz_codec fuzz_manifest)

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSQAR_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build build-fuzz --target fuzzers -j"$(nproc)" | tail -1
bash fuzz/make_corpus.sh build-fuzz/seeds

mkdir -p build-fuzz/artifacts
for h in "${harnesses[@]}"; do
  corpus=build-fuzz/corpus/$h  # grows across local runs; the first directory gets new inputs
  mkdir -p "$corpus"
  dirs=("$corpus" "build-fuzz/seeds/$h")
  [[ -d fuzz/regressions/$h ]] && dirs+=("fuzz/regressions/$h")
  log=build-fuzz/$h.log
  start=$SECONDS
  # -timeout: one input taking > 10 s is a hang; -rss_limit_mb: unbounded allocation is a bug.
  if ! "build-fuzz/fuzz/$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="build-fuzz/artifacts/$h-" "${dirs[@]}" >"$log" 2>&1; then
    grep -v -E '^#[0-9]+' "$log" | tail -60
    echo "fuzz: $h FAILED after $((SECONDS - start)) s; reproducer: $(ls -t build-fuzz/artifacts/$h-* 2>/dev/null | head -1)"
    exit 1
  fi
  echo "fuzz: $h ok: $(grep -m1 -o 'Done [0-9]* runs' "$log") in $((SECONDS - start)) s," \
       "corpus $(ls "$corpus" | wc -l) inputs"
done
