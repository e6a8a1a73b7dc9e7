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

// The components of `path` (empty ones, from leading, trailing or repeated slashes, dropped)
// pushed onto `todo`, which is walked from its back: the first component ends up last.
void push_components(std::vector<std::string>& todo, std::string_view path) {
  const size_t at = todo.size();
  for (size_t i = 0; i <= path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) todo.emplace_back(path.substr(i, j - i));
    i = j + 1;
  }
  std::reverse(todo.begin() + long(at), todo.end());
}

}  // namespace

reader::Inode resolve_regular_file(reader::Image& image, std::string path) {
  constexpr size_t kMaxPath = 4096;
  constexpr int kMaxSymlinks = 40;  // as the kernel's MAXSYMLINKS
  const std::string asked = path.empty() ? "/" : path;
  // Walked as the kernel walks a path: a stack of the directories reached (the root first),
  // '..' pops one (never past the root: the image has no other root to escape to), and a
  // symlink's target is put in front of the components still to walk, from the root if it
  // is absolute. So '..' after a symlink climbs from where the symlink led, and no part of
  // the path is walked twice. A hostile image can still make a walk long (a directory that
  // lists itself, 40 targets of 4 KiB): each hop is bounded by the 4096-byte path, and the
  // lookups are remembered, so a name is searched for once in each directory.
  struct Reached {
    reader::Inode dir;
    std::string name;
  };
  std::vector<Reached> dirs{{image.root(), ""}};
  std::vector<std::string> todo;
  push_components(todo, path);
  std::unordered_map<std::string, std::optional<reader::DirEntry>> looked_up;
  bool followed_symlink = false;
  int hops = 0;
  // The path the walk is on, as the user would write it: the directories reached, then
  // `extra` (the component at hand), then what is left.
  auto walked = [&](size_t left, const std::string* extra) {
    std::string out;
    for (size_t k = 1; k < dirs.size(); ++k) out += (out.empty() ? "" : "/") + dirs[k].name;
    if (extra) out += (out.empty() ? "" : "/") + *extra;
    for (size_t k = todo.size(); k > todo.size() - left; --k) out += (out.empty() ? "" : "/") + todo[k - 1];
    return out;
  };
  auto fail = [&](const std::string& why, const std::string* at) {
    std::string leads_to = walked(todo.size(), at);
    if (leads_to.size() > 240)  // a hostile chain's 4 KiB path would bury the message
      leads_to = leads_to.substr(0, 120) + "... (" + std::to_string(leads_to.size()) + " bytes)";
    return Error(
        asked + ": " + why +
        (followed_symlink && leads_to != asked && !leads_to.empty() ? " (its symlinks lead to " + leads_to + ")" : ""));
  };
  while (!todo.empty()) {
    const std::string name = std::move(todo.back());
    todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      if (dirs.size() > 1) dirs.pop_back();
      continue;
    }
    const reader::Inode& dir = dirs.back().dir;
    std::string key = std::to_string(dir.ref) + '/' + name;
    auto hit = looked_up.find(key);
    if (hit == looked_up.end()) hit = looked_up.emplace(std::move(key), image.lookup(dir, name)).first;
    if (!hit->second) throw fail("not found in the image", &name);
    reader::Inode ino;
    try {
      ino = image.read_inode(hit->second->inode_ref);
    } catch (const Error& e) {  // a damaged inode: say whose
      throw Error(walked(0, &name) + ": " + without_path_prefix(e.what(), image.path()));
    }
    if (ino.is_symlink()) {
      if (++hops > kMaxSymlinks) throw fail("too many levels of symbolic links", &name);
      followed_symlink = true;
      const std::string target = image.read_symlink(ino);
      if (!target.empty() && target[0] == '/') dirs.resize(1);
      push_components(todo, target);
      // Bounded as the kernel bounds a path (PATH_MAX): a hostile image's symlinks could
      // otherwise grow it by a 4 KiB target per hop.
      size_t length = 0;
      for (size_t k = 1; k < dirs.size(); ++k) length += dirs[k].name.size() + 1;
      for (const std::string& c : todo) length += c.size() + 1;
      if (length > kMaxPath) throw Error(asked + ": its symlinks lead to a path over 4096 bytes (file name too long)");
      continue;
    }
    if (todo.empty()) {
      if (ino.is_regular()) return ino;
      throw fail(ino.is_dir() ? "is a directory" : "is not a regular file", &name);
    }
    if (!ino.is_dir()) throw fail(walked(0, &name) + " is not a directory", &name);
    dirs.push_back({std::move(ino), name});
  }
  throw fail("is a directory", nullptr);
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
