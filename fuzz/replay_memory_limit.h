// The fuzz runs' memory limit for the replay tests (replay_memory_limit.cpp).
#pragma once
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define SQAR_REPLAY_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SQAR_REPLAY_UNDER_ASAN 1
#endif
#endif
#ifndef SQAR_REPLAY_UNDER_ASAN
#define SQAR_REPLAY_UNDER_ASAN 0
#endif

// -rss_limit_mb in fuzz/harnesses.sh: keep the two equal. (A macro: ASan's options are a
// string read before any constructor runs.)
#define SQAR_FUZZ_MEMORY_LIMIT_MB 512

namespace sqar::fuzz {
constexpr unsigned kMemoryLimitMb = SQAR_FUZZ_MEMORY_LIMIT_MB;
// Aborts when the process's peak RSS has passed the limit (not under ASan).
void check_peak_rss();
}  // namespace sqar::fuzz
