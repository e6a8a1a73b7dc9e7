// SquashFS 4.0 on-disk constants shared by the writer and the reader.
// Reference: squashfs-tools-ng doc/format.adoc and the kernel's Documentation/filesystems/squashfs.rst.
#pragma once
#include <cstdint>

namespace sqar::fmt {

constexpr uint32_t kMagic = 0x73717368;  // "hsqs"
constexpr uint16_t kVersionMajor = 4;
constexpr uint16_t kVersionMinor = 0;
constexpr uint32_t kSuperblockSize = 96;
constexpr uint32_t kMetadataBlockSize = 8192;
constexpr uint16_t kMetadataUncompressed = 0x8000;  // bit in the 16-bit metadata block header
constexpr uint32_t kDataUncompressed = 1u << 24;    // bit in a data block / fragment size word
// A data block whose size word is 0 is a hole (a sparse block): it reads as zeros. A word of
// just the uncompressed bit is damage, refused where block lists are read.
constexpr bool is_hole_word(uint32_t size_word) { return size_word == 0; }
constexpr uint32_t kMinBlockSize = 4096;
constexpr uint32_t kMaxBlockSize = 1u << 20;
constexpr uint32_t kNoFragment = 0xFFFFFFFF;
constexpr uint32_t kNoXattr = 0xFFFFFFFF;
constexpr uint64_t kTableAbsent = ~0ull;
constexpr uint32_t kDeviceAlign = 4096;  // images are padded so loop devices see whole pages
// The most blocks one file may have: sqar's reader refuses more (a crafted inode claims
// billions of sparse blocks in a few KB of compressed list), so its writers refuse more too,
// and every image sqar makes it reads back. 4 TiB at 128 KiB blocks, 32 TiB at 1 MiB.
constexpr uint64_t kMaxFileBlocks = uint64_t(1) << 25;

// Superblock flags.
enum SuperFlags : uint16_t {
  kFlagUncompressedInodes = 0x0001,
  kFlagUncompressedData = 0x0002,
  kFlagUncompressedFragments = 0x0008,
  kFlagNoFragments = 0x0010,
  kFlagAlwaysFragments = 0x0020,
  kFlagDuplicates = 0x0040,
  kFlagExportable = 0x0080,
  kFlagUncompressedXattrs = 0x0100,
  kFlagNoXattrs = 0x0200,
  kFlagCompressorOptions = 0x0400,
  kFlagUncompressedIds = 0x0800,
};

// Inode types.
enum InodeType : uint16_t {
  kDir = 1,
  kFile = 2,
  kSymlink = 3,
  kBlockDev = 4,
  kCharDev = 5,
  kFifo = 6,
  kSocket = 7,
  kExtDir = 8,
  kExtFile = 9,
  kExtSymlink = 10,
  kExtBlockDev = 11,
  kExtCharDev = 12,
  kExtFifo = 13,
  kExtSocket = 14,
};

// Device numbers are stored in the Linux "new" 32-bit encoding.
inline uint32_t encode_dev(uint32_t major, uint32_t minor) {
  return (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xffu) << 12);
}
inline uint32_t dev_major(uint32_t dev) { return (dev >> 8) & 0xfff; }
inline uint32_t dev_minor(uint32_t dev) { return (dev & 0xff) | ((dev >> 12) & 0xfff00); }

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace sqar::fmt
