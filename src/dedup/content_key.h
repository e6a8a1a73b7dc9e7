// The identity of content for dedup and --reuse: (size, XXH3-128). The size is part of the key
// so that a collision would also need equal lengths.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/hash.h"

namespace sqar {

struct ContentKey {
  uint64_t size;
  Hash128 hash;
  bool operator==(const ContentKey&) const = default;
};

struct ContentKeyHasher {
  size_t operator()(const ContentKey& k) const { return Hash128Hasher{}(k.hash) ^ size_t(k.size); }
};

}  // namespace sqar
