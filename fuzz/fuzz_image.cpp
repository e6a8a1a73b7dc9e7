// Fuzzes the whole reader core through its public API, the way the CLI and sqarfs use it:
// open (superblock, compressor options, id table), walk every directory, stat every inode, read
// every file (block lists, fragments, sparse blocks), symlinks, xattrs, lookups through the
// directory index, the export table and the manifest trailer.
//
// Every damaged structure must surface as sqar::Error; anything else (a crash, a sanitizer
// report, another exception type, a hang, unbounded memory) is a bug in the reader.
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "fuzz_util.h"

using sqar::reader::Image;
using sqar::reader::Inode;

namespace {

// Bounds per input, so a valid but large (or lying) image cannot turn one run into minutes.
constexpr size_t kMaxEntries = 4096;
constexpr uint64_t kMaxBytesPerFile = 4u << 20;

void read_file(Image& image, const Inode& inode) {
  std::vector<uint8_t> buf(64 << 10);
  const uint64_t limit = std::min<uint64_t>(inode.size, kMaxBytesPerFile);
  for (uint64_t off = 0; off < limit;) {
    size_t n = image.read_file(inode, off, buf.data(), buf.size());
    if (n == 0) break;
    off += n;
  }
  // The zero-copy path and read-ahead take their own route through the block list.
  auto chunk = image.read_chunk(inode, inode.size / 2, 4096);
  (void)chunk;
  image.prefetch_block(inode, 0);
  image.prefetch_block(inode, image.block_count(inode));
  // Reading at or past the end must return nothing rather than fail.
  uint8_t byte;
  if (image.read_file(inode, inode.size, &byte, 1) != 0) __builtin_trap();
}

void visit(Image& image, const std::string& path, const Inode& inode) {
  struct stat st;
  sqar::reader::fill_stat(image, inode, &st);
  try {
    (void)image.xattrs(inode);
  } catch (const sqar::Error&) {
  }
  try {
    if (inode.is_symlink()) (void)image.read_symlink(inode);
    if (inode.is_regular()) read_file(image, inode);
    if (inode.is_dir()) {
      // Lookups go through the directory index of large directories; try a hit and a miss.
      auto entries = image.read_dir(inode);
      if (!entries.empty()) (void)image.lookup(inode, entries[entries.size() / 2].name);
      (void)image.lookup(inode, "zz-not-there");
    }
  } catch (const sqar::Error&) {
  }
  if (!path.empty()) (void)image.resolve_path(path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sqar::fuzz::MemImage mem;
  const std::string& path = mem.store(data, size);
  std::unique_ptr<Image> image;
  try {
    image = Image::open(path, sqar::fuzz::fuzz_options());
  } catch (const sqar::Error&) {
    return 0;
  }
  size_t seen = 0;
  try {
    image->walk([&](const std::string& p, const Inode& inode) {
      if (++seen > kMaxEntries) return false;
      try {
        visit(*image, p, inode);
      } catch (const sqar::Error&) {
        // resolve_path may fail on a damaged parent: keep walking the rest.
      }
      return true;
    });
  } catch (const sqar::Error&) {
  }
  try {
    if (image->has_export_table()) {
      const uint32_t count = std::min<uint32_t>(image->super().inode_count, kMaxEntries);
      for (uint32_t n = 1; n <= count; ++n) {
        auto ref = image->inode_ref_by_number(n);
        if (ref) (void)image->read_inode(*ref, false);
      }
    }
  } catch (const sqar::Error&) {
  }
  try {
    (void)image->manifest();
  } catch (const sqar::Error&) {
  }
  try {
    for (uint32_t i = 0; i < image->super().id_count; ++i) (void)image->id_at(uint16_t(i));
  } catch (const sqar::Error&) {
  }
  return 0;
}
