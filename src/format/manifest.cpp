#include "format/manifest.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"

namespace sqar {

namespace {
constexpr char kMagic[8] = {'S', 'Q', 'A', 'R', 'M', 'N', 'F', '1'};
constexpr uint32_t kEntrySize = 20;  // u32 inode number + 16 hash bytes (versions 1 and 3)
constexpr uint32_t kHashSize = 16;

uint64_t v2_payload_size(uint64_t span, uint64_t count) { return (span + 7) / 8 + count * kHashSize; }

void store_hash(uint8_t* at, const Hash128& h) {
  store_le64(at, h.low);
  store_le64(at + 8, h.high);
}
Hash128 load_hash(const uint8_t* at) { return {load_le64(at), load_le64(at + 8)}; }

// Entries of 20 bytes (versions 1 and 3). Version 1 did not promise order: sorted here.
std::vector<ManifestEntry> decode_entries(const uint8_t* data, size_t count) {
  std::vector<ManifestEntry> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = {load_le32(data + i * kEntrySize), load_hash(data + i * kEntrySize + 4)};
  std::sort(out.begin(), out.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.inode_number < b.inode_number; });
  return out;
}

std::vector<ManifestEntry> decode_v2_bitmap(const uint8_t* data, const ManifestHeader& header) {
  std::vector<ManifestEntry> out(size_t(header.entry_count));
  const size_t bitmap = size_t(header.payload_size - header.entry_count * kHashSize);
  const uint8_t* hashes = data + bitmap;
  size_t next = 0;
  for (size_t byte = 0; byte < bitmap; ++byte) {
    for (unsigned bit = 0; bit < 8; ++bit) {
      if (!(data[byte] >> bit & 1)) continue;
      if (next == out.size()) throw Error("manifest trailer bitmap marks more inodes than it has entries");
      out[next] = {uint32_t(byte * 8 + bit + 1), load_hash(hashes + next * kHashSize)};
      ++next;
    }
  }
  if (next != out.size()) throw Error("manifest trailer bitmap marks fewer inodes than it has entries");
  return out;
}
}  // namespace

std::vector<Hash128> fragment_digests(std::vector<FragmentMember> members, uint32_t fragment_count) {
  std::sort(members.begin(), members.end(), [](const FragmentMember& a, const FragmentMember& b) {
    return std::tie(a.fragment_index, a.inode_number) < std::tie(b.fragment_index, b.inode_number);
  });
  std::vector<Hash128> out(fragment_count, hash128("", 0));
  StreamHasher hasher;
  for (size_t i = 0; i < members.size();) {
    const uint32_t fragment = members[i].fragment_index;
    if (fragment >= fragment_count)
      throw Error("file of inode " + std::to_string(members[i].inode_number) + " lies in fragment block " +
                  std::to_string(fragment) + " of " + std::to_string(fragment_count));
    hasher.reset();
    for (; i < members.size() && members[i].fragment_index == fragment; ++i) {
      if (i && members[i].inode_number == members[i - 1].inode_number && members[i - 1].fragment_index == fragment)
        throw Error("inode " + std::to_string(members[i].inode_number) + " listed twice in fragment block " +
                    std::to_string(fragment));
      uint8_t record[4 + kHashSize];
      store_le32(record, members[i].inode_number);
      store_hash(record + 4, members[i].hash);
      hasher.update(record, sizeof record);
    }
    out[fragment] = hasher.digest();
  }
  return out;
}

std::vector<uint8_t> encode_manifest(std::vector<ManifestEntry> files, const std::vector<Hash128>& digests,
                                     uint32_t version) {
  if (version != 3 && version != 4)
    throw Error("cannot write a manifest trailer of version " + std::to_string(version));
  std::sort(files.begin(), files.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.inode_number < b.inode_number; });
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].inode_number == 0) throw Error("manifest entry for inode 0 (inode numbers start at 1)");
    if (i && files[i].inode_number == files[i - 1].inode_number)
      throw Error("two manifest entries for inode " + std::to_string(files[i].inode_number));
  }
  if (digests.size() > UINT32_MAX) throw Error("more fragment blocks than an image can have");
  const size_t payload = files.size() * kEntrySize + digests.size() * kHashSize;
  std::vector<uint8_t> out(fmt::align_up(kManifestHeaderSize + payload, fmt::kDeviceAlign), 0);
  uint8_t* at = out.data() + kManifestHeaderSize;
  for (const auto& entry : files) {
    store_le32(at, entry.inode_number);
    store_hash(at + 4, entry.hash);
    at += kEntrySize;
  }
  for (const auto& digest : digests) {
    store_hash(at, digest);
    at += kHashSize;
  }
  uint8_t* h = out.data();
  std::memcpy(h, kMagic, 8);
  store_le32(h + 8, version);
  store_le32(h + 12, uint32_t(digests.size()));
  store_le64(h + 16, files.size());
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
  ManifestHeader header{version, count, 0, load_le64(h + 24), 0};
  // Counts above 2^32 cannot be inode numbers and would overflow the size arithmetic below.
  if (count > UINT32_MAX) throw Error("manifest trailer lists more entries than an image can have inodes");
  if (version == 1) {
    if (field != kEntrySize) throw Error("manifest trailer has an unexpected entry size");
    header.payload_size = count * kEntrySize;
  } else if (version == 2) {
    if (count > field) throw Error("manifest trailer lists more entries than its inode span");
    header.payload_size = v2_payload_size(field, count);
  } else if (version == 3 || version == 4) {
    header.fragment_digest_count = field;
    header.payload_size = count * kEntrySize + uint64_t(field) * kHashSize;
  } else {
    throw Error("unsupported manifest trailer version " + std::to_string(version));
  }
  return header;
}

Manifest decode_manifest(const ManifestHeader& header, const uint8_t* data, size_t len) {
  if (header.payload_size > len) throw Error("manifest trailer is truncated");
  if (XXH3_64bits(data, size_t(header.payload_size)) != header.payload_hash)
    throw Error("manifest trailer checksum mismatch");
  Manifest m;
  m.version = header.version;
  if (header.version == 2) {
    m.files = decode_v2_bitmap(data, header);
    return m;
  }
  m.files = decode_entries(data, size_t(header.entry_count));
  for (size_t i = 1; i < m.files.size(); ++i)
    if (m.files[i].inode_number == m.files[i - 1].inode_number)
      throw Error("manifest trailer lists inode " + std::to_string(m.files[i].inode_number) + " twice");
  const uint8_t* digests = data + header.entry_count * kEntrySize;
  m.fragment_digests.reserve(size_t(header.fragment_digest_count));
  for (uint64_t i = 0; i < header.fragment_digest_count; ++i)
    m.fragment_digests.push_back(load_hash(digests + i * kHashSize));
  return m;
}

}  // namespace sqar
