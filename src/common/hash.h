// XXH3-128 content hashes: the identity of file content for dedup and the manifest.
#pragma once
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace sqar {

struct Hash128 {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const Hash128&) const = default;
  std::string hex() const;
};

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return size_t(h.low ^ (h.high * 0x9E3779B97F4A7C15ull)); }
};

inline Hash128 hash128(const void* data, size_t len) {
  XXH128_hash_t h = XXH3_128bits(data, len);
  return {h.low64, h.high64};
}

// Incremental hashing for files read in chunks.
class StreamHasher {
 public:
  StreamHasher();
  ~StreamHasher();
  StreamHasher(const StreamHasher&) = delete;
  StreamHasher& operator=(const StreamHasher&) = delete;
  void reset();
  void update(const void* data, size_t len);
  Hash128 digest() const;

 private:
  XXH3_state_t* state_;
};

}  // namespace sqar
