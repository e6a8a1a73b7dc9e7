#include "dedup/reuse_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <set>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/thread_pool.h"
#include "format/squashfs.h"
#include "reader/image.h"
#include "reader/stored_content.h"

namespace sqar {

ReuseIndex::ReuseIndex(ReuseIndex&& o) noexcept { *this = std::move(o); }

ReuseIndex& ReuseIndex::operator=(ReuseIndex&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    files_ = std::move(o.files_);
    fragments_ = std::move(o.fragments_);
    sizes_ = std::move(o.sizes_);
    blocks_ = std::move(o.blocks_);
    levels_unknown_ = o.levels_unknown_;
  }
  return *this;
}

ReuseIndex::~ReuseIndex() {
  if (fd_ >= 0) close(fd_);
}

namespace {
std::string settings_of(const CodecConfig& c) {
  std::string s = codec_name(c.id);
  if (level_range(c.id).second > 0) s += " level " + std::to_string(resolved_level(c));
  return s + ", " + std::to_string(c.block_size / 1024) + " KiB blocks";
}
}  // namespace

ReuseIndex ReuseIndex::open(const std::string& old_image, const CodecConfig& codec, std::string& why_unusable) {
  ReuseIndex index;
  index.path_ = old_image;
  why_unusable.clear();
  // Only OLD's tables are read through the reader (blocks are pread here): small caches.
  reader::ImageOptions small;
  small.cache_bytes = 1u << 20;
  small.metadata_cache_bytes = 4u << 20;
  auto image = reader::Image::open(old_image, small);
  CodecConfig old = image->codec_config();
  old.block_size = image->super().block_size;
  // Copied blocks must be the blocks this build would write, or the image would depend on
  // what OLD happened to be: same compressor, same options block, same block size, and the
  // same level where OLD's settings trailer tells it (the options block does not for xz, lz4
  // and gzip 10-12). Blocks OLD's trailer calls mixed (append -l, merge) cannot be told apart.
  std::optional<ImageSettings> settings;
  try {
    settings = image->settings_trailer();
  } catch (const std::exception&) {
    // damaged: as without one, the options block decides (and verify reports it)
  }
  const bool other_level = settings && !settings->mixed && resolved_level(old) != resolved_level(codec);
  index.levels_unknown_ = settings ? settings->mixed : !options_block_tells_level(old);
  if (old.id != codec.id || old.block_size != codec.block_size ||
      encode_codec_options(old) != encode_codec_options(codec) || other_level) {
    why_unusable = "it was made with " + settings_of(old) + ", this build uses " + settings_of(codec);
    return index;
  }
  try {
    index.index_files(*image);
    index.index_fragments(*image);
  } catch (const std::exception& e) {
    // OLD opens but is damaged: a rebuild must not fail because its predecessor did.
    why_unusable = std::string("it is damaged (") + e.what() + ")";
    index.files_.clear();
    index.fragments_.clear();
    index.sizes_.clear();
    index.blocks_.clear();
    return index;
  }
  index.fd_ = ::open(old_image.c_str(), O_RDONLY | O_CLOEXEC);
  if (index.fd_ < 0) throw Error(errno_message(old_image, errno));
  return index;
}

void ReuseIndex::index_files(reader::Image& image) {
  auto manifest = image.manifest();
  // A manifest of an earlier version hashes content another way (format/manifest.h): its
  // hashes cannot be matched with the new files', so OLD is then hashed as if it had none.
  if (manifest && manifest->scheme() != HashScheme::kChunked) manifest.reset();
  const bool has_manifest = manifest.has_value();
  std::unordered_map<uint32_t, Hash128> hash_of;  // inode number -> content hash
  if (manifest) {
    // Every file with a full block has its own entry (small files are covered per fragment
    // block, format/manifest.h, and fragment blocks are indexed by content below).
    hash_of.reserve(manifest->files.size());
    for (const ManifestEntry& e : manifest->files) hash_of.emplace(e.inode_number, e.hash);
    manifest.reset();
  }
  // Without a manifest (mksquashfs, --no-manifest, earlier versions) each file's content is
  // decoded and hashed below: files that share their data (same first block and size) are
  // hashed once.
  std::vector<reader::Inode> to_hash;
  std::set<std::pair<uint64_t, uint64_t>> owners;  // (blocks_start, size)

  const uint64_t bs = image.super().block_size;
  // Each indexed block takes 16 bytes here, and a crafted image claims millions of sparse
  // blocks with a few bytes of compressed list: the index holds at most as many blocks as OLD
  // has bytes, so its memory follows OLD's size, never a count OLD claims.
  const uint64_t max_blocks = std::min<uint64_t>(UINT32_MAX, image.super().bytes_used);
  uint64_t to_hash_blocks = 0;
  image.walk([&](const std::string&, const reader::Inode& inode) {
    if (!inode.is_regular() || inode.size < bs || !inode.blocks_loaded) return true;
    if (!has_manifest) {
      if (to_hash_blocks + inode.size / bs > max_blocks) return true;  // nor hash what cannot be indexed
      if (owners.emplace(inode.blocks_start, inode.size).second) {
        to_hash.push_back(inode);
        to_hash_blocks += inode.size / bs;
      }
      return true;
    }
    auto h = hash_of.find(inode.inode_number);
    if (h == hash_of.end()) return true;  // a duplicate (its owner is indexed) or no entry
    add_file(image, inode, h->second, max_blocks);
    hash_of.erase(h);  // hard links: index the inode once
    return true;
  });
  if (to_hash.empty()) return;
  const std::vector<std::optional<Hash128>> hashes = hash_contents(image, to_hash);
  for (size_t i = 0; i < to_hash.size(); ++i)  // in walk order: the first of equal files wins
    if (hashes[i]) add_file(image, to_hash[i], *hashes[i], max_blocks);
}

void ReuseIndex::add_file(reader::Image& image, const reader::Inode& inode, const Hash128& hash, uint64_t max_blocks) {
  const uint64_t nblocks = inode.size / image.super().block_size;
  if (blocks_.size() + nblocks > max_blocks) return;
  const size_t first = blocks_.size();
  try {
    for (uint64_t i = 0; i < nblocks; ++i) {
      const reader::Image::StoredBlock at = image.block_location(inode, i);
      blocks_.push_back({image.offset() + at.position, at.size_word});
    }
  } catch (...) {
    blocks_.resize(first);  // a damaged list: the file is simply not reused
    return;
  }
  if (!files_.try_emplace(ContentKey{inode.size, hash}, uint32_t(first)).second) {
    blocks_.resize(first);
    return;
  }
  sizes_.insert(inode.size);
}

std::vector<std::optional<Hash128>> ReuseIndex::hash_contents(reader::Image& image,
                                                              const std::vector<reader::Inode>& files) {
  // On all cores: decoding is the cost (zstd ~1 GB/s per core, xz ~100 MB/s), still far below
  // compressing the same data again. A file that does not decode is left out.
  std::vector<std::optional<Hash128>> out(files.size());
  ThreadPool pool(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::vector<uint8_t>> bufs(pool.threads(), std::vector<uint8_t>(image.super().block_size));
  pool.parallel_for(files.size(), [&](size_t k, unsigned w) {
    try {
      ContentHasher hasher;
      reader::hash_stored_content(image, files[k], bufs[w].data(), {&hasher});
      out[k] = hasher.digest();
    } catch (const std::exception&) {
    }
  });
  return out;
}

void ReuseIndex::index_fragments(reader::Image& image) {
  // Fragment blocks are keyed by their decoded content, so each is decompressed once here:
  // ~0.1 s for the ports set's 400 blocks, against ~18 ms each to compress one at zstd-15.
  // The reader bounds the count by the image's data region.
  const uint32_t count = image.super().fragment_count;
  fragments_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    reader::Image::StoredBlock where;
    try {
      where = image.fragment_location(i);
    } catch (const std::exception&) {
      return;  // a damaged fragment table: the rest of it is not reused either
    }
    reader::Chunk content;
    try {
      content = image.read_fragment(i);
    } catch (const std::exception&) {
      continue;  // a damaged fragment block is only not reused
    }
    if (blocks_.size() >= UINT32_MAX) return;
    if (fragments_.try_emplace(ContentKey{content.len, hash128(content.data, content.len)}, uint32_t(blocks_.size()))
            .second)
      blocks_.push_back({image.offset() + where.position, where.size_word});
  }
}

std::optional<uint32_t> ReuseIndex::find_fragment(uint64_t len, const Hash128& hash) const {
  auto it = fragments_.find(ContentKey{len, hash});
  if (it == fragments_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> ReuseIndex::find(uint64_t size, const Hash128& hash) const {
  auto it = files_.find(ContentKey{size, hash});
  if (it == files_.end()) return std::nullopt;
  return it->second;
}

bool ReuseIndex::read(const Block& b, std::vector<uint8_t>& out) const {
  const size_t len = b.size_word & ~fmt::kDataUncompressed;
  if (len == 0 || len > fmt::kMaxBlockSize) return false;  // sparse, or a damaged size word
  out.resize(len);
  for (size_t done = 0; done < len;) {
    ssize_t n = pread(fd_, out.data() + done, len - done, off_t(b.position + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

}  // namespace sqar
