# The harnesses and the libFuzzer flags every run uses; sourced by fuzz/run.sh (CI) and
# scripts/fuzz.sh (long local runs), so both fuzz under the same limits.
harnesses=(fuzz_image fuzz_sqarfs fuzz_codec fuzz_manifest fuzz_tar)

# Largest input per harness: the seed images are at most 56 KiB (the one with uncompressed
# tables), metadata blocks 8 KiB, manifest trailers of the seed images under 10 KiB. Larger
# inputs only slow every execution down.
max_len() {
  case $1 in
    fuzz_image | fuzz_sqarfs) echo 65536 ;;
    fuzz_codec | fuzz_manifest) echo 16384 ;;
    fuzz_tar) echo 32768 ;;  # the seed archives are up to 26 KiB
  esac
}

# -timeout: one input taking > 10 s is a hang. -rss_limit_mb (and the malloc limit it implies;
# the replay tests apply the same, kMemoryLimitMb in replay_memory_limit.h): memory an image
# can claim without backing bytes is a bug; 512 MiB is far above what any input of max_len
# bytes needs (a sanitized harness itself uses ~60 MiB).
fuzz_flags() {
  local dict=fuzz/squashfs.dict
  [[ $1 == fuzz_tar ]] && dict=fuzz/tar.dict
  echo "-max_len=$(max_len "$1") -dict=$dict -timeout=10 -rss_limit_mb=512"
}

# Seeds and committed reproducers (fuzz/pending/ is left out: those still crash).
seed_dirs() {
  echo "fuzz/corpus/$1"
  [[ -d fuzz/regressions/$1 ]] && echo "fuzz/regressions/$1"
  return 0
}

# ASan keeps freed memory in a 256 MiB quarantine by default, which counts against the RSS
# limit: a fuzz_image run sat at 360 MiB after a few hundred inputs. 64 MiB still catches
# use-after-free of anything freed during one input. (Options set by the caller come later
# and win.)
export ASAN_OPTIONS="quarantine_size_mb=64${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
