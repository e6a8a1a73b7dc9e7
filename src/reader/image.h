// The reader core: a thread-safe, cached view of one SquashFS 4.0 image.
//
// Serves both the CLI read commands (extract, list, cat, info, verify, diff) and the FUSE
// driver. Every method may be called from any number of threads at once. All on-disk
// structures are decoded here with bounds checks; a damaged image makes a call throw
// sqar::Error whose message names the image path and the problem — it never crashes,
// hangs or allocates without bound.
//
// Opening reads only the superblock, the compressor options and the id table: it costs
// milliseconds whatever the image size. Everything else is read on demand through two
// shared LRU caches (decompressed data blocks/fragments, decompressed metadata blocks).
#pragma once
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "format/data_digests.h"
#include "format/image_settings.h"
#include "format/manifest.h"
#include "reader/listing_budget.h"

namespace sqar::reader {

struct ImageOptions {
  uint64_t offset = 0;                      // byte offset of the image inside the file
  size_t cache_bytes = 64u << 20;           // decompressed data blocks + fragments
  size_t metadata_cache_bytes = 16u << 20;  // decompressed 8 KiB metadata blocks
  // Called on the reading thread before a data block or fragment that is not cached is
  // read and decompressed (sqarfs hands request listening to another thread meanwhile).
  void (*before_block_load)() = nullptr;
  // The same before a metadata block that is not cached: one request may read thousands of
  // them (a huge block list), though most read one or two (sqarfs hands listening on only
  // once the request has run for a while).
  void (*before_metadata_load)() = nullptr;
  // >= 0: read this already open file (the image keeps a duplicate; the caller still owns fd)
  // and use the path only to name the image in messages: standard input spooled to an
  // unlinked temporary file has no path to open.
  int fd = -1;
  // Also refuse, as damage, what the Linux kernel's squashfs driver refuses though the format
  // and unsquashfs accept it (xz blocks beyond the declared dictionary, or with a check other
  // than CRC32: codec.h). For `sqar verify`, whose pass means "the kernel can mount this".
  bool kernel_limits = false;
};

// The superblock as stored (table positions are relative to the image start).
struct Superblock {
  uint32_t inode_count = 0;
  uint32_t mod_time = 0;
  uint32_t block_size = 0;
  uint32_t fragment_count = 0;
  CodecId compressor = CodecId::gzip;
  uint16_t block_log = 0;
  uint16_t flags = 0;  // fmt::SuperFlags
  uint16_t id_count = 0;
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t root_inode_ref = 0;
  uint64_t bytes_used = 0;
  uint64_t id_table_start = 0;
  uint64_t xattr_table_start = 0;
  uint64_t inode_table_start = 0;
  uint64_t directory_table_start = 0;
  uint64_t fragment_table_start = 0;
  uint64_t export_table_start = 0;
};

// Position of an inode: (metadata block start relative to the inode table) << 16 | offset.
using InodeRef = uint64_t;

enum class FileKind : uint8_t { directory, regular, symlink, block_device, char_device, fifo, socket };

// Where reading a long block list resumes (reader/block_index.h): shared by the copies of an
// inode, so every reader of one opened file shares its checkpoints.
class BlockIndex;

struct Inode {
  InodeRef ref = 0;
  uint16_t type = 0;  // raw on-disk type, fmt::InodeType (basic or extended)
  FileKind kind = FileKind::regular;
  uint32_t mode = 0;  // full st_mode including S_IFMT
  uint32_t uid = 0;   // resolved through the id table
  uint32_t gid = 0;
  uint32_t mtime = 0;
  uint32_t inode_number = 0;
  uint32_t nlink = 1;
  // Regular file: content bytes. Directory: the stored file_size (listing bytes + 3), which is
  // what the kernel reports. Symlink: target length. Others: 0.
  uint64_t size = 0;
  uint32_t rdev = 0;  // devices: the stored (new-style) encoding; see rdev_major/minor
  uint32_t rdev_major = 0;
  uint32_t rdev_minor = 0;
  std::string symlink_target;
  uint32_t xattr_index = 0xFFFFFFFF;  // fmt::kNoXattr when none

  // Regular files.
  uint64_t blocks_start = 0;             // absolute position of the first data block (image-relative)
  uint32_t fragment_index = 0xFFFFFFFF;  // fmt::kNoFragment when the file has no tail fragment
  uint32_t fragment_offset = 0;
  uint64_t sparse_bytes = 0;
  // A short list (at most kLoadedBlockList blocks) is held whole; a longer one is read a window
  // at a time through block_index, so memory never follows the count a file claims.
  static constexpr uint64_t kLoadedBlockList = 4096;
  std::vector<uint32_t> block_sizes;        // raw size words (bit 24: stored uncompressed; 0: sparse)
  std::vector<uint64_t> block_offsets;      // image-relative start of each block (prefix sums)
  std::shared_ptr<BlockIndex> block_index;  // lists longer than kLoadedBlockList
  // false after read_inode(ref, /*with_blocks=*/false); true when block_location answers without
  // reading the inode again (the list above, or block_index).
  bool blocks_loaded = false;
  uint64_t block_list_pos = 0;     // where the size words are: metadata block (image-relative)
  uint32_t block_list_offset = 0;  // and offset in it

  // Directories.
  uint32_t dir_block_start = 0;  // relative to the directory table
  uint16_t dir_offset = 0;
  uint32_t dir_file_size = 0;  // as stored (listing bytes + 3)
  uint32_t parent_inode = 0;   // inode number of the parent (root: inode_count + 1)
  uint16_t dir_index_count = 0;
  InodeRef dir_index_ref = 0;  // where the directory index starts (inside the inode table)

  bool is_dir() const { return kind == FileKind::directory; }
  bool is_regular() const { return kind == FileKind::regular; }
  bool is_symlink() const { return kind == FileKind::symlink; }
};

struct DirEntry {
  std::string name;
  InodeRef inode_ref = 0;
  uint32_t inode_number = 0;
  FileKind kind = FileKind::regular;
  uint16_t type = 0;  // basic on-disk type from the directory entry
};

// A read-only view of contiguous file bytes held in the cache (or static zeros for a
// sparse block). `owner` keeps the bytes alive; no copy is made.
struct Chunk {
  std::shared_ptr<const void> owner;
  const uint8_t* data = nullptr;
  size_t len = 0;
};

struct WalkOptions {
  // false: regular files come without their block list (read_inode(ref, false)): for walks
  // that only stat, so a file claiming millions of blocks costs nothing.
  bool with_blocks = true;
  // Called with the entry's path and the error when an inode or a directory listing below the
  // root is damaged; the walk then goes on with the next entry (the rest of a damaged listing
  // is skipped). Without it the walk throws.
  std::function<void(const std::string& path, const std::string& error)> on_error;
};

struct CacheStats {
  uint64_t data_hits = 0, data_misses = 0, data_bytes = 0;
  uint64_t meta_hits = 0, meta_misses = 0, meta_bytes = 0;
};

class Image {
 public:
  // Opens and validates the superblock. Throws sqar::Error (bad path, not SquashFS 4.0,
  // unsupported compressor, tables outside the file...).
  static std::unique_ptr<Image> open(const std::string& path, const ImageOptions& options = {});
  virtual ~Image() = default;

  virtual const std::string& path() const = 0;
  virtual const Superblock& super() const = 0;
  virtual const CodecConfig& codec_config() const = 0;  // compressor + its options block
  virtual uint64_t offset() const = 0;                  // ImageOptions::offset
  virtual uint64_t file_size() const = 0;               // size of the containing file
  // The open file the image is read from (owned by the image): for trailers and stored bytes
  // read beside the filesystem, which must come from the same file even when it has no path
  // (standard input spooled to an unlinked file).
  virtual int file_descriptor() const = 0;

  virtual InodeRef root_ref() const = 0;
  virtual Inode root() = 0;
  // with_blocks=false skips decoding a regular file's block list (cheap stat); read_file
  // and read_chunk reload the list themselves when handed such an inode.
  virtual Inode read_inode(InodeRef ref, bool with_blocks = true) = 0;

  // Entries in on-disk (sorted) order. Throws on names that are empty, '.', '..' or contain
  // '/' or NUL, so no caller can be tricked into writing outside a target directory.
  // A walk that lists every directory passes its one ListingBudget to each listing it opens
  // (see listing_budget.h); a single listing needs none.
  virtual std::vector<DirEntry> read_dir(const Inode& dir, ListingBudget* budget = nullptr) = 0;
  // The same entries one at a time, holding one metadata block rather than the listing: for
  // walks whose memory must not follow the listings' sizes (a crafted image can make every
  // directory of a deep branch hold thousands of long names).
  class Listing {
   public:
    virtual ~Listing() = default;
    // The next entry, or false at the end. Throws where read_dir throws.
    virtual bool next(DirEntry& e) = 0;
    // Drops the metadata block held while the caller reads elsewhere; next() reads it again.
    virtual void release() = 0;
  };
  virtual std::unique_ptr<Listing> open_listing(const Inode& dir, ListingBudget* budget = nullptr) = 0;
  // Uses the directory index of large directories to skip to the right metadata block.
  virtual std::optional<DirEntry> lookup(const Inode& dir, std::string_view name) = 0;
  // "a/b/c" relative to the root ("" or "/" is the root). Symlinks are not followed.
  // nullopt when a component does not exist; throws when a non-final component is not a dir.
  virtual std::optional<Inode> resolve_path(std::string_view path) = 0;

  // Copies up to len bytes of file content at offset; returns bytes copied (0 at/after EOF).
  // Sparse blocks read as zeros. Throws sqar::Error on a corrupt block.
  virtual size_t read_file(const Inode& file, uint64_t offset, void* buf, size_t len) = 0;
  // The longest run of bytes starting at offset that lies in one block or fragment, without
  // copying (at most max_len). len == 0 at/after EOF.
  virtual Chunk read_chunk(const Inode& file, uint64_t offset, size_t max_len) = 0;
  // The file's bytes held in data block `index` (index == block_count: the tail fragment),
  // written to out, which must hold block_size bytes; returns how many (0 past EOF). Full
  // blocks are decompressed straight into out, bypassing the data cache: for streaming
  // readers that read each block once (extract), where caching only costs fresh pages and
  // evictions. Sparse blocks read as zeros. Throws sqar::Error on a corrupt block.
  virtual size_t read_block(const Inode& file, uint64_t index, uint8_t* out) = 0;
  // The whole decompressed fragment block `index` (the tail ends of many small files), from
  // the data cache. Throws sqar::Error on a corrupt block or an index outside the table.
  virtual Chunk read_fragment(uint32_t index) = 0;
  // Where fragment block `index` is stored: image-relative position and its size word
  // (bit 24: stored uncompressed). Throws on an index outside the table or a damaged table.
  struct StoredBlock {
    uint64_t position;
    uint32_t size_word;
  };
  virtual StoredBlock fragment_location(uint32_t index) = 0;
  // Decompresses data block `index` of the file into the cache (read-ahead). Never throws.
  virtual void prefetch_block(const Inode& file, uint64_t index) = 0;
  // Whether prefetch_first_block would decompress anything (false when the block is cached,
  // or the file is empty or starts sparse): lets a caller skip handing it to another thread.
  virtual bool would_load_first_block(const Inode& file) = 0;
  // Decompresses the file's first block, or its tail fragment when it has no full block, into
  // the cache (read-ahead for a file about to be read). Never throws.
  virtual void prefetch_first_block(const Inode& file) = 0;
  // Drops data block `index` of the file from the cache: for readers that know it will not be
  // asked for again (sqarfs once a sequential reader has had all of it). Never throws.
  virtual void release_block(const Inode& file, uint64_t index) = 0;
  virtual uint64_t block_count(const Inode& file) const = 0;  // full blocks (no fragment)
  // The decoded size of the inode table, learned by decoding it once. Throws on damage.
  virtual uint64_t inode_table_bytes() = 0;
  // Where full block `index` (< block_count) of a file is stored; size word 0 is a sparse block.
  // Long lists are decoded a window of 1024 blocks at a time from checkpoints kept every 1024
  // blocks (reader/block_index.h). Throws on a damaged list or an inode read without blocks.
  virtual StoredBlock block_location(const Inode& file, uint64_t index) = 0;

  // The file's block size words and image-relative block starts, a slice at a time (at most
  // 4096 blocks), straight from the inode table when its list is not loaded: memory stays
  // constant whatever number of blocks the file claims. Throws on a damaged list.
  using BlockSlice = std::function<void(const uint32_t* words, const uint64_t* starts, size_t n)>;
  virtual void for_each_block_slice(const Inode& file, const BlockSlice& fn) = 0;

  virtual std::string read_symlink(const Inode& link) = 0;
  // (full name with prefix such as "user.", value) pairs; empty without xattrs.
  virtual std::vector<std::pair<std::string, std::string>> xattrs(const Inode& inode) = 0;
  // The names alone, and the value of one name (nullopt: the inode has no such xattr). The
  // set's names and the size of each value are checked as xattrs() checks them, but no other
  // value is copied: a set may decode to 4 MiB, which sqarfs would otherwise decode for each
  // listxattr and getxattr, as the kernel does not (nor does it refuse a set of more).
  virtual std::vector<std::string> xattr_names(const Inode& inode) = 0;
  virtual std::optional<std::string> xattr_value(const Inode& inode, std::string_view name) = 0;
  // The stored size of the inode's xattr set as its id-table entry gives it (0 without one),
  // which the kernel counts in the inode's blocks.
  virtual uint32_t xattr_stored_size(const Inode& inode) = 0;

  // Id table lookup (uid/gid are already resolved in Inode).
  virtual uint32_t id_at(uint16_t index) = 0;

  // Export table: inode number (1..inode_count) -> ref. nullopt without export table.
  virtual bool has_export_table() const = 0;
  virtual std::optional<InodeRef> inode_ref_by_number(uint32_t inode_number) = 0;

  // Depth-first walk from the root (parents before children; entries in on-disk order).
  // path is relative ("" for the root, "a/b"). Return false from fn to skip a directory's
  // children. Throws on directory loops (a directory that is its own ancestor) and, unless
  // options.on_error is set, on damaged inodes and listings and bad names (see read_dir).
  // Memory grows with the depth only (no listing is held in memory).
  virtual void walk(const std::function<bool(const std::string& path, const Inode& inode)>& fn,
                    const WalkOptions& options = {}) = 0;

  // sqar's three trailers (docs/format.md), one after the other past the filesystem. open()
  // finds where each starts; these read and check one. Each is nullopt when absent (another
  // tool's image, --no-manifest, an earlier sqar) and throws when it, or a trailer header
  // before it, is damaged.
  //
  // The manifest trailer at align_up(bytes_used, 4096): every regular file's content hash.
  virtual std::optional<Manifest> manifest() = 0;
  // The stored-data digests trailer (format/data_digests.h), after the manifest.
  virtual std::optional<DataDigests> data_digests() = 0;
  // The settings trailer (format/image_settings.h), after the stored-data digests. When it is
  // sound, open() has already taken its level into codec_config().
  virtual std::optional<ImageSettings> settings_trailer() = 0;

  virtual CacheStats cache_stats() const = 0;
};

// Fills a struct stat the way the kernel's squashfs driver reports the inode (its blocks
// include those of its xattr set, read from the image).
void fill_stat(Image& image, const Inode& inode, struct stat* st);

const char* kind_name(FileKind kind);

}  // namespace sqar::reader
