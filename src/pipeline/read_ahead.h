// The first stage of the data pipeline: reader threads read the source in units (a whole
// number of blocks of about 1 MiB, or one small file) ahead of the sequencer, into a window of
// slots that the sequencer consumes strictly in order.
//
// Readers claim consecutive units in batches and wake the sequencer only when it waits for a
// unit of the batch just read; the sequencer wakes readers only when a batch worth of room is
// free. Handing over each unit on its own cost three futex calls per small file (600k on the
// ports set; docs/architecture.md).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/first_error.h"
#include "pipeline/source_reader.h"
#include "scan/tree.h"
#include "scan/xattr_reader.h"

namespace sqar {

struct ReadUnit {
  uint32_t file;    // index in Tree::files
  uint64_t offset;  // of the unit in the file
  uint64_t len;
  bool last;          // the file's last unit
  bool hole = false;  // known to lie in a hole when planned (a tar member's): nothing to read
  // What the unit holds in memory once read, for the read-ahead's byte budget: a hole holds
  // nothing, so a run of them is bounded by the window alone.
  uint64_t buffered_bytes() const { return hole ? 0 : len; }
};

struct ReadSlot {
  ReadUnit unit;
  SourceBytes data;
  int err = 0;
  std::string changed;  // SourceRead's file-changed report
  // The file's attributes, read with its first unit (DataOptions::read_file_xattrs), and the
  // attribute that could not be read when err came from that.
  XattrList xattrs;
  std::string xattr_key;
  OpenedFile opened;  // fstat of the file the unit was read from
  // The entry whose name the unit was read through: the file's own, or one of its hard links
  // when that name vanished or holds something else since the scan (own_name_err: ENOENT or
  // kNotRegularFile). Set by UnitReader::start_read.
  uint32_t through = kNoNode;
  int own_name_err = 0;
  bool hole = false;  // the unit lies in a hole of a sparse file: `data` is empty, it reads as zeros
  // Set by the reader (release) once the fields above are final; cleared by release().
  std::atomic<bool> ready{false};
};

// What the readers read: the units in image order, and how one is read.
class UnitReader {
 public:
  virtual ~UnitReader() = default;
  // The next unit in image order; called under the stage's lock, total_units times in all.
  virtual ReadUnit next_unit() = 0;
  // Starts reading slot.unit into the slot: returns 0, an errno value, or
  // SourceRead::kReadPending (then `read` holds the open file). `dir` is the thread's own.
  virtual int start_read(DirectoryHandle& dir, ReadSlot& slot, SourceRead& read) = 0;
};

class ReadAhead {
 public:
  // Up to `window` units and about `byte_budget` bytes are read but not yet released.
  ReadAhead(UnitReader& units, size_t total_units, FirstError& errors, size_t window, uint64_t byte_budget);
  ~ReadAhead();  // joins the readers
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  void start(unsigned threads);
  size_t total_units() const { return total_units_; }
  // Unit i, once read; null when the pipeline failed. Units are taken in order, each once.
  ReadSlot* wait(size_t i);
  // Gives unit i's slot back for a later unit.
  void release(size_t i);

 private:
  void reader_loop();
  bool room_to_read() const;
  void wake_all();

  static constexpr size_t kBatchUnits = 32;
  static constexpr uint64_t kBatchBytes = uint64_t(1) << 20;
  static constexpr size_t kNobody = SIZE_MAX;
  // A slot keeps its buffer for the next small file, but not a large one: 256 slots that each
  // once held a 100 KiB file would pin 25 MB.
  static constexpr size_t kSlotKeepBytes = 16 << 10;

  UnitReader& units_;
  const size_t total_units_;
  FirstError& errors_;
  const size_t window_;
  const uint64_t byte_budget_;
  std::vector<ReadSlot> slots_;
  std::vector<std::thread> threads_;

  std::mutex mu_;
  std::condition_variable read_cv_, ready_cv_;
  size_t next_unit_ = 0, consumed_ = 0;
  uint64_t bytes_in_flight_ = 0;  // read but not yet released
  size_t readers_waiting_ = 0;
  std::atomic<size_t> sequencer_waits_for_{kNobody};
};

}  // namespace sqar
