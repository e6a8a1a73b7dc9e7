// What one walk of an image's whole directory tree keeps so that a crafted image cannot make
// it endless, exponential or quadratic. Every such walk holds one: ImageImpl::walk (list, cat,
// extract, verify, info), diff's tree comparison and the merge/append loader.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>

#include "reader/block_list_budget.h"
#include "reader/image.h"
#include "reader/listing_budget.h"

namespace sqar::reader {

class WalkGuard {
 public:
  explicit WalkGuard(Image& image) : image_(image) {}
  WalkGuard(const WalkGuard&) = delete;
  WalkGuard& operator=(const WalkGuard&) = delete;

  // A directory the walk is about to list (the root included). Every directory is listed
  // once: a listing met again means a directory that is its own ancestor (the walk would never
  // end) or one with two parents (each sharing doubles what lies below). Listings are keyed
  // by where they start, so two inodes pointing at one listing count as one directory. Empty
  // directories list nothing and may share a position: they are not counted. Throws
  // sqar::Error naming the image and path_of(), called only then.
  void enter_directory(const Inode& dir, const std::function<std::string()>& path_of);
  // The account every listing of the walk is read against (Image::open_listing, read_dir).
  ListingBudget* listings() { return &listings_; }
  // Each entry the walk meets: regular files' block lists are counted (block_list_budget.h).
  void count_entry(const Inode& entry, const std::function<std::string()>& path_of) {
    block_lists_.count(image_, entry, path_of);
  }

 private:
  Image& image_;
  std::unordered_set<uint64_t> listed_;
  ListingBudget listings_;
  BlockListBudget block_lists_;
};

}  // namespace sqar::reader
