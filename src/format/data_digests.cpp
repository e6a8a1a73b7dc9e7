#include "format/data_digests.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"

namespace sqar {

namespace {
constexpr char kMagic[8] = {'S', 'Q', 'A', 'R', 'D', 'A', 'T', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMinChunkLog = 12, kMaxChunkLog = 30;

uint64_t digest_count(uint64_t data_end, uint32_t chunk_log) {
  return (data_end + (uint64_t(1) << chunk_log) - 1) >> chunk_log;
}
}  // namespace

uint64_t DataDigests::chunk_begin(size_t i) const {
  return std::max<uint64_t>(fmt::kSuperblockSize, uint64_t(i) << chunk_log);
}
uint64_t DataDigests::chunk_end(size_t i) const { return std::min<uint64_t>(data_end, uint64_t(i + 1) << chunk_log); }

DataDigests compute_data_digests(const std::function<void(uint64_t, void*, size_t)>& read, uint64_t data_end,
                                 uint32_t chunk_log) {
  DataDigests d;
  d.chunk_log = chunk_log;
  d.data_end = data_end;
  const uint64_t n = digest_count(data_end, chunk_log);
  d.digests.resize(size_t(n));
  for (size_t i = 0; i < n; ++i) d.digests[i] = chunk_digest(read, d.chunk_begin(i), d.chunk_end(i));
  return d;
}

uint64_t chunk_digest(const std::function<void(uint64_t, void*, size_t)>& read, uint64_t begin, uint64_t end) {
  constexpr size_t kPiece = 128 << 10;
  thread_local std::vector<uint8_t> buf(kPiece);
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  for (uint64_t at = begin; at < end;) {
    const size_t n = size_t(std::min<uint64_t>(kPiece, end - at));
    read(at, buf.data(), n);
    XXH3_64bits_update(state.get(), buf.data(), n);
    at += n;
  }
  return XXH3_64bits_digest(state.get());
}

std::vector<uint8_t> encode_data_digests(const DataDigests& d) {
  const uint64_t payload = d.digests.size() * 8;
  std::vector<uint8_t> out(size_t(fmt::align_up(kDataDigestHeaderSize + payload, fmt::kDeviceAlign)), 0);
  uint8_t* p = out.data() + kDataDigestHeaderSize;
  for (size_t i = 0; i < d.digests.size(); ++i) store_le64(p + i * 8, d.digests[i]);
  std::memcpy(out.data(), kMagic, 8);
  store_le32(out.data() + 8, kVersion);
  store_le32(out.data() + 12, d.chunk_log);
  store_le64(out.data() + 16, d.data_end);
  store_le64(out.data() + 24, XXH3_64bits(p, size_t(payload)));
  store_le64(out.data() + 32, XXH3_64bits(out.data(), 32));
  return out;
}

std::optional<DataDigestsHeader> decode_data_digests_header(const uint8_t* data, size_t len, uint64_t max_data_end) {
  if (len < kDataDigestHeaderSize || std::memcmp(data, kMagic, 8) != 0) return std::nullopt;
  if (XXH3_64bits(data, 32) != load_le64(data + 32)) throw Error("data digests trailer header is damaged");
  if (load_le32(data + 8) != kVersion)
    throw Error("data digests trailer has unknown version " + std::to_string(load_le32(data + 8)));
  DataDigestsHeader h;
  h.chunk_log = load_le32(data + 12);
  h.data_end = load_le64(data + 16);
  h.payload_hash = load_le64(data + 24);
  if (h.chunk_log < kMinChunkLog || h.chunk_log > kMaxChunkLog)
    throw Error("data digests trailer has chunk size 2^" + std::to_string(h.chunk_log));
  if (h.data_end > max_data_end || h.data_end < fmt::kSuperblockSize)
    throw Error("data digests trailer covers up to byte " + std::to_string(h.data_end) + ", outside the data region");
  h.payload_size = digest_count(h.data_end, h.chunk_log) * 8;
  return h;
}

DataDigests decode_data_digests(const DataDigestsHeader& header, const uint8_t* data, size_t len) {
  if (len < header.payload_size) throw Error("data digests trailer is truncated");
  if (XXH3_64bits(data, size_t(header.payload_size)) != header.payload_hash)
    throw Error("data digests trailer payload is damaged");
  DataDigests d;
  d.chunk_log = header.chunk_log;
  d.data_end = header.data_end;
  d.digests.resize(size_t(header.payload_size / 8));
  for (size_t i = 0; i < d.digests.size(); ++i) d.digests[i] = load_le64(data + i * 8);
  return d;
}

}  // namespace sqar
