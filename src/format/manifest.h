// The sqar manifest trailer: the content hash of every regular file, stored after the
// padded image so that `sqar verify` can check content end to end and `--reuse` can find an
// earlier image's blocks by content.
//
// Layout (little-endian), at align_up(bytes_used, 4096) from the image start; header (40 bytes):
//   magic "SQARMNF1", u32 version, u32 field (v1: entry size 20; v2: inode span S;
//   v3 and v4: fragment digest count F), u64 entry count N, u64 XXH3-64 of the payload,
//   u64 XXH3-64 of the first 32 bytes
// payload, versions 3 and 4:
//   N entries of u32 inode number, u64 low, u64 high, sorted by inode number: each inode that
//   owns data and is not covered by a fragment digest;
//   then F fragment digests (u64 low, u64 high), one per fragment block of the image.
// Version 4 hashes content with HashScheme::kChunked (common/content_hash.h), versions 1-3 with
// kFlat (XXH3-128 of the content); the layouts of 3 and 4 are the same.
// payload, version 2 (still read): presence bitmap of ceil(S / 8) bytes (bit (n-1) % 8 of byte
//   (n-1) / 8 set <=> inode n has an entry), then N hashes in inode order.
// payload, version 1 (still read): N entries as in version 3.
// then zero padding to a multiple of 4096.
// Kernel, unsquashfs and squashfuse stop at bytes_used and never see it.
//
// Which files have an entry: a file whose whole content is a tail in a fragment block (no full
// block: size < block size) is covered by its fragment block's digest instead, XXH3-128 over
// (u32 inode number, u64 low, u64 high of the file's content hash) of every such inode in that
// block, in inode order (fragment_digests below). That still binds each of those inodes to its
// content at 128-bit strength, but costs 16 bytes per fragment block instead of per file: on the
// ports set (66k small files in ~400 fragment blocks) the trailer shrinks from 1.09 MB to a few
// KB. The price is that a mismatch names a fragment block's files, not the one that is wrong.
// Every other inode with data has an entry when it owns that data (dedup makes duplicates share
// it): a regular file without an entry then shares its data with one that has (same size,
// blocks_start, fragment index and offset), hence the same hash. Empty files have no entry.
// `--reuse` needs hashes only of files with full blocks, the ones an entry covers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "format/squashfs.h"

namespace sqar {

struct ManifestEntry {
  uint32_t inode_number;
  Hash128 hash;
};

constexpr size_t kManifestHeaderSize = 40;
constexpr uint32_t kManifestVersion = 4;  // what encode_manifest writes

// How a manifest of this version hashes file content.
inline HashScheme manifest_hash_scheme(uint32_t version) {
  return version >= 4 ? HashScheme::kChunked : HashScheme::kFlat;
}

struct Manifest {
  uint32_t version = kManifestVersion;
  std::vector<ManifestEntry> files;  // sorted by inode number
  // Versions 3 and 4: one per fragment block (fragment_digests below). Versions 1 and 2 have none and
  // list every data-owning file in `files`.
  std::vector<Hash128> fragment_digests;
  bool has_fragment_digests() const { return version >= 3; }
  HashScheme scheme() const { return manifest_hash_scheme(version); }
};

// Does the fragment block's digest cover this file (versions 3 and 4) rather than an entry of its own?
inline bool covered_by_fragment_digest(uint64_t file_size, uint64_t block_size, uint32_t fragment_index) {
  return fragment_index != fmt::kNoFragment && file_size < block_size;
}

// A file covered by a fragment digest: the writer and `sqar verify` both build the digests from
// these, so they agree by construction.
struct FragmentMember {
  uint32_t fragment_index;
  uint32_t inode_number;
  Hash128 hash;  // the file's content hash (the manifest's scheme)
};
// One digest per fragment block 0..fragment_count-1 (a block without members gets the digest of
// nothing). Throws sqar::Error for an index >= fragment_count or an inode listed twice.
std::vector<Hash128> fragment_digests(std::vector<FragmentMember> members, uint32_t fragment_count);

// Serialises the trailer including its padding to 4 KiB. `version` is 4, or 3 where a test needs
// an image as earlier releases wrote it (the hashes must then be kFlat ones).
std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> files, const std::vector<Hash128>& fragment_digests,
                                     uint32_t version = kManifestVersion);

struct ManifestHeader {
  uint32_t version;
  uint64_t entry_count;
  uint64_t fragment_digest_count;  // versions 3 and 4
  uint64_t payload_hash;
  uint64_t payload_size;  // bytes after the header that the payload occupies
};
// Parses and checks the 40-byte header; nullopt when there is no manifest (wrong magic).
// Throws sqar::Error when the magic is right but the header is damaged or of an unknown version.
std::optional<ManifestHeader> decode_manifest_header(const uint8_t* data, size_t len);
// Parses the payload (len >= header.payload_size) and checks its hash; entries come out sorted
// by inode number. Throws sqar::Error on damage.
Manifest decode_manifest(const ManifestHeader& header, const uint8_t* data, size_t len);

}  // namespace sqar
