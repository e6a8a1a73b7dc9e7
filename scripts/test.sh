#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs the whole test suite; then (what CI
# runs, `bash .ci/run`) the suite again under ASan+UBSan, the threaded parts under TSan, and every
# fuzz harness for a bounded time. Every stage runs even when an earlier one fails, so
# one run reports everything; the script then exits non-zero naming the failed stages.
#
#   SQAR_QUICK=1 scripts/test.sh   only the normal build and suite (no sanitizers, no fuzzing)
#   FUZZ_SECONDS=N                 seconds per fuzz harness (default 40)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
stage() { echo; echo "=== $1 ($(date +%T), ${SECONDS}s so far)"; }
failed=()
# Runs one stage in a subshell that stops at its first failing command, and records the stage's
# name when it fails. (Not `if ! (...)`: bash ignores set -e inside a tested subshell.)
run_stage() {
  local name=$1 rc
  shift
  stage "$name"
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  if ((rc != 0)); then
    echo "=== FAILED: $name (exit $rc)"
    failed+=("$name")
  fi
}

normal_stage() {
  bash scripts/build.sh
  cd build
  ctest --output-on-failure -j"$(nproc)" --timeout 900
}
run_stage "build + test" normal_stage
if [[ ${SQAR_QUICK:-0} == 1 ]]; then
  ((${#failed[@]} == 0)) || exit 1
  exit 0
fi

# The sanitizers exit with a code of their own (86, SANITIZER_EXIT_CODE in tests/e2e/sqartest.py):
# by default ASan and UBSan exit 1, which is also sqar's code for an error, so a report from a
# command a test expects to fail would pass unnoticed. The e2e helpers fail a command on this
# code or on a report in its stderr.
SANITIZER_EXIT_CODE=86

# ASan + UBSan: the whole suite, leaks included (LSan also checks sqarfs daemons when they exit).
asan_stage() {
  BUILD_DIR=build-asan CMAKE_ARGS="-DSANITIZE=address" bash scripts/build.sh
  cd build-asan
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:exitcode=$SANITIZER_EXIT_CODE \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=$SANITIZER_EXIT_CODE \
    ctest --output-on-failure -j"$(nproc)" --timeout 900
}

# TSan: the unit tests (reader cache under concurrent reads) and the e2e tests that exercise
# threads: create -j4 / extract -j4 / verify -j4, create -j4 on a cold tree (non-blocking reads),
# create --reuse (compressor threads copying blocks of an older image),
# create from a slow source (listers added while listing waits), create --tar (readers sharing
# the content store), failing and changing sources (every stage stopped by the first error),
# append and merge (pre-stored data), diff (the scanner's listers
# and parallel content comparison), extract stopped by a signal while both threads write,
# sqarfs with 16 readers, sqarfs under load.
# Newer kernels map memory where TSan does not expect it ("FATAL: ThreadSanitizer: unexpected
# memory mapping"): vm.mmap_rnd_bits=28 avoids that (we are root in CI); without root, run
# ctest under `setarch $(uname -m) -R` instead.
tsan_stage() {
  BUILD_DIR=build-tsan CMAKE_ARGS="-DSANITIZE=thread" bash scripts/build.sh
  if [[ $(sysctl -n vm.mmap_rnd_bits 2>/dev/null || echo 28) -gt 28 ]]; then
    sysctl -q -w vm.mmap_rnd_bits=28 || echo "note: cannot lower vm.mmap_rnd_bits; TSan may fail to start"
  fi
  cd build-tsan
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=$SANITIZER_EXIT_CODE \
    ctest --output-on-failure -j"$(nproc)" --timeout 900 \
      -R '^[A-Z]|^e2e\.test_(create_threads|create_cold|create_slow_source|create_reuse|create_tar|create_faults|create_live_tree|append|merge|extract|extract_interrupted|list_info_cat|verify_diff|sqarfs_threads|sqarfs_load|sqarfs_request_loop)$'
}

run_stage "ASan + UBSan build + test" asan_stage
run_stage "TSan build + threaded tests" tsan_stage
run_stage "fuzzing" bash fuzz/run.sh "${FUZZ_SECONDS:-40}"
if ((${#failed[@]})); then
  stage "FAILED stages: ${failed[*]}"
  exit 1
fi
stage "all stages passed"
