#include "ops/manifest_check.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "common/error.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "ops/data_key.h"

namespace sqar::ops {

ManifestCheck::ManifestCheck(reader::Image& image) : img_(image) {
  auto m = img_.manifest();
  if (!m) return;
  has_manifest_ = true;
  scheme_ = m->scheme();
  for (const auto& e : m->files) files_.emplace(e.inode_number, e.hash);
  if (m->has_fragment_digests()) fragment_digests_ = std::move(m->fragment_digests);
}

bool ManifestCheck::in_fragment_digest(const reader::Inode& ino) const {
  return has_manifest_ && fragment_digests_ &&
         covered_by_fragment_digest(ino.size, img_.super().block_size, ino.fragment_index);
}

void ManifestCheck::learn(const reader::Inode& ino) {
  if (!has_manifest_) return;
  if (in_fragment_digest(ino)) {
    members_[ino.fragment_index].emplace_back(ino.inode_number, ino.ref);
    return;
  }
  if (auto it = files_.find(ino.inode_number); it != files_.end())
    by_key_.emplace(fingerprint(DataKey(img_, ino)), it->second);
}

void ManifestCheck::learn_all() {
  if (!has_manifest_) return;
  std::unordered_set<uint32_t> seen;  // an inode of several names is learned once
  reader::WalkOptions options;
  options.on_error = [](const std::string&, const std::string&) {};
  img_.walk(
      [&](const std::string&, const reader::Inode& ino) {
        if (ino.is_regular() && seen.insert(ino.inode_number).second) learn(ino);
        return true;
      },
      options);
}

std::optional<Hash128> ManifestCheck::expected(const reader::Inode& ino) const {
  if (!has_manifest_ || in_fragment_digest(ino)) return std::nullopt;
  if (auto it = files_.find(ino.inode_number); it != files_.end()) return it->second;
  if (auto it = by_key_.find(fingerprint(DataKey(img_, ino))); it != by_key_.end()) return it->second;
  if (ino.size == 0) return content_hash("", 0, scheme_);
  return std::nullopt;
}

std::vector<uint32_t> ManifestCheck::bad_fragments(const std::unordered_map<uint32_t, Hash128>& read) {
  std::vector<uint32_t> bad;
  if (!has_manifest_ || !fragment_digests_) return bad;
  for (const auto& [fragment, files] : members_) {
    bool touched = false;
    for (const auto& f : files) touched |= read.count(f.first) != 0;
    if (touched && !fragment_matches(fragment, read)) bad.push_back(fragment);
  }
  return bad;
}

bool ManifestCheck::fragment_matches(uint32_t fragment, const std::unordered_map<uint32_t, Hash128>& read) {
  if (!has_manifest_ || !fragment_digests_) return true;
  if (fragment >= fragment_digests_->size()) return false;
  auto it = members_.find(fragment);
  if (it == members_.end()) return true;
  // An inode learned under two names (hard links, or a crafted second name of an inode whose
  // link count says 1) is one member of its block's digest.
  std::vector<std::pair<uint32_t, reader::InodeRef>> unique = it->second;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  std::vector<FragmentMember> members;
  try {
    for (const auto& [number, ref] : unique) {
      auto known = read.find(number);
      members.push_back(
          {0, number,
           known != read.end() ? known->second : reader::stored_content_hash(img_, img_.read_inode(ref), scheme_)});
    }
    return fragment_digests(std::move(members), 1)[0] == (*fragment_digests_)[fragment];
  } catch (const std::exception&) {
    return false;  // a member that does not decode cannot vouch for the block
  }
}

std::string manifest_trailer_problem(const std::exception& e, const std::string& image_path) {
  const std::string cause = without_path_prefix(e.what(), image_path);
  return cause.find("manifest") != std::string::npos ? cause : "manifest trailer: " + cause;
}

}  // namespace sqar::ops
