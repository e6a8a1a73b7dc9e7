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
    // The payload size as the header describes it (v1: 20-byte entries; v2: bitmap + hashes;
    // v3: 20-byte entries + fragment digests), clamped to what the input holds.
    const uint64_t count = sqar::load_le64(buf.data() + 16) & 0xffffffffu;
    const uint64_t field = sqar::load_le32(buf.data() + 12);
    const uint32_t version = sqar::load_le32(buf.data() + 8);
    const uint64_t want = version == 1   ? count * 20
                          : version == 2 ? (field + 7) / 8 + count * 16
                                         : count * 20 + field * 16;
    const size_t payload = size_t(std::min<uint64_t>(want, avail));
    sqar::store_le64(buf.data() + 24, XXH3_64bits(buf.data() + sqar::kManifestHeaderSize, payload));
    sqar::store_le64(buf.data() + 32, XXH3_64bits(buf.data(), 32));
  }
  try {
    auto header = sqar::decode_manifest_header(buf.data(), buf.size());
    if (!header) return 0;
    const size_t rest = buf.size() - sqar::kManifestHeaderSize;
    auto m = sqar::decode_manifest(*header, buf.data() + sqar::kManifestHeaderSize, rest);
    if (m.files.size() != header->entry_count || m.fragment_digests.size() != header->fragment_digest_count)
      __builtin_trap();
    for (size_t i = 1; i < m.files.size(); ++i)
      if (m.files[i].inode_number <= m.files[i - 1].inode_number) __builtin_trap();  // sorted, no repeats
    // What we decode must encode back (as version 3) to the same entries and digests. Inode 0
    // is refused by the encoder only (earlier decoders accepted it).
    if (!m.files.empty() && m.files[0].inode_number == 0) return 0;
    auto again = sqar::encode_manifest(m.files, m.fragment_digests);
    auto h2 = sqar::decode_manifest_header(again.data(), again.size());
    if (!h2 || h2->entry_count != m.files.size()) __builtin_trap();
    auto back =
        sqar::decode_manifest(*h2, again.data() + sqar::kManifestHeaderSize, again.size() - sqar::kManifestHeaderSize);
    if (back.files.size() != m.files.size() || back.fragment_digests != m.fragment_digests) __builtin_trap();
    for (size_t i = 0; i < back.files.size(); ++i)
      if (back.files[i].inode_number != m.files[i].inode_number || !(back.files[i].hash == m.files[i].hash))
        __builtin_trap();
  } catch (const sqar::Error&) {
  }
  return 0;
}
