#include "ops/merge_images.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <thread>
#include <unordered_map>

#include "common/endian.h"
#include "common/error.h"
#include "common/unique_fd.h"
#include "dedup/content_key.h"
#include "format/squashfs.h"
#include "ops/append_lock.h"
#include "ops/input_image.h"
#include "ops/parallel.h"
#include "ops/recoded_content.h"
#include "ops/renumbered_content.h"
#include "ops/tree_union.h"
#include "pipeline/prestored.h"
#include "scan/scanner.h"
#include "tarin/tar_ingest.h"
#include "writer/finish_image.h"
#include "writer/image_file.h"
#include "writer/image_header.h"

namespace sqar::ops {
namespace {

// A byte range of an input image copied to the output.
struct Range {
  uint64_t begin, end;
  uint64_t dst = 0;
};

// Copies of at least this size are placed at the input's offset modulo 4096, so that XFS and
// btrfs can share the extents (copy_file_range clones whole blocks only) instead of copying.
constexpr uint64_t kAlignedCopyMin = 64 << 10;
// Copies go in pieces of this size (a multiple of 4096, so extents stay shareable).
constexpr uint64_t kCopyPiece = uint64_t(64) << 20;

std::string settings(CodecId id, uint32_t block_size) {
  return std::string(codec_name(id)) + " with " + std::to_string(block_size / 1024) + " KiB blocks";
}

std::string settings(const InputImage& in) {
  return settings(in.image->super().compressor, in.image->super().block_size);
}

class Merger {
 public:
  Merger(MergeOptions& opt, MergeProgress* progress) : opt_(opt), progress_(progress) {}

  MergeStats run() {
    const auto t0 = std::chrono::steady_clock::now();
    if (opt_.images.empty()) throw Error("no input image given");
    // append changes IMAGE as a user sees it, though it renames a new file over it: an image
    // its owner made read-only (chmod 444, as archives are protected) is refused, as
    // mksquashfs refuses to append to it. (root may write it, there as here.)
    if (opt_.append && ::access(opt_.images[0].c_str(), W_OK) != 0 && errno == EACCES)
      throw Error(opt_.images[0] + ": Permission denied (the image is not writable; append would replace it)");
    if (struct stat st; opt_.append && opt_.warn && ::stat(opt_.images[0].c_str(), &st) == 0 && st.st_nlink > 1)
      opt_.warn(opt_.images[0] + ": has " + std::to_string(st.st_nlink - 1) +
                " other hard link(s), which keep the old image: the new one is a new file renamed over this name");
    if (opt_.append) lock_.emplace(opt_.images[0], opt_.warn);
    for (const auto& p : opt_.images) inputs_.push_back(open_input_image(p));
    const CodecConfig codec = choose_codec();
    load_inputs();
    for (const auto& in : inputs_) stats_.decoded_bytes += in.decoded_bytes;
    auto since = [](auto t) { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(); };
    stats_.load_seconds = since(t0);

    ImageFile out(opt_.append ? opt_.images[0] : opt_.output, opt_.append || opt_.force);
    // OUT '-' with standard output appending to an input (>> shard.sqfs): the image would be
    // copied onto the end of the file it was read from.
    if (const auto target = out.replaced_identity();
        target && !opt_.append && opt_.output == ImageFile::kStandardOutput)
      for (const auto& in : inputs_)
        if (in.st.st_dev == target->first && in.st.st_ino == target->second)
          throw Error("standard output is " + in.path + ", an input; write the merged image to another file");
    std::optional<Tree> scanned;
    std::optional<TarInput> tar;
    if (!opt_.sources.empty() && !opt_.tar.empty())
      throw Error("--tar takes the place of SOURCEs; give one or the other");
    if (!opt_.sources.empty() || !opt_.tar.empty()) enter(MergePhase::scanning);
    if (!opt_.sources.empty()) restamp(*(scanned = scan(out)));
    if (!opt_.tar.empty()) restamp((tar = read_tar(out, codec))->tree);
    std::vector<UnionInput> uin;
    for (const auto& in : inputs_) uin.push_back({&in.tree, in.path});
    if (scanned) uin.push_back({&*scanned, "the SOURCEs"});
    if (tar) uin.push_back({&tar->tree, opt_.tar == "-" ? "the tar stream" : opt_.tar});
    TreeUnion u = union_trees(uin, opt_.replace, opt_.warn);

    pick_owners(u);
    pick_fragments();
    const auto t_copy = std::chrono::steady_clock::now();
    // The first input's bytes start at offset 0, superblock included (it is rewritten at the
    // end), so its blocks keep their positions and the copy is aligned for extent sharing. A
    // recoded first input brings nothing: the output's own header takes its place.
    uint16_t header_flags = inputs_[0].image->super().flags & fmt::kFlagCompressorOptions;
    if (inputs_[0].recode) header_flags = write_image_header(out, codec);
    uint64_t copy_total = 0;
    for (uint32_t k = 0; k < inputs_.size(); ++k)
      for (const Range& r : ranges_.emplace_back(plan(k))) copy_total += r.end - r.begin;
    enter(MergePhase::copying, copy_total);
    for (uint32_t k = 0; k < inputs_.size(); ++k) copy_input(k, out);
    if (xz_dictionary_) {
      uint8_t dict[4];
      store_le32(dict, xz_dictionary_);
      out.write_at(fmt::kSuperblockSize + 2, dict, sizeof dict);
    }
    PrestoredData pre = prestored(u);
    const RecodedContent recoded = recoded_files(u);
    std::optional<RenumberedContent> tar_content;
    if (tar) tar_content.emplace(*tar->content, tar_nodes(u));
    stats_.copy_seconds = since(t_copy);
    const auto t_data = std::chrono::steady_clock::now();

    DataOptions data_opt;
    data_opt.codec = codec;
    data_opt.threads = opt_.threads;
    data_opt.dedup = opt_.dedup;
    data_opt.skip_unreadable = opt_.skip_unreadable;
    data_opt.strict = opt_.strict;
    data_opt.fixed_uid = opt_.uid.has_value();  // restamp() set them on the new entries
    data_opt.fixed_gid = opt_.gid.has_value();
    data_opt.fixed_mtime = opt_.mtime.has_value();
    data_opt.read_file_xattrs = opt_.xattrs && scanned.has_value();  // the others' come with their tree
    data_opt.warn = opt_.warn;
    data_opt.prestored = &pre;
    if (!recoded.empty()) data_opt.content = &recoded;
    if (tar_content) data_opt.content = &*tar_content;
    if (progress_) {
      uint64_t total = 0;  // what the pipeline reads: every file not copied
      for (uint32_t i = 0; i < u.tree.files.size(); ++i)
        if (!pre.stored[i]) total += u.tree.nodes[u.tree.files[i]].size;
      enter(MergePhase::data, total);
      data_opt.bytes_done = &progress_->bytes_done;
      data_opt.bytes_total = &progress_->bytes_total;
    }
    DataResult data = write_file_data(u.tree, out, data_opt);
    refuse_replacements_left_out(u);
    for (const auto& in : inputs_)
      if (in.recode) check_input_unchanged(in, in.image->file_descriptor());
    stats_.data_seconds = since(t_data);
    const auto t_finish = std::chrono::steady_clock::now();
    enter(MergePhase::finishing);

    FinishOptions fin;
    fin.image = out.display_name();
    fin.codec = codec;
    fin.flags = header_flags;
    fin.dedup = opt_.dedup;
    fin.xattrs = true;  // the inputs keep theirs; --no-xattrs leaves out only the new entries' (scan)
    fin.mixed_levels = copies_other_levels(codec);
    fin.image_time = opt_.image_time;
    if (lock_) fin.before_commit = [this] { lock_->check_still_in_place(); };
    const FinishResult fr = finish_image(u.tree, data, out, fin);
    stats_.finish_seconds = since(t_finish);

    // The root counts, as create and info count it.
    for (uint32_t i = 0; i < u.tree.nodes.size(); ++i) stats_.entries += !u.tree.nodes[i].omitted;
    stats_.files = u.tree.files.size();
    stats_.data = data.stats;
    stats_.image_bytes = fr.bytes_used;
    stats_.file_bytes = out.position();
    stats_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return stats_;
  }

 private:
  // A --replace entry from SOURCEs that the data pass left out (it vanished, or was unreadable
  // with --skip-unreadable) would take IMAGE's entry of that name with it: the run fails, and
  // IMAGE stays as it was, rather than lose the entry the user meant to update.
  void refuse_replacements_left_out(const TreeUnion& u) const {
    std::string names;
    size_t count = 0;
    for (uint32_t i = 0; i < u.tree.nodes.size(); ++i) {
      if (!u.replaces_earlier[i]) continue;
      const Node& n = u.tree.nodes[i];
      const bool gone = n.omitted || (n.link_target != kNoNode && u.tree.nodes[n.link_target].omitted);
      if (!gone) continue;
      if (++count <= 10) names += (names.empty() ? "" : ", ") + u.tree.rel_path_of(n);
    }
    if (count == 0) return;
    if (count > 10) names += " and " + std::to_string(count - 10) + " more";
    throw Error(
        names + ": left out (see above), so " + (count == 1 ? "it does" : "they do") +
        " not replace the entry of that name; " +
        (opt_.append ? "nothing is written and " + opt_.images[0] + " is as it was" : opt_.output + " is not written"));
  }

  // The output takes the first input's compressor and block size, so that its stored bytes
  // (and compressor options) lead the output, unless merge's -c or -b choose others. An input
  // stored another way is recoded: its files are decoded and compressed again, with a warning,
  // since its blocks cannot be copied. append never recodes IMAGE.
  CodecConfig choose_codec() {
    const InputImage& first = inputs_[0];
    CodecConfig codec = first.image->codec_config();
    codec.block_size = first.image->super().block_size;
    const bool other_codec = opt_.compressor && *opt_.compressor != codec.id;
    const bool other_block = opt_.block_size && *opt_.block_size != codec.block_size;
    if (opt_.append && (other_codec || other_block))
      throw OptionError(first.path + " is " + settings(first) +
                        ": new data is stored the same way (recompressing the image is not supported)");
    if (other_codec) {
      codec = CodecConfig{};
      codec.id = *opt_.compressor;
      codec.level = preferred_level(codec.id);
      codec.block_size = first.image->super().block_size;
    }
    if (other_block) {
      codec.block_size = *opt_.block_size;
      codec.xz_dict_size = 0;  // the block size, as create chooses it
    }
    if (!codec_can_write(codec.id)) throw Error(std::string("cannot write ") + codec_name(codec.id) + " images");
    if (opt_.level >= 0) {
      auto [lo, hi] = level_range(codec.id);
      if (opt_.level < lo || opt_.level > hi)
        throw OptionError("level " + std::to_string(opt_.level) + " is out of range for " + codec_name(codec.id) +
                          " (" + std::to_string(lo) + "-" + std::to_string(hi) + ")");
      codec.level = opt_.level;
    }
    if (codec.id == CodecId::lz4 && (other_codec || opt_.level >= 0)) codec.lz4_hc = codec.level > 0;
    for (auto& in : inputs_)
      if (in.image->super().compressor != codec.id || in.image->super().block_size != codec.block_size)
        recode(in, "is " + settings(in) + ", the output " + settings(codec.id, codec.block_size));
    if (codec.id == CodecId::xz) declare_xz_dictionary(codec);
    return codec;
  }

  // Whether some copied block may have been compressed at another level than the new data
  // (`codec`'s): an input copied as stored whose settings trailer gives another level, says
  // it is mixed itself, or is missing (another tool's image, an earlier sqar's).
  static bool copies_other_levels(const std::vector<InputImage>& inputs, const CodecConfig& codec) {
    for (const auto& in : inputs) {
      if (in.recode || in.data_end <= fmt::kSuperblockSize) continue;  // nothing copied as stored
      std::optional<ImageSettings> s;
      try {
        s = in.image->settings_trailer();
      } catch (const Error&) {
      }
      if (!s || s->mixed || s->level != resolved_level(codec)) return true;
    }
    return false;
  }
  bool copies_other_levels(const CodecConfig& codec) const { return copies_other_levels(inputs_, codec); }

  // Marks an input whose blocks cannot be copied for recoding, with one warning line: its
  // path, `why`, and what happens instead.
  void recode(InputImage& in, const std::string& why) {
    in.recode = true;
    ++stats_.recoded_inputs;
    if (opt_.warn) opt_.warn(in.path + " " + why + ": its data is decoded and compressed again, not copied");
  }

  // The kernel allocates the xz dictionary that the compressor options declare and refuses a
  // block that needs a larger one (XZ_MEMLIMIT_ERROR, so EIO). A copied input compressed with a
  // larger dictionary than the first input's therefore raises the declared size: the first
  // input's options block is rewritten once it is copied (xz_dictionary_). Where that cannot
  // be done (no uncompressed options block to rewrite, a dictionary beyond the block size, or
  // a recoded first input, whose place the output's own header takes), such an input is
  // recoded instead. `codec` is the first input's settings when that input is copied, so what
  // it declares is the output's dictionary either way.
  void declare_xz_dictionary(CodecConfig& codec) {
    auto input_dictionary = [](const InputImage& in) { return xz_block_dictionary(in.image->codec_config()); };
    const InputImage& first = inputs_[0];
    const uint32_t declared = xz_block_dictionary(codec);
    uint32_t needed = declared;
    for (const auto& in : inputs_)
      if (!in.recode) needed = std::max(needed, input_dictionary(in));
    if (needed == declared) return;
    if (!first.recode && needed <= codec.block_size && options_block_is_plain(first)) {
      codec.xz_dict_size = needed;
      xz_dictionary_ = needed;
      return;
    }
    for (auto& in : inputs_)
      if (!in.recode && input_dictionary(in) > declared)
        recode(in, "uses a " + std::to_string(input_dictionary(in) / 1024) + " KiB xz dictionary, more than the " +
                       std::to_string(declared / 1024) + " KiB the output declares");
  }

  // Whether the input has an uncompressed 8-byte compressor options block after its
  // superblock, which the output (whose first bytes are the input's) can have rewritten.
  static bool options_block_is_plain(const InputImage& in) {
    if (!(in.image->super().flags & fmt::kFlagCompressorOptions)) return false;
    uint8_t header[2];
    if (::pread(in.image->file_descriptor(), header, 2, fmt::kSuperblockSize) != 2) return false;
    return load_le16(header) == (8 | fmt::kMetadataUncompressed);
  }

  Tree scan(const ImageFile& out) const {
    ScanOptions scan;
    scan.sources = opt_.sources;
    scan.excludes = opt_.excludes;
    scan.keep_as_directory = opt_.keep_as_directory;
    scan.one_file_system = opt_.one_file_system;
    scan.xattrs = opt_.xattrs;
    scan.file_xattrs_later = opt_.xattrs;
    scan.skip_unreadable = opt_.skip_unreadable;
    scan.strict = opt_.strict;
    scan.threads = std::min(2 * opt_.threads, 16u);
    scan.max_threads = 16;
    scan.warn = opt_.warn;
    scan.warn_unstorable_times = !opt_.mtime;
    // Neither the image being written nor an input may be packed into the result.
    scan.skip_inodes.push_back(out.identity());
    for (const auto& in : inputs_) scan.skip_inodes.emplace_back(in.st.st_dev, in.st.st_ino);
    return scan_sources(scan);
  }

  // --tar: the stream's tree and content, read once; content beyond tar_memory spills to a
  // scratch file beside IMAGE.
  TarInput read_tar(const ImageFile& out, const CodecConfig& codec) const {
    TarIngestOptions t;
    t.archive = opt_.tar;
    t.scratch_dir = out.directory();
    t.memory_limit = opt_.tar_memory;
    t.block_size = codec.block_size;
    t.excludes = opt_.excludes;
    t.xattrs = opt_.xattrs;
    t.warn = opt_.warn;
    t.warn_unstorable_times = !opt_.mtime;
    return ingest_tar(t);
  }

  // --uid, --gid, --mtime: the new entries' owner and time (the root's too, which the union
  // takes only with --replace and a SOURCE that names it).
  void restamp(Tree& tree) const {
    for (uint32_t i = 0; i < tree.nodes.size(); ++i) {
      Node& n = tree.nodes[i];
      if (opt_.uid) n.uid = *opt_.uid;
      if (opt_.gid) n.gid = *opt_.gid;
      if (opt_.mtime) n.mtime = *opt_.mtime;
    }
  }

  // For each node of the union that came from the tar stream, its node in the stream's tree.
  std::vector<uint32_t> tar_nodes(const TreeUnion& u) const {
    std::vector<uint32_t> map(u.tree.nodes.size(), UINT32_MAX);
    for (uint32_t n = 0; n < u.tree.nodes.size(); ++n)
      if (u.origin[n].input == inputs_.size()) map[n] = u.origin[n].node;
    return map;
  }

  // Which input files the result uses, and for each content the first input that holds it:
  // a later input's copy of that content is not copied (its files point at the first one's).
  void pick_owners(const TreeUnion& u) {
    used_.assign(inputs_.size(), {});
    for (size_t k = 0; k < inputs_.size(); ++k) used_[k].assign(inputs_[k].files.size(), false);
    file_origin_.assign(u.tree.files.size(), {UINT32_MAX, 0});
    for (size_t i = 0; i < u.tree.files.size(); ++i) {
      const Origin o = u.origin[u.tree.files[i]];
      if (o.input >= inputs_.size() || inputs_[o.input].recode) continue;  // stored by the pipeline
      const uint32_t f = inputs_[o.input].tree.nodes[o.node].file_index;
      file_origin_[i] = {o.input, f};
      used_[o.input][f] = true;
    }
    owner_.assign(inputs_.size(), {});
    std::unordered_map<ContentKey, std::pair<uint32_t, uint32_t>, ContentKeyHasher> first;
    for (uint32_t k = 0; k < inputs_.size(); ++k) {
      const InputImage& in = inputs_[k];
      owner_[k].resize(in.files.size());
      for (uint32_t f = 0; f < in.files.size(); ++f) {
        owner_[k][f] = {k, f};
        if (!used_[k][f]) continue;
        const uint64_t size = in.tree.nodes[in.tree.files[f]].size;
        if (!opt_.dedup || size == 0) continue;
        auto [it, added] = first.emplace(ContentKey{size, in.files[f].hash}, std::make_pair(k, f));
        if (!added && it->second.first != k) {
          owner_[k][f] = it->second;
          ++stats_.duplicate_files;
          stats_.duplicate_bytes += size;
        }
      }
    }
  }

  // Which fragment blocks of each input the output keeps: those holding the tail of a file
  // that keeps its own data. A block whose used tails all belong to files stored by an
  // earlier input (shards of copies of one tree) is neither copied nor listed, so a small
  // file's content found in several inputs is stored once, as a large file's is. append keeps
  // every fragment block of IMAGE: they are copied with its data region, where they lie.
  // Kept blocks are numbered in input order, then in each input's order, as the output's
  // fragment table lists them (prestored).
  void pick_fragments() {
    fragment_index_.assign(inputs_.size(), {});
    uint32_t kept = 0;
    for (uint32_t k = 0; k < inputs_.size(); ++k) {
      const InputImage& in = inputs_[k];
      if (in.recode) continue;  // none of its fragment blocks is copied
      std::vector<uint8_t> keep(in.fragments.size(), opt_.append && k == 0);
      for (uint32_t f = 0; f < in.files.size(); ++f)
        if (used_[k][f] && owner_[k][f].first == k && in.files[f].fragment != fmt::kNoFragment)
          keep[in.files[f].fragment] = 1;
      fragment_index_[k].assign(in.fragments.size(), fmt::kNoFragment);
      for (uint32_t i = 0; i < keep.size(); ++i)
        if (keep[i]) fragment_index_[k][i] = kept++;
    }
  }

  uint64_t stored_length(const InputImage& in, uint32_t f) const {
    const uint64_t size = in.tree.nodes[in.tree.files[f]].size;
    const uint64_t count = size / in.image->super().block_size + in.stored_tail[f];
    uint64_t len = 0;
    for (uint64_t b = 0; b < count; ++b) len += in.words[in.files[f].first_block + b] & ~fmt::kDataUncompressed;
    return len;
  }

  // The byte ranges of input k to copy: IMAGE's whole data region for append (its positions
  // stay valid and it is one reflink-friendly range); otherwise the blocks of the files that
  // keep their own data and the fragment blocks kept (a kept fragment block is copied whole
  // even when some of the tails in it belong to files stored by an earlier input).
  std::vector<Range> plan(uint32_t k) const {
    const InputImage& in = inputs_[k];
    if (in.recode) return {};
    if (opt_.append && k == 0) return {{0, in.data_end}};
    std::vector<Range> r;
    for (uint32_t f = 0; f < in.files.size(); ++f) {
      if (!used_[k][f] || owner_[k][f].first != k) continue;
      const uint64_t len = stored_length(in, f);
      if (len) r.push_back({in.files[f].blocks_start, in.files[f].blocks_start + len});
    }
    for (uint32_t i = 0; i < in.fragments.size(); ++i) {
      const auto& frag = in.fragments[i];
      const uint64_t len = frag.size_word & ~fmt::kDataUncompressed;
      if (len && fragment_index_[k][i] != fmt::kNoFragment) r.push_back({frag.position, frag.position + len});
    }
    std::sort(r.begin(), r.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    std::vector<Range> merged;
    for (const Range& x : r) {
      if (!merged.empty() && x.begin <= merged.back().end)
        merged.back().end = std::max(merged.back().end, x.end);
      else
        merged.push_back(x);
    }
    // The first input brings the superblock's place and the compressor options block after it:
    // a range of its own unless its first data follows them, so that data it no longer needs
    // (replaced with --replace, or all stored by nobody) is not copied along.
    if (k == 0) {
      const uint64_t header = header_end(in);
      if (merged.empty() || merged.front().begin > header)
        merged.insert(merged.begin(), {0, header});
      else
        merged.front().begin = 0;
    }
    return merged;
  }

  // Where an image's data starts: after the superblock and its compressor options block.
  static uint64_t header_end(const InputImage& in) {
    uint64_t end = fmt::kSuperblockSize;
    if (in.image->super().flags & fmt::kFlagCompressorOptions) {
      uint8_t h[2];
      if (::pread(in.image->file_descriptor(), h, 2, off_t(end)) != 2)
        throw Error(in.path + ": cannot read the compressor options block");
      end += 2 + (load_le16(h) & 0x7FFF);
    }
    return std::min(end, in.data_end);
  }

  // Checks each range against the input's data digests (or relies on the full decode that
  // load_input_image did without them), then copies it.
  void copy_input(uint32_t k, ImageFile& out) {
    const InputImage& in = inputs_[k];
    // The file that was loaded, not the one at its name now (replaced meanwhile, its bytes
    // would be copied under the loaded image's tables).
    const UniqueFd fd(::fcntl(in.image->file_descriptor(), F_DUPFD_CLOEXEC, 0));
    if (!fd) throw Error(errno_message(in.path, errno));
    std::vector<uint8_t> checked;
    for (Range& r : ranges_[k]) {
      if (in.digests) {
        check_stored_bytes(fd.get(), in.path, *in.digests, r.begin, r.end, checked);
        stats_.checked_bytes += r.end - r.begin;
      }
      // The first input's first range starts at 0, as the output does; every other large
      // range keeps its offset within a device block, so extents can be shared.
      if (r.end - r.begin >= kAlignedCopyMin && r.begin != 0) {
        const uint64_t pad = (r.begin - out.position()) % fmt::kDeviceAlign;
        const std::vector<uint8_t> zeros(size_t(pad), 0);
        out.append(zeros.data(), zeros.size());
      }
      r.dst = out.position();
      // In pieces, so that a progress display moves while a large region is copied.
      for (uint64_t pos = r.begin; pos < r.end; pos += kCopyPiece) {
        const uint64_t len = std::min(kCopyPiece, r.end - pos);
        stats_.shared_bytes += out.append_from(fd.get(), in.path, pos, len);
        if (progress_) progress_->bytes_done += len;
      }
      stats_.copied_bytes += r.end - r.begin;
    }
    // What was checked must be what was copied: an input rewritten meanwhile is refused.
    check_input_unchanged(in, fd.get());
  }

  uint64_t relocate(uint32_t k, uint64_t pos) const {
    const auto& r = ranges_[k];
    auto it = std::upper_bound(r.begin(), r.end(), pos, [](uint64_t p, const Range& x) { return p < x.begin; });
    if (it == r.begin() || pos > std::prev(it)->end)
      throw Error(inputs_[k].path + ": internal error: byte " + std::to_string(pos) + " was not copied");
    --it;
    return it->dst + (pos - it->begin);
  }

  // Called once, after the copy is planned: it takes the inputs' block size words instead of
  // copying them, and the data pipeline takes them from here (copied at each step, they cost
  // 12 bytes a block: 1.26 GB for 100 files of 2^20 sparse blocks, from 1.7 MB of image).
  PrestoredData prestored(const TreeUnion& u) {
    PrestoredData pre;
    const size_t n = u.tree.files.size();
    pre.stored.assign(n, 0);
    pre.files.resize(n);
    for (uint32_t k = 0; k < inputs_.size(); ++k) {
      const auto& frags = inputs_[k].fragments;
      for (uint32_t i = 0; i < fragment_index_[k].size(); ++i) {
        if (fragment_index_[k][i] == fmt::kNoFragment) continue;
        const uint64_t len = frags[i].size_word & ~fmt::kDataUncompressed;
        pre.fragments.push_back({len ? relocate(k, frags[i].position) : 0, frags[i].size_word});
      }
    }
    std::vector<uint32_t> words_of(n, UINT32_MAX);  // the input whose words a file's list is
    for (uint32_t i = 0; i < n; ++i) {
      const auto [k, f] = file_origin_[i];
      if (k == UINT32_MAX) continue;
      const auto [ok, of] = owner_[k][f];
      const InputImage& in = inputs_[ok];
      FileLocation loc = in.files[of];  // first_block indexes in.words until they are taken below
      words_of[i] = ok;
      loc.blocks_start = stored_length(in, of) ? relocate(ok, loc.blocks_start) : 0;
      if (loc.fragment != fmt::kNoFragment) {
        loc.fragment = fragment_index_[ok][loc.fragment];
        if (loc.fragment == fmt::kNoFragment)
          throw Error(in.path + ": internal error: a kept file's fragment block was not kept");
      }
      loc.hash = inputs_[k].files[f].hash;
      loc.same_as = kNoNode;
      pre.files[i] = loc;
      pre.stored[i] = 1;
      if (in.stored_tail[of]) pre.stored_tail_files.push_back(i);
    }
    // The inputs' words one after another, each input's released as it is taken.
    std::vector<uint64_t> word_base(inputs_.size(), 0);
    std::vector<bool> taken(inputs_.size(), false);
    for (const uint32_t k : words_of)
      if (k != UINT32_MAX) taken[k] = true;
    for (uint32_t k = 0; k < inputs_.size(); ++k) {
      std::vector<uint32_t>& words = inputs_[k].words;
      if (!taken[k]) {  // none of its files keeps its data (recoded, replaced or duplicates)
        std::vector<uint32_t>().swap(words);
        continue;
      }
      if (pre.block_sizes.size() > UINT32_MAX - words.size())
        throw Error("more than 2^32 data blocks in one image; inputs with a larger block size are needed");
      word_base[k] = pre.block_sizes.size();
      if (pre.block_sizes.empty()) {
        pre.block_sizes = std::move(words);
      } else {
        pre.block_sizes.insert(pre.block_sizes.end(), words.begin(), words.end());
      }
      std::vector<uint32_t>().swap(words);
    }
    for (uint32_t i = 0; i < n; ++i)
      if (words_of[i] != UINT32_MAX) pre.files[i].first_block += uint32_t(word_base[words_of[i]]);
    return pre;
  }

  // The files of recoded inputs, which the data pipeline reads through the reader.
  RecodedContent recoded_files(const TreeUnion& u) {
    RecodedContent content(inputs_);
    for (uint32_t i = 0; i < u.tree.files.size(); ++i) {
      const uint32_t node = u.tree.files[i];
      const Origin o = u.origin[node];
      if (o.input >= inputs_.size() || !inputs_[o.input].recode) continue;
      const InputImage& in = inputs_[o.input];
      content.add(node, o.input, in.tree.nodes[o.node].file_index);
      ++stats_.recoded_files;
      stats_.recoded_bytes += in.tree.nodes[o.node].size;
    }
    // The pipeline reads every file that is not prestored through one content source; only
    // merge recodes, and it has no SOURCEs on disk.
    if (!content.empty() && (!opt_.sources.empty() || !opt_.tar.empty()))
      throw Error("internal error: recoded inputs beside SOURCEs");
    return content;
  }

  // Inputs are loaded side by side, the threads shared among them: walking an image's tables
  // is serial, and an input of many small files spends most of its load there. The first
  // input (in command-line order) that fails is the one reported.
  void load_inputs() {
    const unsigned side_by_side = unsigned(std::min<size_t>(std::max(1u, opt_.threads), inputs_.size()));
    const unsigned each = std::max(1u, opt_.threads / side_by_side);
    std::vector<std::exception_ptr> failed(inputs_.size());
    parallel_for(inputs_.size(), side_by_side, [&](size_t i, unsigned) {
      try {
        load_input_image(inputs_[i], each);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    });
    for (const auto& e : failed)
      if (e) std::rethrow_exception(e);
  }

  void enter(MergePhase phase, uint64_t bytes_total = 0) const {
    if (!progress_) return;
    progress_->bytes_done = 0;
    progress_->bytes_total = bytes_total;
    progress_->phase = phase;
  }

  MergeOptions& opt_;
  MergeProgress* progress_;
  uint32_t xz_dictionary_ = 0;      // the dictionary size the first input's options block is given
  std::optional<AppendLock> lock_;  // append: held from before IMAGE is opened until it is replaced
  std::vector<InputImage> inputs_;
  std::vector<std::vector<bool>> used_;                            // per input file
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> owner_;  // per input file: whose data
  std::vector<std::pair<uint32_t, uint32_t>> file_origin_;         // per output file
  std::vector<std::vector<Range>> ranges_;                         // per input, by begin
  std::vector<std::vector<uint32_t>> fragment_index_;  // per input fragment block: its output index, or none
  MergeStats stats_;
};

}  // namespace

MergeStats merge_images(MergeOptions opt, MergeProgress* progress) {
  if (opt.threads == 0) opt.threads = std::max(1u, std::thread::hardware_concurrency());
  return Merger(opt, progress).run();
}

}  // namespace sqar::ops
