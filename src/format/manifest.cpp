#include "format/manifest.h"

#include <algorithm>
#include <cstring>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"

namespace sqar {

namespace {
constexpr char kMagic[8] = {'S', 'Q', 'A', 'R', 'M', 'N', 'F', '1'};
constexpr uint32_t kVersion = 1;
}  // namespace

std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.inode_number < b.inode_number; });
  const size_t payload = entries.size() * kManifestEntrySize;
  std::vector<uint8_t> out(fmt::align_up(kManifestHeaderSize + payload, fmt::kDeviceAlign), 0);
  uint8_t* e = out.data() + kManifestHeaderSize;
  for (const auto& entry : entries) {
    store_le32(e, entry.inode_number);
    store_le64(e + 4, entry.hash.low);
    store_le64(e + 12, entry.hash.high);
    e += kManifestEntrySize;
  }
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 8);
  store_le32(h + 8, kVersion);
  store_le32(h + 12, kManifestEntrySize);
  store_le64(h + 16, entries.size());
  store_le64(h + 24, XXH3_64bits(out.data() + kManifestHeaderSize, payload));
  store_le64(h + 32, XXH3_64bits(h, 32));
  return out;
}

std::optional<ManifestHeader> decode_manifest_header(const uint8_t* h, size_t len) {
  if (len < kManifestHeaderSize || std::memcmp(h, kMagic, 8) != 0) return std::nullopt;
  if (load_le64(h + 32) != XXH3_64bits(h, 32)) throw Error("manifest trailer header checksum mismatch");
  if (load_le32(h + 8) != kVersion) throw Error("unsupported manifest trailer version " + std::to_string(load_le32(h + 8)));
  if (load_le32(h + 12) != kManifestEntrySize) throw Error("manifest trailer has an unexpected entry size");
  return ManifestHeader{load_le64(h + 16), load_le64(h + 24)};
}

std::vector<ManifestEntry> decode_manifest_entries(const ManifestHeader& header, const uint8_t* data, size_t len) {
  if (header.entry_count > len / kManifestEntrySize) throw Error("manifest trailer is truncated");
  const size_t payload = size_t(header.entry_count) * kManifestEntrySize;
  if (XXH3_64bits(data, payload) != header.payload_hash) throw Error("manifest trailer checksum mismatch");
  std::vector<ManifestEntry> out(header.entry_count);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* e = data + i * kManifestEntrySize;
    out[i] = {load_le32(e), {load_le64(e + 4), load_le64(e + 12)}};
  }
  return out;
}

}  // namespace sqar
