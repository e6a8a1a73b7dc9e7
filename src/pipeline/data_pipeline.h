// The data path of `sqar create`: read source files in parallel, dedup by content before any
// compression, compress blocks on all cores, write them in a fixed order.
//
//   readers (N threads) --> sequencer (1 thread, image order) --> compressors (N) --> writer (1)
//   read_ahead.h            data_pipeline.cpp                      ordered_compressor.h, block_writer.h
//
// Every decision that shapes the output (dedup owner, block cut, fragment packing, write order)
// is taken by the sequencer in image order, so the image is byte-identical for any thread count.
// The first error in any stage stops them all (first_error.h).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "common/hash.h"
#include "format/squashfs.h"
#include "scan/tree.h"

namespace sqar {

class ContentSource;
class ImageFile;
class ReuseIndex;
struct PrestoredData;

struct DataOptions {
  CodecConfig codec;  // codec.block_size is the image block size
  unsigned threads = 1;
  bool dedup = true;
  bool verify_dedup = false;  // byte-compare files before sharing their data
  bool skip_unreadable = false;
  // A file that grows, shrinks, vanishes or is replaced while it is read is an error. Without
  // it the file is stored as read (at most the size the scan saw), with a warning.
  bool strict = false;
  bool detect_incompressible = true;
  // The scan left the attributes of regular files with content to the data phase
  // (ScanOptions::file_xattrs_later): read them from each file as it is opened, into Tree::xattrs.
  bool read_file_xattrs = false;
  // Each file's mode, owner and mtime are taken from the file as it is opened (it may have been
  // replaced since the scan), except those that --uid, --gid or --mtime (--all-root) set.
  bool fixed_uid = false, fixed_gid = false, fixed_mtime = false;
  // --reuse OLD: full blocks of files whose content OLD holds, and fragment blocks OLD has
  // with the same content, are copied from OLD (after checking they decode to the source
  // bytes) instead of compressed. Not owned.
  const ReuseIndex* reuse = nullptr;
  // Content and hashes of the regular files from elsewhere than their paths on disk (a tar
  // stream's members: tarin/content_store.h); null: the files the scan found. Not owned.
  const ContentSource* content = nullptr;
  // append/merge: files whose data is already written (pipeline/prestored.h); the others are
  // stored after it and share its data where their content matches. Not owned, but its
  // block_sizes are taken (moved out), since they may be hundreds of MB.
  PrestoredData* prestored = nullptr;
  std::function<void(const std::string&)> warn;
  // Progress: bytes read so far and to read in all. Files that share their size are read
  // twice (hashed, then stored if they own their data), so bytes_total (the source's bytes
  // when the pipeline starts) grows by the second reads: a bar reaches its end only when the
  // last byte is stored.
  std::atomic<uint64_t>* bytes_done = nullptr;
  std::atomic<uint64_t>* bytes_total = nullptr;
};

// One per regular file, so kept small (10^5..10^7 of them live for the whole build): 40 bytes.
struct FileLocation {
  uint64_t blocks_start = 0;
  Hash128 hash;  // XXH3-128 of the whole content
  // Size words of its full blocks: DataResult::block_sizes[first_block..]. 32 bits: one build
  // stores at most 2^32 full blocks (16 TiB at 4 KiB blocks, 512 TiB at 128 KiB; checked).
  uint32_t first_block = 0;
  uint32_t fragment = fmt::kNoFragment;
  uint32_t fragment_offset = 0;
  uint32_t same_as = kNoNode;  // file index whose data this file shares
};
static_assert(sizeof(FileLocation) == 40, "FileLocation grew: it is multiplied by 10^5..10^7 files");

struct FragmentLocation {
  uint64_t start = 0;
  uint32_t size_word = 0;
};

struct DataStats {
  uint64_t files = 0;
  uint64_t bytes_in = 0;           // content bytes of the regular files stored (not those left out)
  uint64_t bytes_read = 0;         // bytes read from the source, hashing passes included
  uint64_t dedup_files = 0;        // files that share another file's data
  uint64_t dedup_bytes = 0;        // content bytes not stored because of whole-file dedup
  uint64_t tail_dedup_bytes = 0;   // tail bytes that share an identical fragment tail
  uint64_t codec_input_bytes = 0;  // bytes handed to the compressor (a duplicate never is)
  uint64_t blocks_compressed = 0;
  uint64_t blocks_raw = 0;             // did not shrink
  uint64_t blocks_incompressible = 0;  // detected early, stored raw without running the codec
  uint64_t blocks_sparse = 0;
  uint64_t blocks_reused = 0;     // copied from --reuse OLD instead of compressed
  uint64_t fragments_reused = 0;  // fragment blocks copied from --reuse OLD
  uint64_t reused_bytes = 0;      // source bytes of the copied blocks and fragment blocks
  uint64_t reuse_mismatches = 0;  // OLD's block did not decode to the source bytes: compressed
  uint64_t fragments = 0;
  uint64_t data_bytes_written = 0;
};

struct DataResult {
  std::vector<FileLocation> files;  // indexed like Tree::files; duplicates resolved (same_as copied)
  // On-disk size words of every file's full blocks (0 = sparse); a file has size / block_size
  // of them (its tail, if any, is in a fragment).
  std::vector<uint32_t> block_sizes;
  std::vector<FragmentLocation> fragments;
  std::vector<uint32_t> stored_tail_files;  // PrestoredData::stored_tail_files
  DataStats stats;
};

// Writes all file data to `out` starting at its current position. Marks nodes `omitted` when
// they are unreadable and opt.skip_unreadable, or vanished before they were read; a file that
// shrank gets its stored size in Node::size. Throws sqar::Error naming the file and the cause.
DataResult write_file_data(Tree& tree, ImageFile& out, const DataOptions& opt);

}  // namespace sqar
