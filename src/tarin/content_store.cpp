#include "tarin/content_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/all_zero.h"
#include "common/error.h"
#include "writer/scratch_file.h"

namespace sqar {
namespace {

constexpr uint64_t kChunk = uint64_t(1) << 20;    // memory is allocated a chunk at a time
constexpr size_t kSpillBuffer = size_t(1) << 20;  // spill writes are gathered to this size
// Zeros are left gaps a window at a time: large enough that a member's extents stay few (at
// most about two per window: 48 bytes per 64 KiB), small enough to catch a database's empty pages.
constexpr uint64_t kZeroWindow = uint64_t(1) << 16;

}  // namespace

ContentStore::ContentStore(std::string scratch_dir, uint64_t memory_limit, bool keep_duplicates)
    : scratch_dir_(std::move(scratch_dir)),
      memory_limit_(memory_limit / kChunk * kChunk),
      keep_duplicates_(keep_duplicates) {}

ContentStore::~ContentStore() = default;

void ContentStore::begin() {
  hasher_.reset();
  member_start_ = end_;
  member_pos_ = 0;
  member_extents_.clear();
}

void ContentStore::hash_zeros(uint64_t len) { hasher_.update_zeros(len); }

void ContentStore::add(uint64_t offset, const uint8_t* data, size_t len) {
  if (len == 0) return;
  hash_zeros(offset - member_pos_);  // the caller checked offset >= member_pos_
  hasher_.update(data, len);
  member_pos_ = offset + len;
  while (len > 0) {
    const size_t n = size_t(std::min<uint64_t>(len, kZeroWindow - offset % kZeroWindow));
    if (!all_zero(data, n)) keep(offset, data, n);
    offset += n;
    data += n;
    len -= n;
  }
}

void ContentStore::keep(uint64_t offset, const uint8_t* data, size_t len) {
  if (!member_extents_.empty() && member_extents_.back().offset + member_extents_.back().len == offset)
    member_extents_.back().len += len;
  else
    member_extents_.push_back({offset, end_, len});
  append(data, len);
}

void ContentStore::append(const uint8_t* p, size_t len) {
  while (len > 0 && end_ < memory_limit_) {
    const size_t chunk = size_t(end_ / kChunk), at = size_t(end_ % kChunk);
    if (chunk == chunks_.size()) chunks_.push_back(std::make_unique<uint8_t[]>(kChunk));
    const size_t n = std::min<size_t>(len, kChunk - at);
    std::memcpy(chunks_[chunk].get() + at, p, n);
    p += n;
    len -= n;
    end_ += n;
  }
  if (len == 0) return;
  if (!spill_) {
    spill_ = std::make_unique<ScratchFile>(scratch_dir_, "the tar stream's content");
    spill_buf_at_ = end_;
  }
  while (len > 0) {
    const size_t n = std::min(len, kSpillBuffer - spill_buf_.size());
    spill_buf_.insert(spill_buf_.end(), p, p + n);
    p += n;
    len -= n;
    end_ += n;
    if (spill_buf_.size() == kSpillBuffer) flush_spill();
  }
}

void ContentStore::flush_spill() {
  if (spill_buf_.empty()) return;
  sqfs_file_t* f = spill_->as_sqfs_file();
  if (f->write_at(f, spill_buf_at_ - memory_limit_, spill_buf_.data(), spill_buf_.size()) != 0)
    throw Error(spill_->last_error());
  spill_buf_at_ += spill_buf_.size();
  spill_buf_.clear();
}

uint32_t ContentStore::finish(uint64_t size) {
  hash_zeros(size - member_pos_);  // a trailing hole
  Content c;
  c.size = size;
  c.hash = hasher_.digest();
  if (!keep_duplicates_) {
    if (auto it = by_hash_.find(c.hash); it != by_hash_.end() && contents_[it->second].size == size) {
      // Already held: give the bytes back (those still in the spill buffer are never written;
      // the scratch file's are overwritten by the next member).
      end_ = member_start_;
      if (spill_ && end_ < spill_buf_at_) {
        // Rolled back below what was written: the spill buffer restarts where the store ends.
        spill_buf_.clear();
        spill_buf_at_ = std::max(end_, memory_limit_);
      } else if (spill_) {
        spill_buf_.resize(size_t(end_ > spill_buf_at_ ? end_ - spill_buf_at_ : 0));
      }
      ++duplicates_;
      return it->second;
    }
  }
  if (member_extents_.size() == 1 && member_extents_[0].offset == 0 && member_extents_[0].len == size) {
    c.where = member_extents_[0].where;
  } else if (size) {  // holes: the extents, possibly none (all hole)
    if (extents_.size() + member_extents_.size() > UINT32_MAX)
      throw Error("more than 2^32 data extents in sparse members");
    c.first_extent = uint32_t(extents_.size());
    c.extent_count = uint32_t(member_extents_.size());
    extents_.insert(extents_.end(), member_extents_.begin(), member_extents_.end());
  }
  if (contents_.size() >= kNone) throw Error("more than 2^32 files in one archive");
  const uint32_t id = uint32_t(contents_.size());
  contents_.push_back(c);
  by_hash_.emplace(c.hash, id);
  return id;
}

void ContentStore::bind(uint32_t node, uint32_t id) {
  if (node >= node_content_.size()) node_content_.resize(size_t(node) + 1, kNone);
  node_content_[node] = id;
}

void ContentStore::seal() {
  if (spill_) flush_spill();
  by_hash_ = {};
  member_extents_ = {};
}

void ContentStore::read_store(uint64_t where, uint8_t* out, size_t len) const {
  while (len > 0 && where < memory_limit_) {
    const size_t at = size_t(where % kChunk);
    const size_t n = std::min<size_t>(len, size_t(std::min<uint64_t>(kChunk - at, memory_limit_ - where)));
    std::memcpy(out, chunks_[size_t(where / kChunk)].get() + at, n);
    out += n;
    len -= n;
    where += n;
  }
  if (len == 0) return;
  sqfs_file_t* f = spill_->as_sqfs_file();
  if (f->read_at(f, where - memory_limit_, out, len) != 0) throw Error(spill_->last_error());
}

bool ContentStore::range_is_hole(uint32_t node, uint64_t offset, uint64_t len) const {
  const uint32_t id = content_of(node);
  if (id == kNone || len == 0 || offset > contents_[id].size || len > contents_[id].size - offset) return false;
  const Content& c = contents_[id];
  if (c.first_extent == kNone) return false;  // contiguous: all data
  const Extent* first = extents_.data() + c.first_extent;
  const Extent* last = first + c.extent_count;
  const Extent* e =
      std::upper_bound(first, last, offset, [](uint64_t off, const Extent& x) { return off < x.offset + x.len; });
  return e == last || e->offset >= offset + len;
}

int ContentStore::read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const {
  const uint32_t id = content_of(node);
  if (id == kNone || offset > contents_[id].size || len > contents_[id].size - offset) return EINVAL;
  const Content& c = contents_[id];
  try {
    if (c.first_extent == kNone) {  // contiguous
      read_store(c.where + offset, out, size_t(len));
      return 0;
    }
    std::memset(out, 0, size_t(len));
    const Extent* first = extents_.data() + c.first_extent;
    const Extent* last = first + c.extent_count;
    // The first extent that ends after `offset`.
    const Extent* e =
        std::upper_bound(first, last, offset, [](uint64_t off, const Extent& x) { return off < x.offset + x.len; });
    for (; e != last && e->offset < offset + len; ++e) {
      const uint64_t from = std::max(e->offset, offset), to = std::min(e->offset + e->len, offset + len);
      read_store(e->where + (from - e->offset), out + (from - offset), size_t(to - from));
    }
    return 0;
  } catch (const Error&) {
    return EIO;  // the scratch file's cause is in its last_error()
  }
}

}  // namespace sqar
