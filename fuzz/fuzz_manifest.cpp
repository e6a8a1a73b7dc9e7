// Fuzzes the sqar manifest trailer decoder (src/format/manifest.h): header checks, then entries.
// The checksums would make almost every mutation fail early, so the harness also rebuilds the
// checksums for half of the inputs (selected by the first byte) to reach the entry decoding with
// lying entry counts and sizes.
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/endian.h"
#include "common/error.h"
#include "format/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool fix_checksums = data[0] & 1;
  std::vector<uint8_t> buf(data + 1, data + size);
  if (fix_checksums && buf.size() >= sqar::kManifestHeaderSize) {
    const size_t avail = buf.size() - sqar::kManifestHeaderSize;
    // The payload size as the header describes it (v1: 20-byte entries; v2: bitmap + hashes),
    // clamped to what the input holds.
    const uint64_t count = sqar::load_le64(buf.data() + 16) & 0xffffffffu;
    const uint64_t field = sqar::load_le32(buf.data() + 12);
    const uint64_t want = sqar::load_le32(buf.data() + 8) == 1 ? count * 20 : (field + 7) / 8 + count * 16;
    const size_t payload = size_t(std::min<uint64_t>(want, avail));
    sqar::store_le64(buf.data() + 24, XXH3_64bits(buf.data() + sqar::kManifestHeaderSize, payload));
    sqar::store_le64(buf.data() + 32, XXH3_64bits(buf.data(), 32));
  }
  try {
    auto header = sqar::decode_manifest_header(buf.data(), buf.size());
    if (!header) return 0;
    const size_t rest = buf.size() - sqar::kManifestHeaderSize;
    auto entries = sqar::decode_manifest_entries(*header, buf.data() + sqar::kManifestHeaderSize, rest);
    if (entries.size() != header->entry_count) __builtin_trap();
    // What we decode must encode back to the same header and entries. (Version 1 entries may
    // name any inode number; version 2 spends a bit per inode up to the largest, so skip those
    // that would make the harness allocate and scan hundreds of megabytes.)
    for (const auto& e : entries)
      if (e.inode_number > (1u << 20)) return 0;
    auto again = sqar::encode_manifest(entries);
    auto h2 = sqar::decode_manifest_header(again.data(), again.size());
    if (!h2 || h2->entry_count != entries.size()) __builtin_trap();
    auto back = sqar::decode_manifest_entries(*h2, again.data() + sqar::kManifestHeaderSize,
                                              again.size() - sqar::kManifestHeaderSize);
    // (Version 1 did not require sorted entries; the encoder sorts.)
    std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.inode_number < b.inode_number; });
    if (back.size() != entries.size()) __builtin_trap();
    for (size_t i = 0; i < back.size(); ++i)
      if (back[i].inode_number != entries[i].inode_number || !(back[i].hash == entries[i].hash)) __builtin_trap();
  } catch (const sqar::Error&) {
  }
  return 0;
}
