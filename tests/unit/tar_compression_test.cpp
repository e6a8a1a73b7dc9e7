#include "ops/tar_compression.h"

#include <gtest/gtest.h>

namespace sqar::ops {
namespace {

TEST(TarCompression, SuffixesAsTarAutoCompressReadsThem) {
  EXPECT_EQ(tar_compression_for_name("backup.tar.gz"), TarCompression::gzip);
  EXPECT_EQ(tar_compression_for_name("backup.tgz"), TarCompression::gzip);
  EXPECT_EQ(tar_compression_for_name("backup.taz"), TarCompression::gzip);
  EXPECT_EQ(tar_compression_for_name("/srv/x.tar.xz"), TarCompression::xz);
  EXPECT_EQ(tar_compression_for_name("x.txz"), TarCompression::xz);
  EXPECT_EQ(tar_compression_for_name("x.tar.zst"), TarCompression::zstd);
  EXPECT_EQ(tar_compression_for_name("x.tzst"), TarCompression::zstd);
  for (const char* name : {"x.tar.bz2", "x.tbz", "x.tbz2", "x.tz2", "x.tb2"})
    EXPECT_EQ(tar_compression_for_name(name), TarCompression::bzip2) << name;
  EXPECT_EQ(tar_compression_for_name("x.tar.lz4"), TarCompression::lz4);
  EXPECT_EQ(tar_compression_for_name("x.tar.lzma"), TarCompression::lzma);
  EXPECT_EQ(tar_compression_for_name("x.tlz"), TarCompression::lzma);
  EXPECT_EQ(tar_compression_for_name("x.tar.lz"), TarCompression::lzip);
  EXPECT_EQ(tar_compression_for_name("x.tar.Z"), TarCompression::compress);
  EXPECT_EQ(tar_compression_for_name("x.taZ"), TarCompression::compress);
}

TEST(TarCompression, OtherNamesArePlainTar) {
  for (const char* name : {"x.tar", "-", "archive", "x.z", "x.GZ", "x.tar.gz.part", "", ".gz", "/dev/st0"})
    EXPECT_EQ(tar_compression_for_name(name), TarCompression::none) << name;
  // Only the file's own name counts, not a directory it is in.
  EXPECT_EQ(tar_compression_for_name("out.gz/archive"), TarCompression::none);
  EXPECT_EQ(tar_compression_for_name("dir.tar/x.tar.zst"), TarCompression::zstd);
}

TEST(TarCompression, NamesAndAliasesRoundTrip) {
  for (TarCompression c :
       {TarCompression::none, TarCompression::gzip, TarCompression::bzip2, TarCompression::xz, TarCompression::zstd,
        TarCompression::lz4, TarCompression::lzma, TarCompression::lzip, TarCompression::compress})
    EXPECT_EQ(parse_tar_compression(tar_compression_name(c)), c) << tar_compression_name(c);
  EXPECT_EQ(parse_tar_compression("gz"), TarCompression::gzip);
  EXPECT_EQ(parse_tar_compression("zst"), TarCompression::zstd);
  EXPECT_EQ(parse_tar_compression("bz2"), TarCompression::bzip2);
  EXPECT_EQ(parse_tar_compression("Z"), TarCompression::compress);
  EXPECT_EQ(parse_tar_compression("rar"), std::nullopt);
  EXPECT_EQ(parse_tar_compression(""), std::nullopt);
  EXPECT_EQ(parse_tar_compression("GZIP"), std::nullopt);
  EXPECT_EQ(tar_compression_names(), "none, gzip, bzip2, xz, zstd, lz4, lzma, lzip, compress");
}

}  // namespace
}  // namespace sqar::ops
