#include "common/hash.h"

#include <cstdio>
#include <new>

namespace sqar {

std::string Hash128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return buf;
}

StreamHasher::StreamHasher() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  reset();
}
StreamHasher::~StreamHasher() { XXH3_freeState(state_); }
void StreamHasher::reset() { XXH3_128bits_reset(state_); }
void StreamHasher::update(const void* data, size_t len) { XXH3_128bits_update(state_, data, len); }
Hash128 StreamHasher::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(state_);
  return {h.low64, h.high64};
}

}  // namespace sqar
