#include "cache/block_cache.h"

#include <exception>
#include <optional>
#include <string>

#include "common/error.h"

namespace sqar::cache {

namespace {
// Bookkeeping per entry (list node, hash node, control block): charged so that a cache of
// many tiny fragments still respects its budget.
constexpr size_t kEntryOverhead = 128;
size_t charge(const BlockPtr& b) { return b->size + kEntryOverhead; }
}  // namespace

struct BlockCache::Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  BlockPtr result;
  // A failed load's message, not its exception object: each waiter throws its own copy, so no
  // exception object is shared between threads (its reference count lives in the uninstrumented
  // C++ runtime, where ThreadSanitizer cannot see it synchronize).
  std::optional<std::string> error;
};

BlockCache::BlockCache(size_t capacity_bytes, unsigned shard_count)
    : capacity_(capacity_bytes), shard_capacity_(capacity_bytes / (shard_count ? shard_count : 1)) {
  if (shard_count == 0) shard_count = 1;
  for (unsigned i = 0; i < shard_count; ++i) shards_.push_back(std::make_unique<Shard>());
}

BlockCache::Shard& BlockCache::shard_for(uint64_t key) {
  // Block positions share low bits (alignment); mix before picking a shard.
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return *shards_[(h >> 32) % shards_.size()];
}

BlockPtr BlockCache::find_locked(Shard& s, uint64_t key) {
  auto it = s.index.find(key);
  if (it == s.index.end()) return nullptr;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->second;
}

void BlockCache::insert_locked(Shard& s, uint64_t key, BlockPtr block) {
  auto it = s.index.find(key);
  if (it != s.index.end()) {
    s.bytes -= charge(it->second->second);
    s.lru.erase(it->second);
    s.index.erase(it);
  }
  s.bytes += charge(block);
  s.lru.emplace_front(key, std::move(block));
  s.index[key] = s.lru.begin();
  // Keep at least the newest entry so a tiny budget still caches the block in use.
  while (s.bytes > shard_capacity_ && s.lru.size() > 1) {
    auto& victim = s.lru.back();
    s.bytes -= charge(victim.second);
    s.index.erase(victim.first);
    s.lru.pop_back();
  }
}

void BlockCache::erase(uint64_t key) {
  Shard& s = shard_for(key);
  BlockPtr victim;  // freed after the lock is released
  std::lock_guard lock(s.mu);
  auto it = s.index.find(key);
  if (it == s.index.end()) return;
  s.bytes -= charge(it->second->second);
  victim = std::move(it->second->second);
  s.lru.erase(it->second);
  s.index.erase(it);
}

bool BlockCache::contains(uint64_t key) {
  Shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  return s.index.count(key) != 0;
}

BlockPtr BlockCache::find(uint64_t key) {
  Shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  BlockPtr b = find_locked(s, key);
  if (b) ++s.hits;
  return b;
}

void BlockCache::insert(uint64_t key, BlockPtr block) {
  Shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  insert_locked(s, key, std::move(block));
}

BlockPtr BlockCache::get_or_load(uint64_t key, const std::function<BlockPtr()>& load) {
  Shard& s = shard_for(key);
  std::shared_ptr<Pending> pending;
  bool owner = false;
  {
    std::lock_guard lock(s.mu);
    if (BlockPtr b = find_locked(s, key)) {
      ++s.hits;
      return b;
    }
    ++s.misses;
    auto it = s.loading.find(key);
    if (it != s.loading.end()) {
      pending = it->second;
    } else {
      pending = std::make_shared<Pending>();
      s.loading.emplace(key, pending);
      owner = true;
    }
  }
  if (!owner) {
    std::unique_lock lock(pending->mu);
    pending->cv.wait(lock, [&] { return pending->done; });
    if (pending->error) throw Error(*pending->error);
    return pending->result;
  }
  BlockPtr result;
  std::exception_ptr error;
  std::string message;
  try {
    result = load();
  } catch (const std::exception& e) {
    error = std::current_exception();
    message = e.what();
  } catch (...) {
    error = std::current_exception();
    message = "unknown error";
  }
  {
    std::lock_guard lock(s.mu);
    s.loading.erase(key);
    if (result) insert_locked(s, key, result);
  }
  {
    std::lock_guard lock(pending->mu);
    pending->done = true;
    pending->result = result;
    if (error) pending->error = message;
  }
  pending->cv.notify_all();
  if (error) std::rethrow_exception(error);
  return result;
}

CacheCounters BlockCache::counters() const {
  CacheCounters c;
  for (const auto& s : shards_) {
    std::lock_guard lock(s->mu);
    c.hits += s->hits;
    c.misses += s->misses;
    c.bytes += s->bytes;
  }
  return c;
}

}  // namespace sqar::cache
