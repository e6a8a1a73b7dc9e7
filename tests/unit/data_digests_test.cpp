// The stored-data digests trailer (src/format/data_digests.h): chunks at fixed image offsets
// without the superblock, a round trip, and damaged or out-of-range trailers refused.
#include "format/data_digests.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <vector>

#include "common/endian.h"
#include "common/error.h"

namespace {

std::vector<uint8_t> image_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + (i >> 9));
  return v;
}

sqar::DataDigests digest(const std::vector<uint8_t>& img, uint64_t end, uint32_t log) {
  return sqar::compute_data_digests(
      [&](uint64_t off, void* buf, size_t len) { std::memcpy(buf, img.data() + off, len); }, end, log);
}

TEST(DataDigests, ChunksCoverTheDataButNotTheSuperblock) {
  auto img = image_bytes(3 * 4096 + 100);
  const auto d = digest(img, img.size(), 12);
  ASSERT_EQ(d.digests.size(), 4u);
  EXPECT_EQ(d.digests[0], XXH3_64bits(img.data() + 96, 4096 - 96));
  EXPECT_EQ(d.digests[3], XXH3_64bits(img.data() + 3 * 4096, 100));
  img[10] ^= 1;  // the superblock: rewritten by append, not covered
  EXPECT_EQ(digest(img, img.size(), 12).digests, d.digests);
  img[5000] ^= 1;
  EXPECT_NE(digest(img, img.size(), 12).digests[1], d.digests[1]);
}

// Chunks of 1 MiB are read and hashed in smaller pieces: the digest must be the one-shot
// XXH3-64 of the whole chunk, whatever its length and offset.
TEST(DataDigests, PiecewiseHashEqualsTheWholeChunksHash) {
  const auto img = image_bytes((3 << 20) + 777);
  const auto d = digest(img, img.size(), 20);
  ASSERT_EQ(d.digests.size(), 4u);
  EXPECT_EQ(d.digests[0], XXH3_64bits(img.data() + 96, (1 << 20) - 96));
  EXPECT_EQ(d.digests[1], XXH3_64bits(img.data() + (1 << 20), 1 << 20));
  EXPECT_EQ(d.digests[3], XXH3_64bits(img.data() + (3 << 20), 777));
}

TEST(DataDigests, RoundTripAndDamage) {
  const auto img = image_bytes(5 << 20);
  const auto d = digest(img, img.size() - 1000, sqar::kDataDigestChunkLog);
  auto blob = sqar::encode_data_digests(d);
  ASSERT_EQ(blob.size() % 4096, 0u);
  auto h = sqar::decode_data_digests_header(blob.data(), blob.size(), img.size());
  ASSERT_TRUE(h);
  const auto back = sqar::decode_data_digests(*h, blob.data() + sqar::kDataDigestHeaderSize,
                                              blob.size() - sqar::kDataDigestHeaderSize);
  EXPECT_EQ(back.digests, d.digests);
  EXPECT_EQ(back.data_end, d.data_end);
  // beyond bytes_used
  EXPECT_THROW(sqar::decode_data_digests_header(blob.data(), blob.size(), d.data_end - 1), sqar::Error);
  // a flipped digest
  auto bad = blob;
  bad[sqar::kDataDigestHeaderSize + 3] ^= 1;
  EXPECT_THROW(
      sqar::decode_data_digests(*h, bad.data() + sqar::kDataDigestHeaderSize, bad.size() - sqar::kDataDigestHeaderSize),
      sqar::Error);
  // a flipped header field
  bad = blob;
  bad[20] ^= 1;
  EXPECT_THROW(sqar::decode_data_digests_header(bad.data(), bad.size(), img.size()), sqar::Error);
  // a chunk size out of range, resealed
  bad = blob;
  sqar::store_le32(bad.data() + 12, 40);
  sqar::store_le64(bad.data() + 32, XXH3_64bits(bad.data(), 32));
  EXPECT_THROW(sqar::decode_data_digests_header(bad.data(), bad.size(), img.size()), sqar::Error);
  // another magic: no trailer
  bad = blob;
  bad[0] = 'X';
  EXPECT_FALSE(sqar::decode_data_digests_header(bad.data(), bad.size(), img.size()));
  // truncated payload
  EXPECT_THROW(sqar::decode_data_digests(*h, blob.data() + sqar::kDataDigestHeaderSize, 8), sqar::Error);
}

}  // namespace
