#include "ops/input_image.h"

#include <unistd.h>
#include <xxhash.h>

#include <deque>
#include <mutex>
#include <unordered_map>

#include "common/content_hash.h"
#include "common/error.h"
#include "common/hash.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "ops/parallel.h"
#include "reader/stored_content.h"
#include "reader/walk_guard.h"

namespace sqar::ops {
namespace {

void pread_fully(int fd, const std::string& path, uint64_t off, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len) {
    const ssize_t n = ::pread(fd, p, len, off_t(off));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(errno_message(path, errno));
    if (n == 0) throw Error(path + ": ends before byte " + std::to_string(off + len));
    p += n;
    off += uint64_t(n);
    len -= size_t(n);
  }
}

// Where a file's data is: files that share it (dedup) have the same key and the same content.
// The size words are part of it: a hostile image gives two files the same size and
// blocks_start but different block lists ([A0, A1] and [sparse, A0]), and grouping them
// would give the second the first's content, under a hash the output's manifest then vouches
// for.
struct DataKey {
  uint64_t size, blocks_start, words_hash;
  uint32_t fragment, fragment_offset;
  bool operator==(const DataKey&) const = default;
};
struct DataKeyHasher {
  size_t operator()(const DataKey& k) const {
    return size_t(XXH3_64bits(&k, sizeof k.size + sizeof k.blocks_start) ^ k.words_hash ^
                  (uint64_t(k.fragment) << 32 | k.fragment_offset));
  }
};

// What hashing a file needs of its inode, kept for every file of the input until it is hashed:
// 40 bytes, where a reader::Inode takes five times that (a 10^7-file image: 0.4 GB, not 2 GB).
struct FileInode {
  reader::InodeRef ref;
  uint64_t size, blocks_start;
  uint32_t fragment_index, fragment_offset, inode_number;
};

class Loader {
 public:
  Loader(InputImage& in, unsigned threads) : in_(in), threads_(threads) {}

  // The memory the decoded xattr sets of an input may take in all (memory_of). Entries share
  // a set by its index in the image, so a million files with one SELinux label count it once;
  // a million distinct 50-byte labels take 132 MB.
  static constexpr uint64_t kMaxXattrBytes = uint64_t(256) << 20;

  void run() {
    auto& img = *in_.image;
    const auto& sb = img.super();
    in_.data_end = sb.inode_table_start;
    if (in_.data_end < fmt::kSuperblockSize) throw Error(in_.path + ": inode table starts inside the superblock");
    in_.fragments.reserve(sb.fragment_count);
    for (uint32_t i = 0; i < sb.fragment_count; ++i) {
      auto f = img.fragment_location(i);
      check_extent(f.position, f.size_word, [&] { return "fragment block " + std::to_string(i); });
      in_.fragments.push_back(f);
    }
    build_tree();
    manifest_ = img.manifest();
    in_.digests = img.data_digests();
    if (in_.digests && in_.digests->data_end < in_.data_end)
      throw Error(in_.path + ": the data digests trailer ends at byte " + std::to_string(in_.digests->data_end) +
                  ", before the data (" + std::to_string(in_.data_end) + ")");
    hash_files();
  }

 private:
  // `what` names the extent; called only to word an error, since this runs once per block.
  template <typename Describe>
  void check_extent(uint64_t pos, uint32_t word, Describe&& what) const {
    const uint64_t len = word & ~fmt::kDataUncompressed;
    if (len > in_.image->super().block_size || pos < fmt::kSuperblockSize || pos > in_.data_end ||
        len > in_.data_end - pos)
      throw Error(in_.path + ": " + what() + " lies outside the data region (bytes " + std::to_string(pos) + ".." +
                  std::to_string(pos + len) + ", data ends at " + std::to_string(in_.data_end) + ")");
  }

  uint32_t add_node(const std::string& name, uint32_t parent) {
    Node n;
    n.parent = parent;
    in_.tree.set_name(n, name);
    in_.tree.nodes.push_back(n);
    return uint32_t(in_.tree.nodes.size() - 1);
  }

  // Fills node i from the inode; a second entry of the same inode becomes a hard link.
  void fill(uint32_t i, const reader::Inode& ino) {
    Node& n = in_.tree.nodes[i];
    if (!ino.is_dir()) {
      auto [it, first] = by_ref_.emplace(ino.ref, i);
      if (!first) {
        n.link_target = it->second;
        n.mode = in_.tree.nodes[it->second].mode;
        ++in_.tree.nodes[it->second].link_count;
        return;
      }
    }
    n.mode = ino.mode;
    n.uid = ino.uid;
    n.gid = ino.gid;
    n.mtime = ino.mtime;
    n.rdev = ino.rdev;
    if (ino.xattr_index != fmt::kNoXattr) {
      if (SharedXattrs x = xattr_set(ino, i)) in_.tree.xattrs[i] = std::move(x);
    }
    if (ino.is_symlink()) in_.tree.symlink_targets[i] = in_.image->read_symlink(ino);
    if (ino.is_regular()) {
      n.size = ino.size;
      n.file_index = uint32_t(in_.files.size());
      in_.tree.files.push_back(i);
      in_.tree.total_file_bytes += ino.size;
      add_file(ino, i);
    }
  }

  // `node` is the file's node in the tree, whose path names it in errors.
  void add_file(const reader::Inode& ino, uint32_t node) {
    auto path = [&] { return in_.tree.path_of(node); };
    const uint32_t bs = in_.image->super().block_size;
    FileLocation loc;
    loc.blocks_start = ino.blocks_start;
    loc.fragment = ino.fragment_index;
    loc.fragment_offset = ino.fragment_offset;
    if (in_.words.size() > UINT32_MAX) throw Error(in_.path + ": more than 2^32 data blocks");
    loc.first_block = uint32_t(in_.words.size());
    const uint64_t full = ino.size / bs;
    uint64_t count = 0;
    bool checking_extent = false;  // check_extent's errors name the file already
    try {
      in_.image->for_each_block_slice(ino, [&](const uint32_t* words, const uint64_t* starts, size_t n) {
        for (size_t k = 0; k < n; ++k, ++count) {
          checking_extent = true;
          if (words[k]) check_extent(starts[k], words[k], [&] { return path() + " block " + std::to_string(count); });
          checking_extent = false;
          in_.words.push_back(words[k]);
        }
      });
    } catch (const Error& e) {  // the reader's, for a damaged list: name the file it belongs to
      if (checking_extent) throw;
      throw Error(in_.path + ": " + path() + ": " + without_path_prefix(e.what(), in_.path));
    }
    bool stored_tail = false;
    if (count == full + 1 && ino.size % bs && ino.fragment_index == fmt::kNoFragment) {
      stored_tail = in_.words.back() != 0;  // 0: a sparse tail, which the writer adds back itself
      if (!stored_tail) in_.words.pop_back();
    } else if (count != full) {
      throw Error(in_.path + ": " + path() + " has " + std::to_string(count) + " blocks for " +
                  std::to_string(ino.size) + " bytes");
    }
    if (ino.fragment_index != fmt::kNoFragment) {
      if (ino.fragment_index >= in_.fragments.size())
        throw Error(in_.path + ": " + path() + " names fragment block " + std::to_string(ino.fragment_index) + " of " +
                    std::to_string(in_.fragments.size()));
    }
    in_.files.push_back(loc);
    in_.file_refs.push_back(ino.ref);
    in_.stored_tail.push_back(stored_tail);
    inodes_.push_back({ino.ref, ino.size, ino.blocks_start, ino.fragment_index, ino.fragment_offset, ino.inode_number});
  }

  // Breadth-first, so each directory's entries are consecutive nodes as Tree requires.
  void build_tree() {
    auto& img = *in_.image;
    in_.tree.source_dirs.push_back(in_.path + ":");
    in_.tree.nodes.push_back(Node{});
    const reader::Inode root = img.root();
    fill(0, root);
    std::deque<std::pair<uint32_t, reader::Inode>> todo{{0, root}};
    reader::WalkGuard guard(img);
    guard.enter_directory(root, [] { return std::string(); });
    while (!todo.empty()) {
      auto [dir, ino] = std::move(todo.front());
      todo.pop_front();
      const auto entries = img.read_dir(ino, guard.listings());
      const uint32_t first = uint32_t(in_.tree.nodes.size());
      for (const auto& e : entries) add_node(e.name, dir);
      in_.tree.nodes[dir].first_child = first;
      in_.tree.nodes[dir].child_count = uint32_t(entries.size());
      for (size_t k = 0; k < entries.size(); ++k) {
        reader::Inode child = img.read_inode(entries[k].inode_ref, false);
        const auto path_of = [&] { return in_.tree.rel_path_of(in_.tree.nodes[first + uint32_t(k)]); };
        guard.count_entry(child, path_of);
        fill(first + uint32_t(k), child);
        if (child.is_dir()) {
          guard.enter_directory(child, path_of);
          todo.emplace_back(first + uint32_t(k), std::move(child));
        }
      }
    }
  }

  // Every file gets its content hash: from the manifest where it has one, by decoding otherwise.
  // Without stored-data digests, everything is decoded and compared, which is the check. A
  // manifest of an earlier version hashes content another way (format/manifest.h): every file
  // is then decoded and hashed both ways, the earlier way to check it against that manifest.
  void hash_files() {
    std::unordered_map<uint32_t, Hash128> entry;
    if (manifest_)
      for (const auto& e : manifest_->files) entry.emplace(e.inode_number, e.hash);
    const uint32_t bs = in_.image->super().block_size;
    const HashScheme check_scheme = manifest_ ? manifest_->scheme() : HashScheme::kChunked;
    const bool earlier_scheme = check_scheme != HashScheme::kChunked;
    const bool decode_all = !in_.digests || in_.recode || earlier_scheme;
    // One decode per stored content: files sharing data share the result.
    std::unordered_map<DataKey, uint32_t, DataKeyHasher> groups;
    std::vector<uint32_t> group_of(in_.files.size());
    std::vector<uint32_t> leader;  // a file of each group
    std::vector<std::optional<Hash128>> expected;
    for (uint32_t f = 0; f < in_.files.size(); ++f) {
      const auto& ino = inodes_[f];
      const uint64_t first = in_.files[f].first_block;
      const uint64_t end = f + 1 < in_.files.size() ? in_.files[f + 1].first_block : in_.words.size();
      const uint64_t words_hash =
          XXH3_64bits(in_.words.data() + first, size_t(end - first) * sizeof(uint32_t)) ^ in_.stored_tail[f];
      const DataKey key{ino.size, ino.size >= bs || ino.fragment_index == fmt::kNoFragment ? ino.blocks_start : 0,
                        words_hash, ino.fragment_index, ino.fragment_offset};
      auto [it, added] = groups.emplace(key, uint32_t(leader.size()));
      if (added) {
        leader.push_back(f);
        expected.emplace_back();
      }
      group_of[f] = it->second;
      if (auto e = entry.find(ino.inode_number); e != entry.end()) {
        auto& x = expected[it->second];
        if (x && !(*x == e->second))
          throw Error(in_.path + ": the manifest trailer gives two hashes for the data of " +
                      in_.tree.path_of(in_.tree.files[f]));
        x = e->second;
      }
    }
    std::vector<Hash128> hashes(leader.size());
    // What the manifest's scheme gives, where it is not kChunked (else `hashes` itself).
    std::vector<Hash128> check_hashes(earlier_scheme ? leader.size() : 0);
    const auto in_manifest_scheme = [&](uint32_t g) -> const Hash128& {
      return earlier_scheme ? check_hashes[g] : hashes[g];
    };
    std::vector<uint32_t> todo;
    for (uint32_t g = 0; g < leader.size(); ++g) {
      if (inodes_[leader[g]].size == 0)
        hashes[g] = content_hash("", 0);
      else if (expected[g] && !decode_all)
        hashes[g] = *expected[g];
      else
        todo.push_back(g);
    }
    std::mutex mu;
    std::string error;
    std::atomic<uint64_t> decoded{0};
    std::vector<std::vector<uint8_t>> bufs(std::max(1u, threads_), std::vector<uint8_t>(bs));
    parallel_for(todo.size(), threads_, [&](size_t k, unsigned w) {
      const uint32_t g = todo[k];
      const uint32_t f = leader[g];
      try {
        // A small file is a slice of its fragment block: hashed from the cached block, without
        // reading its inode again (most of a small-file shard's files).
        const FileInode& small = inodes_[f];
        if (small.size < bs && small.fragment_index != fmt::kNoFragment) {
          const reader::Chunk frag = in_.image->read_fragment(small.fragment_index);
          if (small.fragment_offset > frag.len || small.size > frag.len - small.fragment_offset)
            throw Error("its tail lies outside fragment block " + std::to_string(small.fragment_index));
          const uint8_t* content = frag.data + small.fragment_offset;
          hashes[g] = content_hash(content, size_t(small.size));
          if (earlier_scheme) check_hashes[g] = content_hash(content, size_t(small.size), check_scheme);
          decoded += small.size;
          if (expected[g] && !(in_manifest_scheme(g) == *expected[g]))
            throw Error("its content does not match the manifest trailer (damaged fragment block " +
                        std::to_string(small.fragment_index) + ")");
          return;
        }
        const reader::Inode ino = in_.image->read_inode(inodes_[f].ref, true);
        ContentHasher h;
        std::optional<ContentHasher> check;
        if (earlier_scheme) check.emplace(check_scheme);
        reader::hash_stored_content(*in_.image, ino, bufs[w].data(), {&h, check ? &*check : nullptr});
        hashes[g] = h.digest();
        if (check) check_hashes[g] = check->digest();
        decoded += ino.size;
        if (expected[g] && !(in_manifest_scheme(g) == *expected[g]))
          throw Error("its content does not match the manifest trailer (damaged data blocks at " +
                      std::to_string(ino.blocks_start) + ")");
      } catch (const std::exception& e) {
        std::lock_guard lk(mu);
        // "IMAGE: path/in/image: cause", the reader's own "IMAGE: " taken off its message.
        if (error.empty())
          error = in_.path + ": " + in_.tree.rel_path_of(in_.tree.nodes[in_.tree.files[f]]) + ": " +
                  without_path_prefix(e.what(), in_.image->path());
      }
    });
    if (!error.empty()) throw Error(error);
    in_.decoded_bytes = decoded;
    for (uint32_t f = 0; f < in_.files.size(); ++f) in_.files[f].hash = hashes[group_of[f]];
    check_fragment_digests([&](uint32_t f) { return in_manifest_scheme(group_of[f]); });
  }

  // The small files' hashes just decoded must give the manifest's fragment digests: a damaged
  // fragment block that still decodes is caught here. hash_of(f): file f's content hash in the
  // manifest's scheme.
  template <typename HashOf>
  void check_fragment_digests(HashOf&& hash_of) const {
    if (!manifest_ || !manifest_->has_fragment_digests()) return;
    const uint32_t bs = in_.image->super().block_size;
    std::vector<FragmentMember> members;
    for (uint32_t f = 0; f < in_.files.size(); ++f) {
      const auto& ino = inodes_[f];
      if (ino.size && covered_by_fragment_digest(ino.size, bs, ino.fragment_index))
        members.push_back({ino.fragment_index, ino.inode_number, hash_of(f)});
    }
    const auto digests = fragment_digests(std::move(members), uint32_t(in_.fragments.size()));
    if (digests.size() != manifest_->fragment_digests.size())
      throw Error(in_.path + ": the manifest trailer has " + std::to_string(manifest_->fragment_digests.size()) +
                  " fragment digests for " + std::to_string(digests.size()) + " fragment blocks");
    for (size_t i = 0; i < digests.size(); ++i)
      if (!(digests[i] == manifest_->fragment_digests[i]))
        throw Error(in_.path + ": fragment block " + std::to_string(i) + " (at byte " +
                    std::to_string(in_.fragments[i].position) + ") does not match the manifest trailer: damaged");
  }

  // The decoded set of the inode's xattr index, shared by every entry that names that index
  // (nullptr for an empty one). Sets are held decoded until the new image is written. One
  // set is bounded by the reader (4 MiB), but out-of-line values let every set point at the
  // same stored value: a 12 KB image of 1,000 such sets took merge 8 GB. So the sets decoded
  // are bounded in all.
  SharedXattrs xattr_set(const reader::Inode& ino, uint32_t node) {
    auto [it, inserted] = xattr_sets_.try_emplace(ino.xattr_index);
    if (!inserted) return it->second;
    Xattrs x = in_.image->xattrs(ino);
    xattr_bytes_ += memory_of(x);
    if (xattr_bytes_ > kMaxXattrBytes)
      throw Error(in_.path + ": the decoded xattrs of its entries take more than " +
                  std::to_string(kMaxXattrBytes >> 20) + " MiB (at " + in_.tree.rel_path_of(in_.tree.nodes[node]) +
                  "), more than is held while the new image is written");
    if (!x.empty()) it->second = std::make_shared<const Xattrs>(std::move(x));
    return it->second;
  }

  InputImage& in_;
  uint64_t xattr_bytes_ = 0;                               // decoded so far, summed over distinct sets
  std::unordered_map<uint32_t, SharedXattrs> xattr_sets_;  // by xattr index
  unsigned threads_;
  std::optional<Manifest> manifest_;
  std::unordered_map<reader::InodeRef, uint32_t> by_ref_;
  std::vector<FileInode> inodes_;  // indexed like in_.files
};

}  // namespace

void check_stored_bytes(int fd, const std::string& path, const DataDigests& d, uint64_t begin, uint64_t end,
                        std::vector<uint8_t>& checked) {
  if (begin >= end) return;
  if (end > d.data_end) throw Error(path + ": bytes up to " + std::to_string(end) + " lie beyond the data digests");
  checked.resize(d.digests.size(), 0);
  for (size_t i = size_t(begin >> d.chunk_log); i <= size_t((end - 1) >> d.chunk_log); ++i) {
    if (checked[i]) continue;
    const uint64_t b = d.chunk_begin(i), e = d.chunk_end(i);
    const auto read = [&](uint64_t at, void* buf, size_t n) { pread_fully(fd, path, at, buf, n); };
    if (chunk_digest(read, b, e) != d.digests[i])
      throw Error(path + ": stored data bytes " + std::to_string(b) + ".." + std::to_string(e) +
                  " do not match the data digests trailer: damaged");
    checked[i] = 1;
  }
}

InputImage open_input_image(const std::string& path) {
  InputImage in;
  in.path = path;
  reader::ImageOptions small;
  small.cache_bytes = 8u << 20;
  in.image = reader::Image::open(path, small);
  if (in.image->offset() != 0) throw Error(path + ": an image inside a larger file cannot be an input");
  // The file opened, not whatever is at the name a moment later.
  if (::fstat(in.image->file_descriptor(), &in.st) != 0) throw Error(errno_message(path, errno));
  return in;
}

void load_input_image(InputImage& in, unsigned threads) { Loader(in, threads).run(); }

void check_input_unchanged(const InputImage& in, int fd) {
  struct stat now;
  if (fstat(fd, &now) != 0) throw Error(errno_message(in.path, errno));
  if (now.st_ino != in.st.st_ino || now.st_size != in.st.st_size || now.st_mtim.tv_sec != in.st.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != in.st.st_mtim.tv_nsec)
    throw Error(in.path + ": changed while it was being read");
}

}  // namespace sqar::ops
