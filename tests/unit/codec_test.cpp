#include "codec/codec.h"
#include "pipeline/incompressible.h"

#include <gtest/gtest.h>

#include <random>

namespace sqar {
namespace {

std::vector<uint8_t> text_block(size_t n) {
  std::vector<uint8_t> v(n);
  const char* words = "the quick brown fox jumps over the lazy dog 0123456789\n";
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(words[(i * 7 + i / 13) % 55]);
  return v;
}

std::vector<uint8_t> random_block(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

class CodecRoundTrip : public ::testing::TestWithParam<CodecId> {};

TEST_P(CodecRoundTrip, CompressesTextAndRestoresIt) {
  CodecConfig cfg;
  cfg.id = GetParam();
  auto codec = make_codec(cfg);
  auto in = text_block(131072);
  std::vector<uint8_t> packed(in.size()), out(in.size());
  size_t n = codec->compress(in.data(), in.size(), packed.data(), packed.size());
  ASSERT_GT(n, 0u);
  ASSERT_LT(n, in.size() / 4);
  auto m = codec->decompress(packed.data(), n, out.data(), out.size());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(*m, in.size());
  EXPECT_EQ(out, in);
}

TEST_P(CodecRoundTrip, RefusesToGrowRandomData) {
  CodecConfig cfg;
  cfg.id = GetParam();
  auto codec = make_codec(cfg);
  auto in = random_block(65536, 7);
  std::vector<uint8_t> packed(in.size());
  EXPECT_EQ(codec->compress(in.data(), in.size(), packed.data(), packed.size()), 0u);
}

TEST_P(CodecRoundTrip, RejectsGarbageWithoutCrashing) {
  CodecConfig cfg;
  cfg.id = GetParam();
  auto codec = make_codec(cfg);
  auto in = text_block(8192);
  std::vector<uint8_t> packed(in.size()), out(in.size());
  size_t n = codec->compress(in.data(), in.size(), packed.data(), packed.size());
  ASSERT_GT(n, 0u);
  // Truncated input and a too-small output buffer must fail cleanly.
  EXPECT_FALSE(codec->decompress(packed.data(), n / 2, out.data(), out.size()).has_value() &&
               out == in);
  EXPECT_FALSE(codec->decompress(packed.data(), n, out.data(), 100).has_value());
  auto garbage = random_block(4096, 3);
  auto r = codec->decompress(garbage.data(), garbage.size(), out.data(), out.size());
  (void)r;  // any answer is fine as long as it stays in bounds (ASan checks that)
}

INSTANTIATE_TEST_SUITE_P(AllWritableCodecs, CodecRoundTrip,
                         ::testing::Values(CodecId::gzip, CodecId::xz, CodecId::lzo, CodecId::lz4, CodecId::zstd),
                         [](const auto& info) { return std::string(codec_name(info.param)); });

TEST(CodecOptions, DefaultsNeedNoOptionsBlockExceptLz4) {
  for (CodecId id : {CodecId::gzip, CodecId::xz, CodecId::lzo, CodecId::zstd}) {
    CodecConfig cfg;
    cfg.id = id;
    EXPECT_TRUE(encode_codec_options(cfg).empty()) << codec_name(id);
  }
  CodecConfig lz4;
  lz4.id = CodecId::lz4;
  EXPECT_EQ(encode_codec_options(lz4).size(), 8u);
}

TEST(CodecOptions, RoundTripNonDefaultLevels) {
  CodecConfig cfg;
  cfg.id = CodecId::zstd;
  cfg.level = 3;
  auto blob = encode_codec_options(cfg);
  CodecConfig back;
  back.id = CodecId::zstd;
  decode_codec_options(back, blob.data(), blob.size());
  EXPECT_EQ(back.level, 3);
  EXPECT_THROW(decode_codec_options(back, blob.data(), 2), std::exception);
}

TEST(Incompressible, DetectsRandomButNotText) {
  auto rnd = random_block(131072, 11);
  auto txt = text_block(131072);
  EXPECT_TRUE(looks_incompressible(rnd.data(), rnd.size()));
  EXPECT_FALSE(looks_incompressible(txt.data(), txt.size()));
  // Random bytes repeated: high entropy, but LZ4 sees the repeat (within its 64 KiB window).
  std::vector<uint8_t> twice(rnd.begin(), rnd.begin() + 32768);
  for (int i = 0; i < 3; ++i) twice.insert(twice.end(), rnd.begin(), rnd.begin() + 32768);
  EXPECT_FALSE(looks_incompressible(twice.data(), twice.size()));
}

}  // namespace
}  // namespace sqar
