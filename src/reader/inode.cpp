// Decoding inodes (all 14 on-disk types) from the inode table.
#include <sys/stat.h>

#include "common/error.h"
#include "reader/block_index.h"
#include "reader/meta_reader.h"

namespace sqar::reader {

namespace {
// Sanity limits: larger values only come from damaged images and would make us allocate
// or loop without bound.
using fmt::kMaxFileBlocks;

// A file's data blocks: the full ones, and a partial last one unless the tail is in a fragment.
// Not (size + block_size - 1) / block_size: for a size a crafted inode puts near 2^64 that
// wraps to 0 blocks, and the file passed every bound with a size no read can reach the end of.
uint64_t data_block_count(uint64_t size, uint64_t block_size, bool has_fragment) {
  return size / block_size + (!has_fragment && size % block_size != 0);
}
// The kernel refuses a symlink longer than a page (PAGE_SIZE, 4096 on x86); Linux cannot make
// one longer than PATH_MAX - 1 anyway.
constexpr uint32_t kMaxSymlinkTarget = 4096;

struct TypeInfo {
  FileKind kind;
  mode_t ifmt;
};
TypeInfo type_info(uint16_t basic) {
  switch (basic) {
    case fmt::kDir: return {FileKind::directory, S_IFDIR};
    case fmt::kFile: return {FileKind::regular, S_IFREG};
    case fmt::kSymlink: return {FileKind::symlink, S_IFLNK};
    case fmt::kBlockDev: return {FileKind::block_device, S_IFBLK};
    case fmt::kCharDev: return {FileKind::char_device, S_IFCHR};
    case fmt::kFifo: return {FileKind::fifo, S_IFIFO};
    default: return {FileKind::socket, S_IFSOCK};
  }
}
}  // namespace

Inode ImageImpl::read_inode(InodeRef ref, bool want_blocks) {
  const uint64_t block = ref >> 16;
  const uint32_t off = uint32_t(ref & 0xffff);
  if (off >= fmt::kMetadataBlockSize || block >= sb_.bytes_used - sb_.inode_table_start)
    fail("inode reference " + hex(ref) + " points outside the inode table");
  MetaReader r(*this, sb_.inode_table_start + block, off, "inode");

  uint8_t h[16];
  r.read(h, sizeof h);
  Inode ino;
  ino.ref = ref;
  ino.type = load_le16(h);
  if (ino.type < fmt::kDir || ino.type > fmt::kExtSocket) r.fail("unknown inode type " + std::to_string(ino.type));
  const uint16_t basic = ino.type > fmt::kSocket ? uint16_t(ino.type - 7) : ino.type;
  const TypeInfo ti = type_info(basic);
  ino.kind = ti.kind;
  ino.mode = ti.ifmt | (load_le16(h + 2) & 07777);
  ino.uid = id_at(load_le16(h + 4));
  ino.gid = id_at(load_le16(h + 6));
  ino.mtime = load_le32(h + 8);
  ino.inode_number = load_le32(h + 12);
  if (ino.inode_number == 0 || ino.inode_number > sb_.inode_count)
    r.fail("inode number " + std::to_string(ino.inode_number) + " is outside 1.." + std::to_string(sb_.inode_count));

  switch (ino.type) {
    case fmt::kDir: {
      uint8_t b[16];
      r.read(b, sizeof b);
      ino.dir_block_start = load_le32(b);
      ino.nlink = load_le32(b + 4);
      ino.dir_file_size = load_le16(b + 8);
      ino.dir_offset = load_le16(b + 10);
      ino.parent_inode = load_le32(b + 12);
      break;
    }
    case fmt::kExtDir: {
      uint8_t b[24];
      r.read(b, sizeof b);
      ino.nlink = load_le32(b);
      ino.dir_file_size = load_le32(b + 4);
      ino.dir_block_start = load_le32(b + 8);
      ino.parent_inode = load_le32(b + 12);
      ino.dir_index_count = load_le16(b + 16);
      ino.dir_offset = load_le16(b + 18);
      ino.xattr_index = load_le32(b + 20);
      // Each index entry points at a directory header of the listing (libsquashfs indexes
      // every header, mksquashfs the first header in each metadata block), and a header takes
      // at least 21 bytes: 12 of its own and one entry of 8 plus a name. More entries than
      // that means a damaged count, which every lookup would scan.
      if (ino.dir_index_count > ino.dir_file_size / 21 + 1)
        r.fail("directory index of " + std::to_string(ino.dir_index_count) + " entries for a listing of " +
               std::to_string(ino.dir_file_size) + " bytes");
      if (ino.dir_index_count) {
        uint64_t pos = r.block_pos();
        ino.dir_index_ref = ((pos - sb_.inode_table_start) << 16) | r.offset();
      }
      break;
    }
    case fmt::kFile:
    case fmt::kExtFile: {
      uint64_t size;
      if (ino.type == fmt::kFile) {
        uint8_t b[16];
        r.read(b, sizeof b);
        ino.blocks_start = load_le32(b);
        ino.fragment_index = load_le32(b + 4);
        ino.fragment_offset = load_le32(b + 8);
        size = load_le32(b + 12);
      } else {
        uint8_t b[40];
        r.read(b, sizeof b);
        ino.blocks_start = load_le64(b);
        size = load_le64(b + 8);
        ino.sparse_bytes = load_le64(b + 16);
        ino.nlink = load_le32(b + 24);
        ino.fragment_index = load_le32(b + 28);
        ino.fragment_offset = load_le32(b + 32);
        ino.xattr_index = load_le32(b + 36);
      }
      ino.size = size;
      const bool has_fragment = ino.fragment_index != fmt::kNoFragment;
      if (has_fragment) {
        if (ino.fragment_index >= sb_.fragment_count)
          r.fail("fragment index " + std::to_string(ino.fragment_index) + " is outside the fragment table");
        if (ino.fragment_offset >= sb_.block_size) r.fail("fragment offset is larger than the block size");
      }
      const uint64_t nblocks = data_block_count(size, sb_.block_size, has_fragment);
      if (nblocks > kMaxFileBlocks) r.fail("file of " + std::to_string(size) + " bytes is implausibly large");
      if (ino.blocks_start > sb_.bytes_used) r.fail("data blocks start outside the image");
      if (nblocks > 0) {  // (normalising the position may read the next metadata block)
        ino.block_list_pos = r.block_pos();
        ino.block_list_offset = r.offset();
      }
      if (want_blocks && nblocks > Inode::kLoadedBlockList) {
        ino.block_index = std::make_shared<BlockIndex>(
            BlockIndex::Checkpoint{ino.block_list_pos, ino.block_list_offset, ino.blocks_start});
        ino.blocks_loaded = true;
      } else if (want_blocks || nblocks == 0) {
        ino.block_sizes.reserve(size_t(nblocks));
        stream_block_words(r, 0, ino.blocks_start, nblocks,
                           [&](const uint32_t* words, const uint64_t* offsets, size_t n) {
                             ino.block_sizes.insert(ino.block_sizes.end(), words, words + n);
                             ino.block_offsets.insert(ino.block_offsets.end(), offsets, offsets + n);
                           });
        ino.blocks_loaded = true;
      }
      break;
    }
    case fmt::kSymlink:
    case fmt::kExtSymlink: {
      ino.nlink = r.u32();
      uint32_t len = r.u32();
      if (len > kMaxSymlinkTarget) r.fail("symlink target of " + std::to_string(len) + " bytes is too long");
      // No system can make one (symlink("") is ENOENT) and unsquashfs refuses it: damage, not
      // an entry to copy into a merged image.
      if (len == 0) r.fail("symlink with an empty target");
      ino.symlink_target.resize(len);
      r.read(ino.symlink_target.data(), len);
      if (ino.symlink_target.find('\0') != std::string::npos) r.fail("symlink target contains a NUL byte");
      ino.size = len;
      if (ino.type == fmt::kExtSymlink) ino.xattr_index = r.u32();
      break;
    }
    case fmt::kBlockDev:
    case fmt::kCharDev:
    case fmt::kExtBlockDev:
    case fmt::kExtCharDev: {
      ino.nlink = r.u32();
      ino.rdev = r.u32();
      ino.rdev_major = fmt::dev_major(ino.rdev);
      ino.rdev_minor = fmt::dev_minor(ino.rdev);
      if (ino.type > fmt::kSocket) ino.xattr_index = r.u32();
      break;
    }
    default: {  // fifo, socket
      ino.nlink = r.u32();
      if (ino.type > fmt::kSocket) ino.xattr_index = r.u32();
      break;
    }
  }
  if (ino.kind == FileKind::directory) ino.size = ino.dir_file_size;
  return ino;
}

void ImageImpl::stream_block_words(MetaReader& r, uint64_t first, uint64_t data_pos, uint64_t nblocks,
                                   const BlockSlice& fn) {
  constexpr size_t kSlice = 4096;
  uint8_t raw[kSlice * 4];
  uint32_t words[kSlice];
  uint64_t offsets[kSlice];
  uint64_t pos = data_pos;
  for (uint64_t done = 0; done < nblocks;) {
    const size_t n = size_t(std::min<uint64_t>(kSlice, nblocks - done));
    r.read(raw, n * 4);
    for (size_t j = 0; j < n; ++j) {
      const uint32_t w = load_le32(raw + j * 4);
      const uint32_t stored = w & ~fmt::kDataUncompressed;
      // The kernel reads such a block with EIO and unsquashfs as a block of no bytes, which
      // shifts the rest of the file: there is no content all readers agree on.
      if (w == fmt::kDataUncompressed)
        r.fail("block " + std::to_string(first + done + j) + " is flagged stored uncompressed but has no bytes");
      if (stored > sb_.block_size)
        r.fail("block " + std::to_string(first + done + j) + " has size " + std::to_string(stored) + " > block size");
      words[j] = w;
      offsets[j] = pos;
      pos += stored;
      if (pos > sb_.bytes_used) r.fail("block size list runs past the end of the image");
    }
    fn(words, offsets, n);
    done += n;
  }
}

void ImageImpl::for_each_block_slice(const Inode& file, const BlockSlice& fn) {
  if (!file.is_regular()) return;
  if (file.blocks_loaded && !file.block_index)
    return fn(file.block_sizes.data(), file.block_offsets.data(), file.block_sizes.size());
  MetaReader r(*this, file.block_list_pos, file.block_list_offset, "block list");
  stream_block_words(r, 0, file.blocks_start, block_count(file), fn);
}

Image::StoredBlock ImageImpl::block_location(const Inode& file, uint64_t index) {
  if (index >= block_count(file))
    fail("file inode " + std::to_string(file.inode_number) + " has no data block " + std::to_string(index));
  if (!file.blocks_loaded) fail("file inode " + std::to_string(file.inode_number) + " was read without its blocks");
  if (!file.block_index) return {file.block_offsets[index], file.block_sizes[index]};
  BlockIndex& bi = *file.block_index;
  std::lock_guard lock(bi.mu);
  const uint64_t w = index / BlockIndex::kWindow;
  if (bi.window != w) load_window(file, bi, w);
  const size_t at = size_t(index % BlockIndex::kWindow);
  return {bi.starts[at], bi.words[at]};
}

void ImageImpl::load_window(const Inode& file, BlockIndex& bi, uint64_t w) {
  const uint64_t nblocks = block_count(file);
  // Checkpoints are added in order as windows are first decoded, so reaching window w decodes
  // every word before it once: the memory they take follows work actually done.
  for (uint64_t at = std::min<uint64_t>(w, bi.checkpoints.size() - 1);; ++at) {
    const BlockIndex::Checkpoint cp = bi.checkpoints[at];
    const uint64_t first = at * BlockIndex::kWindow;
    const uint64_t n = std::min(BlockIndex::kWindow, nblocks - first);
    MetaReader r(*this, cp.meta_pos, cp.meta_offset, "block list");
    bi.window = UINT64_MAX;  // until the words are in (a damaged list throws half-way)
    bi.words.clear();
    bi.starts.clear();
    uint64_t end = cp.data_pos;
    stream_block_words(r, first, cp.data_pos, n, [&](const uint32_t* words, const uint64_t* starts, size_t k) {
      bi.words.insert(bi.words.end(), words, words + k);
      bi.starts.insert(bi.starts.end(), starts, starts + k);
      end = starts[k - 1] + (words[k - 1] & ~fmt::kDataUncompressed);
    });
    bi.window = at;
    if (at + 1 == bi.checkpoints.size() && first + n < nblocks)
      bi.checkpoints.push_back({r.block_pos(), r.offset(), end});
    if (at == w) return;
  }
}

uint64_t ImageImpl::block_count(const Inode& file) const {
  if (!file.is_regular()) return 0;
  return data_block_count(file.size, sb_.block_size, file.fragment_index != fmt::kNoFragment);
}

uint64_t ImageImpl::inode_table_bytes() {
  inode_table_once_([&] {
    // Not through the metadata cache: a walk would not ask for most of these blocks again,
    // and they would push out those it does.
    uint8_t block[fmt::kMetadataBlockSize];
    uint64_t total = 0;
    for (uint64_t pos = sb_.inode_table_start, next; pos < sb_.directory_table_start; pos = next)
      total += decode_meta_block(pos, block, next);
    inode_table_bytes_ = total;
  });
  return inode_table_bytes_;
}

const Inode& ImageImpl::with_blocks(const Inode& file, Inode& storage) {
  if (file.blocks_loaded) return file;
  storage = read_inode(file.ref, true);
  return storage;
}

std::string ImageImpl::read_symlink(const Inode& link) {
  if (!link.is_symlink()) fail("inode " + std::to_string(link.inode_number) + " is not a symlink");
  return link.symlink_target;
}

}  // namespace sqar::reader
