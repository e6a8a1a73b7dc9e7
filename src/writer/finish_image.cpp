#include "writer/finish_image.h"

#include <sqfs/super.h>

#include <algorithm>
#include <ctime>

#include "common/error.h"
#include "format/data_digests.h"
#include "format/image_settings.h"
#include "format/manifest.h"
#include "format/squashfs.h"
#include "writer/image_file.h"

namespace sqar {
namespace {

// Metadata blocks are 8 KiB and compressed one after another (each inode's reference depends on
// the compressed size of every block before it), so their level costs wall time that no thread
// can hide, and on 8 KiB blocks zstd gains little above level 6 (docs/architecture.md,
// "Metadata through libsquashfs").
constexpr int kMetadataZstdLevelCap = 6;
// gzip -l 7 to 9 all compress data with libdeflate's level 8. Their metadata takes -l 6's
// libdeflate 7 instead: on 8 KiB metadata blocks 8 is no smaller (ports +0.08%, C headers
// -0.04%), and 7 takes two thirds of its time. Levels 10-12 keep theirs (2.4% smaller
// metadata for those who asked for the smallest image), and so does the zlib path of a
// window below 32 KiB.
constexpr int kMetadataGzipLevel = 6;

CodecConfig metadata_codec(CodecConfig cfg) {
  const int level = resolved_level(cfg);
  if (cfg.id == CodecId::zstd && level > kMetadataZstdLevelCap) cfg.level = kMetadataZstdLevelCap;
  if (cfg.id == CodecId::gzip && cfg.gzip_window >= 15 && level > kMetadataGzipLevel && level <= 9)
    cfg.level = kMetadataGzipLevel;
  return cfg;
}

uint16_t block_log(uint32_t bs) {
  uint16_t l = 0;
  while ((1u << l) < bs) ++l;
  return l;
}

// The manifest trailer (format/manifest.h): an entry for each data-owning file with a full block
// (or no fragment), and a digest per fragment block over the small files that lie in it alone.
std::vector<uint8_t> encode_manifest_of(const Tree& tree, const DataResult& data,
                                        const std::vector<uint32_t>& inode_numbers, uint32_t block_size) {
  std::vector<ManifestEntry> entries;
  std::vector<FragmentMember> members;
  for (size_t i = 0; i < tree.files.size(); ++i) {
    const Node& node = tree.nodes[tree.files[i]];
    const FileLocation& loc = data.files[i];
    if (node.omitted || node.size == 0) continue;
    if (covered_by_fragment_digest(node.size, block_size, loc.fragment))
      members.push_back({loc.fragment, inode_numbers[i], loc.hash});  // duplicates too: each inode is bound
    else if (loc.same_as == kNoNode)
      entries.push_back({inode_numbers[i], loc.hash});
  }
  return encode_manifest(std::move(entries), fragment_digests(std::move(members), uint32_t(data.fragments.size())));
}

}  // namespace

FinishResult finish_image(const Tree& tree, const DataResult& data, ImageFile& out, const FinishOptions& opt) {
  const uint64_t data_end = out.position();
  int64_t sb_time = opt.image_time    ? *opt.image_time
                    : opt.mtime       ? *opt.mtime
                    : opt.source_date ? *opt.source_date
                                      : int64_t(time(nullptr));
  sqfs_super_t super;
  if (sqfs_super_init(&super, opt.codec.block_size, uint32_t(std::clamp<int64_t>(sb_time, 0, UINT32_MAX)),
                      SQFS_COMPRESSOR(opt.codec.id)) != 0)
    throw Error("invalid superblock parameters");
  super.block_log = block_log(opt.codec.block_size);
  MetadataOptions meta_opt;
  meta_opt.codec = metadata_codec(opt.codec);
  meta_opt.exportable = opt.exportable;
  meta_opt.xattrs = opt.xattrs;
  meta_opt.uid = opt.uid;
  meta_opt.gid = opt.gid;
  meta_opt.mtime_override = opt.mtime;
  meta_opt.mtime_clamp = opt.source_date;
  FinishResult r;
  r.meta = write_metadata(tree, data, out, super, meta_opt);

  super.flags = uint16_t(super.flags | opt.flags);
  if (opt.dedup) super.flags |= fmt::kFlagDuplicates;
  if (r.meta.xattr_sets == 0) super.flags |= fmt::kFlagNoXattrs;
  super.bytes_used = out.position();
  const uint64_t padded = fmt::align_up(super.bytes_used, fmt::kDeviceAlign);
  std::vector<uint8_t> zeros(padded - super.bytes_used, 0);
  out.append(zeros.data(), zeros.size());
  out.flush();
  if (sqfs_super_write(&super, out.as_sqfs_file()) != 0) throw Error(opt.image + ": writing the superblock failed");

  if (opt.manifest) {
    auto blob = encode_manifest_of(tree, data, r.meta.file_inode_numbers, opt.codec.block_size);
    out.append(blob.data(), blob.size());
    // Digests of the stored data, read back from the page cache: what append and merge check
    // copied blocks against (format/data_digests.h).
    const auto digests =
        compute_data_digests([&](uint64_t off, void* buf, size_t len) { out.read_at(off, buf, len); }, data_end);
    blob = encode_data_digests(digests);
    out.append(blob.data(), blob.size());
    blob = encode_image_settings({opt.codec.id, resolved_level(opt.codec), opt.mixed_levels});
    out.append(blob.data(), blob.size());
  }
  if (opt.before_commit) opt.before_commit();
  out.commit();
  r.bytes_used = super.bytes_used;
  return r;
}

}  // namespace sqar
