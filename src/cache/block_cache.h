// A bounded, sharded LRU cache of decompressed blocks, shared by all reader threads.
//
// Keys are block positions in the image. Values are immutable and reference counted, so a
// hit hands out a pointer (no copy) and eviction never frees bytes a reader still uses.
// The cache is split into shards, each with its own mutex, so 4-16 threads rarely contend;
// a lock is held only for a hash lookup and a list splice.
//
// Concurrent misses on one key are coalesced: the first thread decompresses, the others
// wait for its result instead of decompressing the same block again (this matters when
// FUSE read-ahead and the reader that triggered it ask for the same block).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cache/buffer_pool.h"

namespace sqar::cache {

struct Block {
  Buffer bytes;       // pooled (data blocks) or from new[]
  size_t size = 0;    // valid bytes
  uint64_t tag = 0;   // caller-defined check value (e.g. the on-disk size word)
  uint64_t next = 0;  // metadata blocks: position of the following block
  const uint8_t* data() const { return bytes.get(); }
};
using BlockPtr = std::shared_ptr<const Block>;

struct CacheCounters {
  uint64_t hits = 0, misses = 0, bytes = 0;
};

class BlockCache {
 public:
  // capacity_bytes: total budget for cached block bytes (0 still allows each shard one block).
  explicit BlockCache(size_t capacity_bytes, unsigned shard_count = 16);
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  BlockPtr find(uint64_t key);
  // Whether the entry is cached, without counting a hit or touching its LRU position.
  bool contains(uint64_t key);
  void insert(uint64_t key, BlockPtr block);
  // Returns the cached block or calls load() once for all threads missing the same key at
  // the same time. Exceptions from load() reach every waiting caller; nothing is cached then.
  BlockPtr get_or_load(uint64_t key, const std::function<BlockPtr()>& load);

  // Drops the entry (readers holding it keep their pointer). No-op when absent or loading.
  void erase(uint64_t key);

  CacheCounters counters() const;
  size_t capacity() const { return capacity_; }

 private:
  struct Pending;
  struct Shard {
    mutable std::mutex mu;
    std::list<std::pair<uint64_t, BlockPtr>> lru;  // front = most recently used
    std::unordered_map<uint64_t, std::list<std::pair<uint64_t, BlockPtr>>::iterator> index;
    std::unordered_map<uint64_t, std::shared_ptr<Pending>> loading;
    size_t bytes = 0;
    uint64_t hits = 0, misses = 0;
  };
  Shard& shard_for(uint64_t key);
  BlockPtr find_locked(Shard& s, uint64_t key);
  void insert_locked(Shard& s, uint64_t key, BlockPtr block);

  size_t capacity_;
  size_t shard_capacity_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace sqar::cache
