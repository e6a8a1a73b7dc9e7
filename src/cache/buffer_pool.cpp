#include "cache/buffer_pool.h"

#include <sys/mman.h>

#include <map>
#include <new>

namespace sqar::cache {

namespace {
constexpr size_t kRegion = 2u << 20;  // one transparent huge page on x86-64 and arm64

// A kRegion-aligned, kRegion-sized mapping (THP needs the alignment), or nullptr.
uint8_t* map_region() {
  void* p = mmap(nullptr, 2 * kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kRegion - 1) & ~uintptr_t(kRegion - 1);
  if (aligned > start) munmap(p, aligned - start);
  if (start + 2 * kRegion > aligned + kRegion)
    munmap(reinterpret_cast<void*>(aligned + kRegion), start + 2 * kRegion - aligned - kRegion);
  madvise(reinterpret_cast<void*>(aligned), kRegion, MADV_HUGEPAGE);  // advisory: ignore failure
  return reinterpret_cast<uint8_t*>(aligned);
}
}  // namespace

BufferPool& BufferPool::for_size(size_t size) {
  static std::mutex mu;
  static auto* pools = new std::map<size_t, BufferPool*>;  // never destroyed: buffers may outlive main
  std::lock_guard lock(mu);
  BufferPool*& p = (*pools)[size];
  if (!p) p = new BufferPool(size);
  return *p;
}

uint8_t* BufferPool::get() {
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      uint8_t* p = free_.back();
      free_.pop_back();
      return p;
    }
  }
  if (size_ > kRegion) return new uint8_t[size_];  // not pooled sizes: put() never sees these
  uint8_t* region = map_region();
  if (!region) throw std::bad_alloc();
  const size_t n = kRegion / size_;
  std::lock_guard lock(mu_);
  for (size_t i = 1; i < n; ++i) free_.push_back(region + i * size_);
  return region;
}

void BufferPool::put(uint8_t* p) {
  if (size_ > kRegion) {
    delete[] p;
    return;
  }
  std::lock_guard lock(mu_);
  free_.push_back(p);
}

}  // namespace sqar::cache
