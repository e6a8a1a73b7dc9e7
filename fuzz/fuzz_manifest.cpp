// Fuzzes the sqar manifest trailer decoder (src/format/manifest.h): header checks, then entries.
// The checksums would make almost every mutation fail early, so the harness also rebuilds the
// checksums for half of the inputs (selected by the first byte) to reach the entry decoding with
// lying entry counts and sizes.
#include <xxhash.h>

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
    const uint64_t count = sqar::load_le64(buf.data() + 16);
    const size_t payload = count <= avail / sqar::kManifestEntrySize ? size_t(count) * sqar::kManifestEntrySize : 0;
    sqar::store_le64(buf.data() + 24, XXH3_64bits(buf.data() + sqar::kManifestHeaderSize, payload));
    sqar::store_le64(buf.data() + 32, XXH3_64bits(buf.data(), 32));
  }
  try {
    auto header = sqar::decode_manifest_header(buf.data(), buf.size());
    if (!header) return 0;
    const size_t rest = buf.size() - sqar::kManifestHeaderSize;
    auto entries = sqar::decode_manifest_entries(*header, buf.data() + sqar::kManifestHeaderSize, rest);
    if (entries.size() != header->entry_count) __builtin_trap();
    // What we decode must encode back to the same header and entries.
    auto again = sqar::encode_manifest(entries);
    auto h2 = sqar::decode_manifest_header(again.data(), again.size());
    if (!h2 || h2->entry_count != entries.size()) __builtin_trap();
  } catch (const sqar::Error&) {
  }
  return 0;
}
