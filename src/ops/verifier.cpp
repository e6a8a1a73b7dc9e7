#include "ops/verifier.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/content_hash.h"
#include "common/error.h"
#include "common/hash.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "ops/data_key.h"
#include "ops/input_image.h"
#include "ops/manifest_check.h"
#include "ops/parallel.h"
#include "ops/path_table.h"
#include "reader/stored_content.h"

namespace sqar::ops {
namespace {

// What the content check needs of a file; the inode itself (with its block list) is read
// again by the worker that checks it, from the metadata cache, so memory stays proportional
// to the number of files, not to their inodes' size (a full Inode per entry made verify of
// a 270k-entry image take 232 MB).
struct FileJob {
  PathTable::Id path;  // in Impl::paths_: whole paths of a deep tree grow with its depth squared
  reader::InodeRef ref;
  uint32_t inode_number;
  uint64_t size;
};

}  // namespace

class Verifier::Impl {
 public:
  Impl(reader::Image& image, unsigned jobs, ProblemSink sink) : img_(image), jobs_(jobs), sink_(std::move(sink)) {}

  // The reader's errors start with the image's path, which every report line already names.
  std::string without_image_path(const std::string& msg) const { return without_path_prefix(msg, img_.path()); }

  // A problem of the image as a whole (no path) is reported once: a damaged trailer header
  // loses the trailers after it too, and each of them reports the same cause.
  void problem(const std::string& path, const std::string& why) {
    std::string msg = without_image_path(why);
    std::lock_guard lock(mu_);
    if (path.empty() && !image_problems_.insert(msg).second) return;
    ++problems_;
    if (sink_) sink_(Severity::error, path, msg);
  }

  // Decodes each xattr set once, however many entries share it (hard links, and writers that
  // store one copy of identical sets): one set may decode to 4 MiB, and decoding it for each
  // of 20,000 names of a 45 KB image took 40 s. An entry of a damaged set is named each time.
  void check_xattrs(const reader::Inode& ino) {
    auto [it, fresh] = xattr_errors_.try_emplace(ino.xattr_index);
    if (fresh) {
      try {
        img_.xattrs(ino);
      } catch (const std::exception& e) {
        it->second = e.what();
      }
    }
    if (!it->second.empty()) throw Error(it->second);
  }

  size_t run() {
    check_codec_options();
    load_manifest();
    std::vector<FileJob> files;
    std::unordered_set<uint32_t> file_inodes;  // regular files' inode numbers (hard links once)
    try {
      img_.walk(
          [&](const std::string& path, const reader::Inode& ino) {
            entries_++;
            entries_seen_.store(entries_, std::memory_order_relaxed);
            // A reference, not a copy: paths of a deep tree are long, and copying each one made
            // the walk quadratic in the depth.
            static const std::string kRoot = ".";
            const std::string& shown = path.empty() ? kRoot : path;
            try {
              if (ino.xattr_index != fmt::kNoXattr) check_xattrs(ino);
              if (ino.is_symlink()) img_.read_symlink(ino);
            } catch (const std::exception& e) {
              problem(shown, e.what());
            }
            check_export_entry(shown, ino);
            if (ino.is_dir()) paths_.add(path, /*is_dir=*/true);
            if (ino.is_regular() && file_inodes.insert(ino.inode_number).second) {
              files.push_back({paths_.add(path, /*is_dir=*/false), ino.ref, ino.inode_number, ino.size});
              if (auto it = manifest_.find(ino.inode_number); it != manifest_.end())
                by_key_.emplace(DataKey(img_, ino), it->second);
            }
            return true;
          },
          reader::WalkOptions{.with_blocks = false, .on_error = [&](const std::string& path, const std::string& error) {
                                problem(path.empty() ? "." : path, error);
                              }});
    } catch (const std::exception& e) {
      problem("", "metadata: " + without_image_path(e.what()));
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
    check_data_digests();
    check_settings_trailer();
    files_ = files.size();
    return problems_;
  }

  uint64_t entries() const { return entries_; }
  uint64_t files() const { return files_; }
  uint64_t bytes() const { return bytes_; }
  bool had_manifest() const { return had_manifest_; }
  VerifyProgress progress() const {
    return {phase_.load() == 0, entries_seen_.load(), bytes_done_.load(), bytes_total_.load()};
  }

 private:
  // The options block as the kernel checks it at mount (the reader accepts more).
  void check_codec_options() {
    const CodecConfig& codec = img_.codec_config();
    if (codec.id == CodecId::xz && codec.xz_dict_size && !xz_dictionary_size_is_valid(codec.xz_dict_size))
      problem("", "compressor options declare an xz dictionary of " + std::to_string(codec.xz_dict_size) +
                      " bytes: the Linux kernel mounts only sizes of 2^n or 3*2^n bytes");
  }

  void check_ids() {
    for (uint32_t i = 0; i < img_.super().id_count; ++i) {
      try {
        img_.id_at(uint16_t(i));
      } catch (const std::exception& e) {
        problem("", "id table: " + without_image_path(e.what()));
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
      problem(shown, "export table: " + without_image_path(e.what()));
      export_table_broken_ = true;
    }
  }

  // The stored-data digests trailer (format/data_digests.h): the stored bytes append and
  // merge would copy, hashed per MiB. One problem per damaged MiB.
  void check_data_digests() {
    if (img_.offset() != 0) return;
    std::optional<DataDigests> d;
    try {
      d = img_.data_digests();
    } catch (const std::exception& e) {
      problem("", e.what());
      return;
    }
    if (!d) return;
    if (d->data_end != img_.super().inode_table_start)
      problem("", "data digests trailer covers bytes up to " + std::to_string(d->data_end) + ", the data ends at " +
                      std::to_string(img_.super().inode_table_start));
    const int fd = img_.file_descriptor();
    std::vector<uint8_t> checked;
    for (size_t i = 0; i < d->digests.size(); ++i) {
      try {
        check_stored_bytes(fd, img_.path(), *d, d->chunk_begin(i), d->chunk_end(i), checked);
      } catch (const std::exception& e) {
        problem("", e.what());
      }
    }
  }

  // The settings trailer (format/image_settings.h): damage there would make append and
  // --reuse fall back to the options block's level, so it is reported.
  void check_settings_trailer() {
    try {
      (void)img_.settings_trailer();
    } catch (const std::exception& e) {
      problem("", e.what());
    }
  }

  void load_manifest() {
    try {
      auto m = img_.manifest();
      if (!m) return;
      had_manifest_ = true;
      scheme_ = m->scheme();
      for (const auto& e : m->files) manifest_.emplace(e.inode_number, e.hash);
      if (m->has_fragment_digests()) fragment_digests_ = std::move(m->fragment_digests);
    } catch (const std::exception& e) {
      problem("", manifest_trailer_problem(e, img_.path()));
    }
  }

  // What reading one stored content gave: its content hash, or the error that stopped it.
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
      // Without a manifest the content is only decoded: nothing to compare a hash with.
      ContentHasher hasher(scheme_);
      reader::hash_stored_content(img_, ino, block.data(), {had_manifest_ ? &hasher : nullptr}, &bytes_done_);
      out.digest = hasher.digest();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
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
          return problem(paths_.path(f.path), seen->error);
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
          expected = content_hash("", 0, scheme_);
        if (!expected)
          problem(paths_.path(f.path), "missing from the manifest trailer");
        else if (!(*expected == seen->digest))
          problem(paths_.path(f.path), "content differs from the manifest (content hash " + seen->digest.hex() +
                                           ", expected " + expected->hex() + ")");
      } catch (const std::exception& e) {
        problem(paths_.path(f.path), e.what());
      }
    });
    bytes_ = bytes;
  }

  // Manifests of versions 3 and 4: the files that lie in a fragment block alone are checked together, by
  // the block's digest over their (inode number, content hash) (format/manifest.h). A block with a
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
    std::map<uint32_t, std::vector<size_t>> files_of;  // mismatching block -> its files
    for (size_t k = 0; k < members_.size(); ++k) {
      const uint32_t fragment = members_[k].fragment_index;
      if (fragment < expected.size() && !(seen[fragment] == expected[fragment]) &&
          !undecodable_fragments_.count(fragment))
        files_of[fragment].push_back(member_files_[k]);
    }
    for (const auto& [fragment, members_failed] : files_of) {
      std::vector<std::string> paths;
      for (size_t file : members_failed) paths.push_back(paths_.path(files[file].path));
      std::sort(paths.begin(), paths.end());
      const std::string why = "content differs from the manifest: the digest of fragment block " +
                              std::to_string(fragment) + " over its " + std::to_string(paths.size()) +
                              " small files does not match (this file or another of them is damaged)";
      for (const std::string& path : paths) problem(path, why);
    }
  }

  reader::Image& img_;
  unsigned jobs_;
  PathTable paths_;  // of the directories and of the files checked
  ProblemSink sink_;
  std::mutex mu_;
  std::unordered_set<std::string> image_problems_;          // reported once each (see problem)
  std::unordered_map<uint32_t, std::string> xattr_errors_;  // xattr index -> why it is damaged, or ""
  size_t problems_ = 0;
  uint64_t entries_ = 0, files_ = 0, bytes_ = 0;
  bool had_manifest_ = false;
  HashScheme scheme_ = HashScheme::kChunked;  // the manifest's
  bool export_table_broken_ = false;
  std::unordered_map<uint32_t, Hash128> manifest_;        // inode number -> content hash
  std::map<DataKey, Hash128> by_key_;                     // stored data of listed inodes -> hash
  std::optional<std::vector<Hash128>> fragment_digests_;  // version 3 manifests
  std::mutex members_mu_;
  std::vector<FragmentMember> members_;  // files the fragment digests cover
  std::vector<size_t> member_files_;     // their index in the file list, in the same order
  std::unordered_set<uint32_t> undecodable_fragments_;
  std::mutex outcomes_mu_;
  std::unordered_map<Hash128, Outcome, Hash128Hasher> outcomes_;  // fingerprint of stored data -> what it gave
  std::atomic<int> phase_{0};                                     // 0 metadata, 1 file contents
  std::atomic<uint64_t> entries_seen_{0}, bytes_done_{0}, bytes_total_{0};
};

Verifier::Verifier(reader::Image& image, unsigned jobs, ProblemSink problems)
    : impl_(std::make_unique<Impl>(image, jobs, std::move(problems))) {}
Verifier::~Verifier() = default;
size_t Verifier::run() { return impl_->run(); }
uint64_t Verifier::entries() const { return impl_->entries(); }
uint64_t Verifier::files() const { return impl_->files(); }
uint64_t Verifier::bytes() const { return impl_->bytes(); }
bool Verifier::had_manifest() const { return impl_->had_manifest(); }
VerifyProgress Verifier::progress() const { return impl_->progress(); }

}  // namespace sqar::ops
