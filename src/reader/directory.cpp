// Directory listings, name lookup (with the directory index), path resolution and walks.

#include "common/error.h"
#include "reader/meta_reader.h"
#include "reader/walk_guard.h"

namespace sqar::reader {

namespace {
constexpr uint32_t kMaxEntriesPerHeader = 256;
constexpr uint32_t kMaxNameLen = 256;

FileKind kind_of_entry_type(uint16_t t) {
  switch (t) {
    case fmt::kDir: return FileKind::directory;
    case fmt::kFile: return FileKind::regular;
    case fmt::kSymlink: return FileKind::symlink;
    case fmt::kBlockDev: return FileKind::block_device;
    case fmt::kCharDev: return FileKind::char_device;
    case fmt::kFifo: return FileKind::fifo;
    default: return FileKind::socket;
  }
}

// Walks a directory listing from a given position, entry by entry.
class ListingCursor {
 public:
  // budget: the walk's account of listing bytes (nullptr for a lookup or a single listing).
  ListingCursor(ImageImpl& img, const Inode& dir, uint64_t block_rel, uint32_t offset, uint32_t consumed,
                ListingBudget* budget)
      : r_(img, img.super().directory_table_start + block_rel, offset, "directory listing"),
        total_(dir.dir_file_size > 3 ? dir.dir_file_size - 3 : 0),
        consumed_(consumed),
        dir_number_(dir.inode_number),
        budget_(budget) {
    if (block_rel >= img.super().bytes_used - img.super().directory_table_start || offset >= fmt::kMetadataBlockSize)
      img.fail("directory inode " + std::to_string(dir.inode_number) + " points outside the directory table");
    r_.count_blocks_in(budget);
  }

  // Next entry, or false at the end of the listing.
  bool next(DirEntry& e) {
    if (remaining_ == 0) {
      if (consumed_ >= total_) return false;
      need(12);
      uint8_t h[12];
      r_.read(h, 12);
      spend(12);
      const uint64_t count = uint64_t(load_le32(h)) + 1;  // stored less one: 2^32-1 must not wrap to 0
      start_ = load_le32(h + 4);
      base_ = load_le32(h + 8);
      if (count > kMaxEntriesPerHeader)
        r_.fail("directory header lists " + std::to_string(count) + " entries (max 256)");
      remaining_ = uint32_t(count);
    }
    need(8);
    uint8_t b[8];
    r_.read(b, 8);
    uint16_t off = load_le16(b);
    int16_t delta = int16_t(load_le16(b + 2));
    e.type = load_le16(b + 4);
    uint32_t name_len = uint32_t(load_le16(b + 6)) + 1;
    if (name_len > kMaxNameLen) r_.fail("directory entry name of " + std::to_string(name_len) + " bytes is too long");
    if (e.type < fmt::kDir || e.type > fmt::kSocket)
      r_.fail("directory entry has invalid type " + std::to_string(e.type));
    need(name_len);
    e.name.resize(name_len);
    r_.read(e.name.data(), name_len);
    spend(8 + name_len);
    if (!valid_entry_name(e.name))
      r_.fail("directory " + std::to_string(dir_number_) + " holds an invalid name \"" + printable(e.name) + "\"");
    if (off >= fmt::kMetadataBlockSize)
      r_.fail("directory entry \"" + printable(e.name) + "\" has an invalid inode offset");
    e.inode_ref = (uint64_t(start_) << 16) | off;
    e.inode_number = uint32_t(int64_t(base_) + delta);
    e.kind = kind_of_entry_type(e.type);
    --remaining_;
    return true;
  }

  [[noreturn]] void fail(const std::string& why) { r_.fail(why); }
  // Drops the metadata block held: a paused cursor (a walk's ancestor) pins no memory.
  void release() { r_.release(); }

  static std::string printable(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
      if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
        char buf[8];
        snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
    return out;
  }

 private:
  void need(uint32_t n) {
    if (n > total_ - std::min(consumed_, total_)) r_.fail("directory listing is longer than its inode says");
    consumed_ += n;
  }
  // After the bytes are read, so that the blocks they came from are counted.
  void spend(uint32_t n) {
    if (budget_ && !budget_->spend(n))
      r_.fail("directory listings overlap: " + std::to_string(budget_->listing_bytes()) +
              " bytes of listings read from " + std::to_string(budget_->block_bytes()) + " bytes of directory table");
  }

  MetaReader r_;
  uint32_t total_;
  uint32_t consumed_;
  uint32_t dir_number_;
  ListingBudget* budget_;
  uint32_t remaining_ = 0;
  uint32_t start_ = 0;
  uint32_t base_ = 0;
};
}  // namespace

bool valid_entry_name(std::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

namespace {

// A listing read through a cursor, checked as read_dir checks it.
class CursorListing final : public Image::Listing {
 public:
  CursorListing(ImageImpl& img, const Inode& dir, ListingBudget* budget)
      : cursor_(img, dir, dir.dir_block_start, dir.dir_offset, 0, budget) {}

  bool next(DirEntry& e) override {
    if (!cursor_.next(e)) return false;
    // Writers store names sorted (the kernel's lookup depends on it); a duplicate name
    // could make an extractor follow a symlink planted under the same name.
    if (!previous_.empty() && !(previous_ < e.name))
      cursor_.fail("directory entries are unsorted or duplicated at \"" + ListingCursor::printable(e.name) + "\"");
    previous_ = e.name;
    return true;
  }

  void release() override { cursor_.release(); }

 private:
  ListingCursor cursor_;
  std::string previous_;
};

}  // namespace

std::unique_ptr<Image::Listing> ImageImpl::open_listing(const Inode& dir, ListingBudget* budget) {
  if (!dir.is_dir()) fail("inode " + std::to_string(dir.inode_number) + " is not a directory");
  return std::make_unique<CursorListing>(*this, dir, budget);
}

std::vector<DirEntry> ImageImpl::read_dir(const Inode& dir, ListingBudget* budget) {
  std::vector<DirEntry> out;
  const std::unique_ptr<Listing> listing = open_listing(dir, budget);
  DirEntry e;
  while (listing->next(e)) out.push_back(e);
  return out;
}

std::optional<DirEntry> ImageImpl::lookup(const Inode& dir, std::string_view name) {
  if (!dir.is_dir()) fail("inode " + std::to_string(dir.inode_number) + " is not a directory");
  if (!valid_entry_name(name)) return std::nullopt;
  uint64_t block = dir.dir_block_start;
  uint32_t offset = dir.dir_offset;
  uint32_t consumed = 0;
  if (dir.dir_index_count > 0) {
    // The index lists the first name of each metadata block the listing spans; jump to
    // the last one not greater than the name we want.
    MetaReader r(*this, sb_.inode_table_start + (dir.dir_index_ref >> 16), uint32_t(dir.dir_index_ref & 0xffff),
                 "directory index");
    std::string idx_name;
    const uint32_t total = dir.dir_file_size > 3 ? dir.dir_file_size - 3 : 0;
    for (uint32_t i = 0; i < dir.dir_index_count; ++i) {
      uint8_t b[12];
      r.read(b, 12);
      uint32_t index = load_le32(b);
      uint32_t start = load_le32(b + 4);
      uint32_t len = load_le32(b + 8) + 1;
      if (len > kMaxNameLen) r.fail("directory index name is too long");
      idx_name.resize(len);
      r.read(idx_name.data(), len);
      if (std::string_view(idx_name) > name) break;
      if (index > total || index < consumed) r.fail("directory index entry points outside the listing");
      block = start;
      consumed = index;
      offset = uint32_t((dir.dir_offset + uint64_t(index)) % fmt::kMetadataBlockSize);
    }
  }
  ListingCursor cur(*this, dir, block, offset, consumed, nullptr);
  DirEntry e;
  while (cur.next(e)) {
    int c = std::string_view(e.name).compare(name);
    if (c == 0) return e;
    if (c > 0) break;  // sorted: it is not there
  }
  return std::nullopt;
}

std::optional<Inode> ImageImpl::resolve_path(std::string_view path) {
  Inode cur = root();
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    std::string_view comp = path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    pos = slash == std::string_view::npos ? path.size() + 1 : slash + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") throw Error(path_ + ": path \"" + std::string(path) + "\": '..' is not supported");
    if (!cur.is_dir()) throw Error(path_ + ": path \"" + std::string(path) + "\": not a directory");
    auto e = lookup(cur, comp);
    if (!e) return std::nullopt;
    cur = read_inode(e->inode_ref);
  }
  return cur;
}

void ImageImpl::walk(const std::function<bool(const std::string&, const Inode&)>& fn, const WalkOptions& options) {
  // A frame per open directory holds a cursor into its listing (not the listing itself) and
  // the length of its path in the one shared path buffer, so memory grows with the depth by
  // ~150 bytes per level, whatever the names and listing sizes.
  struct Frame {
    ListingCursor cursor;
    size_t path_len;
    std::string prev;  // the previous name: listings must be sorted without duplicates
  };
  WalkGuard guard(*this);
  Inode r = root();
  if (!r.is_dir()) fail("the root inode is not a directory");
  std::string path;
  guard.enter_directory(r, [&] { return path; });
  if (!fn(path, r)) return;
  std::vector<Frame> stack;
  stack.push_back({ListingCursor(*this, r, r.dir_block_start, r.dir_offset, 0, guard.listings()), 0, {}});
  DirEntry e;
  while (!stack.empty()) {
    Frame& f = stack.back();
    path.resize(f.path_len);
    bool more;
    try {
      more = f.cursor.next(e);
      if (more && !f.prev.empty() && !(f.prev < e.name))
        f.cursor.fail("directory entries are unsorted or duplicated at \"" + ListingCursor::printable(e.name) + "\"");
    } catch (const Error& err) {
      // The rest of this listing is lost; its siblings' listings are not, unless listings
      // overlap, which puts all of them in doubt.
      if (!options.on_error || stack.size() == 1 || guard.listings()->overdrawn()) throw;
      options.on_error(path, err.what());
      more = false;
    }
    if (!more) {
      stack.pop_back();
      continue;
    }
    f.prev = e.name;
    if (!path.empty()) path += '/';
    path += e.name;
    Inode ino;
    try {
      ino = read_inode(e.inode_ref, options.with_blocks);
    } catch (const Error& err) {
      // Without a handler the walk ends here; the error still says whose inode it was.
      if (!options.on_error) throw Error(path_ + ": " + path + ": " + without_path_prefix(err.what(), path_));
      options.on_error(path, err.what());
      continue;
    }
    if (ino.is_dir()) guard.enter_directory(ino, [&] { return path; });
    guard.count_entry(ino, [&] { return path; });
    if (!fn(path, ino) || !ino.is_dir()) continue;
    try {
      ListingCursor child(*this, ino, ino.dir_block_start, ino.dir_offset, 0, guard.listings());
      f.cursor.release();
      stack.push_back({std::move(child), path.size(), {}});
    } catch (const Error& err) {
      if (!options.on_error) throw;
      options.on_error(path, err.what());
    }
  }
}

}  // namespace sqar::reader
