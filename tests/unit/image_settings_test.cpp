// The settings trailer (src/format/image_settings.h): a round trip for every compressor, and
// absent, later-version, damaged and out-of-range trailers told apart.
#include "format/image_settings.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <vector>

#include "common/endian.h"
#include "common/error.h"

namespace {

using sqar::CodecId;

// Rewrites the header hash after a field was changed, so that only the field is wrong.
void rehash(std::vector<uint8_t>& t) { sqar::store_le64(t.data() + 32, XXH3_64bits(t.data(), 32)); }

TEST(ImageSettings, RoundTripsTheLevelAndTheMixedFlag) {
  for (auto [id, level] :
       {std::pair{CodecId::gzip, 12}, {CodecId::xz, 0}, {CodecId::lz4, 4}, {CodecId::zstd, 22}, {CodecId::lzo, 9}}) {
    for (bool mixed : {false, true}) {
      const auto t = sqar::encode_image_settings({id, level, mixed});
      ASSERT_EQ(t.size(), 4096u);
      const auto s = sqar::decode_image_settings(t.data(), t.size(), id);
      ASSERT_TRUE(s.has_value());
      EXPECT_EQ(s->compressor, id);
      EXPECT_EQ(s->level, level);
      EXPECT_EQ(s->mixed, mixed);
    }
  }
}

TEST(ImageSettings, AbsentOrLaterVersionIsNoTrailer) {
  std::vector<uint8_t> zeros(4096, 0);
  EXPECT_FALSE(sqar::decode_image_settings(zeros.data(), zeros.size(), CodecId::xz).has_value());
  auto t = sqar::encode_image_settings({CodecId::xz, 6, false});
  EXPECT_FALSE(sqar::decode_image_settings(t.data(), 39, CodecId::xz).has_value());  // shorter than a header
  sqar::store_le32(t.data() + 8, 2);
  rehash(t);
  EXPECT_FALSE(sqar::decode_image_settings(t.data(), t.size(), CodecId::xz).has_value());
}

TEST(ImageSettings, DamageIsAnError) {
  auto t = sqar::encode_image_settings({CodecId::xz, 6, false});
  t[16] ^= 1;  // the level, without the header hash to match
  EXPECT_THROW(sqar::decode_image_settings(t.data(), t.size(), CodecId::xz), sqar::Error);

  t = sqar::encode_image_settings({CodecId::xz, 6, false});
  EXPECT_THROW(sqar::decode_image_settings(t.data(), t.size(), CodecId::gzip), sqar::Error);  // another compressor

  for (uint32_t level : {10u, 0xFFFFFFFFu}) {  // xz has 0-9
    sqar::store_le32(t.data() + 16, level);
    rehash(t);
    EXPECT_THROW(sqar::decode_image_settings(t.data(), t.size(), CodecId::xz), sqar::Error) << level;
  }
  t = sqar::encode_image_settings({CodecId::gzip, 9, false});
  sqar::store_le32(t.data() + 16, 0);  // gzip has 1-12
  rehash(t);
  EXPECT_THROW(sqar::decode_image_settings(t.data(), t.size(), CodecId::gzip), sqar::Error);
}

}  // namespace
