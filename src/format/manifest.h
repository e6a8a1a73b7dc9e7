// The sqar manifest trailer: each regular file's XXH3-128, stored after the padded image.
//
// Layout (little-endian), at align_up(bytes_used, 4096) from the image start:
//   header (40 bytes): magic "SQARMNF1", u32 version (1), u32 entry size (20),
//                      u64 entry count, u64 XXH3-64 of the entries, u64 XXH3-64 of the first 32 bytes
//   entries:           u32 inode number, u64 hash low, u64 hash high  (sorted by inode number)
//   zero padding to a multiple of 4096.
// Kernel, unsquashfs and squashfuse stop at bytes_used and never see it.
//
// Only inodes that own their data have an entry (dedup makes most of a tree's duplicates share
// data; 16 bytes per duplicate would be a large share of a small-file image). A regular file
// without an entry shares its data with one that has: same file size, blocks_start, fragment
// index and fragment offset, hence the same content hash. Empty files have no entry; their hash
// is XXH3-128 of nothing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/hash.h"

namespace sqar {

struct ManifestEntry {
  uint32_t inode_number;
  Hash128 hash;
};

constexpr size_t kManifestHeaderSize = 40;
constexpr size_t kManifestEntrySize = 20;

// Serialises the trailer including its padding to 4 KiB.
std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> entries);

struct ManifestHeader {
  uint64_t entry_count;
  uint64_t payload_hash;
};
// Parses and checks the 40-byte header; nullopt when there is no manifest (wrong magic).
// Throws sqar::Error when the magic is right but the header is damaged.
std::optional<ManifestHeader> decode_manifest_header(const uint8_t* data, size_t len);
// Parses the entries and checks their hash; throws sqar::Error on damage.
std::vector<ManifestEntry> decode_manifest_entries(const ManifestHeader& header, const uint8_t* data, size_t len);

}  // namespace sqar
