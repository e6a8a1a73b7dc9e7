#include "ops/tar_export.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "codec/parallel_gzip.h"
#include "common/all_zero.h"
#include "common/display_name.h"
#include "common/error.h"
#include "common/owner_id.h"
#include "common/unique_fd.h"
#include "common/utf8_locale.h"
#include "format/squashfs.h"
#include "ops/decode_ahead.h"
#include "ops/extract_filter.h"
#include "ops/manifest_check.h"
#include "ops/path_table.h"
#include "ops/safe_dir.h"
#include "scan/tree.h"
#include "writer/image_file.h"

namespace sqar::ops {
namespace {

using reader::FileKind;
using reader::Inode;

constexpr uint32_t kNoXattr = 0xFFFFFFFF;

// Where the archive bytes go: the unnamed file that becomes OUTPUT; or, as tar writes them, a
// device or FIFO that OUTPUT names (/dev/null, a tape, a pipe a reader waits on), which a
// file renamed over it would replace; or standard output.
class Sink {
 public:
  explicit Sink(const std::string& output) : name_(output == "-" ? "standard output" : output) {
    if (output == "-") return;
    struct stat st;
    if (::stat(output.c_str(), &st) == 0 && is_stream(st.st_mode)) {
      // O_CREAT as tar opens it, so the kernel's protected_fifos applies (a FIFO another user
      // planted in /tmp is refused); no O_TRUNC, and what was opened is checked again, since
      // the name may have changed since the stat.
      device_.reset(::open(output.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666));
      if (!device_) throw_errno(output, errno);
      if (::fstat(device_.get(), &st) != 0 || !is_stream(st.st_mode))
        throw Error(output + ": changed from a device or FIFO while it was opened; nothing written");
      return;
    }
    file_.emplace(output, /*overwrite=*/true);  // as `tar -cf` replaces
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void write(const void* data, size_t len) {
    if (file_) return file_->append(data, len);
    const int fd = device_ ? device_.get() : STDOUT_FILENO;
    auto p = static_cast<const uint8_t*>(data);
    while (len) {
      ssize_t n = ::write(fd, p, len);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_errno(name_, errno);
      p += n, len -= size_t(n);
    }
  }
  // Bytes go out as they are written (standard output, a device, a FIFO): an error cannot
  // take back what was sent.
  bool streams() const { return !file_; }
  void commit() {
    if (file_) file_->commit();
    if (device_ && device_.close_checked() != 0 && errno != EINTR) throw_errno(name_, errno);
  }

 private:
  static bool is_stream(mode_t mode) { return S_ISCHR(mode) || S_ISBLK(mode) || S_ISFIFO(mode); }

  std::string name_;
  std::optional<ImageFile> file_;  // OUTPUT as a file
  UniqueFd device_;                // OUTPUT as a device or FIFO; with neither, standard output
};

struct ArchiveFree {
  void operator()(archive* a) const { archive_write_free(a); }
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

class Exporter {
 public:
  Exporter(reader::Image& image, const TarExportOptions& opt) : img_(image), opt_(opt) {}
  // After an error the sink is gone, and freeing the writer flushes what it buffered: that
  // goes nowhere (the unnamed file is discarded, a broken stream gets no more bytes).
  ~Exporter() {
    sink_ = nullptr;
    a_.reset();
  }
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  TarExportStats run() {
    check_patterns();
    open_manifest();
    Sink sink(opt_.output);
    sink_ = &sink;
    a_.reset(archive_write_new());
    if (!a_) throw Error("cannot set up the tar writer: out of memory");
    check(archive_write_set_format_pax_restricted(a_.get()), "");
    // Only SCHILY.xattr: GNU tar warns about every LIBARCHIVE.xattr record, bsdtar reads both.
    check(archive_write_set_format_option(a_.get(), "pax", "xattrheader", "SCHILY"), "");
    add_compression();
    check(archive_write_open2(a_.get(), this, nullptr, &Exporter::write_cb, nullptr, nullptr), "");
    write_all();
    check_deferred_content();
    check(archive_write_close(a_.get()), "");
    if (gzip_) gzip_->finish();
    sink.commit();
    sink_ = nullptr;
    return stats_;
  }

 private:
  // One archive entry as the walk found it, with everything read from the image that its
  // header needs; its content blocks are decoded ahead by the queue's workers.
  struct Item {
    std::string path;
    Inode inode;
    std::optional<Inode> content;  // a regular file with its block list (not a hard link)
    uint64_t full_blocks = 0;      // of content: decoded ahead into the queue's ring
    // The first file (in walk order) with its tail in a fragment block: one more queued job
    // decodes that block into the image's cache, where this file's tail and those of the files
    // after it are read without waiting.
    bool fetch_fragment = false;
    std::optional<std::string> link_to;  // a further name of an inode written before
    // The entry's image path in paths_, for a file named again later (a hard link's first
    // name, a content checked after the last entry); the root otherwise.
    PathTable::Id path_id = PathTable::kRoot;
    std::string symlink;
    std::vector<std::pair<std::string, std::string>> xattrs;
  };
  using Queue = DecodeAheadQueue<Item>;

  // A directory leading to the current entry of the walk. Its path is the first path_length
  // bytes of the entry's: a string per level would be quadratic in the depth (a 20,000-deep
  // crafted image took 800 MB).
  struct OpenDir {
    size_t path_length;
    Inode inode;
    ExtractFilter::Mark mark;
    bool written;  // archived already (a selected directory, or one leading to a selection)
  };

  static la_ssize_t write_cb(archive* a, void* self, const void* buf, size_t len) {
    auto* me = static_cast<Exporter*>(self);
    if (!me->sink_) return la_ssize_t(len);
    try {
      if (me->gzip_)
        me->gzip_->write(buf, len);
      else
        me->sink_->write(buf, len);
      return la_ssize_t(len);
    } catch (const std::exception& e) {
      me->write_error_ = e.what();
      archive_set_error(a, EIO, "%s", e.what());
      return -1;
    }
  }

  void add_compression() {
    if (opt_.compression == TarCompression::none) return;
    if (opt_.compression == TarCompression::gzip) {
      // Not libarchive's gzip filter: zlib on one core made `.tar.gz` as slow as
      // `sqfs2tar | gzip` (bench/results/2026-12-02-extract-tar-parallel-gzip.md). Level 6,
      // gzip's default.
      gzip_ = std::make_unique<ParallelGzipWriter>(6, opt_.threads, [this](const void* data, size_t len) {
        if (sink_) sink_->write(data, len);
      });
      return;
    }
    const char* name = tar_compression_name(opt_.compression);
    if (archive_write_add_filter_by_name(a_.get(), name) != ARCHIVE_OK)
      throw Error(std::string("cannot write ") + name + " archives: " + archive_error_string(a_.get()));
    // The compressed stream ends where it ends: libarchive would pad it with zeros to 10 KiB,
    // which zstd -d and lz4 -d refuse as trailing garbage (the tar inside is padded already).
    check(archive_write_set_bytes_in_last_block(a_.get(), 1), "");
    if (opt_.compression == TarCompression::xz || opt_.compression == TarCompression::zstd) {
      // At least 2: for 1 libarchive runs xz's single-threaded encoder, whose stream differs
      // from the multi-threaded one's; that one's, and zstd's with workers, is the same for any
      // count (the input is cut into blocks by size), so the archive does not depend on -j.
      const std::string threads = std::to_string(std::max(2u, opt_.threads));
      check(archive_write_set_filter_option(a_.get(), name, "threads", threads.c_str()), "");
    }
  }

  // Names the entry (and the cause libarchive or the sink gave) in the thrown error.
  void check(int rc, const std::string& path) {
    if (rc == ARCHIVE_OK) return;
    const char* msg = archive_error_string(a_.get());
    std::string cause = !write_error_.empty() ? write_error_ : msg ? msg : "tar writer error";
    if (rc == ARCHIVE_WARN) {
      // A name that is not UTF-8 goes byte for byte, marked hdrcharset=BINARY: nothing is
      // lost, so libarchive's "Can't translate pathname" is no news to the user.
      if (cause.rfind("Can't translate pathname", 0) == 0 || cause.rfind("Can't translate linkname", 0) == 0) return;
      if (opt_.problems) opt_.problems(Severity::warning, path, cause);
      return;
    }
    throw Error(write_error_.empty() && !path.empty() ? img_.path() + ": " + path + ": " + cause : cause);
  }

  Error named(const std::string& path, const std::exception& e) const {
    // Image errors start with the image path: say it once, then the entry.
    return Error(img_.path() + ": " + path + ": " + without_path_prefix(e.what(), img_.path()));
  }
  [[noreturn]] void fail(const std::string& path, const std::exception& e) const { throw named(path, e); }

  // A pattern that selects nothing is an error before a byte is written (standard output
  // cannot be taken back).
  void check_patterns() {
    if (opt_.patterns.empty()) return;
    ExtractFilter filter(opt_.patterns, opt_.excludes);
    reader::WalkOptions wo;
    wo.with_blocks = false;
    img_.walk(
        [&](const std::string& path, const Inode&) {
          if (!path.empty()) filter.match(path);
          return true;
        },
        wo);
    std::string unmatched;  // all of them named, as tar -x names them
    for (const std::string& p : filter.unmatched()) unmatched += (unmatched.empty() ? "" : ", ") + p;
    if (!unmatched.empty()) throw Error(img_.path() + ": " + unmatched + ": not found in the image");
  }

  // The walk runs on its own thread and queues the entries in walk order; the workers decode
  // the files' blocks ahead; this thread writes entries and blocks in that order, so the
  // archive is the same whatever the thread count. Slots: 16 per worker, at most 8 MiB (as
  // many fragment blocks may be fetched ahead into the image's cache, which holds 8 MiB or more).
  void write_all() {
    const size_t bs = img_.super().block_size;
    const unsigned workers = opt_.threads > 1 ? opt_.threads : 0;
    const size_t slots =
        std::clamp<size_t>(16 * size_t(std::max(1u, opt_.threads)), 8, std::max<size_t>(8, (size_t(8) << 20) / bs));
    // Paths and xattrs queued ahead are bounded too: a crafted image 3,000 levels deep with
    // 255-byte names (49 KB) names entries by paths of 750 KB, and 1,024 of them took 780 MB;
    // one of 1,000 inodes whose xattrs decode to 4 MiB each (out-of-line values all pointing
    // at one 64 KiB value: 12 KB) took 1.15 GB.
    Queue q(
        bs, workers, slots, /*max_items=*/1024,
        [this](const Item& it, uint64_t index, uint8_t* out) { return decode(it, index, out); },
        /*max_weight=*/size_t(16) << 20);
    std::thread planner([&] { plan(q); });
    // Stops the queue before the planner is joined, so an error here never leaves it waiting.
    struct Join {
      Queue& q;
      std::thread& t;
      ~Join() {
        q.stop();
        t.join();
      }
    } join{q, planner};
    while (Item* it = q.front()) {
      entry(*it, q);
      q.pop();
    }
  }

  // Walks the image and queues every selected entry; an error (a damaged inode or listing)
  // ends the queue, and the writer throws it after the entries before it.
  void plan(Queue& q) {
    struct Stopped {};
    const uint64_t bs = img_.super().block_size;
    uint32_t last_fragment = fmt::kNoFragment;
    auto queue = [&](Item&& it) {
      if (it.content) {
        it.full_blocks = std::min(img_.block_count(*it.content), (it.content->size + bs - 1) / bs);
        const uint32_t frag = it.content->fragment_index;
        it.fetch_fragment = frag != fmt::kNoFragment && frag != last_fragment && it.full_blocks * bs < it.content->size;
        if (it.fetch_fragment) last_fragment = frag;
      }
      const uint64_t jobs = it.full_blocks + (it.fetch_fragment ? 1 : 0);
      size_t weight = it.path.size() + it.symlink.size() + (it.link_to ? it.link_to->size() : 0);
      weight += memory_of(it.xattrs);
      if (!q.push(std::move(it), jobs, weight)) throw Stopped{};
    };
    try {
      std::vector<OpenDir> open;  // the directories leading to the current entry
      ExtractFilter filter(opt_.patterns, opt_.excludes);
      reader::WalkOptions wo;
      wo.with_blocks = false;  // loaded only for files that are written
      img_.walk(
          [&](const std::string& path, const Inode& inode) {
            if (path.empty()) {
              // The root is never an entry; it selects everything only without patterns.
              open.push_back({0, inode, filter.root(), true});
              return true;
            }
            const auto [parent, name] = split_parent(path);
            if (stripped_name_taken(path, name, inode)) return false;  // and all below it
            learn(inode);
            if (inode.is_dir()) paths_.add(path, /*is_dir=*/true);
            while (open.size() > 1 && open.back().path_length != parent.size()) open.pop_back();
            const ExtractFilter::Mark mark = filter.entry(open.back().mark, path, name, inode.is_dir());
            if (mark.selected) {
              // The directories leading to a match, each once, before it (as extract makes them).
              for (auto& d : open)
                if (!d.written) {
                  const std::string_view leading = std::string_view(path).substr(0, d.path_length);
                  if (auto kept = without_stripped(leading)) {
                    claim_stripped_name(*kept, leading, d.inode);
                    queue(describe(std::string(*kept), d.inode));
                  }
                  d.written = true;
                }
              if (auto kept = without_stripped(path)) {
                claim_stripped_name(*kept, path, inode);
                queue(describe(std::string(*kept), inode, path));
              }
            }
            if (inode.is_dir()) open.push_back({path.size(), inode, mark, mark.selected});
            return true;
          },
          wo);
    } catch (const Stopped&) {
      return;
    } catch (...) {
      return q.close(std::current_exception());
    }
    q.close();
  }

  // The archived path of a file in paths_ (archived, so never stripped whole).
  std::string archived_path(PathTable::Id id) const {
    const std::string path = paths_.path(id);
    return std::string(without_stripped(path).value_or(path));
  }

  // --strip-components gives entries of different directories one name (a/x and b/x with 1).
  // Archiving both would let the later one extend the first: a/x a symlink out of the tree and
  // b/x/f a file, a tar reader that follows symlinks (Python's tarfile without a filter)
  // writes f outside its target. As extract into a directory does, the first archived keeps
  // the name, and the later entry is named and left out with everything below it. Names
  // collide first at the top of the stripped tree, so only those are remembered; two names
  // of one file stay one archived name (see entry()).
  void claim_stripped_name(std::string_view kept, std::string_view image_path, const Inode& inode) {
    if (opt_.strip_components == 0 || kept.find('/') != std::string_view::npos) return;
    stripped_names_.try_emplace(std::string(kept), inode.ref, std::string(image_path));
  }
  bool stripped_name_taken(const std::string& path, std::string_view name, const Inode& inode) {
    if (opt_.strip_components == 0) return false;
    const std::optional<std::string_view> kept = without_stripped(path);
    if (!kept || kept->size() != name.size()) return false;
    const auto it = stripped_names_.find(std::string(name));
    if (it == stripped_names_.end() || it->second.first == inode.ref) return false;
    if (opt_.problems)
      opt_.problems(Severity::error, path,
                    "not archived: --strip-components gives it the name of " + it->second.second + ", archived as " +
                        std::string(name));
    return true;
  }

  // The path as archived: without its first strip_components components, or nothing for an
  // entry that lies no deeper than that (it is not archived; what lies below it is).
  std::optional<std::string_view> without_stripped(std::string_view path) const {
    size_t start = 0;
    for (unsigned n = 0; n < opt_.strip_components; ++n) {
      const size_t slash = path.find('/', start);
      if (slash == std::string_view::npos) return std::nullopt;
      start = slash + 1;
    }
    return path.substr(start);
  }

  // Reads what the entry's header needs; throws an error naming the entry. `path` is the
  // archived path, `image_path` the entry's path in the image (for files).
  Item describe(const std::string& path, const Inode& inode, std::string_view image_path = {}) {
    Item it;
    it.path = path;
    it.inode = inode;
    if (inode.kind == FileKind::socket) return it;
    if (!inode.is_dir() && inode.nlink > 1) {
      const auto found = first_name_.find(inode.inode_number);
      if (found == first_name_.end()) {
        it.path_id = paths_.add(image_path, /*is_dir=*/false);
        first_name_.emplace(inode.inode_number, FirstName{it.path_id, inode.ref});
      } else if (found->second.ref == inode.ref) {
        // Only names of the same inode are linked: a crafted image may give one number to two inodes.
        it.link_to = archived_path(found->second.path);
        return it;
      }
    }
    if (inode.kind == FileKind::regular && check_ && it.path_id == PathTable::kRoot)
      it.path_id = paths_.add(image_path, /*is_dir=*/false);
    try {
      if (opt_.xattrs && inode.xattr_index != kNoXattr) it.xattrs = img_.xattrs(inode);
      if (inode.kind == FileKind::symlink) it.symlink = img_.read_symlink(inode);
      if (inode.kind == FileKind::regular) it.content = img_.read_inode(inode.ref, /*with_blocks=*/true);
    } catch (const Error& err) {
      fail(path, err);
    }
    return it;
  }

  // Full block `index` of a file for the writer: a sparse block is fed as zeros (libarchive
  // consumes a hole's bytes without writing them) without the reader filling a buffer. The
  // job after the full blocks brings the file's fragment block into the cache.
  DecodedBlock decode(const Item& it, uint64_t index, uint8_t* out) {
    const Inode& file = *it.content;
    const uint64_t bs = img_.super().block_size;
    if (index >= it.full_blocks) {
      try {
        img_.read_fragment(file.fragment_index);
      } catch (const Error&) {
        // Reading the tail meets the same error and names the file.
      }
      return {};
    }
    try {
      if (is_sparse(file, index, it.full_blocks)) return {size_t(std::min<uint64_t>(bs, file.size - index * bs)), true};
      return {img_.read_block(file, index, out), false};
    } catch (const Error& err) {
      fail(it.path, err);
    }
  }

  void entry(const Item& it, Queue& q) {
    const std::string& path = it.path;
    const Inode& inode = it.inode;
    if (inode.kind == FileKind::socket) {
      if (opt_.problems) opt_.problems(Severity::warning, path, "socket not archived (tar has no socket type)");
      return;
    }
    // Two names of one file that --strip-components gives one name (x/f and y/f): a link of
    // the name to itself adds nothing, and bsdtar refuses to extract one.
    if (it.link_to && *it.link_to == path) {
      if (opt_.problems)
        opt_.problems(Severity::warning, path,
                      "a further name of the same file gets this name too after --strip-components: archived once");
      return;
    }
    std::unique_ptr<archive_entry, ArchiveFree> e(archive_entry_new2(a_.get()));
    if (!e) throw Error("cannot set up a tar entry: out of memory");
    archive_entry_copy_pathname(e.get(), (inode.is_dir() ? path + "/" : path).c_str());
    archive_entry_set_mode(e.get(), inode.mode);
    archive_entry_set_uid(e.get(), extracted_owner_id(inode.uid, false));
    archive_entry_set_gid(e.get(), extracted_owner_id(inode.gid, true));
    archive_entry_set_mtime(e.get(), inode.mtime, 0);
    ++stats_.entries;
    if (opt_.progress) opt_.progress->entries_done.fetch_add(1, std::memory_order_relaxed);
    if (it.link_to) {
      archive_entry_copy_hardlink(e.get(), it.link_to->c_str());
      archive_entry_set_size(e.get(), 0);
      check(archive_write_header(a_.get(), e.get()), path);
      return;
    }
    for (const auto& [key, value] : it.xattrs) {
      archive_entry_xattr_add_entry(e.get(), key.c_str(), value.data(), value.size());
      warn_if_name_encoded(path, key);
    }
    switch (inode.kind) {
      case FileKind::symlink: archive_entry_copy_symlink(e.get(), it.symlink.c_str()); break;
      case FileKind::block_device:
      case FileKind::char_device:
        archive_entry_set_rdevmajor(e.get(), inode.rdev_major);
        archive_entry_set_rdevminor(e.get(), inode.rdev_minor);
        break;
      default: break;
    }
    if (it.content) return file(it, e.get(), q);
    check(archive_write_header(a_.get(), e.get()), path);
  }

  // libarchive's pax writer %-encodes the bytes of an xattr name outside '!'..'~', and '%'
  // and '=', in its SCHILY.xattr keyword; GNU tar decodes only %3D and %25 and bsdtar none, so
  // such a name comes back changed ("user.caf%C3%A9"). No libarchive option writes it raw:
  // the user is told, naming the entry and the xattr (extract without --tar keeps the name).
  void warn_if_name_encoded(const std::string& path, const std::string& key) {
    const bool encoded = std::any_of(key.begin(), key.end(), [](char c) {
      const auto b = static_cast<unsigned char>(c);
      return b < 33 || b > 126 || b == '%' || b == '=';
    });
    if (encoded && opt_.problems)
      opt_.problems(Severity::warning, path,
                    "xattr " + printable(key) +
                        ": libarchive writes this name %-encoded, and tar -x may restore it so (bsdtar decodes "
                        "none, GNU tar only %3D and %25); sqar create --tar and sqar extract without --tar keep it");
  }

  // Holes: the image's sparse blocks, and the 4 KiB-aligned all-zero runs inside the other
  // blocks of such a file (a source's holes are packed in whole blocks: a block holding 10
  // bytes of data is stored whole). Only files with a sparse block are scanned, since the
  // scan decodes their blocks a second time.
  void add_sparse_map(const std::string& path, const Inode& file, archive_entry* e) {
    const uint64_t blocks = img_.block_count(file);
    bool any_sparse = false;
    for (uint64_t i = 0; i < blocks && !any_sparse; ++i) any_sparse = is_sparse(file, i, blocks);
    if (!any_sparse) return;
    constexpr uint64_t kPage = 4096;
    const uint64_t bs = img_.super().block_size;
    std::vector<std::pair<uint64_t, uint64_t>> data;  // offset, length
    auto add = [&](uint64_t off, uint64_t len) {
      if (!data.empty() && data.back().first + data.back().second == off)
        data.back().second += len;
      else
        data.emplace_back(off, len);
    };
    buf_.resize(bs);
    for (uint64_t i = 0; i <= blocks && i * bs < file.size; ++i) {
      if (is_sparse(file, i, blocks)) continue;
      const size_t n = read_block_of(path, file, i);
      for (size_t p = 0; p < n; p += kPage) {
        const size_t len = size_t(std::min<uint64_t>(kPage, n - p));
        if (!all_zero(buf_.data() + p, len)) add(i * bs + p, len);
      }
    }
    // A map that ends before the end of the file ends in a hole: a last empty region
    // records the size for readers that take it from the map.
    if (data.empty() || data.back().first + data.back().second < file.size) data.emplace_back(file.size, 0);
    for (const auto& [off, len] : data) archive_entry_sparse_add_entry(e, la_int64_t(off), la_int64_t(len));
  }

  // Whether full block `index` of the file is a hole (size word 0); the tail is never one.
  bool is_sparse(const Inode& file, uint64_t index, uint64_t blocks) {
    return index < blocks && fmt::is_hole_word(img_.block_location(file, index).size_word);
  }

  size_t read_block_of(const std::string& path, const Inode& file, uint64_t index) {
    try {
      return img_.read_block(file, index, buf_.data());
    } catch (const Error& err) {
      fail(path, err);
    }
  }

  void file(const Item& it, archive_entry* e, Queue& q) {
    const std::string& path = it.path;
    const Inode& file = *it.content;
    archive_entry_set_size(e, la_int64_t(file.size));
    add_sparse_map(path, file, e);
    check(archive_write_header(a_.get(), e), path);
    const uint64_t bs = img_.super().block_size;
    ContentHasher* hasher = hasher_ ? &*hasher_ : nullptr;
    if (hasher) hasher->reset();
    auto write = [&](const void* data, size_t len, bool zeros = false) {
      if (hasher && zeros)
        hasher->update_zeros(len);
      else if (hasher)
        hasher->update(data, len);
      if (archive_write_data(a_.get(), data, len) < 0) check(ARCHIVE_FATAL, path);
      if (opt_.progress) opt_.progress->bytes_done.fetch_add(len, std::memory_order_relaxed);
    };
    auto ends_early = [&] { return Error(img_.path() + ": " + path + ": content ends before the file's size"); };
    uint64_t done = 0;
    for (uint64_t i = 0; i < it.full_blocks; ++i) {
      const auto [data, block] = q.next_block();
      if (block.len == 0) throw ends_early();
      if (block.zeros && zeros_.size() < block.len) zeros_.assign(bs, 0);
      write(block.zeros ? zeros_.data() : data, block.len, block.zeros);
      done += block.len;
    }
    if (done != std::min(it.full_blocks * bs, file.size)) throw ends_early();
    if (it.fetch_fragment) q.next_block();  // the fragment block is cached now
    while (done < file.size) {              // the tail, straight from the cached fragment block
      reader::Chunk c;
      try {
        c = img_.read_chunk(file, done, size_t(std::min<uint64_t>(bs, file.size - done)));
      } catch (const Error& err) {
        fail(path, err);
      }
      if (c.len == 0) throw ends_early();
      write(c.data, c.len);
      done += c.len;
    }
    stats_.bytes += done;
    if (hasher) check_content(it, file, hasher->digest());
  }

  // The content check against the manifest trailer, as `extract` and `cat` make it. A file
  // with its own entry is checked as soon as it was written; a duplicate (the manifest lists
  // each content once) and a small file covered by its fragment block's digest need every
  // regular inode of the image learned, so they are checked after the last entry, before
  // the archive is closed. A mismatch is an error, so a file archive is never completed.
  void open_manifest() {
    if (!opt_.verify) return;
    try {
      check_.emplace(img_);
      if (!check_->has_manifest()) check_.reset();
    } catch (const std::exception& e) {
      throw Error(img_.path() + ": " + manifest_trailer_problem(e, img_.path()) +
                  " (--no-verify writes the archive without checking contents)");
    }
    if (check_) hasher_.emplace(check_->scheme());
  }

  // The planner's walk visits every inode (selected or not): each regular one is learned
  // there, on the planner's thread, beside the writer, rather than in a second walk after it
  // (on ports, 270k entries, such a walk is a fifth of the export's time).
  void learn(const Inode& inode) {
    if (!check_ || !inode.is_regular()) return;
    if (inode.nlink > 1 && !learned_links_.insert(inode.inode_number).second) return;
    std::lock_guard lock(check_mu_);
    check_->learn(inode);
  }

  void check_content(const Item& it, const Inode& file, const Hash128& got) {
    if (check_->in_fragment_digest(file)) {
      in_fragments_.push_back({it.path_id, file.inode_number, file.fragment_index});
      fragment_hashes_.emplace(file.inode_number, got);
      return;
    }
    std::optional<Hash128> want;
    {
      std::lock_guard lock(check_mu_);
      want = check_->expected(file);
    }
    if (want) {
      if (!(*want == got)) throw content_differs(it.path, got, *want);
      return;
    }
    // A duplicate whose listed inode the planner has not reached yet: checked at the end.
    duplicates_.push_back({it.path_id, file.ref, got});
  }

  // After the last entry: the planner has walked (and learned) the whole image.
  void check_deferred_content() {
    if (!check_ || (duplicates_.empty() && fragment_hashes_.empty())) return;
    for (const auto& d : duplicates_)
      if (auto want = check_->expected(img_.read_inode(d.file)); want && !(*want == d.got))
        throw content_differs(archived_path(d.path), d.got, *want);
    std::unordered_set<uint32_t> bad;
    for (uint32_t fragment : check_->bad_fragments(fragment_hashes_)) bad.insert(fragment);
    for (const auto& f : in_fragments_)
      if (bad.count(f.fragment))
        throw Error(img_.path() + ": " + archived_path(f.path) +
                    ": content differs from the manifest: the digest of fragment block " + std::to_string(f.fragment) +
                    " over its small files does not match (this file or another of them is damaged)" + not_written());
  }

  Error content_differs(const std::string& path, const Hash128& got, const Hash128& want) const {
    return Error(img_.path() + ": " + path + ": content differs from the manifest (XXH3-128 " + got.hex() +
                 ", expected " + want.hex() + ")" + not_written());
  }
  std::string not_written() const {
    if (!sink_->streams()) return "; no archive was written";
    return "; the archive on " + std::string(opt_.output == "-" ? "standard output" : opt_.output) + " is incomplete";
  }

  reader::Image& img_;
  const TarExportOptions& opt_;
  Sink* sink_ = nullptr;
  std::unique_ptr<ParallelGzipWriter> gzip_;  // between libarchive and the sink for .tar.gz
  std::unique_ptr<archive, ArchiveFree> a_;
  std::string write_error_;
  // Image paths of the directories and of the files named again later, as links to their
  // directory: whole, they grow with the depth squared (a crafted 120 KB image of hard links
  // 800 levels deep held 3 GB of first names). The planner adds and reads them; the writer
  // keeps only ids, and reads paths only after the planner was joined (deferred checks).
  PathTable paths_;
  // --strip-components: the archived names at the top of the stripped tree, with the inode and
  // image path of the entry that took each (claim_stripped_name).
  std::unordered_map<std::string, std::pair<reader::InodeRef, std::string>> stripped_names_;
  struct FirstName {
    PathTable::Id path;
    reader::InodeRef ref;
  };
  std::unordered_map<uint32_t, FirstName> first_name_;
  std::vector<uint8_t> buf_;    // the sparse scan's block
  std::vector<uint8_t> zeros_;  // one block of zeros for sparse blocks
  TarExportStats stats_;
  // The content check (see open_manifest).
  struct DeferredFile {
    PathTable::Id path;
    reader::InodeRef file;  // read again at the end: a full inode holds up to 4,096 blocks
    Hash128 got;
  };
  struct FragmentFile {
    PathTable::Id path;
    uint32_t inode_number, fragment;
  };
  std::optional<ManifestCheck> check_;
  std::mutex check_mu_;                         // check_ is learned by the planner, asked by the writer
  std::unordered_set<uint32_t> learned_links_;  // the planner's: inodes with several names, learned once
  std::optional<ContentHasher> hasher_;         // of the file being written, reset for each
  std::vector<DeferredFile> duplicates_;
  std::vector<FragmentFile> in_fragments_;
  std::unordered_map<uint32_t, Hash128> fragment_hashes_;
};

}  // namespace

TarExportStats export_tar(reader::Image& image, const TarExportOptions& options) {
  // pax names are UTF-8, converted from the thread's locale (see common/utf8_locale.h).
  ThreadUtf8Locale utf8;
  return Exporter(image, options).run();
}

}  // namespace sqar::ops
