// Checking extracted or printed content against the content hashes of sqar's manifest trailer
// (format/manifest.h), as `sqar verify` does, for `extract` and `cat`.
//
// A file is covered in one of three ways: its own entry; the entry of another inode with the
// same stored data (dedup lists each content once); or, for a small file alone in a fragment
// block, the block's digest over all its files. The last two need every regular inode of the
// image to be learned first (a metadata walk); the caller hashes the files it reads and this
// reads the other members of a fragment block itself.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/content_hash.h"
#include "common/hash.h"
#include "reader/image.h"
#include "reader/stored_content.h"

namespace sqar::ops {

class ManifestCheck {
 public:
  // Reads the trailer. Throws sqar::Error when it is damaged; without one, nothing is covered.
  explicit ManifestCheck(reader::Image& image);

  bool has_manifest() const { return has_manifest_; }
  // How the manifest hashes content: callers hash what they read with a ContentHasher of this
  // scheme (kChunked when there is no manifest).
  HashScheme scheme() const { return scheme_; }
  // Call for every regular inode before asking about duplicates or fragment blocks. Learning
  // an inode again (a second name) changes nothing.
  void learn(const reader::Inode& ino);
  // Learns every regular inode of the image in one metadata walk. Damaged entries are passed
  // over (they cannot be learned): a file covered by one of them is then not checked, and a
  // fragment block holding one does not match its digest.
  void learn_all();
  bool in_fragment_digest(const reader::Inode& ino) const;
  // The hash the file's content must have when it is covered by an entry (its own or a
  // duplicate's) or is empty; nullopt when it is covered by its fragment block or not at all.
  std::optional<Hash128> expected(const reader::Inode& ino) const;
  // The fragment blocks whose digest does not match, given the content hashes of the files the
  // caller read (by inode number); the block's other files are read from the image here.
  // Only blocks with at least one file in `read` are checked.
  std::vector<uint32_t> bad_fragments(const std::unordered_map<uint32_t, Hash128>& read);
  // Whether one fragment block's digest matches, the same way (files not in `read` are read
  // from the image). True without fragment digests or members.
  bool fragment_matches(uint32_t fragment, const std::unordered_map<uint32_t, Hash128>& read);

 private:
  reader::Image& img_;
  bool has_manifest_ = false;
  HashScheme scheme_ = HashScheme::kChunked;
  std::unordered_map<uint32_t, Hash128> files_;                 // inode number -> hash
  std::unordered_map<Hash128, Hash128, Hash128Hasher> by_key_;  // data key fingerprint -> hash
  std::optional<std::vector<Hash128>> fragment_digests_;        // version 3
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, reader::InodeRef>>> members_;  // fragment -> files
};

// What to report when an image's manifest trailer cannot be read: the cause, without the
// image's path, naming the trailer once (most causes name it themselves).
std::string manifest_trailer_problem(const std::exception& e, const std::string& image_path);

}  // namespace sqar::ops
