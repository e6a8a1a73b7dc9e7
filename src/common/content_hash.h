// The content hash of a file: its identity for dedup, for the manifest trailer and for every
// content check (verify, extract, cat, diff, append, merge, --reuse).
//
// Two schemes, told apart by the manifest trailer's version (format/manifest.h):
//   kFlat (versions 1-3): XXH3-128 of the content.
//   kChunked (version 4, what sqar writes): XXH3-128 over a record stream that describes the
//     content in chunks of 64 KiB. Each full chunk adds a record 'D' + u64 XXH3-64 of the
//     chunk, except that a run of full chunks whose digest is that of 64 KiB of zeros adds one
//     record 'Z' + u64 run length; a last partial chunk adds 'D' + its XXH3-64; the stream
//     ends with 'E' + u64 content size. Integers are little-endian.
//
// Why kChunked: a hole is a run of zeros that costs nothing to store, and a tar member or a
// crafted image can claim terabytes of them in a few bytes. XXH3 cannot skip zeros (each 1 KiB
// scrambles its state), so kFlat hashed 4 TiB of a sparse tar member's zeros at ~12 GB/s for
// ~340 s. kChunked takes a run of zero chunks as one record, so update_zeros costs at most two
// partial chunks whatever its length; data costs what kFlat costs (one XXH3 pass, 9 bytes of
// record per 64 KiB). A chunk of zeros that arrives as data hashes to the same record as a
// hole, so the hash stays a function of the content alone.
#pragma once
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

#include "common/hash.h"

namespace sqar {

enum class HashScheme { kFlat, kChunked };

constexpr size_t kContentHashChunk = 64 << 10;

class ContentHasher {
 public:
  explicit ContentHasher(HashScheme scheme = HashScheme::kChunked);
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;

  HashScheme scheme() const { return scheme_; }
  void reset();
  void update(const void* data, size_t len);
  // len bytes of zeros (a hole) without their bytes: O(1) in len for kChunked.
  void update_zeros(uint64_t len);
  Hash128 digest() const;

 private:
  void add_record(XXH3_state_t* to, char tag, uint64_t value) const;
  void end_full_chunk(uint64_t chunk_digest);
  void feed_chunked(const uint8_t* p, size_t len);

  HashScheme scheme_;
  XXH3_state_t* outer_;  // kFlat: the content; kChunked: the records
  XXH3_state_t* chunk_;  // kChunked: the chunk being filled
  size_t chunk_fill_ = 0;
  uint64_t zero_run_ = 0;  // full zero chunks not yet recorded
  uint64_t size_ = 0;
};

// The content hash of a whole file held in memory.
Hash128 content_hash(const void* data, size_t len, HashScheme scheme = HashScheme::kChunked);

}  // namespace sqar
