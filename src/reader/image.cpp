// Opening an image, block I/O (pread + per-thread codecs + shared caches), lookup tables.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"
#include "reader/image_impl.h"

namespace sqar::reader {

namespace {
std::atomic<uint64_t> g_next_serial{1};
}  // namespace

std::string hex(uint64_t v) {
  char buf[24];
  snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::unique_ptr<Image> Image::open(const std::string& path, const ImageOptions& options) {
  return std::make_unique<ImageImpl>(path, options);
}

ImageImpl::ImageImpl(std::string path, const ImageOptions& options)
    : path_(std::move(path)),
      offset_(options.offset),
      serial_(g_next_serial.fetch_add(1)),
      before_block_load_(options.before_block_load),
      before_metadata_load_(options.before_metadata_load),
      kernel_limits_(options.kernel_limits),
      data_cache_(options.cache_bytes),
      meta_cache_(options.metadata_cache_bytes) {
  // Owned from here: a throw below closes it (the destructor does not run for a constructor
  // that throws; members' destructors do).
  fd_.reset(options.fd >= 0 ? fcntl(options.fd, F_DUPFD_CLOEXEC, 0)
                            : ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd_) throw_errno(path_, errno);
  const int fd = fd_.get();
  // O_NONBLOCK only so that opening a named pipe without a writer does not hang; reads block.
  if (options.fd < 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  struct stat st;
  if (fstat(fd, &st) != 0) throw_errno(path_, errno);
  if (S_ISDIR(st.st_mode)) throw Error(path_ + ": is a directory, not a SquashFS image");
  // A pipe's size reads as 0 ("too small"), which hides the real cause: it cannot seek.
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
    throw Error(path_ + ": is a pipe, which cannot seek: a SquashFS image must be read from a file or block device");
  file_size_ = uint64_t(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    off_t end = lseek(fd, 0, SEEK_END);
    if (end > 0) file_size_ = uint64_t(end);
  }
  load_superblock();
  load_ids();
  // The settings trailer gives the level the options block cannot (xz, lz4, gzip 10-12): what
  // append and --reuse take as the image's. A damaged trailer leaves the options block's
  // level, and the accessors report the damage to whoever asks (verify).
  locate_trailers();
  if (trailers_.settings) codec_cfg_.level = trailers_.settings->level;
}

ImageImpl::~ImageImpl() = default;

void ImageImpl::fail(const std::string& what) const { throw Error(path_ + ": " + what); }

void ImageImpl::read_exact(uint64_t pos, void* dst, size_t len, const char* what) const {
  if (pos > sb_.bytes_used || len > sb_.bytes_used - pos)
    fail(std::string(what) + " at " + hex(pos) + " runs past the end of the image");
  uint8_t* out = static_cast<uint8_t*>(dst);
  uint64_t at = offset_ + pos;
  while (len > 0) {
    ssize_t n = ::pread(fd_.get(), out, len, off_t(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(std::string("reading ") + what + " at " + hex(pos) + ": " + strerror(errno));
    }
    if (n == 0) fail(std::string(what) + " at " + hex(pos) + ": unexpected end of file");
    out += n;
    at += uint64_t(n);
    len -= size_t(n);
  }
}

namespace {
// A power of two from 4K to 1M, and the log the superblock gives beside it agrees.
bool block_size_is_valid(uint32_t size, uint16_t log) {
  return size >= fmt::kMinBlockSize && size <= fmt::kMaxBlockSize && (size & (size - 1)) == 0 && log <= 20 &&
         (1u << log) == size;
}
}  // namespace

// An image inside a larger file (after a boot sector, a script or a partition table) has its
// superblock at a sector boundary further in: the first MiB is searched for one whose fields
// look sound, so the error can name the offset to give.
std::string ImageImpl::embedded_image_hint() const {
  constexpr uint64_t kSearched = 1 << 20, kStep = 512;
  if (offset_ != 0 || file_size_ < 2 * kStep) return "";
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(file_size_, kSearched)));
  size_t got = 0;
  while (got < head.size()) {
    const ssize_t n = ::pread(fd_.get(), head.data() + got, head.size() - got, off_t(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  for (size_t at = kStep; at + fmt::kSuperblockSize <= got; at += kStep) {
    const uint8_t* b = head.data() + at;
    const bool sound = load_le32(b) == fmt::kMagic && load_le16(b + 28) == fmt::kVersionMajor &&
                       load_le16(b + 30) == fmt::kVersionMinor &&
                       block_size_is_valid(load_le32(b + 12), load_le16(b + 22));
    if (sound) return "; a SquashFS superblock starts " + std::to_string(at) + " bytes in: give that offset";
  }
  return "";
}

void ImageImpl::load_superblock() {
  uint8_t b[fmt::kSuperblockSize];
  if (offset_ > file_size_ || file_size_ - offset_ < fmt::kSuperblockSize)
    fail("too small to be a SquashFS image (no superblock at offset " + std::to_string(offset_) + ")");
  sb_.bytes_used = fmt::kSuperblockSize;  // lets read_exact read the superblock itself
  read_exact(0, b, sizeof b, "superblock");
  if (load_le32(b) != fmt::kMagic) {
    if (std::memcmp(b, "sqsh", 4) == 0) fail("big-endian SquashFS images are not supported");
    fail("not a SquashFS image (bad magic" + std::string(offset_ ? " at offset " + std::to_string(offset_) : "") + ")" +
         embedded_image_hint());
  }
  Superblock s;
  s.inode_count = load_le32(b + 4);
  s.mod_time = load_le32(b + 8);
  s.block_size = load_le32(b + 12);
  s.fragment_count = load_le32(b + 16);
  uint16_t comp = load_le16(b + 20);
  s.block_log = load_le16(b + 22);
  s.flags = load_le16(b + 24);
  s.id_count = load_le16(b + 26);
  s.version_major = load_le16(b + 28);
  s.version_minor = load_le16(b + 30);
  s.root_inode_ref = load_le64(b + 32);
  s.bytes_used = load_le64(b + 40);
  s.id_table_start = load_le64(b + 48);
  s.xattr_table_start = load_le64(b + 56);
  s.inode_table_start = load_le64(b + 64);
  s.directory_table_start = load_le64(b + 72);
  s.fragment_table_start = load_le64(b + 80);
  s.export_table_start = load_le64(b + 88);

  if (s.version_major != fmt::kVersionMajor || s.version_minor != fmt::kVersionMinor)
    fail("unsupported SquashFS version " + std::to_string(s.version_major) + "." + std::to_string(s.version_minor) +
         " (only 4.0 is supported)");
  if (!block_size_is_valid(s.block_size, s.block_log))
    fail("invalid block size " + std::to_string(s.block_size) + " / log " + std::to_string(s.block_log));
  if (comp < 1 || comp > 6) fail("unknown compressor id " + std::to_string(comp));
  s.compressor = CodecId(comp);
  if (s.bytes_used < fmt::kSuperblockSize || s.bytes_used > file_size_ - offset_)
    fail("superblock says the image is " + std::to_string(s.bytes_used) + " bytes but the file holds only " +
         std::to_string(file_size_ - offset_) + " after the offset (truncated image?)");
  if (s.inode_count == 0) fail("superblock has an inode count of 0");
  auto check_table = [&](uint64_t start, const char* name, bool optional) {
    if (optional && start == fmt::kTableAbsent) return;
    if (start < fmt::kSuperblockSize || start >= s.bytes_used)
      fail(std::string(name) + " start " + hex(start) + " lies outside the image");
  };
  check_table(s.inode_table_start, "inode table", false);
  check_table(s.directory_table_start, "directory table", false);
  check_table(s.id_table_start, "id table", false);
  check_table(s.fragment_table_start, "fragment table", true);
  check_table(s.export_table_start, "export table", true);
  check_table(s.xattr_table_start, "xattr table", true);
  if (s.fragment_count > 0 && s.fragment_table_start == fmt::kTableAbsent)
    fail("superblock lists fragments but has no fragment table");
  // Each fragment block takes at least a byte of the data region (before the inode table), so
  // a larger count is a lie: bounded here, every table sized by it (append's, merge's and
  // --reuse's lists of fragment blocks) stays proportional to the image; unbounded, an 8 KB
  // image claiming 2^30 fragments costs --reuse 8 GB.
  if (s.fragment_count > s.inode_table_start - fmt::kSuperblockSize)
    fail("the fragment table lists " + std::to_string(s.fragment_count) + " fragment blocks in a data region of " +
         std::to_string(s.inode_table_start - fmt::kSuperblockSize) + " bytes");
  if ((s.root_inode_ref & 0xffff) >= fmt::kMetadataBlockSize)
    fail("root inode reference " + hex(s.root_inode_ref) + " is invalid");
  sb_ = s;

  codec_cfg_ = CodecConfig{};
  codec_cfg_.id = s.compressor;
  codec_cfg_.block_size = s.block_size;
  codec_cfg_.level = default_level(s.compressor);
  if (s.flags & fmt::kFlagCompressorOptions) {
    cache::BlockPtr opts = meta_block(fmt::kSuperblockSize);
    try {
      decode_codec_options(codec_cfg_, opts->data(), opts->size);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
}

void ImageImpl::load_ids() {
  if (sb_.id_count == 0) return;  // id_at() reports the problem if an inode needs an id
  std::vector<uint64_t> ptrs = load_pointer_array(sb_.id_table_start, sb_.id_count, 4, "id table");
  ids_.resize(sb_.id_count);
  for (uint32_t i = 0; i < sb_.id_count; ++i) {
    uint8_t b[4];
    read_table_entry(ptrs, i, 4, b, "id table");
    ids_[i] = load_le32(b);
  }
}

uint32_t ImageImpl::id_at(uint16_t index) {
  if (index >= ids_.size())
    fail("id index " + std::to_string(index) + " is outside the id table (" + std::to_string(ids_.size()) + " ids)");
  return ids_[index];
}

Codec& ImageImpl::codec() {
  // Codecs keep per-call state and are not thread-safe: each thread keeps its own for the
  // few images it reads (the serial is never reused, so a stale slot can never match).
  struct Slot {
    uint64_t serial = 0;
    std::unique_ptr<Codec> codec;
  };
  thread_local std::array<Slot, 4> slots;
  thread_local unsigned next_victim = 0;
  for (auto& s : slots)
    if (s.serial == serial_) return *s.codec;
  Slot& s = slots[next_victim++ % slots.size()];
  s.codec = make_codec(codec_cfg_);
  s.serial = serial_;
  return *s.codec;
}

void ImageImpl::check_kernel_limits(const uint8_t* src, size_t len, uint64_t pos, const char* what) const {
  if (!kernel_limits_) return;
  const std::string why = block_kernel_refusal(codec_cfg_, src, len);
  if (!why.empty()) fail(std::string(what) + " at " + hex(pos) + " " + why);
}

size_t ImageImpl::decode_meta_block(uint64_t pos, uint8_t* out, uint64_t& next) {
  // One pread for header + payload: metadata blocks are at most 8 KiB + 2.
  uint8_t raw[fmt::kMetadataBlockSize + 2];
  if (pos >= sb_.bytes_used || sb_.bytes_used - pos < 3)
    fail("metadata block at " + hex(pos) + " lies outside the image");
  size_t avail = size_t(std::min<uint64_t>(sizeof raw, sb_.bytes_used - pos));
  read_exact(pos, raw, 2, "metadata block header");
  uint16_t header = load_le16(raw);
  size_t stored = header & 0x7fff;
  bool compressed = !(header & fmt::kMetadataUncompressed);
  if (stored == 0 || stored > fmt::kMetadataBlockSize)
    fail("metadata block at " + hex(pos) + " has invalid size " + std::to_string(stored));
  if (stored + 2 > avail) fail("metadata block at " + hex(pos) + " runs past the end of the image");
  read_exact(pos + 2, raw + 2, stored, "metadata block");
  next = pos + 2 + stored;
  if (!compressed) {
    std::memcpy(out, raw + 2, stored);
    return stored;
  }
  check_kernel_limits(raw + 2, stored, pos, "metadata block");
  auto n = codec().decompress(raw + 2, stored, out, fmt::kMetadataBlockSize);
  if (!n || *n == 0) fail("metadata block at " + hex(pos) + " does not decompress (corrupt)");
  return *n;
}

cache::BlockPtr ImageImpl::meta_block(uint64_t pos) {
  return meta_cache_.get_or_load(pos, [&]() -> cache::BlockPtr {
    if (before_metadata_load_) before_metadata_load_();
    auto block = std::make_shared<cache::Block>();
    block->bytes = std::make_unique_for_overwrite<uint8_t[]>(fmt::kMetadataBlockSize);
    block->size = decode_meta_block(pos, block->bytes.get(), block->next);
    return block;
  });
}

size_t ImageImpl::decode_data_block(uint64_t pos, uint32_t size_word, uint8_t* out, const char* what) {
  const uint32_t stored = size_word & ~fmt::kDataUncompressed;
  const bool compressed = !(size_word & fmt::kDataUncompressed);
  if (stored == 0 || stored > sb_.block_size)
    fail(std::string(what) + " at " + hex(pos) + " has invalid size " + std::to_string(stored));
  if (pos >= sb_.bytes_used || stored > sb_.bytes_used - pos)
    fail(std::string(what) + " at " + hex(pos) + " runs past the end of the image");
  if (!compressed) {
    read_exact(pos, out, stored, what);
    return stored;
  }
  // Not zero-filled: only the pages a compressed block reaches are ever touched.
  thread_local auto scratch = std::make_unique_for_overwrite<uint8_t[]>(fmt::kMaxBlockSize);
  read_exact(pos, scratch.get(), stored, what);
  check_kernel_limits(scratch.get(), stored, pos, what);
  auto n = codec().decompress(scratch.get(), stored, out, sb_.block_size);
  if (!n) fail(std::string(what) + " at " + hex(pos) + " does not decompress (corrupt)");
  return *n;
}

cache::BlockPtr ImageImpl::data_block(uint64_t pos, uint32_t size_word, const char* what) {
  auto load = [&]() -> cache::BlockPtr {
    if (before_block_load_) before_block_load_();
    auto block = std::make_shared<cache::Block>();
    block->tag = size_word;
    block->bytes = cache::pooled_buffer(sb_.block_size);
    block->size = decode_data_block(pos, size_word, block->bytes.get(), what);
    return block;
  };
  cache::BlockPtr b = data_cache_.get_or_load(pos, load);
  // A damaged image may point two size words at one position; never serve the wrong one.
  if (b->tag != size_word) return load();
  return b;
}

std::vector<uint64_t> ImageImpl::load_pointer_array(uint64_t start, uint64_t count, size_t entry_size,
                                                    const char* what) {
  uint64_t blocks = (count * entry_size + fmt::kMetadataBlockSize - 1) / fmt::kMetadataBlockSize;
  if (start == fmt::kTableAbsent || start >= sb_.bytes_used || blocks > (sb_.bytes_used - start) / 8)
    fail(std::string(what) + " lookup table at " + hex(start) + " runs past the end of the image");
  std::vector<uint8_t> raw(size_t(blocks * 8));
  read_exact(start, raw.data(), raw.size(), what);
  std::vector<uint64_t> ptrs(static_cast<size_t>(blocks));
  for (size_t i = 0; i < ptrs.size(); ++i) {
    ptrs[i] = load_le64(&raw[i * 8]);
    if (ptrs[i] >= sb_.bytes_used)
      fail(std::string(what) + " block pointer " + hex(ptrs[i]) + " lies outside the image");
  }
  return ptrs;
}

void ImageImpl::read_table_entry(const std::vector<uint64_t>& ptrs, uint64_t index, size_t entry_size, void* dst,
                                 const char* what) {
  uint64_t byte = index * entry_size;
  uint64_t blk = byte / fmt::kMetadataBlockSize;
  size_t off = size_t(byte % fmt::kMetadataBlockSize);
  if (blk >= ptrs.size()) fail(std::string(what) + " entry " + std::to_string(index) + " is outside the table");
  cache::BlockPtr b = meta_block(ptrs[blk]);
  // Table entries never straddle metadata blocks (entry sizes divide 8192).
  if (off + entry_size > b->size)
    fail(std::string(what) + " entry " + std::to_string(index) + " lies past the end of its metadata block");
  std::memcpy(dst, b->data() + off, entry_size);
}

ImageImpl::Fragment ImageImpl::fragment_entry(uint32_t index) {
  if (index >= sb_.fragment_count)
    fail("fragment index " + std::to_string(index) + " is outside the fragment table (" +
         std::to_string(sb_.fragment_count) + " fragments)");
  fragment_once_(
      [&] { fragment_ptrs_ = load_pointer_array(sb_.fragment_table_start, sb_.fragment_count, 16, "fragment table"); });
  uint8_t e[16];
  read_table_entry(fragment_ptrs_, index, 16, e, "fragment table");
  return {load_le64(e), load_le32(e + 8)};
}

std::optional<InodeRef> ImageImpl::inode_ref_by_number(uint32_t n) {
  if (!has_export_table()) return std::nullopt;
  if (n == 0 || n > sb_.inode_count) return std::nullopt;
  export_once_([&] { export_ptrs_ = load_pointer_array(sb_.export_table_start, sb_.inode_count, 8, "export table"); });
  uint8_t e[8];
  read_table_entry(export_ptrs_, n - 1, 8, e, "export table");
  return load_le64(e);
}

CacheStats ImageImpl::cache_stats() const {
  auto d = const_cast<cache::BlockCache&>(data_cache_).counters();
  auto m = const_cast<cache::BlockCache&>(meta_cache_).counters();
  return {d.hits, d.misses, d.bytes, m.hits, m.misses, m.bytes};
}

void fill_stat(Image& image, const Inode& inode, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = inode.inode_number;
  st->st_mode = inode.mode;
  st->st_nlink = inode.nlink;
  st->st_uid = inode.uid;
  st->st_gid = inode.gid;
  st->st_size = off_t(inode.size);
  st->st_blksize = 4096;
  if (inode.kind == FileKind::block_device || inode.kind == FileKind::char_device)
    st->st_rdev = makedev(inode.rdev_major, inode.rdev_minor);
  if (inode.kind == FileKind::regular && inode.size > inode.sparse_bytes)
    st->st_blocks = blkcnt_t(((inode.size - inode.sparse_bytes - 1) >> 9) + 1);
  st->st_atim.tv_sec = st->st_mtim.tv_sec = st->st_ctim.tv_sec = time_t(inode.mtime);
  // As the kernel counts them (du shows the same). A damaged xattr table only costs the
  // blocks here: getxattr and listxattr report it.
  try {
    if (const uint32_t xattr_size = image.xattr_stored_size(inode))
      st->st_blocks += blkcnt_t(((xattr_size - 1) >> 9) + 1);
  } catch (const Error&) {
  }
}

const char* kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::directory: return "directory";
    case FileKind::regular: return "regular file";
    case FileKind::symlink: return "symlink";
    case FileKind::block_device: return "block device";
    case FileKind::char_device: return "character device";
    case FileKind::fifo: return "fifo";
    case FileKind::socket: return "socket";
  }
  return "unknown";
}

}  // namespace sqar::reader
