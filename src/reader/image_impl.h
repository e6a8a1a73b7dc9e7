// Private to src/reader: the Image implementation shared by the reader's source files.
#pragma once
#include <atomic>
#include <mutex>

#include "cache/block_cache.h"
#include "common/unique_fd.h"
#include "reader/image.h"

namespace sqar::reader {

class MetaReader;

// Loads a lazily read table once for all threads. Not std::call_once: libstdc++ builds it on
// pthread_once, which knows nothing of exceptions. glibc happens to reset the flag when a loader
// throws, but ThreadSanitizer's interceptor (and other libcs, GCC bug 66146) leave it taken and
// every later caller blocks forever: sqarfs under TSan hung on an image with a damaged export
// table. Here a loader that throws leaves the table unloaded; the next caller retries (and throws).
class LoadOnce {
 public:
  template <class F>
  void operator()(F&& load) {
    if (done_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    load();
    done_.store(true, std::memory_order_release);
  }

 private:
  std::mutex mu_;
  std::atomic<bool> done_{false};
};

class ImageImpl final : public Image {
 public:
  ImageImpl(std::string path, const ImageOptions& options);
  ~ImageImpl() override;

  const std::string& path() const override { return path_; }
  const Superblock& super() const override { return sb_; }
  const CodecConfig& codec_config() const override { return codec_cfg_; }
  uint64_t offset() const override { return offset_; }
  uint64_t file_size() const override { return file_size_; }
  int file_descriptor() const override { return fd_.get(); }

  InodeRef root_ref() const override { return sb_.root_inode_ref; }
  Inode root() override { return read_inode(sb_.root_inode_ref); }
  Inode read_inode(InodeRef ref, bool with_blocks = true) override;

  std::vector<DirEntry> read_dir(const Inode& dir, ListingBudget* budget = nullptr) override;
  std::unique_ptr<Listing> open_listing(const Inode& dir, ListingBudget* budget = nullptr) override;
  std::optional<DirEntry> lookup(const Inode& dir, std::string_view name) override;
  std::optional<Inode> resolve_path(std::string_view path) override;

  size_t read_file(const Inode& file, uint64_t offset, void* buf, size_t len) override;
  Chunk read_chunk(const Inode& file, uint64_t offset, size_t max_len) override;
  size_t read_block(const Inode& file, uint64_t index, uint8_t* out) override;
  Chunk read_fragment(uint32_t index) override;
  StoredBlock fragment_location(uint32_t index) override {
    const Fragment f = fragment_entry(index);
    return {f.start, f.size_word};
  }
  void prefetch_block(const Inode& file, uint64_t index) override;
  bool would_load_first_block(const Inode& file) override;
  void prefetch_first_block(const Inode& file) override;
  void release_block(const Inode& file, uint64_t index) override;
  uint64_t block_count(const Inode& file) const override;
  uint64_t inode_table_bytes() override;
  StoredBlock block_location(const Inode& file, uint64_t index) override;

  void for_each_block_slice(const Inode& file, const BlockSlice& fn) override;
  std::string read_symlink(const Inode& link) override;
  std::vector<std::pair<std::string, std::string>> xattrs(const Inode& inode) override;
  std::vector<std::string> xattr_names(const Inode& inode) override;
  std::optional<std::string> xattr_value(const Inode& inode, std::string_view name) override;
  uint32_t xattr_stored_size(const Inode& inode) override;
  uint32_t id_at(uint16_t index) override;

  bool has_export_table() const override { return sb_.export_table_start != ~0ull; }
  std::optional<InodeRef> inode_ref_by_number(uint32_t inode_number) override;

  void walk(const std::function<bool(const std::string&, const Inode&)>& fn, const WalkOptions& options) override;
  std::optional<Manifest> manifest() override;
  std::optional<DataDigests> data_digests() override;
  std::optional<ImageSettings> settings_trailer() override;  // as open() read it
  CacheStats cache_stats() const override;

  // ---- internals used across the reader's files ----
  [[noreturn]] void fail(const std::string& what) const;
  // pread exactly len bytes of a trailer at file position pos (checked against the file size
  // first); fails naming `what` (reader/trailers.cpp).
  void read_trailer(uint64_t pos, void* dst, size_t len, const char* what) const;
  // pread exactly len bytes at image-relative pos; fails when the range leaves the image.
  void read_exact(uint64_t pos, void* dst, size_t len, const char* what) const;
  // Decompressed metadata block at image-relative pos (cached).
  cache::BlockPtr meta_block(uint64_t pos);
  // Decodes the metadata block at pos into out (8 KiB) without caching it; returns its size
  // and sets next to the position of the block after it.
  size_t decode_meta_block(uint64_t pos, uint8_t* out, uint64_t& next);
  // Decompressed data block or fragment block: size_word as stored (bit 24: uncompressed).
  cache::BlockPtr data_block(uint64_t pos, uint32_t size_word, const char* what);
  // Checks and decompresses (or copies) the data block at pos into out (block_size bytes);
  // returns its decompressed size.
  size_t decode_data_block(uint64_t pos, uint32_t size_word, uint8_t* out, const char* what);
  // Entry `index` of a table made of metadata blocks located by a pointer array.
  void read_table_entry(const std::vector<uint64_t>& pointers, uint64_t index, size_t entry_size, void* dst,
                        const char* what);
  // Loads the u64 pointer array for a table of `count` entries of entry_size at `start`.
  std::vector<uint64_t> load_pointer_array(uint64_t start, uint64_t count, size_t entry_size, const char* what);

  struct Fragment {
    uint64_t start;
    uint32_t size_word;
  };
  Fragment fragment_entry(uint32_t index);
  // Decodes and checks nblocks size words from r, the first being block `first` of the file and
  // starting at data_pos, in slices.
  void stream_block_words(MetaReader& r, uint64_t first, uint64_t data_pos, uint64_t nblocks, const BlockSlice& fn);
  // Makes window w of a long list the one index holds (index.mu held).
  void load_window(const Inode& file, BlockIndex& index, uint64_t w);
  // The list of block sizes of a file read with with_blocks=false, loaded on demand.
  const Inode& with_blocks(const Inode& file, Inode& storage);

 private:
  Codec& codec();
  // With kernel_limits_: fails when the kernel would refuse the compressed block src.
  void check_kernel_limits(const uint8_t* src, size_t len, uint64_t pos, const char* what) const;
  void load_superblock();
  // Decodes the inode's xattr set, checking all of it, and calls fn(name, value) for each;
  // value is null unless want_value(name) asked for it (reader/xattr.cpp).
  void visit_xattrs(const Inode& inode, const std::function<bool(const std::string&)>& want_value,
                    const std::function<void(std::string&, std::string*)>& fn);
  // The inode's 16-byte xattr id-table entry (reference, count, size); false without xattrs.
  bool xattr_id_entry(const Inode& inode, uint8_t entry[16]);
  std::string embedded_image_hint() const;
  void load_ids();
  // Walks the trailers' headers once, at open (reader/trailers.cpp), filling trailers_.
  void locate_trailers();
  void read_trailer_headers();

  std::string path_;
  uint64_t offset_;
  UniqueFd fd_;
  uint64_t file_size_ = 0;
  uint64_t serial_;                 // distinguishes images for thread-local codecs
  void (*before_block_load_)();     // ImageOptions::before_block_load
  void (*before_metadata_load_)();  // ImageOptions::before_metadata_load
  bool kernel_limits_;              // ImageOptions::kernel_limits
  Superblock sb_;
  CodecConfig codec_cfg_;
  // Where each trailer starts (file positions) and its decoded header, as locate_trailers()
  // found them: a trailer absent, or after a damaged header, has none. Its payload is read on
  // demand; the settings trailer is all header.
  struct Trailers {
    uint64_t manifest_at = 0;
    std::optional<ManifestHeader> manifest;
    uint64_t digests_at = 0;
    std::optional<DataDigestsHeader> digests;
    std::optional<ImageSettings> settings;
    // The first damaged header (or read error) on the way, and which trailer it was (1 the
    // manifest, 2 the digests, 3 the settings): that one and those after it cannot be had.
    std::string problem;
    int damaged = 0;
    bool earlier_filesystem = false;  // trailers were found, of a filesystem since changed
  };
  bool trailers_of_an_earlier_filesystem();
  Trailers trailers_;
  std::vector<uint32_t> ids_;

  cache::BlockCache data_cache_;
  cache::BlockCache meta_cache_;

  LoadOnce fragment_once_, export_once_, xattr_once_, inode_table_once_;
  uint64_t inode_table_bytes_ = 0;
  std::vector<uint64_t> fragment_ptrs_, export_ptrs_, xattr_ptrs_;
  uint64_t xattr_kv_start_ = 0;
  uint32_t xattr_id_count_ = 0;
};

// Rejects names that could escape a directory or are otherwise invalid on disk.
bool valid_entry_name(std::string_view name);
std::string hex(uint64_t v);

}  // namespace sqar::reader
