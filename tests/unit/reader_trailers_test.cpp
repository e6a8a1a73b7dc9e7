// sqar's trailers as the reader finds them (src/reader/trailers.cpp). They are written here,
// byte by byte, after an image mksquashfs made (which has none), so that each one can be
// present, absent, damaged or lying about its size: a damaged header makes that trailer and
// those after it an error, never the ones before it, and no size a header claims is read or
// allocated before it is checked against the file.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>

#include "common/endian.h"
#include "common/error.h"
#include "format/data_digests.h"
#include "format/image_settings.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "reader/image.h"
#include "reader_test_util.h"

namespace {

using namespace sqar::testutil;
using sqar::reader::Image;

struct Trailers {
  std::string filesystem;  // mksquashfs's image, padded to 4 KiB
  std::string manifest, digests, settings;
};

class ReaderTrailers : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
    fs::create_directories(tmp.path() / "src");
    write_file(tmp.path() / "src" / "a", "alpha");
    const fs::path raw = tmp.path() / "raw.sqfs";
    ASSERT_EQ(run("mksquashfs " + (tmp.path() / "src").string() + " " + raw.string() +
                  " -comp zstd -noappend -quiet -no-progress"),
              0);
    t.filesystem = read_host_file(raw);
    auto image = Image::open(raw);
    ASSERT_EQ(t.filesystem.size(), sqar::fmt::align_up(image->super().bytes_used, 4096));
    options_level = image->codec_config().level;
    // One fragment digest per fragment block, as every manifest of version 3 or 4 has (a
    // count that differs marks trailers of an earlier filesystem).
    const std::vector<sqar::Hash128> fragment_digests(image->super().fragment_count, sqar::Hash128{55, 66});
    const auto manifest = sqar::encode_manifest({{1, {11, 22}}, {2, {33, 44}}}, fragment_digests);
    t.manifest.assign(manifest.begin(), manifest.end());
    const std::string& fs_bytes = t.filesystem;
    const auto digests = sqar::compute_data_digests(
        [&](uint64_t off, void* buf, size_t len) { std::memcpy(buf, fs_bytes.data() + off, len); },
        image->super().inode_table_start);
    const auto encoded = sqar::encode_data_digests(digests);
    t.digests.assign(encoded.begin(), encoded.end());
    const auto settings = sqar::encode_image_settings({sqar::CodecId::zstd, 19, false});
    t.settings.assign(settings.begin(), settings.end());
  }

  std::unique_ptr<Image> open(const std::string& bytes) {
    const fs::path p = tmp.path() / ("img" + std::to_string(++count) + ".sqfs");
    write_file(p, bytes);
    return Image::open(p);
  }

  // The image still opens and reads its file, whatever its trailers hold.
  static void reads_its_file(Image& image) {
    auto a = image.resolve_path("a");
    ASSERT_TRUE(a);
    char buf[8];
    ASSERT_EQ(image.read_file(*a, 0, buf, sizeof buf), 5u);
    EXPECT_EQ(std::string(buf, 5), "alpha");
  }

  TempDir tmp;
  Trailers t;
  int options_level = 0;
  int count = 0;
};

// Flips a bit of the header hash at byte 32 of the trailer that starts at `at`.
std::string damaged_at(std::string bytes, size_t at) {
  bytes[at + 32] = char(bytes[at + 32] ^ 1);
  return bytes;
}

// Runs `call`, which must throw a sqar::Error whose message contains `text`.
template <class Call>
void expect_error_containing(Call call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no error";
  } catch (const sqar::Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST_F(ReaderTrailers, AllThreeAreFoundAndTheSettingsGiveTheLevel) {
  auto image = open(t.filesystem + t.manifest + t.digests + t.settings);
  reads_its_file(*image);
  auto m = image->manifest();
  ASSERT_TRUE(m);
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->files[1].hash.high, 44u);
  auto d = image->data_digests();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->data_end, image->super().inode_table_start);
  EXPECT_EQ(d->digests.size(), 1u);
  auto s = image->settings_trailer();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->level, 19);
  EXPECT_EQ(image->codec_config().level, 19);
}

// Trailers left by an earlier filesystem (mksquashfs 4.5 appends in place without shortening
// the file): digests that cover data up to another inode table, or a manifest with another
// number of fragment digests than the image has fragment blocks, are not this image's.
TEST_F(ReaderTrailers, TrailersOfAnEarlierFilesystemAreNotUsed) {
  const std::string& fs_bytes = t.filesystem;
  auto probe = Image::open(tmp.path() / "raw.sqfs");
  const auto shorter = sqar::compute_data_digests(
      [&](uint64_t off, void* buf, size_t len) { std::memcpy(buf, fs_bytes.data() + off, len); },
      probe->super().inode_table_start + 8);
  const auto stale_digests = sqar::encode_data_digests(shorter);
  auto image = open(t.filesystem + t.manifest + std::string(stale_digests.begin(), stale_digests.end()) + t.settings);
  reads_its_file(*image);
  EXPECT_FALSE(image->manifest());
  EXPECT_FALSE(image->data_digests());
  EXPECT_FALSE(image->settings_trailer());
  const std::vector<sqar::Hash128> one_more(probe->super().fragment_count + 1, sqar::Hash128{1, 2});
  const auto other_fragments = sqar::encode_manifest({{1, {11, 22}}}, one_more);
  image = open(t.filesystem + std::string(other_fragments.begin(), other_fragments.end()));
  reads_its_file(*image);
  EXPECT_FALSE(image->manifest());
}

TEST_F(ReaderTrailers, AbsentTrailersAreNoError) {
  auto none = open(t.filesystem);  // another tool's image
  EXPECT_FALSE(none->manifest());
  EXPECT_FALSE(none->data_digests());
  EXPECT_FALSE(none->settings_trailer());
  auto older = open(t.filesystem + t.manifest);  // an earlier sqar: the manifest alone
  EXPECT_TRUE(older->manifest());
  EXPECT_FALSE(older->data_digests());
  EXPECT_FALSE(older->settings_trailer());
  auto two = open(t.filesystem + t.manifest + t.digests);
  EXPECT_TRUE(two->data_digests());
  EXPECT_FALSE(two->settings_trailer());
  EXPECT_EQ(two->codec_config().level, options_level);
}

TEST_F(ReaderTrailers, ADamagedHeaderLosesItsTrailerAndThoseAfterIt) {
  const size_t manifest_at = t.filesystem.size();
  const size_t digests_at = manifest_at + t.manifest.size();
  const size_t settings_at = digests_at + t.digests.size();
  const std::string whole = t.filesystem + t.manifest + t.digests + t.settings;

  auto bad_manifest = open(damaged_at(whole, manifest_at));
  reads_its_file(*bad_manifest);
  EXPECT_THROW(bad_manifest->manifest(), sqar::Error);
  EXPECT_THROW(bad_manifest->data_digests(), sqar::Error);
  EXPECT_THROW(bad_manifest->settings_trailer(), sqar::Error);
  EXPECT_EQ(bad_manifest->codec_config().level, options_level);

  auto bad_digests = open(damaged_at(whole, digests_at));
  EXPECT_TRUE(bad_digests->manifest());
  EXPECT_THROW(bad_digests->data_digests(), sqar::Error);
  EXPECT_THROW(bad_digests->settings_trailer(), sqar::Error);

  auto bad_settings = open(damaged_at(whole, settings_at));
  EXPECT_TRUE(bad_settings->manifest());
  EXPECT_TRUE(bad_settings->data_digests());
  EXPECT_THROW(bad_settings->settings_trailer(), sqar::Error);
  EXPECT_EQ(bad_settings->codec_config().level, options_level);

  // A damaged payload is that trailer's alone: the walk needs only the headers.
  std::string payload_damaged = whole;
  payload_damaged[manifest_at + sqar::kManifestHeaderSize] ^= 1;
  auto bad_payload = open(payload_damaged);
  EXPECT_THROW(bad_payload->manifest(), sqar::Error);
  EXPECT_TRUE(bad_payload->data_digests());
  EXPECT_TRUE(bad_payload->settings_trailer());

  // The error names the image, every time it is asked.
  expect_error_containing([&] { bad_digests->data_digests(); }, ".sqfs: ");
}

TEST_F(ReaderTrailers, ASizeBeyondTheFileIsTruncationNotAnAllocation) {
  // A sound manifest header (its hash right) that claims 2^32 - 1 entries: 80 GiB of payload.
  uint8_t h[sqar::kManifestHeaderSize] = {};
  std::memcpy(h, "SQARMNF1", 8);
  sqar::store_le32(h + 8, 3);
  sqar::store_le32(h + 12, Image::open(tmp.path() / "raw.sqfs")->super().fragment_count);  // one per block
  sqar::store_le64(h + 16, 0xFFFFFFFFull);
  sqar::store_le64(h + 24, 0);
  sqar::store_le64(h + 32, XXH3_64bits(h, 32));
  std::string manifest(reinterpret_cast<const char*>(h), sizeof h);
  manifest.resize(4096, '\0');
  auto image = open(t.filesystem + manifest + t.digests + t.settings);
  reads_its_file(*image);
  expect_error_containing([&] { image->manifest(); }, "truncated");
  // Where the digests would start lies beyond the file: they are absent, as after an image
  // cut short.
  EXPECT_FALSE(image->data_digests());
  EXPECT_FALSE(image->settings_trailer());

  // A sound digests header whose payload the file does not hold (cut after the header).
  auto cut = open(t.filesystem + t.manifest + t.digests.substr(0, sqar::kDataDigestHeaderSize));
  EXPECT_TRUE(cut->manifest());
  EXPECT_THROW(cut->data_digests(), sqar::Error);
}

TEST_F(ReaderTrailers, AFileEndingInsideAHeaderIsATruncatedTrailer) {
  // Cut a few bytes into the manifest's header: its magic is there, the rest is not. That is
  // damage to report, not an image without a trailer.
  auto cut = open(t.filesystem + t.manifest.substr(0, 4));
  reads_its_file(*cut);
  expect_error_containing([&] { cut->manifest(); }, "manifest trailer is truncated");
  EXPECT_THROW(cut->settings_trailer(), sqar::Error);
  // The same inside the settings header: the trailers before it stay sound.
  auto cut_settings = open(t.filesystem + t.manifest + t.digests + t.settings.substr(0, 12));
  EXPECT_TRUE(cut_settings->manifest());
  EXPECT_TRUE(cut_settings->data_digests());
  EXPECT_THROW(cut_settings->settings_trailer(), sqar::Error);
  // Bytes that do not begin as a trailer's magic are another tool's (a container's footer
  // after an embedded image): no trailer, no error.
  auto footer = open(t.filesystem + "trailing");
  EXPECT_FALSE(footer->manifest());
  EXPECT_FALSE(footer->settings_trailer());
  // Zero bytes where a header would start are padding (another tool's, or a device's tail):
  // no trailer, no error.
  auto zeros = open(t.filesystem + std::string(100, '\0'));
  EXPECT_FALSE(zeros->manifest());
  EXPECT_FALSE(zeros->settings_trailer());
  auto short_zeros = open(t.filesystem + std::string(10, '\0'));
  EXPECT_FALSE(short_zeros->manifest());
}

}  // namespace
