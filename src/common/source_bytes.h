// A byte buffer that a read fills at once: growing it does not zero what the read is about to
// overwrite. std::vector<uint8_t>::resize value-initializes, and the pipeline's read buffers
// start empty whenever their bytes were handed to the compressors: zeroing them took 1% of a
// gzip-9 build's CPU (3 x /usr/include, perf).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

namespace sqar {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  // Default-initializes (for bytes: leaves them as they are) where vector would zero them.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using SourceBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

}  // namespace sqar
