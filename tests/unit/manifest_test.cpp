// The manifest trailer format (src/format/manifest.h): version 2 round trips, version 1 (written
// by earlier builds) still decodes, and damaged or inconsistent trailers are refused.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <vector>

#include "common/endian.h"
#include "common/error.h"
#include "format/manifest.h"

namespace {

using sqar::ManifestEntry;

std::vector<ManifestEntry> decode(const std::vector<uint8_t>& trailer) {
  auto header = sqar::decode_manifest_header(trailer.data(), trailer.size());
  if (!header) throw sqar::Error("no manifest");
  return sqar::decode_manifest_entries(*header, trailer.data() + sqar::kManifestHeaderSize,
                                       trailer.size() - sqar::kManifestHeaderSize);
}

// Recomputes both checksums, so a test can alter fields and reach the consistency checks.
void reseal(std::vector<uint8_t>& t, size_t payload) {
  sqar::store_le64(t.data() + 24, XXH3_64bits(t.data() + sqar::kManifestHeaderSize, payload));
  sqar::store_le64(t.data() + 32, XXH3_64bits(t.data(), 32));
}

TEST(Manifest, Version2RoundTripsSparseInodeNumbersInOrder) {
  std::vector<ManifestEntry> in = {{1000, {7, 8}}, {1, {1, 2}}, {9, {5, 6}}, {8, {3, 4}}};
  auto trailer = sqar::encode_manifest(in);
  EXPECT_EQ(trailer.size() % 4096, 0u);
  EXPECT_EQ(sqar::load_le32(trailer.data() + 8), 2u);
  EXPECT_EQ(sqar::load_le32(trailer.data() + 12), 1000u);  // the inode span
  auto out = decode(trailer);
  ASSERT_EQ(out.size(), 4u);
  const uint32_t numbers[] = {1, 8, 9, 1000};
  const uint64_t lows[] = {1, 3, 5, 7};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i].inode_number, numbers[i]);
    EXPECT_EQ(out[i].hash.low, lows[i]);
    EXPECT_EQ(out[i].hash.high, lows[i] + 1);
  }
  // One bit per inode of the span and 16 bytes per entry: 125 + 64 bytes of payload.
  auto header = sqar::decode_manifest_header(trailer.data(), trailer.size());
  EXPECT_EQ(header->payload_size, 125u + 4 * 16);
}

TEST(Manifest, EmptyManifestRoundTrips) {
  auto trailer = sqar::encode_manifest({});
  EXPECT_TRUE(decode(trailer).empty());
}

TEST(Manifest, EncoderRefusesInodeZeroAndRepeats) {
  EXPECT_THROW(sqar::encode_manifest({{0, {1, 1}}}), sqar::Error);
  EXPECT_THROW(sqar::encode_manifest({{5, {1, 1}}, {5, {2, 2}}}), sqar::Error);
}

TEST(Manifest, Version1TrailersStillDecode) {
  std::vector<uint8_t> t(4096, 0);
  std::memcpy(t.data(), "SQARMNF1", 8);
  sqar::store_le32(t.data() + 8, 1);
  sqar::store_le32(t.data() + 12, 20);
  sqar::store_le64(t.data() + 16, 2);
  uint8_t* e = t.data() + sqar::kManifestHeaderSize;
  sqar::store_le32(e, 3), sqar::store_le64(e + 4, 30), sqar::store_le64(e + 12, 31);
  sqar::store_le32(e + 20, 4), sqar::store_le64(e + 24, 40), sqar::store_le64(e + 32, 41);
  reseal(t, 40);
  auto out = decode(t);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].inode_number, 4u);
  EXPECT_EQ(out[1].hash.low, 40u);
  EXPECT_EQ(out[1].hash.high, 41u);
}

TEST(Manifest, InconsistentOrDamagedTrailersAreRefused) {
  const auto good = sqar::encode_manifest({{2, {1, 2}}, {3, {3, 4}}});
  const size_t payload = 1 + 2 * 16;
  {
    auto t = good;
    t[sqar::kManifestHeaderSize + 5] ^= 1;  // a hash byte, checksum not resealed
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    t[sqar::kManifestHeaderSize] = 0x07;  // three bits for two entries
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    t[sqar::kManifestHeaderSize] = 0x02;  // one bit for two entries
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    sqar::store_le64(t.data() + 16, 9);  // more entries than the span of 3 inodes
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    sqar::store_le32(t.data() + 8, 3);  // a version from the future
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    auto header = sqar::decode_manifest_header(t.data(), t.size());
    EXPECT_THROW(sqar::decode_manifest_entries(*header, t.data() + sqar::kManifestHeaderSize, payload - 1),
                 sqar::Error);  // truncated
  }
  std::vector<uint8_t> not_ours(4096, 0);
  EXPECT_FALSE(sqar::decode_manifest_header(not_ours.data(), not_ours.size()));
}

}  // namespace
