#include "ops/file_printer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/hash.h"
#include "ops/decode_ahead.h"
#include "ops/manifest_check.h"

namespace sqar::ops {

namespace {

// `path` with '.' and '..' resolved lexically; '..' stops at the root (the image has no other
// root to escape to). Right only where every component before a '..' is a directory.
std::string lexical_path(const std::string& joined) {
  std::string out;
  for (size_t i = 0; i <= joined.size();) {
    size_t j = joined.find('/', i);
    if (j == std::string::npos) j = joined.size();
    const std::string comp = joined.substr(i, j - i);
    if (comp == "..") {
      const size_t s = out.rfind('/');
      out = s == std::string::npos ? "" : out.substr(0, s);
    } else if (!comp.empty() && comp != ".") {
      out += (out.empty() ? "" : "/") + comp;
    }
    i = j + 1;
  }
  return out;
}

// `path` without its empty components (leading, trailing and repeated slashes); '.' and
// '..' stay for the walk to resolve.
std::string without_empty_components(const std::string& path) {
  std::string out;
  for (size_t i = 0; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.append(out.empty() ? "" : "/").append(path, i, j - i);
    i = j + 1;
  }
  return out;
}

}  // namespace

reader::Inode resolve_regular_file(reader::Image& image, std::string path) {
  constexpr size_t kMaxPath = 4096;
  // Errors name the path asked for, and where its symlinks led when that differs.
  const std::string asked = path.empty() ? "/" : path;  // the root normalizes to ""
  bool followed_symlink = false;
  auto fail = [&](const std::string& why) {
    return Error(asked + ": " + why +
                 (!followed_symlink || path == asked || path.empty() ? "" : " (its symlinks lead to " + path + ")"));
  };
  // Walks PATH one component at a time from the root, looking each up in the directory
  // before it (linear in the depth, even for a hostile image's 1000-deep chain); a symlink
  // anywhere on the way (not only the last component) is replaced by its target and the walk
  // starts again, at most 40 times, on a path of at most 4096 bytes.
  for (int hops = 0;;) {
    if (path.empty()) throw fail("is a directory");
    reader::Inode dir = image.root();
    for (size_t i = 0;;) {
      size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      const bool last = j == path.size();
      const std::string_view name = std::string_view(path).substr(i, j - i);
      if (name == "." || name == "..") {
        // Every component before this one is a directory, never a symlink (a symlink restarts
        // the walk), so resolving the prefix lexically resolves it as the kernel would:
        // "link/../x" goes through link's target first. The path only gets shorter here.
        const std::string rest = last ? "" : path.substr(j + 1);
        const std::string here = lexical_path(path.substr(0, j));
        path = here.empty() ? rest : rest.empty() ? here : here + "/" + rest;
        break;
      }
      auto entry = image.lookup(dir, name);
      if (!entry) throw fail("not found in the image");
      reader::Inode ino;
      try {
        ino = image.read_inode(entry->inode_ref);
      } catch (const Error& e) {  // a damaged inode: say whose
        throw Error(path.substr(0, j) + ": " + without_path_prefix(e.what(), image.path()));
      }
      if (ino.is_symlink()) {
        if (++hops > 40) throw fail("too many levels of symbolic links");
        followed_symlink = true;
        const std::string walked = i ? path.substr(0, i - 1) : "";  // the directories before it
        const std::string rest = last ? "" : path.substr(j + 1);
        // The target's own '..' are walked in turn like any component: "l/../x" with l ->
        // p/q is p/x, as the kernel reads it, not the x beside l.
        const std::string target = image.read_symlink(ino);
        const bool absolute = !target.empty() && target[0] == '/';
        path = without_empty_components(absolute || walked.empty() ? target : walked + "/" + target);
        if (!rest.empty()) path = path.empty() ? rest : path + "/" + rest;
        // Bounded as the kernel bounds a path (PATH_MAX): a hostile image's symlinks could
        // otherwise grow it by a 4 KiB target per hop, each hop walked from the root again.
        if (path.size() > kMaxPath)
          throw Error(asked + ": its symlinks lead to a path over 4096 bytes (file name too long)");
        break;
      }
      if (last) {
        if (ino.is_regular()) return ino;
        throw fail(ino.is_dir() ? "is a directory" : "is not a regular file");
      }
      if (!ino.is_dir()) throw fail(path.substr(0, j) + " is not a directory");
      dir = ino;
      i = j + 1;
    }
  }
}

namespace {

// The manifest check of what was printed. Duplicates and small files in a fragment block need
// every regular inode learned: that metadata walk runs only when such a file is printed.
class PrintedCheck {
 public:
  explicit PrintedCheck(reader::Image& image) : check_(image) {}
  bool active() const { return check_.has_manifest(); }
  HashScheme scheme() const { return check_.scheme(); }

  void check(const reader::Inode& ino, const Hash128& got, const std::string& shown) {
    std::optional<Hash128> want = check_.expected(ino);
    if (!want || check_.in_fragment_digest(ino)) {
      learn_all();
      want = check_.expected(ino);
    }
    if (check_.in_fragment_digest(ino)) {
      // A block's verdict is the same whichever of its files asks (the others are read from
      // the image, as this one was printed): checked once per block. Asking bad_fragments for
      // each printed file scanned every block's members and hashed the block's files again:
      // cat of 2,222 small files took 17 s.
      auto [verdict, fresh] = fragment_matches_.try_emplace(ino.fragment_index, true);
      if (fresh) verdict->second = check_.fragment_matches(ino.fragment_index, {{ino.inode_number, got}});
      if (!verdict->second)
        throw Error(shown + ": content differs from the manifest: the digest of fragment block " +
                    std::to_string(ino.fragment_index) +
                    " over its small files does not match (this file or another of them is damaged)");
      return;
    }
    if (want && !(*want == got))
      throw Error(shown + ": content differs from the manifest (content hash " + got.hex() + ", expected " +
                  want->hex() + ")");
  }

 private:
  void learn_all() {
    if (learned_) return;
    learned_ = true;
    check_.learn_all();
  }
  ManifestCheck check_;
  bool learned_ = false;
  std::unordered_map<uint32_t, bool> fragment_matches_;  // fragment block -> its digest matches
};

struct PrintJob {
  reader::Inode file;
  std::string shown;
};

}  // namespace

class FilePrinter::Impl {
 public:
  Impl(reader::Image& image, int out_fd, std::string out_name, unsigned threads, bool verify)
      : image_(image), fd_(out_fd), out_name_(std::move(out_name)), threads_(threads) {
    if (verify) {
      check_.emplace(image);
      if (!check_->active()) check_.reset();
    }
  }

  void print(const reader::Inode& file, const std::string& shown) {
    const size_t bs = image_.super().block_size;
    const uint64_t nblocks = (file.size + bs - 1) / bs;
    std::optional<ContentHasher> hasher;
    if (check_) hasher.emplace(check_->scheme());
    auto write_checked = [&](const uint8_t* p, size_t len) {
      if (len == 0) throw Error(shown + ": content ends before the file size");
      if (hasher) hasher->update(p, len);
      write_all(p, len);
    };
    if (nblocks <= 1 || threads_ <= 1) {
      // Nothing to decode ahead: no hand-off to a worker per small file.
      one_.resize(bs);
      for (uint64_t i = 0; i < nblocks; ++i) write_checked(one_.data(), read_block(file, i, shown, one_.data()));
    } else {
      try {
        Queue& q = queue();
        q.push(PrintJob{file, shown}, nblocks);
        q.front();
        for (uint64_t i = 0; i < nblocks; ++i) {
          auto [bytes, block] = q.next_block();
          write_checked(bytes, block.len);
        }
        q.pop();
      } catch (...) {
        // The rest of this file's blocks are not wanted: stop the workers rather than decode
        // them; the next file starts a new queue.
        queue_.reset();
        throw;
      }
    }
    if (check_) check_->check(file, hasher->digest(), shown);
  }

 private:
  using Queue = DecodeAheadQueue<PrintJob>;

  // Worker threads start with the first file of more than one block.
  Queue& queue() {
    if (!queue_) {
      const size_t bs = image_.super().block_size;
      // 4 slots per thread, at most 32 MiB.
      const size_t slots = std::clamp<size_t>(4 * size_t(threads_), 2, std::max<size_t>(2, (32u << 20) / bs));
      queue_ = std::make_unique<Queue>(bs, threads_, slots, /*max_items=*/1,
                                       [this](const PrintJob& job, uint64_t index, uint8_t* out) {
                                         return DecodedBlock{read_block(job.file, index, job.shown, out), false};
                                       });
    }
    return *queue_;
  }

  // The reader names the image and the inode; users need the PATH they asked for.
  size_t read_block(const reader::Inode& file, uint64_t index, const std::string& shown, uint8_t* out) {
    try {
      return image_.read_block(file, index, out);
    } catch (const Error& e) {
      throw Error(shown + ": " + without_path_prefix(e.what(), image_.path()));
    }
  }

  void write_all(const uint8_t* p, size_t n) {
    while (n) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw OutputError(errno_message(out_name_, errno));
      p += w, n -= size_t(w);
    }
  }

  reader::Image& image_;
  const int fd_;
  const std::string out_name_;
  const unsigned threads_;
  std::optional<PrintedCheck> check_;
  std::vector<uint8_t> one_;
  std::unique_ptr<Queue> queue_;
};

FilePrinter::FilePrinter(reader::Image& image, int out_fd, std::string out_name, unsigned threads, bool verify)
    : impl_(std::make_unique<Impl>(image, out_fd, std::move(out_name), threads, verify)) {}
FilePrinter::~FilePrinter() = default;

void FilePrinter::print(const reader::Inode& file, const std::string& shown) { impl_->print(file, shown); }

}  // namespace sqar::ops
