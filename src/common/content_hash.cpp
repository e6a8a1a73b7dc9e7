#include "common/content_hash.h"

#include <algorithm>
#include <memory>
#include <new>

#include "common/endian.h"

namespace sqar {

namespace {

const uint8_t* zero_chunk() {
  static const auto* zeros = new uint8_t[kContentHashChunk]();
  return zeros;
}

uint64_t zero_chunk_digest() {
  static const uint64_t digest = XXH3_64bits(zero_chunk(), kContentHashChunk);
  return digest;
}

XXH3_state_t* new_state() {
  XXH3_state_t* s = XXH3_createState();
  if (!s) throw std::bad_alloc();
  return s;
}

using StatePtr = std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)>;

}  // namespace

ContentHasher::ContentHasher(HashScheme scheme) : scheme_(scheme), outer_(new_state()), chunk_(nullptr) {
  try {
    if (scheme_ == HashScheme::kChunked) chunk_ = new_state();
  } catch (...) {
    XXH3_freeState(outer_);
    throw;
  }
  reset();
}

ContentHasher::~ContentHasher() {
  XXH3_freeState(outer_);
  if (chunk_) XXH3_freeState(chunk_);
}

void ContentHasher::reset() {
  XXH3_128bits_reset(outer_);
  chunk_fill_ = 0;
  zero_run_ = 0;
  size_ = 0;
}

void ContentHasher::add_record(XXH3_state_t* to, char tag, uint64_t value) const {
  uint8_t record[9];
  record[0] = uint8_t(tag);
  store_le64(record + 1, value);
  XXH3_128bits_update(to, record, sizeof record);
}

void ContentHasher::end_full_chunk(uint64_t chunk_digest) {
  if (chunk_digest == zero_chunk_digest()) {
    ++zero_run_;
    return;
  }
  if (zero_run_) {
    add_record(outer_, 'Z', zero_run_);
    zero_run_ = 0;
  }
  add_record(outer_, 'D', chunk_digest);
}

void ContentHasher::feed_chunked(const uint8_t* p, size_t len) {
  if (chunk_fill_) {  // complete the chunk begun earlier
    const size_t n = std::min(len, kContentHashChunk - chunk_fill_);
    XXH3_64bits_update(chunk_, p, n);
    chunk_fill_ += n;
    p += n;
    len -= n;
    if (chunk_fill_ < kContentHashChunk) return;
    end_full_chunk(XXH3_64bits_digest(chunk_));
    chunk_fill_ = 0;
  }
  for (; len >= kContentHashChunk; p += kContentHashChunk, len -= kContentHashChunk)
    end_full_chunk(XXH3_64bits(p, kContentHashChunk));
  if (len) {
    XXH3_64bits_reset(chunk_);
    XXH3_64bits_update(chunk_, p, len);
    chunk_fill_ = len;
  }
}

void ContentHasher::update(const void* data, size_t len) {
  size_ += len;
  if (scheme_ == HashScheme::kFlat)
    XXH3_128bits_update(outer_, data, len);
  else
    feed_chunked(static_cast<const uint8_t*>(data), len);
}

void ContentHasher::update_zeros(uint64_t len) {
  if (scheme_ == HashScheme::kFlat) {
    for (; len > 0;) {
      const size_t n = size_t(std::min<uint64_t>(len, kContentHashChunk));
      update(zero_chunk(), n);
      len -= n;
    }
    return;
  }
  // Up to the next chunk boundary as bytes, then whole chunks as a count, then the rest.
  if (chunk_fill_) {
    const size_t head = size_t(std::min<uint64_t>(len, kContentHashChunk - chunk_fill_));
    update(zero_chunk(), head);
    len -= head;
  }
  if (len >= kContentHashChunk) {
    zero_run_ += len / kContentHashChunk;
    size_ += len / kContentHashChunk * kContentHashChunk;
    len %= kContentHashChunk;
  }
  update(zero_chunk(), size_t(len));
}

Hash128 ContentHasher::digest() const {
  if (scheme_ == HashScheme::kFlat) {
    const XXH128_hash_t h = XXH3_128bits_digest(outer_);
    return {h.low64, h.high64};
  }
  StatePtr records(new_state(), XXH3_freeState);
  XXH3_copyState(records.get(), outer_);
  if (zero_run_) add_record(records.get(), 'Z', zero_run_);
  if (chunk_fill_) add_record(records.get(), 'D', XXH3_64bits_digest(chunk_));
  add_record(records.get(), 'E', size_);
  const XXH128_hash_t h = XXH3_128bits_digest(records.get());
  return {h.low64, h.high64};
}

Hash128 content_hash(const void* data, size_t len, HashScheme scheme) {
  if (scheme == HashScheme::kFlat) return hash128(data, len);
  if (len < kContentHashChunk) {  // the one record of a small file, without a hasher's state
    uint8_t records[18];
    size_t n = 0;
    if (len) {
      records[n++] = 'D';
      store_le64(records + n, XXH3_64bits(data, len));
      n += 8;
    }
    records[n++] = 'E';
    store_le64(records + n, len);
    n += 8;
    return hash128(records, n);
  }
  ContentHasher hasher(scheme);
  hasher.update(data, len);
  return hasher.digest();
}

}  // namespace sqar
