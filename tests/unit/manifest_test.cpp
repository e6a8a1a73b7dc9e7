// The manifest trailer format (src/format/manifest.h): version 3 round trips, the fragment
// digests bind each small file's inode to its content, versions 1 and 2 (written by earlier
// builds) still decode, and damaged or inconsistent trailers are refused.
#include "format/manifest.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <vector>

#include "common/endian.h"
#include "common/error.h"

namespace {

using sqar::FragmentMember;
using sqar::Hash128;
using sqar::ManifestEntry;

sqar::Manifest decode(const std::vector<uint8_t>& trailer) {
  auto header = sqar::decode_manifest_header(trailer.data(), trailer.size());
  if (!header) throw sqar::Error("no manifest");
  return sqar::decode_manifest(*header, trailer.data() + sqar::kManifestHeaderSize,
                               trailer.size() - sqar::kManifestHeaderSize);
}

// Recomputes both checksums, so a test can alter fields and reach the consistency checks.
void reseal(std::vector<uint8_t>& t, size_t payload) {
  sqar::store_le64(t.data() + 24, XXH3_64bits(t.data() + sqar::kManifestHeaderSize, payload));
  sqar::store_le64(t.data() + 32, XXH3_64bits(t.data(), 32));
}

TEST(Manifest, Version4RoundTripsEntriesInInodeOrderAndFragmentDigests) {
  std::vector<ManifestEntry> in = {{1000, {7, 8}}, {1, {1, 2}}, {9, {5, 6}}, {8, {3, 4}}};
  std::vector<Hash128> digests = {{10, 11}, {12, 13}, {14, 15}};
  auto trailer = sqar::encode_manifest(in, digests);
  EXPECT_EQ(trailer.size() % 4096, 0u);
  EXPECT_EQ(sqar::load_le32(trailer.data() + 8), 4u);
  EXPECT_EQ(sqar::load_le32(trailer.data() + 12), 3u);  // the fragment digest count
  auto out = decode(trailer);
  EXPECT_TRUE(out.has_fragment_digests());
  ASSERT_EQ(out.files.size(), 4u);
  const uint32_t numbers[] = {1, 8, 9, 1000};
  const uint64_t lows[] = {1, 3, 5, 7};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out.files[i].inode_number, numbers[i]);
    EXPECT_EQ(out.files[i].hash.low, lows[i]);
    EXPECT_EQ(out.files[i].hash.high, lows[i] + 1);
  }
  EXPECT_EQ(out.fragment_digests, digests);
  // 20 bytes per entry (inode number and hash) and 16 per fragment block.
  auto header = sqar::decode_manifest_header(trailer.data(), trailer.size());
  EXPECT_EQ(header->payload_size, 4u * 20 + 3 * 16);
}

// Version 3 has version 4's layout; only the way content is hashed differs.
TEST(Manifest, Version3StillDecodesAndNamesTheFlatScheme) {
  const std::vector<ManifestEntry> in = {{2, {1, 2}}, {5, {3, 4}}};
  const std::vector<Hash128> digests = {{10, 11}};
  const auto v3 = decode(sqar::encode_manifest(in, digests, 3));
  const auto v4 = decode(sqar::encode_manifest(in, digests));
  EXPECT_EQ(v3.version, 3u);
  EXPECT_EQ(v4.version, 4u);
  EXPECT_EQ(v3.scheme(), sqar::HashScheme::kFlat);
  EXPECT_EQ(v4.scheme(), sqar::HashScheme::kChunked);
  ASSERT_EQ(v3.files.size(), 2u);
  EXPECT_EQ(v3.files[1].hash, (Hash128{3, 4}));
  EXPECT_EQ(v3.fragment_digests, digests);
  EXPECT_THROW(sqar::encode_manifest(in, digests, 2), sqar::Error);
}

TEST(Manifest, EmptyManifestRoundTrips) {
  auto out = decode(sqar::encode_manifest({}, {}));
  EXPECT_TRUE(out.files.empty());
  EXPECT_TRUE(out.fragment_digests.empty());
}

TEST(Manifest, EncoderRefusesInodeZeroAndRepeats) {
  EXPECT_THROW(sqar::encode_manifest({{0, {1, 1}}}, {}), sqar::Error);
  EXPECT_THROW(sqar::encode_manifest({{5, {1, 1}}, {5, {2, 2}}}, {}), sqar::Error);
}

TEST(Manifest, OnlyFilesWithoutAFullBlockAreCoveredByTheirFragmentDigest) {
  EXPECT_TRUE(sqar::covered_by_fragment_digest(100, 4096, 0));
  EXPECT_TRUE(sqar::covered_by_fragment_digest(4095, 4096, 7));
  EXPECT_FALSE(sqar::covered_by_fragment_digest(4096, 4096, 7));          // a full block and no tail
  EXPECT_FALSE(sqar::covered_by_fragment_digest(5000, 4096, 7));          // a full block and a tail
  EXPECT_FALSE(sqar::covered_by_fragment_digest(100, 4096, 0xFFFFFFFF));  // no fragment (zero tail)
}

TEST(Manifest, FragmentDigestsBindEachInodeToItsContent) {
  const Hash128 a{1, 2}, b{3, 4}, c{5, 6};
  const auto base = sqar::fragment_digests({{0, 10, a}, {0, 11, b}, {1, 12, c}}, 3);
  ASSERT_EQ(base.size(), 3u);
  EXPECT_EQ(base[2], sqar::hash128("", 0));  // a block without members: the digest of nothing
  // The order the members come in does not matter; the digest is XXH3-128 over
  // (u32 inode number, u64 low, u64 high) in inode order.
  EXPECT_EQ(sqar::fragment_digests({{1, 12, c}, {0, 11, b}, {0, 10, a}}, 3), base);
  uint8_t records[40];
  sqar::store_le32(records, 10), sqar::store_le64(records + 4, 1), sqar::store_le64(records + 12, 2);
  sqar::store_le32(records + 20, 11), sqar::store_le64(records + 24, 3), sqar::store_le64(records + 32, 4);
  EXPECT_EQ(base[0], sqar::hash128(records, sizeof records));
  // Two inodes whose contents trade places, a content that changes, a file that moves to
  // another block, and a duplicate inode added: each changes a digest.
  EXPECT_NE(sqar::fragment_digests({{0, 10, b}, {0, 11, a}, {1, 12, c}}, 3)[0], base[0]);
  EXPECT_NE(sqar::fragment_digests({{0, 10, a}, {0, 11, c}, {1, 12, c}}, 3)[0], base[0]);
  auto moved = sqar::fragment_digests({{0, 10, a}, {1, 11, b}, {1, 12, c}}, 3);
  EXPECT_NE(moved[0], base[0]);
  EXPECT_NE(moved[1], base[1]);
  EXPECT_NE(sqar::fragment_digests({{0, 10, a}, {0, 11, b}, {0, 13, b}, {1, 12, c}}, 3)[0], base[0]);
  // A member beyond the last block, or an inode twice in a block, is an error.
  EXPECT_THROW(sqar::fragment_digests({{3, 10, a}}, 3), sqar::Error);
  EXPECT_THROW(sqar::fragment_digests({{0, 10, a}, {0, 10, a}}, 3), sqar::Error);
}

TEST(Manifest, Version2TrailersStillDecode) {
  // Bitmap of a 9-inode span with inodes 3 and 9 marked, then their two hashes.
  const size_t payload = 2 + 2 * 16;
  std::vector<uint8_t> t(4096, 0);
  std::memcpy(t.data(), "SQARMNF1", 8);
  sqar::store_le32(t.data() + 8, 2);
  sqar::store_le32(t.data() + 12, 9);
  sqar::store_le64(t.data() + 16, 2);
  uint8_t* p = t.data() + sqar::kManifestHeaderSize;
  p[0] = 0x04, p[1] = 0x01;
  sqar::store_le64(p + 2, 30), sqar::store_le64(p + 10, 31);
  sqar::store_le64(p + 18, 90), sqar::store_le64(p + 26, 91);
  reseal(t, payload);
  auto out = decode(t);
  EXPECT_FALSE(out.has_fragment_digests());
  ASSERT_EQ(out.files.size(), 2u);
  EXPECT_EQ(out.files[0].inode_number, 3u);
  EXPECT_EQ(out.files[0].hash.low, 30u);
  EXPECT_EQ(out.files[1].inode_number, 9u);
  EXPECT_EQ(out.files[1].hash.high, 91u);
  {
    auto bad = t;
    bad[sqar::kManifestHeaderSize] = 0x07;  // three bits for two entries
    reseal(bad, payload);
    EXPECT_THROW(decode(bad), sqar::Error);
  }
  {
    auto bad = t;
    bad[sqar::kManifestHeaderSize + 1] = 0x00;  // one bit for two entries
    reseal(bad, payload);
    EXPECT_THROW(decode(bad), sqar::Error);
  }
  {
    auto bad = t;
    sqar::store_le64(bad.data() + 16, 10);  // more entries than the span of 9 inodes
    reseal(bad, payload);
    EXPECT_THROW(decode(bad), sqar::Error);
  }
}

TEST(Manifest, Version1TrailersStillDecode) {
  std::vector<uint8_t> t(4096, 0);
  std::memcpy(t.data(), "SQARMNF1", 8);
  sqar::store_le32(t.data() + 8, 1);
  sqar::store_le32(t.data() + 12, 20);
  sqar::store_le64(t.data() + 16, 2);
  uint8_t* e = t.data() + sqar::kManifestHeaderSize;
  sqar::store_le32(e, 4), sqar::store_le64(e + 4, 40), sqar::store_le64(e + 12, 41);
  sqar::store_le32(e + 20, 3), sqar::store_le64(e + 24, 30), sqar::store_le64(e + 32, 31);
  reseal(t, 40);
  auto out = decode(t);
  EXPECT_FALSE(out.has_fragment_digests());
  ASSERT_EQ(out.files.size(), 2u);
  EXPECT_EQ(out.files[1].inode_number, 4u);  // sorted on the way in
  EXPECT_EQ(out.files[1].hash.low, 40u);
  EXPECT_EQ(out.files[1].hash.high, 41u);
}

TEST(Manifest, InconsistentOrDamagedTrailersAreRefused) {
  const auto good = sqar::encode_manifest({{2, {1, 2}}, {3, {3, 4}}}, {{5, 6}});
  const size_t payload = 2 * 20 + 16;
  {
    auto t = good;
    t[sqar::kManifestHeaderSize + 5] ^= 1;  // a hash byte, checksum not resealed
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    sqar::store_le32(t.data() + sqar::kManifestHeaderSize + 20, 2);  // inode 2 twice
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    sqar::store_le32(t.data() + 12, 2);  // two fragment digests where the payload holds one
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    sqar::store_le32(t.data() + 8, 5);  // a version from the future
    reseal(t, payload);
    EXPECT_THROW(decode(t), sqar::Error);
  }
  {
    auto t = good;
    auto header = sqar::decode_manifest_header(t.data(), t.size());
    EXPECT_THROW(sqar::decode_manifest(*header, t.data() + sqar::kManifestHeaderSize, payload - 1),
                 sqar::Error);  // truncated
  }
  std::vector<uint8_t> not_ours(4096, 0);
  EXPECT_FALSE(sqar::decode_manifest_header(not_ours.data(), not_ours.size()));
}

}  // namespace
