// Fuzzes the tar ingest of `sqar create --tar` (src/tarin/): libarchive's tar readers and
// filters as sqar drives them, the gzip check (archive_input), member names and links into
// the Tree, and the content store. Byte 0 selects options: bit 0 spills all content to the
// scratch file, bit 1 keeps duplicates, bit 2 excludes "*.o" and "/d/", bit 3 leaves tar header
// checksums as they are (by default each ustar header's checksum is recomputed, so a mutated
// name, size or type reaches the ingest instead of failing libarchive's check). Whatever is accepted
// must give a well-formed tree (sorted, unique, valid names; links to owners) whose files read
// back with the hash the ingest computed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/content_hash.h"
#include "common/error.h"
#include "tarin/tar_ingest.h"

namespace {

void check_tree(const sqar::Tree& t, const sqar::ContentStore& store) {
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const sqar::Node& n = t.nodes[i];
    if (i > 0) {
      const std::string_view name = t.name(n);
      if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
          name.find('\0') != std::string_view::npos || name.size() > 255)
        __builtin_trap();
    }
    if (n.link_target != sqar::kNoNode &&
        (n.link_target >= t.nodes.size() || t.nodes[n.link_target].link_target != sqar::kNoNode))
      __builtin_trap();
    if (S_ISDIR(n.mode) && n.link_target == sqar::kNoNode) {
      if (uint64_t(n.first_child) + n.child_count > t.nodes.size()) __builtin_trap();
      for (uint32_t c = n.first_child + 1; c < n.first_child + n.child_count; ++c)
        if (!(t.name(t.nodes[c - 1]) < t.name(t.nodes[c]))) __builtin_trap();  // sorted, no repeats
    }
  }
  std::vector<uint8_t> buf(1 << 16);
  for (uint32_t f : t.files) {
    const uint64_t size = t.nodes[f].size;
    sqar::ContentHasher h;
    for (uint64_t off = 0; off < size; off += buf.size()) {
      const uint64_t n = std::min<uint64_t>(buf.size(), size - off);
      if (store.read(f, off, n, buf.data()) != 0) __builtin_trap();
      h.update(buf.data(), size_t(n));
    }
    if (!(h.digest() == store.hash(f))) __builtin_trap();
  }
}

// Recomputes the checksum of every 512-byte block that carries the ustar magic (offset 257):
// the sum of the header's bytes with the checksum field (148..155) counted as spaces, written as
// six octal digits, NUL, space. Compressed inputs have no such blocks and stay as they are.
void repair_header_checksums(std::vector<uint8_t>& archive) {
  for (size_t at = 0; at + 512 <= archive.size(); at += 512) {
    uint8_t* h = archive.data() + at;
    if (std::memcmp(h + 257, "ustar", 5) != 0) continue;
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += i >= 148 && i < 156 ? ' ' : h[i];
    std::snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum & 0777777);
    h[155] = ' ';
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The ingest opens its archive by path: the input goes to one memfd, reopened per run.
  static const int fd = memfd_create("sqar-fuzz-tar", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  std::vector<uint8_t> archive(data + 1, data + size);
  if (!(data[0] & 8)) repair_header_checksums(archive);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, archive.data(), archive.size(), 0) != ssize_t(archive.size())) std::abort();
  sqar::TarIngestOptions opt;
  opt.archive = "/proc/self/fd/" + std::to_string(fd);
  opt.scratch_dir = "/tmp";
  opt.memory_limit = data[0] & 1 ? 0 : uint64_t(1) << 20;
  opt.keep_duplicates = data[0] & 2;
  if (data[0] & 4) {
    opt.excludes.add("*.o");
    opt.excludes.add("/d/");
  }
  opt.block_size = 4096;
  opt.max_member_size = uint64_t(16) << 20;  // holes are hashed as zeros: keep each input fast
  try {
    sqar::TarInput in = sqar::ingest_tar(opt);
    check_tree(in.tree, *in.content);
  } catch (const sqar::Error&) {
  }
  return 0;
}
