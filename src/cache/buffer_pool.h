// Fixed-size buffers for decompressed blocks, carved from 2 MiB regions.
//
// A 128 KiB buffer from malloc is a fresh mmap: 32 page faults when a block is decompressed
// into it, and an munmap when the cache evicts it (docs/architecture.md, "Buffers from huge
// pages"). Here buffers come
// from 2 MiB-aligned regions marked MADV_HUGEPAGE (one fault per region where the kernel
// allows transparent huge pages) and freed buffers are kept for reuse. The pools are
// process-wide (one per size) and never shrink: they hold at most what the caches held at
// their peak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace sqar::cache {

class BufferPool {
 public:
  static BufferPool& for_size(size_t size);
  uint8_t* get();
  void put(uint8_t* p);

 private:
  explicit BufferPool(size_t size) : size_(size) {}
  size_t size_;
  std::mutex mu_;
  std::vector<uint8_t*> free_;
};

// Returns a buffer to its pool, or delete[]s one that came from new[].
struct BufferDeleter {
  BufferPool* pool = nullptr;
  BufferDeleter() = default;
  explicit BufferDeleter(BufferPool* p) : pool(p) {}
  BufferDeleter(std::default_delete<uint8_t[]>) {}  // NOLINT: lets make_unique results convert
  void operator()(uint8_t* p) const {
    if (pool)
      pool->put(p);
    else
      delete[] p;
  }
};
using Buffer = std::unique_ptr<uint8_t[], BufferDeleter>;

inline Buffer pooled_buffer(size_t size) {
  BufferPool& pool = BufferPool::for_size(size);
  return Buffer(pool.get(), BufferDeleter(&pool));
}

}  // namespace sqar::cache
