#include "format/manifest.h"

#include <algorithm>
#include <cstring>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"

namespace sqar {

namespace {
constexpr char kMagic[8] = {'S', 'Q', 'A', 'R', 'M', 'N', 'F', '1'};
constexpr uint32_t kV1EntrySize = 20;  // u32 inode number + 16 hash bytes
constexpr uint32_t kHashSize = 16;

uint64_t v2_payload_size(uint64_t span, uint64_t count) { return (span + 7) / 8 + count * kHashSize; }
}  // namespace

std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.inode_number < b.inode_number; });
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].inode_number == 0) throw Error("manifest entry for inode 0 (inode numbers start at 1)");
    if (i && entries[i].inode_number == entries[i - 1].inode_number)
      throw Error("two manifest entries for inode " + std::to_string(entries[i].inode_number));
  }
  const uint32_t span = entries.empty() ? 0 : entries.back().inode_number;
  const size_t bitmap = (uint64_t(span) + 7) / 8;
  const size_t payload = size_t(v2_payload_size(span, entries.size()));
  std::vector<uint8_t> out(fmt::align_up(kManifestHeaderSize + payload, fmt::kDeviceAlign), 0);
  uint8_t* bits = out.data() + kManifestHeaderSize;
  uint8_t* hashes = bits + bitmap;
  for (const auto& entry : entries) {
    const uint32_t bit = entry.inode_number - 1;
    bits[bit / 8] = uint8_t(bits[bit / 8] | (1u << (bit % 8)));
    store_le64(hashes, entry.hash.low);
    store_le64(hashes + 8, entry.hash.high);
    hashes += kHashSize;
  }
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 8);
  store_le32(h + 8, kManifestVersion);
  store_le32(h + 12, span);
  store_le64(h + 16, entries.size());
  store_le64(h + 24, XXH3_64bits(out.data() + kManifestHeaderSize, payload));
  store_le64(h + 32, XXH3_64bits(h, 32));
  return out;
}

std::optional<ManifestHeader> decode_manifest_header(const uint8_t* h, size_t len) {
  if (len < kManifestHeaderSize || std::memcmp(h, kMagic, 8) != 0) return std::nullopt;
  if (load_le64(h + 32) != XXH3_64bits(h, 32)) throw Error("manifest trailer header checksum mismatch");
  const uint32_t version = load_le32(h + 8);
  const uint32_t field = load_le32(h + 12);
  const uint64_t count = load_le64(h + 16);
  ManifestHeader header{version, count, load_le64(h + 24), 0};
  // Counts above 2^32 cannot be inode numbers and would overflow the size arithmetic below.
  if (count > UINT32_MAX) throw Error("manifest trailer lists more entries than an image can have inodes");
  if (version == 1) {
    if (field != kV1EntrySize) throw Error("manifest trailer has an unexpected entry size");
    header.payload_size = count * kV1EntrySize;
  } else if (version == 2) {
    if (count > field) throw Error("manifest trailer lists more entries than its inode span");
    header.payload_size = v2_payload_size(field, count);
  } else {
    throw Error("unsupported manifest trailer version " + std::to_string(version));
  }
  return header;
}

std::vector<ManifestEntry> decode_manifest_entries(const ManifestHeader& header, const uint8_t* data, size_t len) {
  if (header.payload_size > len) throw Error("manifest trailer is truncated");
  if (XXH3_64bits(data, size_t(header.payload_size)) != header.payload_hash)
    throw Error("manifest trailer checksum mismatch");
  std::vector<ManifestEntry> out(size_t(header.entry_count));
  if (header.version == 1) {
    for (size_t i = 0; i < out.size(); ++i) {
      const uint8_t* e = data + i * kV1EntrySize;
      out[i] = {load_le32(e), {load_le64(e + 4), load_le64(e + 12)}};
    }
    return out;
  }
  const size_t bitmap = size_t(header.payload_size - header.entry_count * kHashSize);
  const uint8_t* hashes = data + bitmap;
  size_t next = 0;
  for (size_t byte = 0; byte < bitmap; ++byte) {
    for (unsigned bit = 0; bit < 8; ++bit) {
      if (!(data[byte] >> bit & 1)) continue;
      if (next == out.size()) throw Error("manifest trailer bitmap marks more inodes than it has entries");
      const uint8_t* e = hashes + next * kHashSize;
      out[next++] = {uint32_t(byte * 8 + bit + 1), {load_le64(e), load_le64(e + 8)}};
    }
  }
  if (next != out.size()) throw Error("manifest trailer bitmap marks fewer inodes than it has entries");
  return out;
}

}  // namespace sqar
