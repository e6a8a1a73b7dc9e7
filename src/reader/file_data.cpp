// Regular file content: data blocks, sparse blocks, tail fragments, read-ahead.
#include <cstring>

#include "common/error.h"
#include "format/squashfs.h"
#include "reader/image_impl.h"

namespace sqar::reader {

namespace {
// Sparse blocks are served from one shared page of zeros (no allocation, no copy).
const uint8_t* zero_block() {
  static const auto* zeros = new uint8_t[fmt::kMaxBlockSize]();
  return zeros;
}
}  // namespace

Chunk ImageImpl::read_chunk(const Inode& in, uint64_t offset, size_t max_len) {
  if (!in.is_regular()) fail("inode " + std::to_string(in.inode_number) + " is not a regular file");
  if (offset >= in.size || max_len == 0) return {};
  Inode storage;
  const Inode& file = with_blocks(in, storage);
  const uint64_t bs = sb_.block_size;
  const uint64_t index = offset / bs;
  const size_t within = size_t(offset % bs);
  const uint64_t nblocks = block_count(file);
  // Bytes of the file that live in this block (the last one may be short).
  const size_t expected = size_t(std::min<uint64_t>(bs, file.size - index * bs));
  const size_t len = std::min(expected - within, max_len);
  auto where = [&] { return "file inode " + std::to_string(file.inode_number) + ", block " + std::to_string(index); };

  if (index < nblocks) {
    const StoredBlock at = block_location(file, index);
    if (fmt::is_hole_word(at.size_word)) return {nullptr, zero_block() + within, len};
    cache::BlockPtr b;
    try {
      b = data_block(at.position, at.size_word, "data block");
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (" + where() + ")");
    }
    if (b->size < expected)
      fail(where() + ": block holds " + std::to_string(b->size) + " bytes, expected " + std::to_string(expected));
    return {b, b->data() + within, len};
  }
  if (file.fragment_index == fmt::kNoFragment || index != nblocks)
    fail(where() + ": no data block or fragment covers offset " + std::to_string(offset));
  Fragment frag = fragment_entry(file.fragment_index);
  cache::BlockPtr b;
  try {
    b = data_block(frag.start, frag.size_word, "fragment block");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (" + where() + ", fragment " + std::to_string(file.fragment_index) + ")");
  }
  if (uint64_t(file.fragment_offset) + expected > b->size)
    fail(where() + ": tail end lies outside fragment block " + std::to_string(file.fragment_index));
  return {b, b->data() + file.fragment_offset + within, len};
}

size_t ImageImpl::read_block(const Inode& in, uint64_t index, uint8_t* out) {
  if (!in.is_regular()) fail("inode " + std::to_string(in.inode_number) + " is not a regular file");
  const uint64_t bs = sb_.block_size;
  if (index >= (in.size + bs - 1) / bs) return 0;
  Inode storage;
  const Inode& file = with_blocks(in, storage);
  const size_t expected = size_t(std::min<uint64_t>(bs, file.size - index * bs));
  if (index >= block_count(file)) {  // the tail fragment: shared by many files, cached
    Chunk c = read_chunk(file, index * bs, expected);
    std::memcpy(out, c.data, c.len);
    return c.len;
  }
  const auto [pos, word] = block_location(file, index);
  if (fmt::is_hole_word(word)) {
    std::memset(out, 0, expected);
    return expected;
  }
  size_t got;
  if (cache::BlockPtr b = data_cache_.find(pos); b && b->tag == word) {
    got = std::min(b->size, expected);
    std::memcpy(out, b->data(), got);
  } else {
    try {
      got = decode_data_block(pos, word, out, "data block");
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (file inode " + std::to_string(file.inode_number) + ", block " +
                  std::to_string(index) + ")");
    }
  }
  if (got < expected)
    fail("file inode " + std::to_string(file.inode_number) + ", block " + std::to_string(index) + ": block holds " +
         std::to_string(got) + " bytes, expected " + std::to_string(expected));
  return expected;
}

size_t ImageImpl::read_file(const Inode& in, uint64_t offset, void* buf, size_t len) {
  if (!in.is_regular()) fail("inode " + std::to_string(in.inode_number) + " is not a regular file");
  Inode storage;
  const Inode& file = with_blocks(in, storage);
  uint8_t* out = static_cast<uint8_t*>(buf);
  size_t done = 0;
  while (done < len && offset < file.size) {
    Chunk c = read_chunk(file, offset, len - done);
    if (c.len == 0) break;
    std::memcpy(out + done, c.data, c.len);
    done += c.len;
    offset += c.len;
  }
  return done;
}

Chunk ImageImpl::read_fragment(uint32_t index) {
  Fragment frag = fragment_entry(index);
  cache::BlockPtr b;
  try {
    b = data_block(frag.start, frag.size_word, "fragment block");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (fragment " + std::to_string(index) + ")");
  }
  return {b, b->data(), b->size};
}

void ImageImpl::prefetch_block(const Inode& file, uint64_t index) {
  try {
    if (!file.is_regular() || !file.blocks_loaded || index >= block_count(file)) return;
    const StoredBlock at = block_location(file, index);
    if (fmt::is_hole_word(at.size_word)) return;
    data_block(at.position, at.size_word, "data block");
  } catch (...) {
    // The real read reports the error to whoever asks for this block.
  }
}

bool ImageImpl::would_load_first_block(const Inode& file) {
  try {
    if (!file.is_regular() || file.size == 0) return false;
    if (file.blocks_loaded && block_count(file) > 0) {
      const StoredBlock at = block_location(file, 0);
      if (fmt::is_hole_word(at.size_word)) return false;  // sparse
      return !data_cache_.contains(at.position);
    }
    if (file.fragment_index == fmt::kNoFragment) return false;
    return !data_cache_.contains(fragment_entry(file.fragment_index).start);
  } catch (...) {
    return false;  // a damaged fragment table: the read reports it
  }
}

void ImageImpl::prefetch_first_block(const Inode& file) {
  try {
    if (!file.is_regular() || file.size == 0) return;
    if (file.blocks_loaded && block_count(file) > 0) return prefetch_block(file, 0);
    if (file.fragment_index != fmt::kNoFragment) read_fragment(file.fragment_index);
  } catch (...) {
    // The real read reports the error to whoever asks for this block.
  }
}

void ImageImpl::release_block(const Inode& file, uint64_t index) {
  try {
    if (!file.is_regular() || !file.blocks_loaded || index >= block_count(file)) return;
    data_cache_.erase(block_location(file, index).position);
  } catch (...) {
    // A damaged list: nothing of it was cached.
  }
}

}  // namespace sqar::reader
