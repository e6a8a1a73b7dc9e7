// An append-only array in fixed chunks of 2^14 elements: growing it never moves or copies an
// element (so references stay valid, as in a std::deque), and each chunk is one large
// allocation.
//
// Why not std::deque: libstdc++ gives it 512-byte chunks, 9 tree nodes each, allocated by the
// scan's building thread between the short-lived strings and listings of the directories it
// is adding. When those are freed the holes sit between live chunks, no page is ever wholly
// free, and malloc can return none of it: on the ports set (270k entries) 13.6 MB of freed
// memory stayed resident through the whole build, a quarter of its peak RSS.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace sqar {

template <class T>
class ChunkedArray {
 public:
  static constexpr size_t kChunkShift = 14;
  static constexpr size_t kChunkSize = size_t(1) << kChunkShift;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](size_t i) { return chunks_[i >> kChunkShift][i & (kChunkSize - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kChunkShift][i & (kChunkSize - 1)]; }

  T& push_back(const T& value) {
    if ((size_ & (kChunkSize - 1)) == 0 && (size_ >> kChunkShift) == chunks_.size())
      chunks_.push_back(std::make_unique<T[]>(kChunkSize));
    T& slot = (*this)[size_++];
    slot = value;
    return slot;
  }
  T& emplace_back() { return push_back(T{}); }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace sqar
