// `sqar verify`: decompress and check everything in an image; name every bad file.
#include <getopt.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "command.h"
#include "data_key.h"
#include "common/error.h"
#include "common/hash.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "parallel.h"
#include "read_common.h"
#include "status_line.h"

namespace sqar::cli {
namespace {

const char kHelp[] =
    "Usage: sqar verify [OPTIONS] IMAGE\n"
    "\n"
    "Check an image end to end: every metadata block (inodes, directories, ids, xattrs, export\n"
    "table), every data block and fragment a file uses is read and decompressed, and each\n"
    "file's size is checked. When the image carries sqar's manifest trailer, every file's\n"
    "XXH3-128 is compared with it, which also catches damage a codec cannot detect (files\n"
    "smaller than a block are checked together, per fragment block: a mismatch names every\n"
    "file of that block). Files are checked in parallel. Works on images made by any tool\n"
    "(without a manifest, only what the codecs and the format can detect is caught).\n"
    "\n"
    "Options:\n"
    "  -j, --threads N     worker threads (default: all cores)\n"
    "  -q, --quiet         print nothing when the image is good (and no progress bar)\n"
    "      --progress      show the progress bar even when stderr is not a terminal\n"
    "      --offset N      the image starts N bytes into IMAGE\n"
    "  -h, --help          show this help\n"
    "\n"
    "Examples:\n"
    "  sqar verify backup.sqfs && echo intact\n"
    "  sqar verify -j 1 image.sqfs\n"
    "\n"
    "Exit status: 0 when everything is right; 1 when something is wrong (each bad file is named:\n"
    "\"sqar verify: IMAGE: PATH: cause\"); 2 on bad usage.\n";

// What the content check needs of a file; the inode itself (with its block list) is read
// again by the worker that checks it, from the metadata cache, so memory stays proportional
// to the number of files, not to their inodes' size (a full Inode per entry made verify of
// a 270k-entry image take 232 MB).
struct FileJob {
  std::string path;
  reader::InodeRef ref;
  uint32_t inode_number;
  uint64_t size;
};

class Verifier {
 public:
  Verifier(reader::Image& image, unsigned jobs) : img_(image), jobs_(jobs) {}

  void problem(const std::string& path, const std::string& why) {
    std::string msg = why;
    if (msg.rfind(img_.path() + ": ", 0) == 0) msg.erase(0, img_.path().size() + 2);
    std::lock_guard lock(mu_);
    ++problems_;
    report("verify", img_.path(), (path.empty() ? std::string() : path + ": ") + msg);
  }

  size_t run() {
    load_manifest();
    std::vector<FileJob> files;
    std::unordered_set<uint32_t> file_inodes;  // regular files' inode numbers (hard links once)
    try {
      img_.walk([&](const std::string& path, const reader::Inode& ino) {
        entries_++;
        entries_seen_.store(entries_, std::memory_order_relaxed);
        // A reference, not a copy: paths of a deep tree are long, and copying each one made
        // the walk quadratic in the depth.
        static const std::string kRoot = ".";
        const std::string& shown = path.empty() ? kRoot : path;
        try {
          if (ino.xattr_index != 0xFFFFFFFF) img_.xattrs(ino);
          if (ino.is_symlink()) img_.read_symlink(ino);
        } catch (const std::exception& e) {
          problem(shown, e.what());
        }
        check_export_entry(shown, ino);
        if (ino.is_regular() && file_inodes.insert(ino.inode_number).second) {
          files.push_back({path, ino.ref, ino.inode_number, ino.size});
          if (auto it = manifest_.find(ino.inode_number); it != manifest_.end()) by_key_.emplace(DataKey(img_, ino), it->second);
        }
        return true;
      }, reader::WalkOptions{.with_blocks = false,
                             .on_error = [&](const std::string& path, const std::string& error) {
                               problem(path.empty() ? "." : path, error);
                             }});
    } catch (const std::exception& e) {
      problem("", std::string("metadata: ") + e.what());
    }
    check_ids();
    for (const auto& [number, hash] : manifest_)
      if (!file_inodes.count(number))
        problem("", "manifest trailer lists inode " + std::to_string(number) + ", which is not a regular file");
    uint64_t total = 0;
    for (const auto& f : files) total += f.size;
    bytes_total_ = total;
    phase_ = 1;
    check_contents(files);
    check_fragment_digests(files);
    files_ = files.size();
    return problems_;
  }

  uint64_t entries() const { return entries_; }
  uint64_t files() const { return files_; }
  uint64_t bytes() const { return bytes_; }
  bool had_manifest() const { return had_manifest_; }
  // What a status line shows while run() works.
  std::string status(double secs) const {
    if (phase_ == 0) return "checking metadata: " + std::to_string(entries_seen_.load()) + " entries";
    return progress_bar(bytes_done_.load(), bytes_total_.load(), secs);
  }

 private:
  void check_ids() {
    for (uint32_t i = 0; i < img_.super().id_count; ++i) {
      try {
        img_.id_at(uint16_t(i));
      } catch (const std::exception& e) {
        problem("", std::string("id table: ") + e.what());
        return;
      }
    }
  }

  // The export table must map every inode number to the inode the directories lead to. After
  // the first damaged table block the rest of the table is not checked (one message, not 10^5).
  void check_export_entry(const std::string& shown, const reader::Inode& ino) {
    if (!img_.has_export_table() || export_table_broken_) return;
    try {
      auto ref = img_.inode_ref_by_number(ino.inode_number);
      if (!ref || *ref != ino.ref)
        problem(shown, "export table entry of inode " + std::to_string(ino.inode_number) + " points elsewhere");
    } catch (const std::exception& e) {
      problem(shown, std::string("export table: ") + e.what());
      export_table_broken_ = true;
    }
  }

  void load_manifest() {
    try {
      auto m = img_.manifest();
      if (!m) return;
      had_manifest_ = true;
      for (const auto& e : m->files) manifest_.emplace(e.inode_number, e.hash);
      if (m->has_fragment_digests()) fragment_digests_ = std::move(m->fragment_digests);
    } catch (const std::exception& e) {
      problem("", std::string("manifest trailer: ") + e.what());
    }
  }

  // What reading one stored content gave: its XXH3-128, or the error that stopped it.
  struct Outcome {
    Hash128 digest;
    std::string error;  // empty when every block decoded
  };

  // Decodes every block of the file (full blocks straight into a per-thread buffer: each is
  // read once here, so caching them would only evict the fragments the next files need).
  Outcome read_content(const reader::Inode& ino) {
    thread_local std::vector<uint8_t> block;
    block.resize(img_.super().block_size);
    Outcome out;
    try {
      StreamHasher hasher;
      uint64_t off = 0;
      for (uint64_t index = 0; off < ino.size; ++index) {
        const size_t n = img_.read_block(ino, index, block.data());
        if (n == 0) throw Error("content ends at byte " + std::to_string(off) + " of " + std::to_string(ino.size));
        if (had_manifest_) hasher.update(block.data(), n);
        off += n;
        bytes_done_.fetch_add(n, std::memory_order_relaxed);
      }
      out.digest = hasher.digest();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  }

  // XXH3-128 of a data key: the memo below keeps 16 bytes per stored content instead of a
  // copy of its block list.
  static Hash128 fingerprint(const DataKey& k) {
    StreamHasher h;
    const uint64_t head[] = {k.blocks_start, k.size, uint64_t(k.frag) << 32 | k.frag_offset};
    h.update(head, sizeof head);
    const uint64_t sizes[] = {k.sizes_low, k.sizes_high};
    h.update(sizes, sizeof sizes);
    return h.digest();
  }

  void check_contents(const std::vector<FileJob>& files) {
    std::atomic<uint64_t> bytes{0};
    parallel_for(files.size(), jobs_, [&](size_t i, unsigned) {
      const FileJob& f = files[i];
      try {
        const reader::Inode ino = img_.read_inode(f.ref);
        // Inodes with the same data key share their stored bytes (dedup), so they decode to
        // the same content: read it once. (Two threads may both read a key they reach at the
        // same moment; both get the same outcome.)
        const DataKey key(img_, ino);
        const Hash128 id = fingerprint(key);
        std::optional<Outcome> seen;
        {
          std::lock_guard lock(outcomes_mu_);
          if (auto it = outcomes_.find(id); it != outcomes_.end()) seen = it->second;
        }
        if (seen) {
          bytes_done_.fetch_add(ino.size, std::memory_order_relaxed);
        } else {
          seen = read_content(ino);
          std::lock_guard lock(outcomes_mu_);
          outcomes_.emplace(id, *seen);
        }
        if (!seen->error.empty()) {
          if (fragment_digests_ && ino.fragment_index != fmt::kNoFragment) {
            std::lock_guard lock(members_mu_);
            undecodable_fragments_.insert(ino.fragment_index);
          }
          return problem(f.path, seen->error);
        }
        bytes += ino.size;
        if (!had_manifest_) return;
        if (fragment_digests_ && covered_by_fragment_digest(ino.size, img_.super().block_size, ino.fragment_index)) {
          std::lock_guard lock(members_mu_);
          members_.push_back({ino.fragment_index, f.inode_number, seen->digest});
          member_files_.push_back(i);
          return;
        }
        // The writer lists each stored content once: duplicates (same data key) take the hash
        // of the listed inode, and empty files need none.
        std::optional<Hash128> expected;
        if (auto it = manifest_.find(f.inode_number); it != manifest_.end())
          expected = it->second;
        else if (auto k = by_key_.find(key); k != by_key_.end())
          expected = k->second;
        else if (ino.size == 0)
          expected = hash128("", 0);
        if (!expected)
          problem(f.path, "missing from the manifest trailer");
        else if (!(*expected == seen->digest))
          problem(f.path, "content differs from the manifest (XXH3-128 " + seen->digest.hex() + ", expected " +
                              expected->hex() + ")");
      } catch (const std::exception& e) {
        problem(f.path, e.what());
      }
    });
    bytes_ = bytes;
  }

  // Version 3 manifests: the files that lie in a fragment block alone are checked together, by
  // the block's digest over their (inode number, XXH3-128) (format/manifest.h). A block with a
  // file that did not decode is not compared (that file is named already).
  void check_fragment_digests(const std::vector<FileJob>& files) {
    if (!fragment_digests_) return;
    const std::vector<Hash128>& expected = *fragment_digests_;
    if (expected.size() != img_.super().fragment_count)
      problem("", "manifest trailer has " + std::to_string(expected.size()) + " fragment digests for " +
                      std::to_string(img_.super().fragment_count) + " fragment blocks");
    std::vector<FragmentMember> members;
    for (const FragmentMember& m : members_)
      if (m.fragment_index < expected.size()) members.push_back(m);
    const std::vector<Hash128> seen = fragment_digests(members, uint32_t(expected.size()));
    std::map<uint32_t, std::vector<const std::string*>> paths_of;  // mismatching block -> its files
    for (size_t k = 0; k < members_.size(); ++k) {
      const uint32_t fragment = members_[k].fragment_index;
      if (fragment < expected.size() && !(seen[fragment] == expected[fragment]) && !undecodable_fragments_.count(fragment))
        paths_of[fragment].push_back(&files[member_files_[k]].path);
    }
    for (auto& [fragment, paths] : paths_of) {
      std::sort(paths.begin(), paths.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
      const std::string why = "content differs from the manifest: the digest of fragment block " +
                              std::to_string(fragment) + " over its " + std::to_string(paths.size()) +
                              " small files does not match (this file or another of them is damaged)";
      for (const std::string* path : paths) problem(*path, why);
    }
  }

  reader::Image& img_;
  unsigned jobs_;
  std::mutex mu_;
  size_t problems_ = 0;
  uint64_t entries_ = 0, files_ = 0, bytes_ = 0;
  bool had_manifest_ = false;
  bool export_table_broken_ = false;
  std::unordered_map<uint32_t, Hash128> manifest_;  // inode number -> content hash
  std::map<DataKey, Hash128> by_key_;               // stored data of listed inodes -> hash
  std::optional<std::vector<Hash128>> fragment_digests_;  // version 3 manifests
  std::mutex members_mu_;
  std::vector<FragmentMember> members_;  // files the fragment digests cover
  std::vector<size_t> member_files_;     // their index in the file list, in the same order
  std::unordered_set<uint32_t> undecodable_fragments_;
  std::mutex outcomes_mu_;
  std::unordered_map<Hash128, Outcome, Hash128Hasher> outcomes_;  // fingerprint of stored data -> what it gave
  std::atomic<int> phase_{0};  // 0 metadata, 1 file contents
  std::atomic<uint64_t> entries_seen_{0}, bytes_done_{0}, bytes_total_{0};
};

int verify_main(int argc, char** argv) {
  return run_guarded("verify", [&] {
    enum { kOffset = 256, kProgress };
    static const option longopts[] = {{"threads", required_argument, nullptr, 'j'},
                                      {"quiet", no_argument, nullptr, 'q'},
                                      {"progress", no_argument, nullptr, kProgress},
                                      {"offset", required_argument, nullptr, kOffset},
                                      {"help", no_argument, nullptr, 'h'},
                                      {nullptr, 0, nullptr, 0}};
    unsigned jobs = default_jobs();
    bool quiet = false, force_progress = false;
    uint64_t offset = 0;
    optind = 1;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":j:qh", longopts, nullptr)) != -1;) {
      switch (c) {
        case 'j': jobs = parse_jobs_arg(optarg); break;
        case 'q': quiet = true; break;
        case kProgress: force_progress = true; break;
        case kOffset: offset = parse_offset_arg(optarg); break;
        case 'h': std::fputs(kHelp, stdout); return 0;
        case ':': throw UsageError(std::string("option '") + argv[optind - 1] + "' needs a value");
        default: throw UsageError(std::string("unknown option '") + argv[optind - 1] + "'");
      }
    }
    if (argc - optind != 1) throw UsageError("need exactly one IMAGE");
    std::string image_path = argv[optind];
    auto image = open_image(image_path, offset, streaming_cache_bytes(jobs));
    Verifier v(*image, jobs);
    size_t problems;
    {
      std::unique_ptr<StatusLine> bar;
      if (want_progress(quiet, force_progress))
        bar = std::make_unique<StatusLine>([&v](double secs) { return v.status(secs); });
      problems = v.run();
    }
    if (problems) {
      std::fprintf(stderr, "sqar verify: %s: FAILED: %zu problem%s found\n", image_path.c_str(), problems,
                   problems == 1 ? "" : "s");
      return 1;
    }
    if (!quiet)
      std::printf("%s: OK: %llu entries, %llu files, %llu bytes of content checked%s\n", image_path.c_str(),
                  (unsigned long long)v.entries(), (unsigned long long)v.files(), (unsigned long long)v.bytes(),
                  v.had_manifest() ? " against the manifest trailer (XXH3-128)" : " (no manifest trailer)");
    return 0;
  });
}

RegisterCommand reg("verify", "check every block, table and file hash of an image", &verify_main);

}  // namespace
}  // namespace sqar::cli
