// Regression: a damaged lazily loaded table (export, fragment, xattr id table) must throw on every
// call, from any thread. With std::call_once the first exception left the flag locked and the
// second call blocked forever (GCC bug 66146), which hung sqarfs on damaged images.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "common/endian.h"
#include "common/error.h"
#include "reader/image.h"
#include "reader_test_util.h"

namespace {

using namespace sqar::testutil;
using sqar::reader::Image;

// Calls fn twice, each in a fresh thread with a deadline; both calls must throw sqar::Error.
template <class F>
void expect_throws_twice(F fn) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    // A detached thread: a hung call must fail the test, not block it in a join.
    auto outcome = std::make_shared<std::promise<std::string>>();
    auto result = outcome->get_future();
    std::thread([fn, outcome] {
      try {
        fn();
        outcome->set_value("no error");
      } catch (const sqar::Error&) {
        outcome->set_value("threw");
      }
    }).detach();
    ASSERT_EQ(result.wait_for(std::chrono::seconds(20)), std::future_status::ready)
        << "call " << attempt + 1 << " hangs";
    EXPECT_EQ(result.get(), "threw") << "call " << attempt + 1;
  }
}

// Moves the table whose start is the superblock field at sb_offset to 4 bytes before the end of
// the image: the start passes the open-time check, loading its pointer array fails.
void damage_table_start(const fs::path& img, size_t sb_offset) {
  std::fstream f(img, std::ios::in | std::ios::out | std::ios::binary);
  uint8_t b[8];
  f.seekg(40);  // bytes_used
  f.read(reinterpret_cast<char*>(b), 8);
  sqar::store_le64(b, sqar::load_le64(b) - 4);
  f.seekp(std::streamoff(sb_offset));
  f.write(reinterpret_cast<const char*>(b), 8);
}

TEST(ReaderRetry, DamagedLazyTablesThrowOnEveryCall) {
  if (!have_tool("mksquashfs")) GTEST_SKIP() << "mksquashfs is not installed";
  TempDir tmp;
  fs::path src = tmp.path() / "src", img = tmp.path() / "img.sqfs";
  fs::create_directories(src);
  write_file(src / "tail", "a fragment tail");
  ASSERT_EQ(run("mksquashfs " + src.string() + " " + img.string() + " -noappend -quiet -no-progress -exports"), 0);
  damage_table_start(img, 88);  // export_table_start
  damage_table_start(img, 80);  // fragment_table_start
  // Shared, because a hung call's thread outlives the test.
  std::shared_ptr<Image> image = Image::open(img);
  expect_throws_twice([image] { image->inode_ref_by_number(1); });
  auto file = image->resolve_path("tail");
  ASSERT_TRUE(file);
  expect_throws_twice([image, file] {
    char buf[64];
    image->read_file(*file, 0, buf, sizeof buf);
  });
}

}  // namespace
