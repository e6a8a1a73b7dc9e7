#include "writer/metadata_writer.h"

#include <sqfs/dir_writer.h>
#include <sqfs/error.h>
#include <sqfs/frag_table.h>
#include <sqfs/id_table.h>
#include <sqfs/inode.h>
#include <sqfs/meta_writer.h>
#include <sqfs/xattr_writer.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "common/endian.h"
#include "common/error.h"
#include "format/squashfs.h"
#include "writer/image_file.h"
#include "writer/scratch_file.h"
#include "writer/sqfs_codec_adapter.h"

namespace sqar {
namespace {

struct SqfsDeleter {
  void operator()(void* p) const { sqfs_destroy(p); }
};
template <class T>
using SqfsPtr = std::unique_ptr<T, SqfsDeleter>;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using InodePtr = std::unique_ptr<sqfs_inode_generic_t, FreeDeleter>;

// An inode with `payload` bytes after it: a symlink's target (file inodes write their block
// list themselves, write_block_list).
InodePtr alloc_inode(uint32_t payload) {
  auto* p = static_cast<sqfs_inode_generic_t*>(std::calloc(1, sizeof(sqfs_inode_generic_t) + payload));
  if (!p) throw std::bad_alloc();
  p->payload_bytes_available = payload;
  p->payload_bytes_used = payload;
  return InodePtr(p);
}

class MetadataWriter {
 public:
  MetadataWriter(const Tree& tree, const DataResult& data, ImageFile& out, sqfs_super_t& super,
                 const MetadataOptions& opt)
      : tree_(tree), data_(data), out_(out), super_(super), opt_(opt), codec_(opt.codec), scratch_(out.directory()) {}

  MetadataResult run() {
    sqfs_file_t* file = out_.as_sqfs_file();
    sqfs_compressor_t* cmp = codec_.get();
    inode_writer_.reset(sqfs_meta_writer_create(file, cmp, 0));
    dir_meta_.reset(sqfs_meta_writer_create(scratch_.as_sqfs_file(), cmp, 0));
    if (!inode_writer_ || !dir_meta_) throw std::bad_alloc();
    dir_writer_.reset(
        sqfs_dir_writer_create(dir_meta_.get(), opt_.exportable ? SQFS_DIR_WRITER_CREATE_EXPORT_TABLE : 0));
    ids_.reset(sqfs_id_table_create(0));
    xattrs_.reset(sqfs_xattr_writer_create(0));
    if (!dir_writer_ || !ids_ || !xattrs_) throw std::bad_alloc();

    number_.assign(tree_.nodes.size(), 0);
    ref_.assign(tree_.nodes.size(), 0);
    writes_inode_.assign(tree_.nodes.size(), false);
    assign_inode_numbers();

    super_.inode_table_start = file->get_size(file);
    serialize_children();
    serialize(0);
    check(sqfs_meta_writer_flush(inode_writer_.get()), "the inode table");
    check(sqfs_meta_writer_flush(dir_meta_.get()), "the directory table");
    super_.root_inode_ref = ref_[0];
    super_.directory_table_start = file->get_size(file);
    scratch_.copy_to(out_);
    out_.flush();

    SqfsPtr<sqfs_frag_table_t> frags(sqfs_frag_table_create(0));
    if (!frags) throw std::bad_alloc();
    for (const auto& f : data_.fragments) {
      uint32_t idx;
      check(sqfs_frag_table_append(frags.get(), f.start, f.size_word, &idx), "the fragment table");
    }
    check(sqfs_frag_table_write(frags.get(), file, &super_, cmp), "the fragment table");
    if (opt_.exportable) {
      check(sqfs_dir_writer_write_export_table(dir_writer_.get(), file, cmp, number_[0], ref_[0], &super_),
            "the export table");
      super_.flags |= SQFS_FLAG_EXPORTABLE;
    }
    check(sqfs_id_table_write(ids_.get(), file, &super_, cmp), "the id table");
    check(sqfs_xattr_writer_flush(xattrs_.get(), file, &super_, cmp), "the xattr table");
    super_.inode_count = next_number_ - 1;

    MetadataResult r;
    r.inode_count = super_.inode_count;
    r.file_inode_numbers.assign(tree_.files.size(), 0);
    for (size_t i = 0; i < tree_.files.size(); ++i) r.file_inode_numbers[i] = number_[tree_.files[i]];
    r.xattr_sets = xattr_sets_;
    return r;
  }

 private:
  void check(int rc, const char* what) const {
    if (rc >= 0) return;
    if (!out_.last_error().empty()) throw Error(out_.last_error());
    if (!scratch_.last_error().empty()) throw Error(scratch_.last_error());
    throw Error(std::string("writing ") + what + " failed (libsquashfs error " + std::to_string(rc) + ")");
  }
  // Names the entry only on failure: building a path per call was a measurable share of this
  // serial phase (three per entry, 270k entries on the ports set).
  void check(int rc, const char* what, uint32_t node) const {
    if (rc >= 0) return;
    check(rc, (std::string(what) + " of " + tree_.path_of(node)).c_str());
  }

  bool present(uint32_t i) const {
    const Node& n = tree_.nodes[i];
    if (n.omitted) return false;
    return n.link_target == kNoNode || !tree_.nodes[n.link_target].omitted;
  }
  // The node whose metadata and inode a (possibly hard-linked) entry uses.
  uint32_t owner(uint32_t i) const {
    const Node& n = tree_.nodes[i];
    return n.link_target == kNoNode ? i : n.link_target;
  }

  // Inodes are numbered in the order they are written. Children are written before the
  // directory listing that names them, so a hard-linked inode is written at whichever of its
  // entries comes first in this order: every listing that names it is written later.
  void assign_inode_numbers() {
    directories_bottom_up([&](uint32_t dir) {
      for (uint32_t c : tree_.children(tree_.nodes[dir])) {
        if (!present(c)) continue;
        uint32_t o = owner(c);
        if (number_[o] == 0) {
          number_[o] = next_number_++;
          writes_inode_[c] = true;
        }
      }
    });
    number_[0] = next_number_++;
    writes_inode_[0] = true;
  }

  void serialize_children() {
    directories_bottom_up([&](uint32_t dir) {
      for (uint32_t c : tree_.children(tree_.nodes[dir]))
        if (present(c) && writes_inode_[c]) serialize(c);
    });
  }

  // Calls visit(dir) for the root and every directory below it, each after the directories
  // below it, subdirectories in listing order: the order inodes are numbered and written in.
  // A loop, not recursion: a tar member's path may be 100,000 levels deep, and recursing that
  // deep overflowed the stack.
  template <class Visit>
  void directories_bottom_up(const Visit& visit) {
    struct Frame {
      uint32_t dir, next, end;  // the directory and its children still to descend into
    };
    const auto frame = [&](uint32_t dir) {
      const Tree::NodeRange r = tree_.children(tree_.nodes[dir]);
      return Frame{dir, r.first, r.last};
    };
    std::vector<Frame> stack{frame(0)};
    while (!stack.empty()) {
      Frame& f = stack.back();
      while (f.next != f.end && !(present(f.next) && S_ISDIR(tree_.nodes[f.next].mode))) ++f.next;
      if (f.next != f.end) {
        const uint32_t sub = f.next++;
        stack.push_back(frame(sub));  // f is not used after this: push_back may move it
        continue;
      }
      const uint32_t dir = f.dir;
      stack.pop_back();
      visit(dir);
    }
  }

  uint32_t xattr_index(uint32_t i) {
    auto it = tree_.xattrs.find(i);
    if (!opt_.xattrs || it == tree_.xattrs.end()) return fmt::kNoXattr;
    check(sqfs_xattr_writer_begin(xattrs_.get(), 0), "xattrs");
    for (const auto& [k, v] : *it->second)
      check(sqfs_xattr_writer_add(xattrs_.get(), k.c_str(), v.data(), v.size()), "an xattr", i);
    uint32_t idx;
    check(sqfs_xattr_writer_end(xattrs_.get(), &idx), "xattrs");
    ++xattr_sets_;
    return idx;
  }

  uint32_t inode_time(const Node& n) const {
    int64_t t = n.mtime;
    if (opt_.mtime_override) t = *opt_.mtime_override;
    if (opt_.mtime_clamp && t > *opt_.mtime_clamp) t = *opt_.mtime_clamp;
    return uint32_t(std::clamp<int64_t>(t, 0, UINT32_MAX));
  }

  InodePtr directory_inode(uint32_t i) {
    const Node& n = tree_.nodes[i];
    check(sqfs_dir_writer_begin(dir_writer_.get(), 0), "a directory");
    uint32_t subdirs = 0;
    for (uint32_t c : tree_.children(n)) {
      if (!present(c)) continue;
      const uint32_t o = owner(c);
      const Node& child = tree_.nodes[o];
      if (S_ISDIR(child.mode)) ++subdirs;
      check(sqfs_dir_writer_add_entry(dir_writer_.get(), tree_.name_cstr(tree_.nodes[c]), number_[o], ref_[o],
                                      uint16_t(child.mode)),
            "the directory entry", c);
    }
    check(sqfs_dir_writer_end(dir_writer_.get()), "the directory listing", i);
    // The root's parent is conventionally inode_count + 1 (as mksquashfs writes it).
    const uint32_t parent = i == 0 ? uint32_t(next_number_) : number_[n.parent];
    InodePtr ino(sqfs_dir_writer_create_inode(dir_writer_.get(), 0, xattr_index(i), parent));
    if (!ino) throw std::bad_alloc();
    if (ino->base.type == SQFS_INODE_DIR)
      ino->data.dir.nlink = 2 + subdirs;
    else
      ino->data.dir_ext.nlink = 2 + subdirs;
    return ino;
  }

  // A file's block list as the inode stores it: the sizes of its full blocks, then one more
  // word when its tail has no fragment (0 for a sparse tail; a stored tail is never 0).
  struct BlockList {
    const uint32_t* full = nullptr;  // may be null when there are none
    size_t full_blocks = 0;
    std::optional<uint32_t> tail_word;
  };
  BlockList block_list(const Node& n) const {
    const FileLocation& loc = data_.files[n.file_index];
    BlockList list;
    list.full_blocks = size_t(n.size / super_.block_size);
    list.full = data_.block_sizes.data() + loc.first_block;
    const uint64_t tail = n.size % super_.block_size;
    // A tail without a fragment was all zeros: a sparse last block in the list (size word 0),
    // unless an input image stored it as a short block (PrestoredData::stored_tail_files).
    if (tail != 0 && loc.fragment == fmt::kNoFragment) {
      const uint32_t data_owner = loc.same_as == kNoNode ? n.file_index : loc.same_as;  // a duplicate has its data
      const bool stored =
          std::binary_search(data_.stored_tail_files.begin(), data_.stored_tail_files.end(), data_owner);
      list.tail_word = stored ? list.full[list.full_blocks] : 0u;
    }
    return list;
  }

  // The inode without its block list, which write_block_list appends after it: libsquashfs
  // would take the list as the inode's payload (a copy) and copy it again to the stack on its
  // way out, two copies of 128 MiB for a list of 2^25 blocks that an input image can claim.
  InodePtr file_inode(const Node& n, const BlockList& list) {
    const FileLocation& loc = data_.files[n.file_index];
    InodePtr ino = alloc_inode(0);
    ino->base.type = SQFS_INODE_EXT_FILE;
    auto& f = ino->data.file_ext;
    f.blocks_start = loc.blocks_start;
    f.file_size = n.size;
    const uint64_t sparse_blocks = uint64_t(std::count(list.full, list.full + list.full_blocks, 0u));
    const uint64_t sparse_tail = list.tail_word == 0u ? n.size % super_.block_size : 0;
    f.sparse = sparse_blocks * super_.block_size + sparse_tail;
    f.nlink = n.link_count;
    f.fragment_idx = loc.fragment;
    f.fragment_offset = loc.fragment == fmt::kNoFragment ? 0 : loc.fragment_offset;
    f.xattr_idx = fmt::kNoXattr;
    return ino;
  }

  // The block list follows the file inode's fixed part in the inode table, little-endian.
  void write_block_list(const BlockList& list, uint32_t node) {
    constexpr size_t kWords = 2048;
    std::array<uint8_t, kWords * 4> le;
    for (size_t done = 0; done < list.full_blocks;) {
      const size_t k = std::min(kWords, list.full_blocks - done);
      for (size_t j = 0; j < k; ++j) store_le32(le.data() + 4 * j, list.full[done + j]);
      check(sqfs_meta_writer_append(inode_writer_.get(), le.data(), k * 4), "the inode", node);
      done += k;
    }
    if (list.tail_word) {
      store_le32(le.data(), *list.tail_word);
      check(sqfs_meta_writer_append(inode_writer_.get(), le.data(), 4), "the inode", node);
    }
  }

  InodePtr other_inode(uint32_t i) {
    const Node& n = tree_.nodes[i];
    InodePtr ino;
    if (S_ISLNK(n.mode)) {
      const std::string& target = tree_.symlink_targets.at(i);
      ino = alloc_inode(uint32_t(target.size()));
      ino->base.type = SQFS_INODE_SLINK;
      ino->data.slink.nlink = n.link_count;
      ino->data.slink.target_size = uint32_t(target.size());
      std::memcpy(ino->extra, target.data(), target.size());
    } else if (S_ISCHR(n.mode) || S_ISBLK(n.mode)) {
      ino = alloc_inode(0);
      ino->base.type = S_ISCHR(n.mode) ? SQFS_INODE_CDEV : SQFS_INODE_BDEV;
      ino->data.dev.nlink = n.link_count;
      ino->data.dev.devno = n.rdev;
    } else {
      ino = alloc_inode(0);
      ino->base.type = S_ISFIFO(n.mode) ? SQFS_INODE_FIFO : SQFS_INODE_SOCKET;
      ino->data.ipc.nlink = n.link_count;
    }
    return ino;
  }

  void serialize(uint32_t i) {
    const uint32_t o = owner(i);
    const Node& n = tree_.nodes[o];
    std::optional<BlockList> blocks;
    if (S_ISREG(n.mode)) blocks = block_list(n);
    InodePtr ino = S_ISDIR(n.mode) ? directory_inode(o) : blocks ? file_inode(n, *blocks) : other_inode(o);
    ino->base.mode = uint16_t(n.mode);
    ino->base.mod_time = inode_time(n);
    ino->base.inode_number = number_[o];
    // Only the 65,537th distinct id fails (create checks the count up front; merge and append
    // meet it here).
    check(sqfs_id_table_id_to_index(ids_.get(), opt_.uid.value_or(n.uid), &ino->base.uid_idx),
          "the id table (at most 65,536 distinct owner and group ids)", o);
    check(sqfs_id_table_id_to_index(ids_.get(), opt_.gid.value_or(n.gid), &ino->base.gid_idx),
          "the id table (at most 65,536 distinct owner and group ids)", o);
    if (!S_ISDIR(n.mode)) {
      uint32_t x = xattr_index(o);
      if (x != fmt::kNoXattr) check(sqfs_inode_set_xattr_index(ino.get(), x), "the xattrs", o);
    }
    check(sqfs_inode_make_basic(ino.get()), "the inode", o);
    sqfs_u64 block;
    sqfs_u32 offset;
    sqfs_meta_writer_get_position(inode_writer_.get(), &block, &offset);
    ref_[o] = (block << 16) | offset;
    check(sqfs_meta_writer_write_inode(inode_writer_.get(), ino.get()), "the inode", o);
    if (blocks) write_block_list(*blocks, o);
  }

  const Tree& tree_;
  const DataResult& data_;
  ImageFile& out_;
  sqfs_super_t& super_;
  const MetadataOptions& opt_;
  SqfsCodecAdapter codec_;
  ScratchFile scratch_;  // the directory table, until the inode table is complete
  SqfsPtr<sqfs_meta_writer_t> inode_writer_, dir_meta_;
  SqfsPtr<sqfs_dir_writer_t> dir_writer_;
  SqfsPtr<sqfs_id_table_t> ids_;
  SqfsPtr<sqfs_xattr_writer_t> xattrs_;
  std::vector<uint32_t> number_;
  std::vector<uint64_t> ref_;
  std::vector<bool> writes_inode_;
  uint32_t next_number_ = 1;
  uint64_t xattr_sets_ = 0;
};

}  // namespace

MetadataResult write_metadata(const Tree& tree, const DataResult& data, ImageFile& out, sqfs_super_t& super,
                              const MetadataOptions& opt) {
  return MetadataWriter(tree, data, out, super, opt).run();
}

}  // namespace sqar
