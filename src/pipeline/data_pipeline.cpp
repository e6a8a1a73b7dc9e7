#include "pipeline/data_pipeline.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "common/all_zero.h"
#include "common/content_hash.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "dedup/dedup_index.h"
#include "dedup/reuse_index.h"
#include "pipeline/block_job.h"
#include "pipeline/block_writer.h"
#include "pipeline/content_source.h"
#include "pipeline/first_error.h"
#include "pipeline/hard_link_names.h"
#include "pipeline/ordered_compressor.h"
#include "pipeline/prestored.h"
#include "pipeline/read_ahead.h"
#include "pipeline/source_reader.h"
#include "writer/image_file.h"

namespace sqar {
namespace {

// How a file's content reaches the sequencer.
enum class FileKind : uint8_t {
  kEmpty,        // size 0: nothing to read
  kUnique,       // no other file has its size: streamed, hashed on the way (for the manifest)
  kSharedSmall,  // shares its size and fits one read unit: hashed in memory, then dedup decided
  kPrehashed,    // shares its size and is large: hashed in a first pass, dedup decided up front
  kStored,       // already in the image (DataOptions::prestored)
};

// Planning and the sequencer. Every decision that shapes the image (which file owns a content,
// where blocks are cut, how tails are packed, the order blocks are written in) is taken here on
// one thread in image order; the readers, compressors and writer around it only move bytes.
class DataPipeline final : public UnitReader {
 public:
  DataPipeline(Tree& tree, ImageFile& out, const DataOptions& opt)
      : tree_(tree),
        out_(out),
        opt_(opt),
        block_size_(opt.codec.block_size),
        threads_(std::max(1u, opt.threads)),
        links_(tree) {
    // A read unit is a whole number of blocks of about 1 MiB: big enough for few syscalls,
    // small enough to bound memory.
    chunk_ = std::max<uint64_t>(block_size_, (uint64_t(1) << 20) / block_size_ * block_size_);
    // Read-ahead: up to window_ units and about byte_budget_ bytes read but not yet sequenced.
    window_ = 256;
    byte_budget_ = uint64_t(8 * threads_ + 16) << 20;
    max_jobs_ = 4 * threads_ + 8;
  }

  DataResult run() {
    const size_t nfiles = tree_.files.size();
    locs_.resize(nfiles);
    kinds_.resize(nfiles);
    skip_.assign(nfiles, false);
    for (size_t i = 0; i < nfiles; ++i) skip_[i] = node_of(uint32_t(i)).omitted;
    refuse_files_of_too_many_blocks();
    classify();
    if (opt_.dedup) {
      size_t shared = 0;  // only files that share their size are looked up
      for (FileKind k : kinds_) shared += k != FileKind::kEmpty && k != FileKind::kUnique;
      dedup_.reserve(shared);
    }
    take_prestored();
    prehash();
    plan_units();

    // Destroyed in reverse order: the readers are joined before the compressors, whose wake-up
    // a failing reader still calls.
    BlockWriter writer(out_, locs_, block_sizes_, fragments_);
    OrderedCompressor compressor(opt_, writer, errors_, threads_, max_jobs_);
    ReadAhead reader(*this, total_units_, errors_, window_, byte_budget_);
    compressor_ = &compressor;
    reader.start(threads_);
    errors_.guard([&] { sequence(reader); });
    compressor_ = nullptr;
    errors_.throw_if_failed();
    compressor.close(stats_);
    errors_.throw_if_failed();
    out_.flush();
    for (const auto& [file, size] : cut_) tree_.nodes[tree_.files[file]].size = size;
    for (const auto& [file, link] : read_through_) move_inode_to_link(tree_, file, link, *links_.of(tree_.files[file]));
    return finish(writer.bytes_written());
  }

 private:
  const Node& node_of(uint32_t file) const { return tree_.nodes[tree_.files[file]]; }

  // A file of more blocks than sqar's reader takes (fmt::kMaxFileBlocks) would make an image
  // sqar cannot read back: checked before any file is hashed or read.
  void refuse_files_of_too_many_blocks() const {
    for (uint32_t i = 0; i < tree_.files.size(); ++i) {
      const Node& n = node_of(i);
      if (!n.omitted && (n.size + block_size_ - 1) / block_size_ > fmt::kMaxFileBlocks)
        throw Error(tree_.path_of(n) + ": " + std::to_string(n.size) + " bytes are more than " +
                    std::to_string(fmt::kMaxFileBlocks) + " blocks of " + std::to_string(block_size_) +
                    ", the most one file may have; use a larger block size (-b)");
    }
  }

  void skip_file(uint32_t file, const std::string& why) {
    if (!opt_.skip_unreadable) throw Error(why + " (--skip-unreadable leaves it out and goes on)");
    if (opt_.warn) opt_.warn(why + " (skipped)");
    skip_[file] = true;
    tree_.nodes[tree_.files[file]].omitted = true;
  }

  // Whether the read of this unit also reads the file's attributes (read_file_xattrs): with
  // its first unit, unless the hashing pass already did.
  bool reads_xattrs(const ReadUnit& u) const {
    return opt_.read_file_xattrs && u.offset == 0 && kinds_[u.file] != FileKind::kPrehashed;
  }

  // Keeps the attributes a reader found. Main thread only: nothing else touches Tree::xattrs
  // during the data phase.
  void store_xattrs(uint32_t file, XattrList& found) {
    if (!found.unstorable.empty()) warn_unstorable_xattrs(found, tree_.path_of(node_of(file)), opt_.warn);
    if (!found.stored.empty())
      tree_.xattrs[tree_.files[file]] = std::make_shared<const Xattrs>(std::move(found.stored));
  }

  // ---- planning (main thread, before the workers start) ----
  void classify() {
    std::unordered_map<uint64_t, uint32_t> per_size;
    for (uint32_t f : tree_.files) ++per_size[tree_.nodes[f].size];
    for (size_t i = 0; i < kinds_.size(); ++i) {
      uint64_t size = node_of(uint32_t(i)).size;
      if (opt_.prestored && opt_.prestored->stored[i])
        kinds_[i] = FileKind::kStored;
      else if (size == 0)
        kinds_[i] = FileKind::kEmpty;
      else if (!opt_.dedup || per_size[size] == 1)
        kinds_[i] = FileKind::kUnique;
      else
        kinds_[i] = size <= chunk_ && !opt_.content ? FileKind::kSharedSmall : FileKind::kPrehashed;
      // A file OLD may hold must be hashed before its blocks are cut, to know whether to copy
      // them: in memory when it is one read unit, in the hashing pass when it is more.
      if (reuse_candidate(size) && kinds_[i] == FileKind::kUnique)
        kinds_[i] = size <= chunk_ && !opt_.content ? FileKind::kSharedSmall : FileKind::kPrehashed;
    }
  }

  // Stored files come first in every dedup lookup, whatever their place in image order: their
  // data is written already, so a new file with the same content shares it instead of storing
  // it again. Their block words and fragments lead the tables this build fills.
  void take_prestored() {
    if (!opt_.prestored) return;
    PrestoredData& p = *opt_.prestored;
    block_sizes_ = std::move(p.block_sizes);
    fragments_ = p.fragments;
    fragment_count_ = uint32_t(p.fragments.size());
    for (uint32_t i = 0; i < kinds_.size(); ++i) {
      if (kinds_[i] != FileKind::kStored) continue;
      locs_[i] = p.files[i];
      locs_[i].same_as = kNoNode;
      const uint64_t size = node_of(i).size;
      if (opt_.dedup && size) {
        if (auto owner = dedup_.find_or_add_file(size, locs_[i].hash, i)) locs_[i].same_as = *owner;
      }
    }
  }

  bool reuse_candidate(uint64_t size) const { return opt_.reuse && size >= block_size_ && opt_.reuse->has_size(size); }

  // Called in image order once the file's hash is known and it owns its data.
  void look_up_reuse(uint32_t file, uint64_t size, const Hash128& hash) {
    if (!reuse_candidate(size)) return;
    if (auto first = opt_.reuse->find(size, hash)) reuse_first_.emplace(file, *first);
  }

  void prehash() {
    std::vector<uint32_t> todo;
    for (uint32_t i = 0; i < kinds_.size(); ++i)
      if (kinds_[i] == FileKind::kPrehashed && !skip_[i]) todo.push_back(i);
    if (todo.empty()) return;
    // Until the dedup decisions, every one of them counts as read again (plan_units takes
    // back the bytes of those that are not), so the bar does not fill during this pass.
    if (opt_.bytes_total)
      for (uint32_t f : todo) second_read_bytes_ += node_of(f).size;
    if (opt_.bytes_total) opt_.bytes_total->fetch_add(second_read_bytes_, std::memory_order_relaxed);
    prehash_.resize(kinds_.size());
    std::vector<int> errs(todo.size(), 0);
    std::vector<std::string> changed(todo.size());
    std::vector<uint64_t> hashed(todo.size(), 0);
    std::vector<XattrList> xattrs(opt_.read_file_xattrs ? todo.size() : 0);
    std::vector<std::string> xattr_keys(todo.size());
    std::vector<OpenedFile> opened(todo.size());
    std::vector<uint32_t> through(todo.size(), kNoNode);
    std::vector<int> own_name_err(todo.size(), 0);
    ThreadPool pool(threads_);
    std::vector<DirectoryHandle> dirs(pool.threads());  // one a worker: the last directory it opened
    // Hashed on all cores; the decisions below are taken in image order.
    pool.parallel_for(todo.size(), [&](size_t k, unsigned w) {
      const Node& n = node_of(todo[k]);
      if (opt_.content) {  // hashed as it came in
        prehash_[todo[k]] = opt_.content->hash(tree_.files[todo[k]]);
        hashed[k] = n.size;
      } else {
        errs[k] = by_a_name(dirs[w], todo[k], through[k], own_name_err[k], [&](int dirfd, const char* name) {
          return hash_source_file(dirfd, name, n.size, prehash_[todo[k]], changed[k], hashed[k],
                                  opt_.read_file_xattrs ? &xattrs[k] : nullptr, &xattr_keys[k], &opened[k]);
        });
      }
      if (opt_.bytes_done) opt_.bytes_done->fetch_add(n.size, std::memory_order_relaxed);
    });
    // Dedup decisions in image order: the first file of a content owns the data.
    for (size_t k = 0; k < todo.size(); ++k) {
      uint32_t f = todo[k];
      const Node& n = node_of(f);
      if (!opt_.content) stats_.bytes_read += n.size;  // a tar member was not read for its hash
      if (errs[k] == ENOENT || errs[k] == kNotRegularFile) {
        left_out_before_read(f, errs[k]);
        continue;
      }
      if (errs[k]) {
        skip_file(f, errno_message(xattr_error_subject(tree_.path_of(n), xattr_keys[k]), errs[k]));
        continue;
      }
      if (!opt_.content) note_read_through(f, through[k], own_name_err[k]);
      if (hashed[k] < n.size) {
        // Its content is no longer n.size bytes, so it is no duplicate of a file of that size:
        // stored on its own by the data pass, which finds (and reports) where it ends then,
        // and reads its attributes with its first range.
        if (opt_.strict) warn_shrank(f, hashed[k]);  // throws
        kinds_[f] = FileKind::kUnique;
        continue;
      }
      if (!opt_.content) take_attributes_of_opened(f, opened[k]);
      if (!changed[k].empty()) grew(f);  // the hash is of its first n.size bytes, as stored
      if (opt_.read_file_xattrs) store_xattrs(f, xattrs[k]);
      locs_[f].hash = prehash_[f];
      if (!share_if_duplicate(f, n.size, prehash_[f])) {
        look_up_reuse(f, n.size, prehash_[f]);
      } else {
        // A duplicate is stored as this pass read it (the data pass does not read it again).
        warn_changed_during_read(f, opened[k].written_during_read, opened[k].changed_during_read);
      }
    }
  }

  // Returns true when `file` now shares an earlier file's data.
  bool share_if_duplicate(uint32_t file, uint64_t size, const Hash128& hash) {
    if (!opt_.dedup) return false;  // hashed only for --reuse
    auto orig = dedup_.find_or_add_file(size, hash, file);
    if (!orig) return false;
    if (opt_.verify_dedup && !(opt_.content ? opt_.content->identical(tree_.files[*orig], tree_.files[file], size)
                                            : source_files_identical(*orig, file, size))) {
      if (opt_.warn)
        opt_.warn(tree_.path_of(node_of(file)) + ": XXH3-128 collision with " + tree_.path_of(node_of(*orig)) +
                  ", stored separately");
      return false;
    }
    locs_[file].same_as = *orig;
    ++stats_.dedup_files;
    stats_.dedup_bytes += size;
    return true;
  }

  // Read units are produced on the fly by a cursor (a list of them cost 32 bytes per file);
  // here they are only counted, and each file gets its slots in the block size pool, sized
  // once so the writer thread can fill them while the sequencer runs.
  void plan_units() {
    has_units_.assign(kinds_.size(), false);
    uint64_t blocks = 0;
    for (uint32_t i = 0; i < kinds_.size(); ++i) {
      if (kinds_[i] == FileKind::kEmpty) {
        locs_[i].hash = content_hash("", 0);
        continue;
      }
      if (kinds_[i] == FileKind::kStored) continue;
      if (skip_[i] || locs_[i].same_as != kNoNode) continue;
      const uint64_t size = node_of(i).size;
      has_units_[i] = true;
      total_units_ += (size + chunk_ - 1) / chunk_;
      if (blocks > UINT32_MAX - size / block_size_)
        throw Error("more than 2^32 data blocks in one image; use a larger block size (-b)");
      locs_[i].first_block = uint32_t(blocks);
      blocks += size / block_size_;
    }
    const uint64_t base = block_sizes_.size();  // the stored files' words (take_prestored)
    if (blocks > UINT32_MAX - base)
      throw Error("more than 2^32 data blocks in one image; use a larger block size (-b)");
    for (uint32_t i = 0; i < kinds_.size(); ++i)
      if (has_units_[i]) locs_[i].first_block += uint32_t(base);
    if (opt_.bytes_total) {
      uint64_t read_again = 0;
      for (uint32_t i = 0; i < kinds_.size(); ++i)
        if (has_units_[i] && kinds_[i] == FileKind::kPrehashed) read_again += node_of(i).size;
      opt_.bytes_total->fetch_sub(second_read_bytes_ - std::min(read_again, second_read_bytes_),
                                  std::memory_order_relaxed);
    }
    block_sizes_.resize(base + blocks, 0);
    late_blocks_ = base + blocks;
  }

  // ---- what the readers read (UnitReader; called on reader threads) ----

  // The next read unit in image order; called under the read stage's lock only.
  ReadUnit next_unit() override {
    while (!has_units_[cursor_file_]) ++cursor_file_;
    const uint64_t size = node_of(cursor_file_).size;
    ReadUnit u{cursor_file_, cursor_offset_, std::min(chunk_, size - cursor_offset_), false};
    u.last = u.offset + u.len == size;
    // As for files on disk, the last unit is always read (a zero tail is found by its bytes).
    u.hole = opt_.content && !u.last && opt_.content->range_is_hole(tree_.files[u.file], u.offset, u.len);
    if (u.last) {
      ++cursor_file_;
      cursor_offset_ = 0;
    } else {
      cursor_offset_ += u.len;
    }
    return u;
  }

  // The directory holding n, opened one name at a time from its SOURCE without following a
  // symlink (the handle keeps it open for the next file there); -1 with errno set. A directory
  // on the way replaced by a file or a symlink since the scan is gone (ENOENT), as the scan
  // takes it.
  int directory_of(DirectoryHandle& dir, const Node& n) const {
    // Entries of the root come from several SOURCE directories: the source is part of the key.
    const uint64_t key = n.parent == 0 ? uint64_t(n.source) << 32 : n.parent;
    const int fd = dir.open(key, tree_.source_dirs[n.source],
                            [&] { return n.parent == 0 ? std::string() : tree_.rel_path_of(tree_.nodes[n.parent]); });
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) errno = ENOENT;
    return fd;
  }

  bool source_files_identical(uint32_t a, uint32_t b, uint64_t size) {
    const Node &na = read_name_of(a), &nb = read_name_of(b);
    const int dir_a = directory_of(compare_dirs_[0], na), dir_b = directory_of(compare_dirs_[1], nb);
    return dir_a >= 0 && dir_b >= 0 &&
           sqar::source_files_identical(dir_a, tree_.name_cstr(na), dir_b, tree_.name_cstr(nb), size);
  }

  // Returns 0, an errno value, or SourceRead::kReadPending (then `read` holds the open file).
  int start_read(DirectoryHandle& dir, ReadSlot& s, SourceRead& read) override {
    const ReadUnit& u = s.unit;
    s.hole = false;
    if (opt_.content) {
      if (u.hole) {
        s.hole = true;
        s.data.clear();
        return 0;
      }
      s.data.resize(u.len);
      return opt_.content->read(tree_.files[u.file], u.offset, u.len, s.data.data());
    }
    return by_a_name(dir, u.file, s.through, s.own_name_err, [&](int dirfd, const char* name) {
      s.xattr_key.clear();
      return start_unit(read, dirfd, name, s, reads_xattrs(u));
    });
  }

  // Calls open(dirfd, name) for file f's name, and when that name is gone or holds something
  // else than a regular file now, for each of its hard links in turn until one holds a regular
  // file: the inode outlives the name the scan found first. `through` receives the entry whose
  // name was used, `own_name_err` what the file's own name gave. Returns what open returned
  // (for the file's own name when no link holds the file either).
  template <class Open>
  int by_a_name(DirectoryHandle& dir, uint32_t f, uint32_t& through, int& own_name_err, Open&& open) const {
    const uint32_t owner = tree_.files[f];
    through = owner;
    own_name_err = open_by_name(dir, owner, open);
    if (own_name_err != ENOENT && own_name_err != kNotRegularFile) return own_name_err;
    if (const std::vector<uint32_t>* links = links_.of(owner)) {
      for (uint32_t link : *links) {
        const int rc = open_by_name(dir, link, open);
        if (rc == ENOENT || rc == kNotRegularFile) continue;
        through = link;
        return rc;
      }
    }
    return own_name_err;
  }
  template <class Open>
  int open_by_name(DirectoryHandle& dir, uint32_t node, Open& open) const {
    const Node& n = tree_.nodes[node];
    const int dirfd = directory_of(dir, n);
    return dirfd < 0 ? errno : open(dirfd, tree_.name_cstr(n));
  }

  // The entry whose name file f was read through (sequencer thread).
  const Node& read_name_of(uint32_t f) const {
    const auto it = read_through_.find(f);
    return tree_.nodes[it == read_through_.end() ? tree_.files[f] : it->second];
  }

  // Starts reading s.unit of the file `name` in `dirfd` into the slot: the one way units are
  // read, so that every slot says whether its range lay in a hole (and so has no bytes).
  static int start_unit(SourceRead& read, int dirfd, const char* name, ReadSlot& s, bool with_xattrs) {
    const ReadUnit& u = s.unit;
    const int rc = read.start(dirfd, name, u.offset, u.len, u.last, s.data, s.changed,
                              with_xattrs ? &s.xattrs : nullptr, &s.xattr_key, &s.opened);
    s.hole = rc == 0 && read.range_was_hole();
    return rc;
  }

  // ---- sequencer (main thread) ----
  void sequence(ReadAhead& reader) {
    frag_buf_ = std::make_shared<SourceBytes>();
    for (size_t i = 0; i < total_units_; ++i) {
      ReadSlot* s = reader.wait(i);
      if (!s) return;  // failed
      process_unit(s->unit, *s);
      reread_orphans();
      reader.release(i);
      if (errors_.failed()) return;
    }
    flush_fragment();
  }

  void process_unit(const ReadUnit& u, ReadSlot& s) {
    const uint32_t f = u.file;
    if (skip_[f] || ended_before(f, u.offset)) return;
    const Node& n = node_of(f);
    // The file or its directory is gone, or something else than a regular file is at its name.
    if (s.err == ENOENT || s.err == kNotRegularFile) {
      const bool gone = s.err == ENOENT;
      if (u.offset == 0) {
        left_out_before_read(f, s.err);
      } else {
        file_changed(f, gone ? "vanished while being read" : "was replaced while being read",
                     "stored its first " + std::to_string(u.offset) + " bytes");
        end_at(f, u.offset);
      }
      return;
    }
    if (s.err) {
      if (u.offset != 0) throw Error(errno_message(tree_.path_of(n), s.err));
      skip_file(f, errno_message(xattr_error_subject(tree_.path_of(n), s.xattr_key), s.err));
      return;
    }
    if (!opt_.content) {
      if (u.offset == 0) {
        note_read_through(f, s.through, s.own_name_err);
        first_open_ = s.opened;
        take_attributes_of_opened(f, s.opened);
      } else if (s.opened.inode != first_open_.inode) {
        // The units of a large file are read through separate opens: all must read one file.
        file_changed(f, "was replaced while being read",
                     "stored the first " + std::to_string(u.offset) + " bytes of the file found first");
        end_at(f, u.offset);
        return;
      }
      // Written to in place while a unit was read, or between two of its units (as tar says,
      // "file changed as we read it"): what is stored may mix two versions. Only its mode,
      // owner or links changed when the ctime moved but not the mtime. A read that saw the
      // file grow or shrink is named so below instead.
      const bool later_unit = u.offset != 0;
      const bool written =
          s.opened.written_during_read || (later_unit && time_moved(s.opened.mtime_exact, first_open_.mtime_exact));
      const bool changed =
          s.opened.changed_during_read || (later_unit && time_moved(s.opened.ctime, first_open_.ctime));
      if (s.changed.empty()) warn_changed_during_read(f, written, changed);
    }
    // A file stores what was read of its first n.size bytes (the size the scan saw): all of
    // them when it grew, up to where it ends now when it shrank.
    uint64_t len = u.len;
    bool last = u.last;
    if (s.hole) {
      store_hole(u, s);
      return;
    }
    if (s.data.size() < u.len) {
      len = s.data.size();
      last = true;
      cut_[f] = u.offset + len;
      warn_shrank(f, u.offset + len);
    } else if (!s.changed.empty()) {
      grew(f);
    }
    if (reads_xattrs(u)) store_xattrs(f, s.xattrs);
    stats_.bytes_read += len;
    if (opt_.bytes_done) opt_.bytes_done->fetch_add(len, std::memory_order_relaxed);
    const size_t full_blocks = size_t(len / block_size_);
    // Only full blocks go to the compressors and need a shared buffer; a small file's bytes stay
    // in the slot (its buffer is reused: no allocation per small file).
    BlockBuffer data;
    if (full_blocks) data = std::make_shared<SourceBytes>(std::move(s.data));
    const uint8_t* bytes = full_blocks ? data->data() : s.data.data();
    FileLocation& loc = locs_[f];
    if (u.offset == 0) {
      if (kinds_[f] == FileKind::kSharedSmall) {
        loc.hash = content_hash(bytes, len);
        if (len && share_if_duplicate(f, len, loc.hash)) return;
        look_up_reuse(f, len, loc.hash);
      } else {
        hasher_.reset();
      }
    }
    if (kinds_[f] != FileKind::kSharedSmall && !opt_.content) hasher_.update(bytes, len);

    const auto reuse = reuse_first_.find(f);
    for (size_t b = 0; b < full_blocks; ++b) {
      auto job = std::make_unique<BlockJob>();
      job->file = f;
      job->index = uint32_t(u.offset / block_size_ + b);
      job->buf = data;
      job->off = b * block_size_;
      job->len = block_size_;
      job->sparse = all_zero(bytes + job->off, job->len);
      if (reuse != reuse_first_.end()) job->reuse_block = reuse->second + job->index;
      submit(std::move(job));
    }
    if (!last) return;
    if (reuse != reuse_first_.end()) reuse_first_.erase(reuse);
    finish_hash(f);
    const size_t tail = size_t(len % block_size_);
    if (tail == 0) return;
    const uint8_t* tail_bytes = bytes + full_blocks * block_size_;
    if (all_zero(tail_bytes, tail)) {
      // A zero tail is a sparse last block (size word 0, no fragment), as mksquashfs stores
      // it, so unpacking keeps the hole; the metadata writer adds it to the block list.
      ++sparse_tails_;
      return;
    }
    add_tail(f, tail_bytes, tail);
  }

  // A unit that lies in a hole of a sparse file (never a file's last unit, so never a tail):
  // its blocks are sparse, and the file's hash takes them as a hole (no bytes hashed) instead
  // of a buffer filled and scanned for each unit.
  void store_hole(const ReadUnit& u, ReadSlot& s) {
    const uint32_t f = u.file;
    if (reads_xattrs(u)) store_xattrs(f, s.xattrs);
    stats_.bytes_read += u.len;
    if (opt_.bytes_done) opt_.bytes_done->fetch_add(u.len, std::memory_order_relaxed);
    if (u.offset == 0) hasher_.reset();
    const auto reuse = reuse_first_.find(f);
    for (uint64_t b = 0; b < u.len / block_size_; ++b) {
      hasher_.update_zeros(block_size_);
      auto job = std::make_unique<BlockJob>();
      job->file = f;
      job->index = uint32_t(u.offset / block_size_ + b);
      job->len = block_size_;
      job->sparse = true;
      if (reuse != reuse_first_.end()) job->reuse_block = reuse->second + job->index;
      submit(std::move(job));
    }
  }

  // ---- files that change while they are read (sequencer thread) ----

  // An error with --strict; otherwise one warning per file, saying what was stored.
  void file_changed(uint32_t f, const std::string& what, const std::string& stored) {
    const std::string path = tree_.path_of(node_of(f));
    if (opt_.strict) throw Error(path + ": " + what + " (--strict)");
    if (warned_.insert(f).second && opt_.warn) opt_.warn(path + ": " + what + "; " + stored);
  }
  // A file whose times moved while it was read: written to (what is stored may mix two
  // versions), or only its mode, owner or links changed (it keeps those of the open).
  void warn_changed_during_read(uint32_t f, bool written, bool changed) {
    if (written)
      file_changed(f, "was written to while being read", "stored what was read, which may mix its versions");
    else if (changed)
      file_changed(f, "had its mode, owner or links changed while being read",
                   "stored the attributes it had when opened");
  }
  void grew(uint32_t f) {
    const std::string size = std::to_string(node_of(f).size);
    file_changed(f, "grew while being read (" + size + " bytes when scanned)", "stored its first " + size + " bytes");
  }
  void warn_shrank(uint32_t f, uint64_t now) {
    file_changed(f, "shrank while being read (" + std::to_string(node_of(f).size) + " bytes when scanned)",
                 "stored the " + std::to_string(now) + " bytes it still had");
  }
  // The entry gets the mode, owner and mtime of the file whose content is stored, as it was
  // opened: a file replaced after the scan (a secret written to a temporary file with mode
  // 0600 and renamed over the name) must not be stored with the old file's mode 0644.
  void take_attributes_of_opened(uint32_t f, const OpenedFile& now) {
    Node& n = tree_.nodes[tree_.files[f]];
    const uint32_t uid = opt_.fixed_uid ? n.uid : now.uid, gid = opt_.fixed_gid ? n.gid : now.gid;
    const uint32_t mtime = opt_.fixed_mtime ? n.mtime : uint32_t(std::clamp<int64_t>(now.mtime, 0, UINT32_MAX));
    const bool mode_differs = (n.mode & 07777) != (now.mode & 07777);
    const bool owner_differs = n.uid != uid || n.gid != gid;
    if (!mode_differs && !owner_differs && n.mtime == mtime) return;
    auto octal = [](mode_t m) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%04o", unsigned(m & 07777));
      return std::string(buf);
    };
    std::string what;
    if (mode_differs) what += ", mode " + octal(n.mode) + " -> " + octal(now.mode);
    if (owner_differs)
      what += ", owner " + std::to_string(n.uid) + ":" + std::to_string(n.gid) + " -> " + std::to_string(uid) + ":" +
              std::to_string(gid);
    if (n.mtime != mtime) what += ", mtime " + std::to_string(n.mtime) + " -> " + std::to_string(mtime);
    n.mode = (n.mode & S_IFMT) | (now.mode & 07777);
    n.uid = uid;
    n.gid = gid;
    n.mtime = mtime;
    // A changed mtime alone is a file written to since the scan, which is common in a live
    // tree (logs): stored as read, without a warning unless the owner or mode changed too.
    if (mode_differs || owner_differs || opt_.strict)
      file_changed(f, "changed after the scan (" + what.substr(2) + ")", "stored with the attributes it had when read");
  }

  // A hard-linked file read through another of its names, since its own one vanished or holds
  // something else now: stored under its other names, which still name it on disk (the image
  // leaves out only the name that went), and the entries are rewired once the readers are done
  // (move_inode_to_link).
  void note_read_through(uint32_t f, uint32_t through, int own_name_err) {
    if (through == tree_.files[f]) {
      read_through_.erase(f);
      return;
    }
    if (!read_through_.insert_or_assign(f, through).second) return;  // the hashing pass said so already
    file_changed(f, own_name_err == ENOENT ? "vanished before it was read" : "is no longer a regular file",
                 "stored through its hard link " + tree_.path_of(through));
  }

  // A file whose first open found it gone (ENOENT), or found something else at its name
  // (kNotRegularFile: a FIFO, a directory, a symlink, a device, a socket, which is not read).
  void left_out_before_read(uint32_t f, int err) {
    std::string stored = "left out";
    // Its other names are entries of the same inode, which is read through this one: they go
    // too, and are named (rare, so the search of the tree for them costs nothing in general).
    if (const uint32_t owner = tree_.files[f]; tree_.nodes[owner].link_count > 1) {
      std::string names;
      for (uint32_t i = 0; i < tree_.nodes.size(); ++i)
        if (tree_.nodes[i].link_target == owner) names += (names.empty() ? "" : ", ") + tree_.path_of(i);
      if (!names.empty()) stored += ", and with it its hard links " + names;
    }
    file_changed(f, err == ENOENT ? "vanished before it was read" : "is no longer a regular file", stored);
    skip_[f] = true;
    tree_.nodes[tree_.files[f]].omitted = true;
    if (kinds_[f] == FileKind::kPrehashed) orphan_duplicates_of(f);
  }
  // Whether file f ended (shrank, vanished or was replaced) before byte `offset`.
  bool ended_before(uint32_t f, uint64_t offset) const {
    if (cut_.empty()) return false;
    const auto c = cut_.find(f);
    return c != cut_.end() && offset >= c->second;
  }
  // Ends file f at `size`, where its units so far ended (whole blocks), when the next one found
  // it gone or replaced.
  void end_at(uint32_t f, uint64_t size) {
    cut_[f] = size;
    if (const auto r = reuse_first_.find(f); r != reuse_first_.end()) reuse_first_.erase(r);
    finish_hash(f);
  }

  // Called once a file's stored content is complete. A file's hash is the hash of exactly the
  // bytes stored, and files found equal by the hashing pass share the data of the first: if
  // that one stored other bytes than the pass hashed, each of them is read and stored on its
  // own (reread_orphans).
  void finish_hash(uint32_t f) {
    if (kinds_[f] == FileKind::kSharedSmall) return;  // hashed whole when its only unit came in
    locs_[f].hash = opt_.content ? opt_.content->hash(tree_.files[f]) : hasher_.digest();
    if (kinds_[f] == FileKind::kPrehashed && (!(locs_[f].hash == prehash_[f]) || cut_.count(f))) {
      file_changed(f, "changed between the hashing pass and the read that stored it", "stored the second read");
      orphan_duplicates_of(f);
    }
  }
  void orphan_duplicates_of(uint32_t owner) {
    const uint64_t size = node_of(owner).size;
    for (uint32_t i = owner + 1; i < locs_.size(); ++i) {  // the owner is the first of its content
      if (locs_[i].same_as != owner) continue;
      locs_[i].same_as = kNoNode;
      --stats_.dedup_files;
      stats_.dedup_bytes -= size;
      orphans_.push_back(i);
    }
  }
  // Reads and stores the files orphan_duplicates_of() took from an owner, here on the
  // sequencer thread (a rare case: a large file changed between its two reads). Their block
  // size words go after the planned ones; the writer makes room for them.
  void reread_orphans() {
    while (!orphans_.empty()) {
      const uint32_t f = orphans_.front();
      orphans_.pop_front();
      const Node& n = node_of(f);
      if (late_blocks_ > UINT32_MAX - n.size / block_size_)
        throw Error("more than 2^32 data blocks in one image; use a larger block size (-b)");
      locs_[f].first_block = uint32_t(late_blocks_);
      late_blocks_ += n.size / block_size_;
      ReadSlot s;
      SourceRead read;
      for (uint64_t off = 0; off < n.size && !skip_[f] && !ended_before(f, off); off += chunk_) {
        s.unit = ReadUnit{f, off, std::min(chunk_, n.size - off), off + chunk_ >= n.size};
        s.changed.clear();
        s.err = by_a_name(orphan_dir_, f, s.through, s.own_name_err, [&](int dirfd, const char* name) {
          return start_unit(read, dirfd, name, s, /*with_xattrs=*/false);
        });
        if (s.err == SourceRead::kReadPending) s.err = read.finish(s.data, s.changed);
        process_unit(s.unit, s);
      }
    }
  }

  void add_tail(uint32_t f, const uint8_t* p, size_t len) {
    FileLocation& loc = locs_[f];
    const Hash128 h = hash128(p, len);
    // Identical tails share one fragment slot. With --verify-dedup tails are not shared, since
    // the earlier tail may no longer be in memory to compare against.
    if (opt_.dedup && !opt_.verify_dedup) {
      if (auto where = dedup_.find_tail(uint32_t(len), h)) {
        loc.fragment = where->fragment;
        loc.fragment_offset = where->offset;
        stats_.tail_dedup_bytes += len;
        return;
      }
    }
    if (frag_buf_->size() + len > block_size_) flush_fragment();
    loc.fragment = fragment_count_;
    loc.fragment_offset = uint32_t(frag_buf_->size());
    frag_buf_->insert(frag_buf_->end(), p, p + len);
    // Only tails of files longer than a block are remembered: a shorter file's tail is its whole
    // content, and whole-file dedup already shares identical files. Remembering those too cost
    // 5 MB on the ports set (66k entries) for sharing that whole-file dedup had done.
    if (opt_.dedup && node_of(f).size > block_size_)
      dedup_.add_tail(uint32_t(len), h, {loc.fragment, loc.fragment_offset});
  }

  void flush_fragment() {
    if (frag_buf_->empty()) return;
    auto job = std::make_unique<BlockJob>();
    job->is_fragment = true;
    job->index = fragment_count_++;
    job->len = frag_buf_->size();
    if (opt_.reuse) {
      if (auto old = opt_.reuse->find_fragment(job->len, hash128(frag_buf_->data(), job->len))) job->reuse_block = *old;
    }
    job->buf = std::move(frag_buf_);
    submit(std::move(job));
    frag_buf_ = std::make_shared<SourceBytes>();
    frag_buf_->reserve(block_size_);
  }

  void submit(std::unique_ptr<BlockJob> job) { compressor_->submit(std::move(job)); }

  DataResult finish(uint64_t data_bytes_written) {
    DataResult r;
    for (size_t i = 0; i < locs_.size(); ++i) {
      // Files left out (unreadable with --skip-unreadable, vanished) are not input to the image.
      if (!node_of(uint32_t(i)).omitted) stats_.bytes_in += node_of(uint32_t(i)).size;
      if (locs_[i].same_as != kNoNode) {
        // Point the duplicate at its owner's blocks and fragment; keep its own hash.
        const FileLocation& owner = locs_[locs_[i].same_as];
        Hash128 h = locs_[i].hash;
        uint32_t same = locs_[i].same_as;
        locs_[i] = owner;
        locs_[i].hash = h;
        locs_[i].same_as = same;
      }
    }
    stats_.blocks_sparse += sparse_tails_;
    stats_.files = locs_.size();
    stats_.fragments = fragments_.size();
    stats_.data_bytes_written = data_bytes_written;
    r.files = std::move(locs_);
    r.fragments = std::move(fragments_);
    r.block_sizes = std::move(block_sizes_);
    if (opt_.prestored) r.stored_tail_files = opt_.prestored->stored_tail_files;
    r.stats = stats_;
    return r;
  }

  Tree& tree_;
  ImageFile& out_;
  const DataOptions& opt_;
  const uint32_t block_size_;
  const unsigned threads_;
  uint64_t chunk_;
  size_t window_, max_jobs_;

  std::vector<FileLocation> locs_;
  std::vector<FileKind> kinds_;
  std::vector<Hash128> prehash_;
  // File -> its first block in --reuse OLD, for files being sequenced (sequencer thread only).
  std::unordered_map<uint32_t, uint32_t> reuse_first_;
  const HardLinkNames links_;  // fixed before the workers start
  // Hard-linked files read through another name than their own -> that entry (main thread).
  std::unordered_map<uint32_t, uint32_t> read_through_;
  std::vector<bool> skip_;       // main thread only
  std::vector<bool> has_units_;  // fixed before the workers start
  size_t total_units_ = 0;
  uint32_t cursor_file_ = 0;
  uint64_t cursor_offset_ = 0;
  std::vector<uint32_t> block_sizes_;
  DedupIndex dedup_;
  DataStats stats_;

  // sequencer state
  ContentHasher hasher_;
  OpenedFile first_open_;  // of the file being sequenced, from its first unit
  // Files that ended before the size the scan saw -> the size they are stored with.
  std::unordered_map<uint32_t, uint64_t> cut_;
  std::unordered_set<uint32_t> warned_;  // files already reported as changed
  std::deque<uint32_t> orphans_;         // files to read again (orphan_duplicates_of)
  uint64_t late_blocks_ = 0;             // next block slot for them
  uint64_t second_read_bytes_ = 0;       // progress: the bytes the hashing pass added to bytes_total
  DirectoryHandle orphan_dir_;           // where they are read again
  DirectoryHandle compare_dirs_[2];      // --verify-dedup's two files (sequencer thread)
  BlockBuffer frag_buf_;
  uint32_t fragment_count_ = 0;
  uint64_t sparse_tails_ = 0;  // zero tails stored as sparse blocks (sequencer thread)

  // the stages around the sequencer (run())
  FirstError errors_;
  OrderedCompressor* compressor_ = nullptr;  // while the sequencer runs
  uint64_t byte_budget_ = 0;                 // read but not yet sequenced
  std::vector<FragmentLocation> fragments_;  // BlockWriter's during the run
};

}  // namespace

DataResult write_file_data(Tree& tree, ImageFile& out, const DataOptions& opt) {
  return DataPipeline(tree, out, opt).run();
}

}  // namespace sqar
