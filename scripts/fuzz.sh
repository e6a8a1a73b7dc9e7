#!/usr/bin/env bash
# A long local fuzzing run of every harness, which, unlike CI's fuzz/run.sh, goes on past a
# crash, out-of-memory or timeout: each finding is saved (one per distinct stack) and the run
# continues. SECONDS is the total wall time, shared out between the harnesses (fuzz_image
# and fuzz_sqarfs reach the most code and get 35% each, fuzz_codec, fuzz_manifest and fuzz_tar 10%).
# The corpus in build-fuzz/corpus/ grows across runs. At the end every finding is run once
# more and summarised: kind, sanitizer summary line and the first frame in sqar's own code.
#
# Usage: scripts/fuzz.sh [SECONDS]   (default 3600; on a shared machine: nice -n 19 scripts/fuzz.sh)
# Exit: 0 nothing found, 1 findings (in build-fuzz/findings/<harness>/), 2 usage.
# Turning a finding into a regression test: fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-3600}
[[ $total =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2; }
source fuzz/harnesses.sh
declare -A share=([fuzz_image]=35 [fuzz_sqarfs]=35 [fuzz_codec]=10 [fuzz_manifest]=10 [fuzz_tar]=10)

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DSQAR_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
cmake --build build-fuzz --target fuzzers -j"$(nproc)" | tail -1

# dedup_token_length: fork mode keeps one reproducer per distinct top-of-stack.
export ASAN_OPTIONS="$ASAN_OPTIONS:dedup_token_length=3:detect_leaks=1"
export UBSAN_OPTIONS=print_stacktrace=1:dedup_token_length=3
for h in "${harnesses[@]}"; do
  secs=$((total * ${share[$h]} / 100))
  ((secs > 0)) || continue
  corpus=build-fuzz/corpus/$h
  found=build-fuzz/findings/$h
  mkdir -p "$corpus" "$found"
  echo "fuzz: $h for $secs s ($(date +%T))"
  # -fork=1: the fuzzing runs in a child process, restarted after each finding.
  "build-fuzz/fuzz/$h" $(fuzz_flags "$h") -max_total_time="$secs" -fork=1 -ignore_crashes=1 \
    -ignore_ooms=1 -ignore_timeouts=1 -print_final_stats=1 -artifact_prefix="$found/" \
    "$corpus" $(seed_dirs "$h") >"build-fuzz/$h.long.log" 2>&1 || true
  grep -E '^#[0-9]+.*(cov|ft):' "build-fuzz/$h.long.log" | tail -1 | sed 's/^/  last: /' || true
done

# One line per finding: run it again (same limits) and keep what names the bug.
status=0
for h in "${harnesses[@]}"; do
  for f in build-fuzz/findings/$h/*; do
    [[ -f $f ]] || continue
    status=1
    out=$("build-fuzz/fuzz/$h" $(fuzz_flags "$h") "$f" 2>&1 || true)
    summary=$(grep -m1 -E '^SUMMARY:|ERROR: libFuzzer' <<<"$out" || echo "(did not reproduce)")
    frame=$(grep -m1 -E '#[0-9]+ .* (/[^ ]*)?(src|fuse)/[^ ]+:[0-9]+' <<<"$out" | sed -E 's/^ *#[0-9]+ 0x[0-9a-f]+ in //' || true)
    echo "finding: $f ($(stat -c %s "$f") bytes): $summary"
    [[ -n $frame ]] && echo "  at $frame"
  done
done
((status == 0)) && echo "fuzz: nothing found"
exit $status
