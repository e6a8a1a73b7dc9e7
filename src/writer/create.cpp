#include "writer/create.h"

#include <malloc.h>
#include <sqfs/super.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>
#include <unordered_set>

#include "common/error.h"
#include "dedup/reuse_index.h"
#include "format/squashfs.h"
#include "tarin/tar_ingest.h"
#include "writer/finish_image.h"
#include "writer/image_file.h"
#include "writer/image_header.h"

namespace sqar {
namespace {

void validate(const CreateOptions& opt) {
  const CodecConfig& codec = opt.data.codec;
  const uint32_t bs = codec.block_size;
  if (bs < fmt::kMinBlockSize || bs > fmt::kMaxBlockSize || (bs & (bs - 1)))
    throw Error("block size must be a power of two from 4K to 1M, got " + std::to_string(bs));
  if (!codec_can_write(codec.id)) throw Error(std::string("cannot write ") + codec_name(codec.id) + " images");
  if (codec.level >= 0) {
    auto [lo, hi] = level_range(codec.id);
    if (codec.level < lo || codec.level > hi)
      throw Error(std::string(codec_name(codec.id)) + " level must be " + std::to_string(lo) + ".." +
                  std::to_string(hi) + ", got " + std::to_string(codec.level));
  }
  if (opt.scan.sources.empty() && opt.tar.empty()) throw Error("no source directory given");
}

// Each SOURCE's absolute path on disk and its path in the image, for
// ExcludeList::map_source_paths.
std::vector<std::pair<std::string, std::string>> source_paths(const CreateOptions& opt) {
  namespace fs = std::filesystem;
  auto absolute = [](const std::string& p) {
    std::error_code ec;
    std::string a = fs::absolute(fs::path(p), ec).lexically_normal().string();
    while (a.size() > 1 && a.back() == '/') a.pop_back();
    return a;
  };
  std::vector<std::pair<std::string, std::string>> out;
  if (sources_form_root(opt.scan.sources, opt.scan.keep_as_directory)) {
    out.emplace_back(absolute(opt.scan.sources[0]), "");
    return out;
  }
  for (const std::string& src : opt.scan.sources) {
    const auto [parent, name] = split_source(src);
    out.emplace_back(absolute(join_path(parent, name)), name);
  }
  return out;
}

// SquashFS's id table holds at most 65,536 distinct owner and group ids (each inode indexes
// it with 16 bits). Checked before any data is compressed, naming the entry whose id is one
// too many; libsquashfs would fail only when the tables are written, at the very end.
void check_id_count(const Tree& tree, const std::optional<uint32_t>& uid, const std::optional<uint32_t>& gid) {
  constexpr size_t kMaxIds = 65536;
  std::unordered_set<uint32_t> ids;
  uint32_t last_uid = 0, last_gid = 0;
  bool any = false;
  for (uint32_t i = 0; i < tree.nodes.size(); ++i) {
    const Node& n = tree.nodes[i];
    if (n.omitted) continue;
    const uint32_t u = uid.value_or(n.uid), g = gid.value_or(n.gid);
    if (any && u == last_uid && g == last_gid) continue;  // most trees have a few ids, in runs
    any = true;
    last_uid = u, last_gid = g;
    for (uint32_t id : {u, g})
      if (ids.insert(id).second && ids.size() > kMaxIds)
        throw Error(tree.path_of(i) + ": owner or group id " + std::to_string(id) +
                    " is one more than the 65,536 distinct ids a SquashFS image can hold (--uid and --gid, or "
                    "--all-root, give every entry the same)");
  }
}

void count_entries(const Tree& tree, CreateStats& s) {
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const Node& n = tree.nodes[i];
    if (n.omitted) continue;
    ++s.entries;
    if (n.link_target != kNoNode) {
      ++s.hardlinks;
      continue;
    }
    switch (n.mode & S_IFMT) {
      case S_IFDIR: ++s.directories; break;
      case S_IFREG: ++s.files; break;
      case S_IFLNK: ++s.symlinks; break;
      case S_IFCHR:
      case S_IFBLK: ++s.devices; break;
      case S_IFIFO: ++s.fifos; break;
      case S_IFSOCK: ++s.sockets; break;
    }
  }
}

// --tar: the tree and content of the archive, read once (its content kept by `content`).
Tree read_tar(const CreateOptions& opt, const ImageFile& out, CreateProgress* progress,
              std::unique_ptr<ContentStore>& content) {
  TarIngestOptions t;
  t.archive = opt.tar;
  t.scratch_dir = out.directory();
  t.memory_limit = opt.tar_memory;
  t.block_size = opt.data.codec.block_size;
  t.excludes = opt.scan.excludes;
  t.xattrs = opt.scan.xattrs;
  t.keep_duplicates = opt.data.verify_dedup;
  t.warn_unstorable_times = !opt.metadata.mtime;
  t.warn = opt.warn;
  if (progress) t.entries_seen = &progress->entries;
  TarInput in = ingest_tar(t);
  content = std::move(in.content);
  return std::move(in.tree);
}

}  // namespace

CreateStats create_image(CreateOptions opt, CreateProgress* progress) {
  const auto t0 = std::chrono::steady_clock::now();
  validate(opt);
  if (opt.threads == 0) opt.threads = std::max(1u, std::thread::hardware_concurrency());
  CreateStats stats;

  // OLD is indexed before IMAGE is touched, so a wrong path fails without leaving anything.
  // (OLD may be IMAGE itself under --force: it is replaced only by the final rename.)
  std::optional<ReuseIndex> reuse;
  if (!opt.reuse.empty()) {
    std::string why_not;
    if (progress) progress->phase = CreatePhase::indexing_reuse;
    try {
      reuse = ReuseIndex::open(opt.reuse, opt.data.codec, why_not);
    } catch (const Error& e) {
      if (opt.reuse_strict) throw Error(std::string("--reuse: ") + e.what());
      if (opt.note) opt.note(std::string("--reuse: ") + e.what() + "; building without it");
    }
    if (!why_not.empty() && opt.warn) opt.warn("not reusing data of " + opt.reuse + ": " + why_not);
    if (reuse && reuse->empty()) reuse.reset();
    if (progress) progress->phase = CreatePhase::scanning;
  }

  // `create -f a.txt dir a.txt` would pack a.txt's old content and then replace it with the
  // image: the source is lost. (An IMAGE inside a source directory is fine: it is skipped.)
  if (struct stat image_st;
      opt.force && opt.image != ImageFile::kStandardOutput && stat(opt.image.c_str(), &image_st) == 0) {
    for (const std::string& source : opt.scan.sources) {
      struct stat source_st;
      if (stat(source.c_str(), &source_st) == 0 && source_st.st_dev == image_st.st_dev &&
          source_st.st_ino == image_st.st_ino)
        throw Error(opt.image + ": is also a SOURCE (" + source + "); --force would replace it with its own image");
    }
  }
  ImageFile out(opt.image, opt.force);  // fails early if IMAGE exists without --force

  ScanOptions& scan = opt.scan;
  const auto sources_on_disk = source_paths(opt);
  scan.excludes.map_source_paths(sources_on_disk, opt.note);
  scan.file_xattrs_later = scan.xattrs;  // the data phase reads them from the open files
  // Listing is system calls, not CPU the codecs need yet: two listers per worker thread scanned
  // the ports set (270k entries) in 0.39 s on 2 cores, against 0.63 s with one and 0.68 s with
  // four per core (contention). The tree does not depend on the count.
  scan.threads = std::min(2 * opt.threads, 16u);
  scan.max_threads = 16;  // more only while listing waits on the disk (Scanner::adapt_listers)
  scan.warn = opt.warn;
  scan.strict = opt.data.strict;
  scan.warn_unstorable_times = !opt.metadata.mtime;
  scan.later_times_clamped = opt.metadata.source_date.has_value();
  // The image must not swallow itself (nor the image it replaces) when written inside a source.
  scan.skip_inodes.push_back(out.identity());
  if (const auto replaced = out.replaced_identity()) scan.skip_inodes.push_back(*replaced);
  if (progress) scan.entries_seen = &progress->entries;
  scan.listers_peak = &stats.scan_listers;
  std::unique_ptr<ContentStore> tar_content;
  Tree tree = opt.tar.empty() ? scan_sources(scan) : read_tar(opt, out, progress, tar_content);
  if (opt.tar.empty()) scan.excludes.warn_unmatched(sources_on_disk, opt.warn);
  check_id_count(tree, opt.metadata.uid, opt.metadata.gid);
  // The scan's listings and per-directory tasks are freed now; hand their pages back before
  // the data phase allocates its own. Ports set, zstd-15: peak RSS 53.6-55.9 MB without this,
  // 47.4 MB with it (the tree's nodes sit in large chunks, so the freed memory is whole pages).
  malloc_trim(0);
  auto since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
  stats.scan_seconds = since(t0);
  const uint16_t flags = write_image_header(out, opt.data.codec);  // data follows

  if (progress) {
    progress->bytes_total = tree.total_file_bytes;
    progress->phase = CreatePhase::data;
  }
  DataOptions& data_opt = opt.data;
  data_opt.threads = opt.threads;
  data_opt.skip_unreadable = scan.skip_unreadable;
  data_opt.fixed_uid = opt.metadata.uid.has_value();  // applied as the metadata is written
  data_opt.fixed_gid = opt.metadata.gid.has_value();
  data_opt.fixed_mtime = opt.metadata.mtime.has_value();
  data_opt.read_file_xattrs = scan.xattrs && !tar_content;
  data_opt.content = tar_content.get();
  data_opt.warn = opt.warn;
  data_opt.reuse = reuse ? &*reuse : nullptr;
  if (progress) {
    data_opt.bytes_done = &progress->bytes_done;
    data_opt.bytes_total = &progress->bytes_total;
  }
  const auto t_data = std::chrono::steady_clock::now();
  DataResult data = write_file_data(tree, out, data_opt);
  stats.data_seconds = since(t_data);
  if (data.stats.reuse_mismatches && opt.warn)
    opt.warn(std::to_string(data.stats.reuse_mismatches) + " data block(s) of " + opt.reuse +
             " did not decode to the source bytes (is it damaged?) and were compressed instead");
  // The pipeline's buffers and dedup index are freed; hand the pages back before the metadata
  // phase allocates its own, so peak RSS is the larger of the two phases, not their sum.
  malloc_trim(0);
  const auto t_meta = std::chrono::steady_clock::now();
  if (progress) progress->phase = CreatePhase::metadata;

  FinishOptions& fin = opt.metadata;
  fin.image = out.display_name();
  fin.codec = data_opt.codec;
  fin.flags = flags;
  fin.dedup = data_opt.dedup;
  fin.xattrs = scan.xattrs;
  // Blocks copied from an OLD whose level is unknown may be of another level than the rest:
  // the trailer says so, so a later --reuse, append or merge does not take them for this one.
  fin.mixed_levels = reuse && reuse->levels_unknown() && (data.stats.blocks_reused || data.stats.fragments_reused);
  const FinishResult fr = finish_image(tree, data, out, fin);
  const MetadataResult& meta = fr.meta;
  stats.metadata_seconds = since(t_meta);

  count_entries(tree, stats);
  stats.inodes = meta.inode_count;
  stats.data = data.stats;
  stats.image_bytes = fr.bytes_used;
  stats.file_bytes = out.position();
  stats.xattr_sets = meta.xattr_sets;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (progress) progress->phase = CreatePhase::done;
  return stats;
}

}  // namespace sqar
