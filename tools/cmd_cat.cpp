// `sqar cat`: the content of files inside an image, to standard output.
#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "command.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/path_pattern.h"
#include "ops/manifest_check.h"
#include "read_common.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar cat [OPTIONS] IMAGE PATTERN...\n"
    "\n"
    "Write the content of the files each PATTERN names inside IMAGE to standard output, in the\n"
    "order given. A PATTERN without wildcards is one path; symlinks inside the image are\n"
    "followed (absolute targets are taken relative to the image root; '..' stops at it). A\n"
    "PATTERN with them selects entries as extract does (*, ? and [...] within one path component,\n"
    "a '**' component across any number, a matching directory brings what lies below it) and its\n"
    "regular files are written in image order; symlinks and other entries it selects are skipped.\n"
    "When the image carries sqar's manifest trailer, what was printed is checked against the\n"
    "file's XXH3-128; a mismatch names the file (\"content differs from the manifest\") and\n"
    "makes the exit status 1, after the content was written.\n"
    "\n"
    "Options:\n"
    "  -j, --threads N     threads decoding blocks ahead of the output (default: all cores)\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "      --no-verify     do not check contents against the manifest trailer\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar cat image.sqfs etc/hostname\n"
    "  sqar cat image.sqfs logs/a.log logs/b.log | grep ERROR\n"
    "  sqar cat image.sqfs big.iso > big.iso\n"
    "  sqar cat image.sqfs 'etc/**/*.conf'   every .conf file below etc, one after the other\n"
    "\n" SQAR_STDIN_IMAGE_HELP
    "\n"
    "Exit status: 0 when every PATTERN was printed, 1 when one is missing, is not a regular file,\n"
    "matches no regular file or is damaged (the others are still printed), 2 on bad usage.\n";

// Resolves PATH, following symlinks inside the image (at most 40, like the kernel).
reader::Inode resolve_file(reader::Image& image, std::string path) {
  for (int hops = 0; hops <= 40; ++hops) {
    auto ino = image.resolve_path(path);
    const std::string shown = path.empty() ? "/" : path;  // the root normalizes to ""
    if (!ino) throw Error(shown + ": not found in the image");
    if (ino->is_regular()) return *ino;
    if (ino->is_dir()) throw Error(shown + ": is a directory");
    if (!ino->is_symlink()) throw Error(shown + ": is not a regular file");
    std::string target = image.read_symlink(*ino);
    {
      // An absolute target starts at the image root; '..' is resolved lexically and stops at
      // the root, whichever form the target has: the image has no other root to escape to.
      size_t slash = path.rfind('/');
      std::string base =
          (!target.empty() && target[0] == '/') || slash == std::string::npos ? "" : path.substr(0, slash);
      std::string joined = base.empty() ? target : base + "/" + target;
      std::string out;
      for (size_t i = 0; i <= joined.size();) {
        size_t j = joined.find('/', i);
        if (j == std::string::npos) j = joined.size();
        std::string comp = joined.substr(i, j - i);
        if (comp == "..") {
          size_t s = out.rfind('/');
          out = s == std::string::npos ? "" : out.substr(0, s);
        } else if (!comp.empty() && comp != ".") {
          out += (out.empty() ? "" : "/") + comp;
        }
        i = j + 1;
      }
      path = out;
    }
  }
  throw Error(path + ": too many levels of symbolic links");
}

void write_all(const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = ::write(STDOUT_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error(std::string("standard output: ") + strerror(errno));
    p += w, n -= size_t(w);
  }
}

// Writes one file's content to standard output. Worker threads decode blocks ahead into a
// ring of slots while this thread writes them in order, so a big file streams at the speed of
// all cores (one thread decoding xz left `sqar cat` at half the speed of `unsquashfs -cat`).
// Everything before a damaged block is written; then its error is thrown.
void cat_file(reader::Image& image, const reader::Inode& ino, unsigned jobs, const std::string& shown,
              StreamHasher* hasher) {
  const size_t bs = image.super().block_size;
  const uint64_t nblocks = (ino.size + bs - 1) / bs;
  std::vector<uint8_t> one;
  // The reader names the image and the inode; users need the PATH they asked for.
  auto named = [&](const std::exception& e) {
    std::string msg = e.what();
    if (msg.rfind(image.path() + ": ", 0) == 0) msg.erase(0, image.path().size() + 2);
    return Error(shown + ": " + msg);
  };
  auto read_block = [&](uint64_t index, uint8_t* out) {
    try {
      return image.read_block(ino, index, out);
    } catch (const Error& e) {
      throw named(e);
    }
  };
  auto check_and_write = [&](const uint8_t* p, size_t len) {
    if (len == 0) throw Error(shown + ": content ends before the file size");
    if (hasher) hasher->update(p, len);
    write_all(p, len);
  };
  if (nblocks <= 1 || jobs <= 1) {
    one.resize(bs);
    for (uint64_t i = 0; i < nblocks; ++i) check_and_write(one.data(), read_block(i, one.data()));
    return;
  }
  // 4 slots per thread, at most 32 MiB.
  const size_t ring = std::clamp<size_t>(4 * size_t(jobs), 2, std::max<size_t>(2, (32u << 20) / bs));
  struct Slot {
    uint64_t index = UINT64_MAX;  // block held, once decoded
    size_t len = 0;
    std::exception_ptr error;
  };
  std::vector<uint8_t> bytes(std::min<uint64_t>(ring, nblocks) * bs);
  std::vector<Slot> slots(ring);
  std::mutex mu;
  std::condition_variable decoded, written;
  uint64_t next_claim = 0, next_write = 0;
  bool stop = false;
  auto worker = [&] {
    for (;;) {
      uint64_t i;
      {
        std::unique_lock lock(mu);
        // Block i goes into slot i % ring once block i - ring has been written.
        written.wait(lock, [&] { return stop || next_claim >= nblocks || next_claim < next_write + ring; });
        if (stop || next_claim >= nblocks) return;
        i = next_claim++;
      }
      Slot result;
      result.index = i;
      try {
        result.len = read_block(i, bytes.data() + (i % ring) * bs);
      } catch (...) {
        result.error = std::current_exception();
      }
      {
        std::lock_guard lock(mu);
        slots[i % ring] = std::move(result);
      }
      decoded.notify_all();
    }
  };
  std::vector<std::jthread> pool;
  // Destroyed before the pool joins its threads: stops them when writing fails midway.
  struct StopOnExit {
    std::mutex& mu;
    bool& stop;
    std::condition_variable& written;
    ~StopOnExit() {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      written.notify_all();
    }
  };
  for (unsigned t = 0; t < std::min<uint64_t>(jobs, nblocks); ++t) pool.emplace_back(worker);
  StopOnExit stopper{mu, stop, written};
  for (uint64_t i = 0; i < nblocks; ++i) {
    Slot& s = slots[i % ring];
    {
      std::unique_lock lock(mu);
      decoded.wait(lock, [&] { return s.index == i; });
    }
    if (s.error) std::rethrow_exception(s.error);
    check_and_write(bytes.data() + (i % ring) * bs, s.len);
    {
      std::lock_guard lock(mu);
      next_write = i + 1;
    }
    written.notify_all();
  }
}

// The manifest check of what cat printed. Duplicates and small files in a fragment block need
// every regular inode learned: that metadata walk runs only when such a file is printed.
class PrintedCheck {
 public:
  explicit PrintedCheck(reader::Image& image) : image_(image) {
    check_.emplace(image);
    if (!check_->has_manifest()) check_.reset();
  }
  bool active() const { return check_.has_value(); }

  void check(const reader::Inode& ino, const Hash128& got, const std::string& shown) {
    std::optional<Hash128> want = check_->expected(ino);
    if (!want || check_->in_fragment_digest(ino)) {
      learn_all();
      want = check_->expected(ino);
    }
    if (check_->in_fragment_digest(ino)) {
      if (!check_->bad_fragments({{ino.inode_number, got}}).empty())
        throw Error(shown + ": content differs from the manifest: the digest of fragment block " +
                    std::to_string(ino.fragment_index) +
                    " over its small files does not match (this file or another of them is damaged)");
      return;
    }
    if (want && !(*want == got))
      throw Error(shown + ": content differs from the manifest (XXH3-128 " + got.hex() + ", expected " + want->hex() +
                  ")");
  }

 private:
  void learn_all() {
    if (learned_) return;
    learned_ = true;
    std::unordered_set<uint32_t> seen;
    image_.walk([&](const std::string&, const reader::Inode& i) {
      if (i.is_regular() && seen.insert(i.inode_number).second) check_->learn(i);
      return true;
    });
  }
  reader::Image& image_;
  std::optional<ops::ManifestCheck> check_;
  bool learned_ = false;
};

int cat_main(int argc, char** argv) {
  return run_guarded("cat", [&] {
    enum { kOffset = 256, kNoVerify };
    static const option longopts[] = {{"threads", required_argument, nullptr, 'j'},
                                      {"no-verify", no_argument, nullptr, kNoVerify},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    uint64_t offset = 0;
    unsigned jobs = default_jobs();
    bool verify = true;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":j:h", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'j': jobs = parse_jobs_arg(optarg); break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case kNoVerify: verify = false; break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        default: throw_getopt_error(c, argv);
      }
    }
    if (argc - optind < 2) throw UsageError("need IMAGE and at least one PATTERN");
    std::string image_path = argv[optind++];
    // Blocks are decoded outside the cache (each is read once), so it only serves fragment
    // blocks shared by several PATHs.
    auto image = open_image(image_path, offset, 8u << 20);
    std::optional<PrintedCheck> printed;
    if (verify) printed.emplace(*image);
    // Writes one file, hashing what was written when the manifest can check it.
    auto print_checked = [&](const reader::Inode& ino, const std::string& shown) {
      const bool checking = printed && printed->active();
      StreamHasher hasher;
      cat_file(*image, ino, jobs, shown, checking ? &hasher : nullptr);
      if (checking) printed->check(ino, hasher.digest(), shown);
    };
    int status = 0;
    for (; optind < argc; ++optind) {
      try {
        const std::string pattern = normalize_image_path(argv[optind]);
        if (!has_wildcard(pattern)) {
          print_checked(resolve_file(*image, pattern), argv[optind]);
          continue;
        }
        // Collected first: the content is read outside the walk, not from inside its callback.
        std::vector<std::pair<std::string, reader::Inode>> files;
        PathSelection selection({pattern});
        image->walk([&](const std::string& path, const reader::Inode& ino) {
          if (selection.select(path) && ino.is_regular()) files.emplace_back(path, ino);
          return ino.is_dir();
        });
        if (files.empty()) throw Error(std::string(argv[optind]) + ": no regular file in the image matches");
        for (const auto& [path, ino] : files) {
          try {
            print_checked(ino, path);
          } catch (const Error& e) {
            if (std::strstr(e.what(), "standard output: ")) throw;
            report("cat", image_path, e.what());
            status = 1;
          }
        }
      } catch (const Error& e) {
        if (std::strstr(e.what(), "standard output: ")) throw;
        report("cat", image_path, e.what());
        status = 1;
      }
    }
    return status;
  });
}

RegisterCommand reg("cat", "write files inside an image to standard output", &cat_main);

}  // namespace
}  // namespace sqar::cli
