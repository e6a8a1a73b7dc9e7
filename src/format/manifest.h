// The sqar manifest trailer: each regular file's XXH3-128, stored after the padded image.
//
// Layout (little-endian), at align_up(bytes_used, 4096) from the image start; header (40 bytes):
//   magic "SQARMNF1", u32 version, u32 (v1: entry size 20; v2: inode span S),
//   u64 entry count N, u64 XXH3-64 of the payload, u64 XXH3-64 of the first 32 bytes
// payload, version 2 (written since session 3):
//   presence bitmap of ceil(S / 8) bytes: bit (n-1) % 8 of byte (n-1) / 8 set <=> inode n has
//   an entry (N bits set, none beyond S); then N hashes (u64 low, u64 high) in inode order.
// payload, version 1 (still read): N entries of u32 inode number, u64 low, u64 high, sorted.
// then zero padding to a multiple of 4096.
// Kernel, unsquashfs and squashfuse stop at bytes_used and never see it.
//
// Only inodes that own their data have an entry (dedup makes most of a tree's duplicates share
// data; 16 bytes per duplicate would be a large share of a small-file image). A regular file
// without an entry shares its data with one that has: same file size, blocks_start, fragment
// index and fragment offset, hence the same content hash. Empty files have no entry; their hash
// is XXH3-128 of nothing. Version 2 replaces v1's 4-byte inode number per entry with one bit
// per inode: on the ports set (66k entries, 270k inodes) 1.09 MB instead of 1.32 MB; the 16
// hash bytes per entry are incompressible and stay.
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
constexpr uint32_t kManifestVersion = 2;  // what encode_manifest writes

// Serialises the trailer including its padding to 4 KiB.
std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> entries);

struct ManifestHeader {
  uint32_t version;
  uint64_t entry_count;
  uint64_t payload_hash;
  uint64_t payload_size;  // bytes after the header that the entries occupy
};
// Parses and checks the 40-byte header; nullopt when there is no manifest (wrong magic).
// Throws sqar::Error when the magic is right but the header is damaged or of an unknown version.
std::optional<ManifestHeader> decode_manifest_header(const uint8_t* data, size_t len);
// Parses the payload (len >= header.payload_size) and checks its hash; entries come out sorted
// by inode number. Throws sqar::Error on damage.
std::vector<ManifestEntry> decode_manifest_entries(const ManifestHeader& header, const uint8_t* data, size_t len);

}  // namespace sqar
