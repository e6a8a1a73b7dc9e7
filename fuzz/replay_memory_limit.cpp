// The memory limit of the fuzz runs (-rss_limit_mb=512, which also refuses any single
// allocation over 512 MiB) applied to the replay tests, so a committed memory-bomb reproducer
// fails the normal suite too, not only under libFuzzer. A bomb usually reserves what an image
// claims before any byte of it is touched: peak RSS would not see it, the allocation size does.
#include "replay_memory_limit.h"

#if SQAR_REPLAY_UNDER_ASAN

// ASan owns operator new: let it refuse large allocations itself (reported, then abort).
#define SQAR_STR2(x) #x
#define SQAR_STR(x) SQAR_STR2(x)
extern "C" const char* __asan_default_options() {
  return "max_allocation_size_mb=" SQAR_STR(SQAR_FUZZ_MEMORY_LIMIT_MB);
}

// ASan's shadow memory and quarantine are not the input's doing: no RSS check.
void sqar::fuzz::check_peak_rss() {}

#else

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <new>

namespace {
constexpr size_t kLimitBytes = size_t(sqar::fuzz::kMemoryLimitMb) << 20;

[[noreturn]] void too_large(size_t n) {
  std::fprintf(stderr, "replay: one allocation of %zu bytes, over the %u MiB limit of the fuzz runs\n", n,
               sqar::fuzz::kMemoryLimitMb);
  std::abort();
}
}  // namespace

void sqar::fuzz::check_peak_rss() {
  rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0 && size_t(ru.ru_maxrss) * 1024 > kLimitBytes) {
    std::fprintf(stderr, "replay: peak RSS %ld KiB, over the %u MiB limit of the fuzz runs\n", ru.ru_maxrss,
                 kMemoryLimitMb);
    std::abort();
  }
}

// Every C++ allocation of the reader goes through these; malloc-backed like the defaults.
void* operator new(size_t n) {
  if (n > kLimitBytes) too_large(n);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (n > kLimitBytes) too_large(n);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

#endif
