#include "scan/scanner.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "common/error.h"
#include "format/squashfs.h"
#include "scan/directory_cursor.h"
#include "scan/xattr_reader.h"

namespace sqar {
namespace {

// One directory entry as a worker found it: everything the tree needs, read without locks.
struct Entry {
  std::string name;
  struct stat st;
  std::string symlink_target;
  Xattrs xattrs;
  std::vector<uint8_t> exclude_state;  // a directory's, for its DirTask
};

// A directory to list: the scan is breadth-first, so a directory's entries become contiguous
// nodes and listing can run on several threads while one thread builds the tree in order.
struct DirTask {
  uint32_t node;
  uint16_t source;   // which SOURCE directory it lies below
  std::string path;  // on disk, for messages
  std::string rel;   // below the source directory, which it is opened by
  // The anchored --exclude patterns' state after rel (ExcludeList::anchored()): its entries are
  // matched one step from it, not by their whole paths (quadratic in the depth).
  std::vector<uint8_t> exclude_state;
  std::vector<Entry> entries;
  std::string error;  // listing failed: "PATH: cause"
  // The directory was gone, or something else was at its name, when it was to be listed: a
  // live tree removed it after its parent was listed.
  bool vanished = false;
  bool ready = false;
};

// `path` is built only when needed: on 10^5 entries the string work alone shows in profiles.
using PathFn = std::function<std::string()>;

// The entry's storable attributes; a warning names each one SquashFS cannot hold.
Xattrs read_xattrs(int dirfd, const char* name, const PathFn& path_of, const ScanOptions& opt) {
  XattrList found;
  std::string failed_key;
  if (int err = read_xattrs_at(dirfd, name, found, failed_key))
    throw_errno(xattr_error_subject(path_of(), failed_key), err);
  if (!found.unstorable.empty()) warn_unstorable_xattrs(found, path_of(), opt.warn);
  return std::move(found.stored);
}

std::string read_symlink(int dirfd, const char* name, const PathFn& path_of, size_t hint) {
  std::string target(hint + 1, '\0');
  for (;;) {
    ssize_t r = readlinkat(dirfd, name, target.data(), target.size());
    if (r < 0) {
      const int err = errno;
      throw_errno(path_of(), err);
    }
    if (size_t(r) < target.size()) {
      target.resize(size_t(r));
      return target;
    }
    target.resize(target.size() * 2);
  }
}

// Fills one Entry for `name` found in the directory open as dirfd, whose --exclude state is
// dir_state. Returns false when the entry is to be left out (vanished, excluded, unsupported
// type, the image itself).
bool describe_entry(int dirfd, const std::string& dir_path, std::span<const uint8_t> dir_state, const std::string& name,
                    const ScanOptions& opt, Entry& e) {
  const PathFn path = [&] { return join_path(dir_path, name); };
  if (fstatat(dirfd, name.c_str(), &e.st, AT_SYMLINK_NOFOLLOW) != 0) {
    const int err = errno;
    if (err == ENOENT) return false;  // vanished between readdir and stat: it is simply not there
    throw_errno(path(), err);
  }
  for (const auto& [dev, ino] : opt.skip_inodes)
    if (e.st.st_ino == ino && e.st.st_dev == dev) return false;
  if (!opt.excludes.empty()) {
    std::vector<uint8_t> state(opt.excludes.anchored().state_size());
    opt.excludes.anchored().step(dir_state, name, state);
    if (opt.excludes.excluded(state, name, S_ISDIR(e.st.st_mode))) return false;
    if (S_ISDIR(e.st.st_mode)) e.exclude_state = std::move(state);
  }
  switch (e.st.st_mode & S_IFMT) {
    case S_IFREG:
    case S_IFDIR:
    case S_IFLNK:
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
    case S_IFSOCK: break;
    default:
      if (opt.warn) opt.warn(path() + ": unsupported file type, skipped");
      return false;
  }
  e.name = name;
  if (S_ISLNK(e.st.st_mode)) e.symlink_target = read_symlink(dirfd, name.c_str(), path, size_t(e.st.st_size));
  // A regular file with content is opened by create's readers anyway, which then read its
  // attributes from the open file (file_xattrs_later): no second path lookup here.
  const bool later = opt.file_xattrs_later && S_ISREG(e.st.st_mode) && e.st.st_size > 0;
  if (opt.xattrs && !later) e.xattrs = read_xattrs(dirfd, name.c_str(), path, opt);
  return true;
}

// The names in an open directory, without "." and "..". getdents64 directly: opendir/readdir
// would add an fcntl per directory and a smaller buffer.
int read_names(int fd, std::vector<std::string>& names) {
  alignas(8) static thread_local char buf[64 * 1024];
  for (;;) {
    long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return 0;
    for (long pos = 0; pos < n;) {
      // struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[]
      uint16_t reclen;
      std::memcpy(&reclen, buf + pos + 16, sizeof reclen);
      const char* nm = buf + pos + 19;
      if (reclen == 0) return EIO;
      pos += reclen;
      if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
      names.emplace_back(nm);
    }
  }
}

// Lists a directory: its names, then lstat/readlink/xattrs of every entry, sorted by name.
// `base` is the SOURCE directory the task lies below; the cursor belongs to the calling thread.
void list_directory(DirTask& task, const ScanOptions& opt, DirectoryCursor& cursor, const std::string& base) {
  const int fd = cursor.open(base, task.rel, true);
  if (fd < 0) {
    task.vanished = errno == ENOENT || errno == ENOTDIR || errno == ELOOP;
    task.error = errno_message(task.path, errno);
    return;
  }
  std::vector<std::string> names;
  if (int err = read_names(fd, names)) {
    task.error = errno_message(task.path, err);
    return;
  }
  std::sort(names.begin(), names.end());
  task.entries.reserve(names.size());
  for (const auto& name : names) {
    Entry e;
    if (describe_entry(fd, task.path, task.exclude_state, name, opt, e)) task.entries.push_back(std::move(e));
  }
}

class Scanner {
 public:
  explicit Scanner(const ScanOptions& opt) : opt_(opt) {}

  Tree run() {
    if (opt_.sources.empty()) throw Error("no source given");
    tree_.nodes.emplace_back();  // the root
    tree_.nodes[0].mode = S_IFDIR | 0755;
    add_root_entries();
    base_listers_ = std::max(1u, opt_.threads);
    active_listers_ = peak_listers_ = base_listers_;
    max_listers_ = std::max(base_listers_, opt_.max_threads);
    std::vector<std::thread> workers;
    for (unsigned i = 1; i < max_listers_; ++i) workers.emplace_back([this, i] { worker_loop(i); });
    try {
      build_in_order();
    } catch (...) {
      stop_workers(workers);
      throw;
    }
    stop_workers(workers);
    if (opt_.listers_peak) *opt_.listers_peak = peak_listers_;
    warn_about_unstorable_times();
    collect_file_owners(tree_);
    // The name pool grew by doubling; up to half of it is slack that would stay resident for
    // the whole build (it is allocated with mmap, so the copy's old buffer is returned at once).
    tree_.names.shrink_to_fit();
    tree_.files.shrink_to_fit();
    return std::move(tree_);
  }

 private:
  // Runs on the thread that builds the tree in order (idx: the node's index, for messages).
  void fill_metadata(Node& n, const struct stat& st, uint32_t idx) {
    n.mode = st.st_mode;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    // SquashFS stores unsigned 32-bit seconds: the nearest time it can hold, as a warning says
    // after the scan (mksquashfs wraps such times around instead).
    n.mtime = uint32_t(std::clamp<int64_t>(st.st_mtim.tv_sec, 0, UINT32_MAX));
    if (int64_t(n.mtime) != int64_t(st.st_mtim.tv_sec) && !(opt_.later_times_clamped && st.st_mtim.tv_sec > 0)) {
      if (unstorable_times_++ == 0) first_unstorable_seconds_ = int64_t(st.st_mtim.tv_sec);
      if (unstorable_time_nodes_.size() < kNamedUnstorableTimes) unstorable_time_nodes_.push_back(idx);
    }
    if (S_ISREG(st.st_mode)) n.size = uint64_t(st.st_size);
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) n.rdev = fmt::encode_dev(major(st.st_rdev), minor(st.st_rdev));
  }

  // As mksquashfs does it: one SOURCE directory becomes the root (its entries are the root's);
  // with several SOURCEs, one that is not a directory, or keep_as_directory, each SOURCE is an
  // entry of the root under its own name, and the root is made up (see made_up_root).
  void add_root_entries() {
    if (sources_form_root(opt_.sources, opt_.keep_as_directory)) {
      const std::string& src = opt_.sources[0];
      struct stat st;
      if (lstat(src.c_str(), &st) != 0) throw_errno(src, errno);
      source_dev_.push_back(st.st_dev);
      tree_.source_dirs.push_back(src);
      fill_metadata(tree_.nodes[0], st, 0);
      if (opt_.xattrs)
        store_xattrs(0, read_xattrs(
                            AT_FDCWD, src.c_str(), [&] { return src; }, opt_));
      DirTask task{0, 0, src, "", opt_.excludes.anchored().start(), {}, {}, false};
      DirectoryCursor cursor;
      list_directory(task, opt_, cursor, src);
      if (!task.error.empty()) throw Error(task.error);
      for (auto& e : task.entries) root_entries_.push_back({std::move(e), 0});
      attach_root_entries();
      return;
    }
    int64_t newest = 0;
    for (const auto& src : opt_.sources) {
      struct stat st;  // a missing SOURCE is an error, not an entry that vanished
      if (lstat(src.c_str(), &st) != 0) throw_errno(src, errno);
      if (struct stat target;
          S_ISLNK(st.st_mode) && stat(src.c_str(), &target) == 0 && S_ISDIR(target.st_mode) && opt_.warn)
        opt_.warn(src + ": a symlink to a directory: the image holds the symlink, not the directory; write '" + src +
                  "/' to pack the directory it points to");
      auto [parent, name] = split_source(src);
      const uint16_t source = uint16_t(tree_.source_dirs.size());
      tree_.source_dirs.push_back(parent);
      int dirfd = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dirfd < 0) throw_errno(parent, errno);
      Entry e;
      bool keep = false;
      try {
        keep = describe_entry(dirfd, parent, opt_.excludes.anchored().start(), name, opt_, e);
      } catch (...) {
        close(dirfd);
        throw;
      }
      close(dirfd);
      source_dev_.push_back(e.st.st_dev);
      newest = std::max<int64_t>(newest, e.st.st_mtim.tv_sec);
      if (keep) root_entries_.push_back({std::move(e), source});
    }
    made_up_root(newest);
    attach_root_entries();
  }

  // The root when the SOURCEs are its entries: a directory (0755) owned by whoever packs, as
  // new as the newest SOURCE (not the time of the build, so the same sources give the same
  // image; --mtime and SOURCE_DATE_EPOCH apply to it as to every entry). No source named
  // it, so `append --replace` of files keeps IMAGE's root as it is (a private image stays so).
  void made_up_root(int64_t mtime) {
    struct stat st {};
    st.st_mode = S_IFDIR | 0755;
    st.st_uid = geteuid();
    st.st_gid = getegid();
    st.st_mtim.tv_sec = mtime;
    fill_metadata(tree_.nodes[0], st, 0);
    tree_.nodes[0].implied = true;
  }

  void attach_root_entries() {
    std::stable_sort(root_entries_.begin(), root_entries_.end(),
                     [](const auto& a, const auto& b) { return a.first.name < b.first.name; });
    for (size_t i = 1; i < root_entries_.size(); ++i)
      if (root_entries_[i].first.name == root_entries_[i - 1].first.name)
        throw Error(join_path(tree_.source_dirs[root_entries_[i - 1].second], root_entries_[i].first.name) + " and " +
                    join_path(tree_.source_dirs[root_entries_[i].second], root_entries_[i].first.name) +
                    " would have the same name in the image (/" + root_entries_[i].first.name +
                    "): rename one, or pack it from a directory of its own");
    tree_.nodes[0].first_child = uint32_t(tree_.nodes.size());
    for (auto& [e, source] : root_entries_) {
      if (opt_.entries_seen) opt_.entries_seen->fetch_add(1, std::memory_order_relaxed);
      add_node(0, source, tree_.source_dirs[source], "", e);
    }
    tree_.nodes[0].child_count = uint32_t(tree_.nodes.size()) - tree_.nodes[0].first_child;
    root_entries_.clear();
  }

  void store_xattrs(uint32_t idx, Xattrs x) {
    if (!x.empty()) tree_.xattrs[idx] = std::make_shared<const Xattrs>(std::move(x));
  }

  // Appends one node below `parent` and queues its listing when it is a directory to enter.
  void add_node(uint32_t parent, uint16_t source, const std::string& dir_path, const std::string& rel, Entry& e) {
    const uint32_t idx = uint32_t(tree_.nodes.size());
    Node n;
    tree_.set_name(n, e.name);
    n.parent = parent;
    n.source = source;
    if (!S_ISDIR(e.st.st_mode) && e.st.st_nlink > 1) {
      auto [it, inserted] = inodes_.try_emplace({e.st.st_dev, e.st.st_ino}, idx);
      if (!inserted) {
        n.mode = e.st.st_mode;
        n.link_target = it->second;
        tree_.nodes[it->second].link_count++;
        tree_.nodes.push_back(n);
        return;
      }
    }
    fill_metadata(n, e.st, idx);
    tree_.nodes.push_back(n);
    if (S_ISLNK(e.st.st_mode)) tree_.symlink_targets[idx] = std::move(e.symlink_target);
    store_xattrs(idx, std::move(e.xattrs));
    if (S_ISDIR(e.st.st_mode)) {
      if (opt_.one_file_system && e.st.st_dev != source_dev_[source]) return;  // the mount point, not its content
      auto task = std::make_unique<DirTask>();
      task->node = idx;
      task->source = source;
      task->path = join_path(dir_path, e.name);
      task->rel = rel.empty() ? e.name : rel + "/" + e.name;
      task->exclude_state = std::move(e.exclude_state);
      bool wake;
      {
        std::lock_guard lk(mu_);
        tasks_.push_back(std::move(task));
        wake = workers_waiting_ > 0 && room_to_list();
      }
      if (wake) work_cv_.notify_one();
    }
  }

  // Workers list directories ahead; this thread turns listings into nodes in queue order, so
  // node numbering and the tree never depend on thread timing.
  void build_in_order() {
    for (size_t i = 0;; ++i) {
      DirTask* task;
      {
        std::lock_guard lk(mu_);
        if (i >= tasks_.size()) break;
        task = tasks_[i].get();
      }
      wait_or_list(i, *task);
      if (!task->error.empty() && task->vanished && task->node != 0) {
        // Left out as a file that vanishes is: it is not in the tree any more.
        if (opt_.strict) throw Error(task->error + " (the directory vanished during the scan; --strict)");
        if (opt_.warn) opt_.warn(task->error + " (the directory vanished during the scan; left out)");
        tree_.nodes[task->node].omitted = true;
      } else if (!task->error.empty()) {
        if (!opt_.skip_unreadable) throw Error(task->error + opt_.unreadable_hint);
        if (opt_.warn) opt_.warn(task->error + " (stored as an empty directory)");
        tree_.unlisted_dirs.emplace_back(task->node, task->error);
      }
      const uint32_t node = task->node;
      const uint16_t source = tree_.nodes[node].source;
      tree_.nodes[node].first_child = uint32_t(tree_.nodes.size());
      for (auto& e : task->entries) {
        if (opt_.entries_seen) opt_.entries_seen->fetch_add(1, std::memory_order_relaxed);
        add_node(node, source, task->path, task->rel, e);
      }
      tree_.nodes[node].child_count = uint32_t(tree_.nodes.size()) - tree_.nodes[node].first_child;
      bool wake;
      {
        std::lock_guard lk(mu_);
        tasks_[i].reset();  // the listing is in the tree now
        committed_ = i + 1;
        wake = workers_waiting_ > 0 && room_to_list();
      }
      if (wake) work_cv_.notify_all();
    }
  }

  void wait_or_list(size_t i, DirTask& task) {
    std::unique_lock lk(mu_);
    if (next_for_worker_ <= i) {
      // Not handed to a worker yet: take it (and skip it for workers).
      next_for_worker_ = i + 1;
      lk.unlock();
      list_guarded(task, builder_cursor_);
      return;
    }
    if (task.ready) return;
    builder_waits_for_ = i;
    done_cv_.wait(lk, [&] { return task.ready; });
    builder_waits_for_ = kNobody;
  }

  void list_guarded(DirTask& task, DirectoryCursor& cursor) {
    try {
      list_directory(task, opt_, cursor, tree_.source_dirs[task.source]);
    } catch (const std::exception& e) {
      // The directory is what becomes empty (with --skip-unreadable) or fails the build, so it
      // is named first even when an entry inside it could not be looked at (a directory that
      // can be listed but not searched, mode r--).
      const std::string what = e.what();
      task.error = what.rfind(task.path + "/", 0) == 0 ? task.path + ": an entry cannot be read: " + what : what;
      task.entries.clear();
    }
  }

  // Under mu_: is there a batch of directories a worker may list? Listings wait in memory until
  // the tree takes them, so workers stay at most kListAhead directories ahead; and they wake
  // for a batch, not for every directory (that cost several futex calls per directory).
  bool room_to_list() const {
    if (next_for_worker_ >= tasks_.size()) return false;
    const size_t limit = committed_ + kListAhead;
    if (next_for_worker_ >= limit) return false;
    const size_t queued = tasks_.size() - next_for_worker_, room = limit - next_for_worker_;
    return room >= std::min(kListBatch, queued);
  }

  // Lister `index` (the building thread is lister 0) works while index < active_listers_.
  void worker_loop(unsigned index) {
    DirectoryCursor cursor;
    std::vector<size_t> batch;
    for (;;) {
      batch.clear();
      {
        std::unique_lock lk(mu_);
        if (index >= active_listers_) {
          idle_cv_.wait(lk, [&] { return stop_ || index < active_listers_; });
          if (stop_) return;
        }
        ++workers_waiting_;
        work_cv_.wait(lk, [&] { return stop_ || room_to_list(); });
        --workers_waiting_;
        if (stop_) return;
        while (batch.size() < kListBatch && next_for_worker_ < tasks_.size() &&
               next_for_worker_ < committed_ + kListAhead)
          batch.push_back(next_for_worker_++);
      }
      const long waits_before = voluntary_switches();
      for (size_t i : batch) {
        DirTask* task;
        {
          std::lock_guard lk(mu_);
          task = tasks_[i].get();
        }
        list_guarded(*task, cursor);
        bool wake;
        {
          std::lock_guard lk(mu_);
          task->ready = true;
          wake = builder_waits_for_ == i;
        }
        if (wake) done_cv_.notify_one();
      }
      adapt_listers(batch.size(), voluntary_switches() - waits_before);
    }
  }

  // This thread's voluntary context switches: it slept, mostly on the disk while listing.
  static long voluntary_switches() {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
  }

  // A cold tree wants many listers waiting on the disk, a cached one few (they only contend;
  // docs/architecture.md, "Parallel, adaptive scan"). So a batch whose
  // listing slept at least once per directory admits two more listers, up to max_threads, and
  // one that hardly slept sends one back, down to `threads`. Being preempted is no voluntary
  // switch, so a busy machine does not look like a cold tree.
  void adapt_listers(size_t directories, long sleeps) {
    if (max_listers_ == base_listers_ || directories == 0) return;
    std::lock_guard lk(mu_);
    if (sleeps >= long(directories) && active_listers_ < max_listers_) {
      active_listers_ = std::min(max_listers_, active_listers_ + 2);
      peak_listers_ = std::max(peak_listers_, active_listers_);
      idle_cv_.notify_all();
    } else if (sleeps * 4 < long(directories) && active_listers_ > base_listers_) {
      --active_listers_;
    }
  }

  void stop_workers(std::vector<std::thread>& workers) {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    idle_cv_.notify_all();
    for (auto& t : workers) t.join();
  }

  void warn_about_unstorable_times() const {
    if (!unstorable_times_ || !opt_.warn || !opt_.warn_unstorable_times) return;
    std::string more;
    if (unstorable_times_ > 1) {
      std::string names;
      for (size_t i = 1; i < unstorable_time_nodes_.size(); ++i)
        names += (names.empty() ? "" : ", ") + tree_.path_of(unstorable_time_nodes_[i]);
      const uint64_t unnamed = unstorable_times_ - unstorable_time_nodes_.size();
      if (unnamed) names += " and " + std::to_string(unnamed) + (unnamed == 1 ? " more entry" : " more entries");
      // The others may lie on either side of the range: each went to the nearer end.
      more = "; also clamped to 1970-01-01 or 2106-02-07, whichever is nearer: " +
             (names.rfind(" and ", 0) == 0 ? names.substr(5) : names);
    }
    const bool early = first_unstorable_seconds_ < 0;
    opt_.warn(tree_.path_of(unstorable_time_nodes_[0]) + ": modification time " +
              std::to_string(first_unstorable_seconds_) + " s is " + (early ? "before 1970" : "after 2106") +
              ", which SquashFS cannot store; stored as " + (early ? "1970-01-01" : "2106-02-07") + more +
              ". --mtime sets one time for all entries");
  }

  const ScanOptions& opt_;
  uint64_t unstorable_times_ = 0;  // entries whose mtime was clamped to SquashFS's range
  // The first few such entries, named in the warning (a whole tree of them would flood it).
  static constexpr size_t kNamedUnstorableTimes = 10;
  std::vector<uint32_t> unstorable_time_nodes_;
  int64_t first_unstorable_seconds_ = 0;
  Tree tree_;
  std::vector<dev_t> source_dev_;
  std::vector<std::pair<Entry, uint16_t>> root_entries_;
  std::map<std::pair<dev_t, ino_t>, uint32_t> inodes_;
  DirectoryCursor builder_cursor_;  // for directories the building thread lists itself

  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::condition_variable idle_cv_;  // listers above active_listers_ wait here
  unsigned base_listers_ = 1, active_listers_ = 1, max_listers_ = 1, peak_listers_ = 1;
  std::deque<std::unique_ptr<DirTask>> tasks_;  // breadth-first queue of directories to list
  size_t next_for_worker_ = 0;
  size_t committed_ = 0;
  size_t workers_waiting_ = 0;
  static constexpr size_t kNobody = SIZE_MAX;
  size_t builder_waits_for_ = kNobody;
  static constexpr size_t kListAhead = 128, kListBatch = 8;
  bool stop_ = false;
};

}  // namespace

Tree scan_sources(const ScanOptions& options) { return Scanner(options).run(); }

std::pair<std::string, std::string> split_source(const std::string& src) {
  std::string path = src;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  auto slash = path.find_last_of('/');
  std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
  // "link/" names the directory a symlink points to (as lstat reads it, and rsync): that
  // directory is the entry, under its own name. Without the resolution the parent of "link"
  // was searched for "link" and the symlink stored.
  struct stat st;
  const bool through_symlink = path.size() != src.size() && lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
  if (last == "." || last == ".." || through_symlink) {
    char* real = realpath(path.c_str(), nullptr);
    if (!real) throw_errno(src, errno);
    path = real;
    std::free(real);
    slash = path.find_last_of('/');
  }
  if (path == "/")
    throw Error(src + ": the file system root has no name to store it under; pass it as the only SOURCE");
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

bool sources_form_root(const std::vector<std::string>& sources, bool keep_as_directory) {
  struct stat st;
  // lstat: "link" is the symlink itself, "link/" the directory it points to.
  return sources.size() == 1 && !keep_as_directory && lstat(sources[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace sqar
