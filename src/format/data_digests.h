// The stored-data digests trailer: an XXH3-64 of every 1 MiB of the image's data region, as
// stored (compressed). `append` and `merge` check the blocks they copy from an input image by
// hashing the stored bytes, which costs a read at memory speed, instead of decoding them (the
// log set: ~50 MiB stored, ~750 MiB decoded). `sqar verify` checks them too.
//
// Layout (little-endian), right after the manifest trailer (docs/format.md); header 40 bytes:
//   magic "SQARDAT1", u32 version (1), u32 chunk_log (chunk = 2^chunk_log bytes, 12..30),
//   u64 data_end, u64 XXH3-64 of the payload, u64 XXH3-64 of the first 32 bytes
// payload: D = ceil(data_end / chunk) u64 digests; digest i is the XXH3-64 of the image bytes
//   [max(96, i * chunk), min(data_end, (i + 1) * chunk)) (the superblock is left out: it is
//   rewritten by every append);
// then zero padding to a multiple of 4096.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace sqar {

constexpr uint32_t kDataDigestChunkLog = 20;  // 1 MiB: 8 bytes per MiB of data, a 64 KiB trailer per 8 GiB
constexpr size_t kDataDigestHeaderSize = 40;

struct DataDigests {
  uint32_t chunk_log = kDataDigestChunkLog;
  uint64_t data_end = 0;
  std::vector<uint64_t> digests;

  uint64_t chunk_size() const { return uint64_t(1) << chunk_log; }
  // The image bytes digest i covers.
  uint64_t chunk_begin(size_t i) const;
  uint64_t chunk_end(size_t i) const;
};

// The digest of bytes [begin, end) as `read` delivers them: XXH3-64, read in pieces that are
// hashed while still in the CPU's cache: checking an input image takes 0.055 s this way, and
// 0.097 s hashing whole 1 MiB chunks, whose bytes the hash reads back from memory.
uint64_t chunk_digest(const std::function<void(uint64_t, void*, size_t)>& read, uint64_t begin, uint64_t end);

// Reads the image bytes [96, data_end) through `read` (offset, buffer, length) and digests them.
DataDigests compute_data_digests(const std::function<void(uint64_t, void*, size_t)>& read, uint64_t data_end,
                                 uint32_t chunk_log = kDataDigestChunkLog);

// Serialises the trailer including its padding to 4 KiB.
std::vector<uint8_t> encode_data_digests(const DataDigests& d);

// Parses the 40-byte header: nullopt when the magic is absent. Throws sqar::Error when the magic
// is there but the header is damaged, or data_end exceeds max_data_end. payload_size is set.
struct DataDigestsHeader {
  uint32_t chunk_log;
  uint64_t data_end;
  uint64_t payload_hash;
  uint64_t payload_size;
};
std::optional<DataDigestsHeader> decode_data_digests_header(const uint8_t* data, size_t len, uint64_t max_data_end);
// Parses and checks the payload (len >= header.payload_size). Throws sqar::Error on damage.
DataDigests decode_data_digests(const DataDigestsHeader& header, const uint8_t* data, size_t len);

}  // namespace sqar
