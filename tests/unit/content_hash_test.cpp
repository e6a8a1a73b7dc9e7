// The content hash (src/common/content_hash.h): any split of the same bytes gives the same hash,
// a hole hashes as the zeros it stands for, and a hole of any length costs a bounded amount of
// work in the chunked scheme.
#include "common/content_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/endian.h"

namespace {

using sqar::content_hash;
using sqar::ContentHasher;
using sqar::Hash128;
using sqar::HashScheme;
using sqar::kContentHashChunk;

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// The documented record stream (common/content_hash.h), built by hand.
class Records {
 public:
  Records& add(char tag, uint64_t value) {
    uint8_t r[9];
    r[0] = uint8_t(tag);
    sqar::store_le64(r + 1, value);
    bytes_.insert(bytes_.end(), r, r + 9);
    return *this;
  }
  Hash128 hash() const {
    const XXH128_hash_t h = XXH3_128bits(bytes_.data(), bytes_.size());
    return {h.low64, h.high64};
  }

 private:
  std::vector<uint8_t> bytes_;
};

// The lengths where chunk bookkeeping can go wrong: empty, one byte, around a chunk and two.
const size_t kLengths[] = {0,
                           1,
                           100,
                           kContentHashChunk - 1,
                           kContentHashChunk,
                           kContentHashChunk + 1,
                           2 * kContentHashChunk,
                           3 * kContentHashChunk + 12345};

TEST(ContentHash, AnySplitOfTheBytesGivesTheOneShotHash) {
  for (const HashScheme scheme : {HashScheme::kFlat, HashScheme::kChunked}) {
    for (const size_t len : kLengths) {
      const auto data = random_bytes(len, unsigned(len));
      const Hash128 whole = content_hash(data.data(), data.size(), scheme);
      for (const size_t piece : {size_t(1), size_t(7), size_t(4096), kContentHashChunk - 3, size_t(200000)}) {
        ContentHasher h(scheme);
        for (size_t at = 0; at < len; at += piece) h.update(data.data() + at, std::min(piece, len - at));
        EXPECT_EQ(h.digest(), whole) << "length " << len << " in pieces of " << piece;
      }
    }
  }
}

TEST(ContentHash, FlatIsXxh3Of128BitsOfTheContent) {
  const auto data = random_bytes(3 * kContentHashChunk + 5, 1);
  const XXH128_hash_t want = XXH3_128bits(data.data(), data.size());
  EXPECT_EQ(content_hash(data.data(), data.size(), HashScheme::kFlat), (Hash128{want.low64, want.high64}));
}

TEST(ContentHash, ChunkedFollowsItsDocumentedRecords) {
  // Two data chunks, then a 10-byte tail: 'D' d0, 'D' d1, 'D' d(tail), 'E' size.
  const auto data = random_bytes(2 * kContentHashChunk + 10, 2);
  const Hash128 want = Records()
                           .add('D', XXH3_64bits(data.data(), kContentHashChunk))
                           .add('D', XXH3_64bits(data.data() + kContentHashChunk, kContentHashChunk))
                           .add('D', XXH3_64bits(data.data() + 2 * kContentHashChunk, 10))
                           .add('E', data.size())
                           .hash();
  EXPECT_EQ(content_hash(data.data(), data.size()), want);

  // Three zero chunks between data: one 'Z' record with the run length.
  std::vector<uint8_t> holed(5 * kContentHashChunk, 0);
  std::memcpy(holed.data(), data.data(), kContentHashChunk);
  std::memcpy(holed.data() + 4 * kContentHashChunk, data.data() + kContentHashChunk, kContentHashChunk);
  const Hash128 want_holed = Records()
                                 .add('D', XXH3_64bits(data.data(), kContentHashChunk))
                                 .add('Z', 3)
                                 .add('D', XXH3_64bits(data.data() + kContentHashChunk, kContentHashChunk))
                                 .add('E', holed.size())
                                 .hash();
  EXPECT_EQ(content_hash(holed.data(), holed.size()), want_holed);
}

TEST(ContentHash, HolesHashAsTheZerosTheyStandFor) {
  for (const HashScheme scheme : {HashScheme::kFlat, HashScheme::kChunked}) {
    // data, hole, data, hole at the end, at offsets on and off the chunk grid
    for (const size_t head : {size_t(0), size_t(5), kContentHashChunk, kContentHashChunk + 77}) {
      for (const size_t hole : {size_t(1), kContentHashChunk - 1, 2 * kContentHashChunk, 3 * kContentHashChunk + 9}) {
        const auto a = random_bytes(head, 3);
        const auto b = random_bytes(4000, 4);
        std::vector<uint8_t> whole(a);
        whole.resize(whole.size() + hole, 0);
        whole.insert(whole.end(), b.begin(), b.end());
        whole.resize(whole.size() + hole, 0);
        ContentHasher h(scheme);
        h.update(a.data(), a.size());
        h.update_zeros(hole);
        h.update(b.data(), b.size());
        h.update_zeros(hole);
        EXPECT_EQ(h.digest(), content_hash(whole.data(), whole.size(), scheme))
            << "data " << head << ", holes of " << hole;
      }
    }
  }
}

TEST(ContentHash, SchemesAndContentsAreToldApart) {
  const auto data = random_bytes(kContentHashChunk + 1, 5);
  EXPECT_NE(content_hash(data.data(), data.size(), HashScheme::kFlat),
            content_hash(data.data(), data.size(), HashScheme::kChunked));
  // Zero runs of different lengths, and a file with one byte more, differ.
  ContentHasher two, three;
  two.update_zeros(2 * kContentHashChunk);
  three.update_zeros(3 * kContentHashChunk);
  EXPECT_NE(two.digest(), three.digest());
  EXPECT_NE(content_hash(data.data(), data.size() - 1), content_hash(data.data(), data.size()));
  EXPECT_NE(content_hash("", 0), content_hash("\0", 1));
}

TEST(ContentHash, AHoleOfAnyLengthIsOneRecord) {
  // 2^60 bytes of zeros: 2^44 chunks. Were they hashed one by one this would not end; the
  // record is computed here by hand from the documented layout.
  const uint64_t huge = uint64_t(1) << 60;
  ContentHasher h;
  h.update("x", 1);
  h.update_zeros(huge);
  std::vector<uint8_t> first(kContentHashChunk, 0);
  first[0] = 'x';
  const Hash128 want = Records()
                           .add('D', XXH3_64bits(first.data(), first.size()))
                           .add('Z', huge / kContentHashChunk - 1)
                           .add('D', XXH3_64bits(first.data() + 1, 1))  // the last partial chunk: one zero byte
                           .add('E', huge + 1)
                           .hash();
  EXPECT_EQ(h.digest(), want);
}

TEST(ContentHash, ResetStartsAnew) {
  const auto data = random_bytes(kContentHashChunk + 3, 6);
  ContentHasher h;
  h.update(data.data(), 1000);
  h.update_zeros(5 * kContentHashChunk);
  h.reset();
  h.update(data.data(), data.size());
  EXPECT_EQ(h.digest(), content_hash(data.data(), data.size()));
}

}  // namespace
