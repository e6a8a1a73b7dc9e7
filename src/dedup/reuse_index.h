// `sqar create --reuse OLD`: the compressed data blocks of an earlier image, found by content.
//
// A rebuild of a tree that mostly did not change (a log tree after one more rotation, a ports
// tree after an update) compresses the same blocks again: at zstd-15 that is most of the build's
// time. OLD's manifest trailer holds each data-owning file's (size, XXH3-128); a new file with
// the same pair gets OLD's compressed full blocks copied instead of compressed. Tails are packed
// into fragment blocks exactly as a fresh build packs them; a fragment block whose content OLD
// has too (indexed by decoding OLD's fragment blocks) is copied the same way.
//
// OLD is trusted for nothing. The compressor thread decompresses each copied block and compares
// it with the source bytes it would otherwise compress (DataPipeline); a block that differs
// (damaged OLD, a hash collision) is compressed as usual. Copying is used only when OLD has the
// same compressor, options and block size as the new build, so with the same library version
// the image is byte-identical to a fresh build, only made faster.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codec/codec.h"
#include "common/hash.h"
#include "dedup/content_key.h"

namespace sqar {
namespace reader {
class Image;
struct Inode;
}  // namespace reader

class ReuseIndex {
 public:
  // Indexes OLD for a build with `codec` (codec.block_size is the new block size). Throws
  // sqar::Error naming OLD when it cannot be opened or read. When OLD is readable but of no
  // use (another compressor, other options or block size, damaged tables) the index is empty
  // and `why_unusable` says why, for a warning. OLD's manifest gives the files' hashes; an
  // image without one (mksquashfs, --no-manifest) has its files decoded and hashed here.
  static ReuseIndex open(const std::string& old_image, const CodecConfig& codec, std::string& why_unusable);

  ReuseIndex() = default;
  ReuseIndex(ReuseIndex&&) noexcept;
  ReuseIndex& operator=(ReuseIndex&&) noexcept;
  ReuseIndex(const ReuseIndex&) = delete;
  ReuseIndex& operator=(const ReuseIndex&) = delete;
  ~ReuseIndex();

  const std::string& path() const { return path_; }
  // Whether OLD's blocks may be of a level other than this build's: OLD calls itself mixed
  // (append -l, merge), or has no settings trailer (mksquashfs, --no-manifest) and an options
  // block that does not tell the level (xz, say). An image that copies any of them is not a
  // fresh build's bytes and says so in its own trailer.
  bool levels_unknown() const { return levels_unknown_; }
  bool empty() const { return files_.empty() && fragments_.empty(); }

  size_t file_count() const { return files_.size(); }
  // Cheap pre-filter: may a file of this size have a match? (Only such files are hashed early.)
  bool has_size(uint64_t size) const { return sizes_.count(size) != 0; }
  // The first of the matching file's blocks in block(), or nullopt.
  std::optional<uint32_t> find(uint64_t size, const Hash128& hash) const;
  // OLD's fragment block with exactly this content (len bytes, XXH3-128 of them), as an index
  // for block(), or nullopt. Tails are packed in image order, so after a change the packing
  // of later blocks shifts; greedy packing falls back into step within a few blocks, and
  // from then on the fragment blocks are OLD's again.
  std::optional<uint32_t> find_fragment(uint64_t len, const Hash128& hash) const;

  struct Block {
    uint64_t position;   // in OLD's file
    uint32_t size_word;  // as stored: bit 24 set = uncompressed, 0 = sparse
  };
  const Block& block(uint32_t index) const { return blocks_[index]; }
  // Reads the stored bytes of `b` into out (size_word's size of them). Thread-safe (pread).
  // False on a short read or an I/O error: the caller then compresses the block itself.
  bool read(const Block& b, std::vector<uint8_t>& out) const;

 private:
  void index_files(reader::Image& image);
  // Indexes the file's full blocks (positions in OLD's file) unless blocks_ would pass max_blocks.
  void add_file(reader::Image& image, const reader::Inode& inode, const Hash128& hash, uint64_t max_blocks);
  static std::vector<std::optional<Hash128>> hash_contents(reader::Image& image,
                                                           const std::vector<reader::Inode>& files);
  void index_fragments(reader::Image& image);

  std::string path_;
  int fd_ = -1;
  bool levels_unknown_ = false;
  std::unordered_map<ContentKey, uint32_t, ContentKeyHasher> files_;      // -> index of its first block
  std::unordered_map<ContentKey, uint32_t, ContentKeyHasher> fragments_;  // decoded content -> block
  std::unordered_set<uint64_t> sizes_;
  std::vector<Block> blocks_;
};

}  // namespace sqar
