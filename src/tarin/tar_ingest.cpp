#include "tarin/tar_ingest.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/display_name.h"
#include "common/error.h"
#include "common/file_type_name.h"
#include "common/hash.h"
#include "common/utf8_locale.h"
#include "format/squashfs.h"
#include "scan/xattr_reader.h"
#include "tarin/archive_input.h"
#include "tarin/pax_xattr_names.h"

namespace sqar {
namespace {

constexpr size_t kMaxNameLength = 255;  // SquashFS's and Linux's NAME_MAX
// symlink(2) takes at most PATH_MAX - 1 bytes; the kernel's squashfs mounts a 4096-byte
// target but readlink() gives 4095 of them, another path.
constexpr size_t kMaxSymlinkLength = 4095;
// The kernel's limits for one inode's attributes (XATTR_SIZE_MAX, XATTR_LIST_MAX); the image
// reader bounds them the same way (docs/architecture.md).
constexpr size_t kMaxXattrValue = 65536;
constexpr size_t kMaxXattrNames = 65536;
// Symlink targets and the distinct xattr sets are held until the image is written. Compressed,
// a tar of distinct 64 KiB values is tiny (10,000 of them, 640 MB, in a 174 KB .tar.xz took
// 1.9 GB), so what they may take is bounded: a real tree's targets and labels take a few MB.
constexpr uint64_t kMaxHeldMetadata = uint64_t(256) << 20;
constexpr uint32_t kRoot = 0;

struct Inode {
  mode_t mode = S_IFDIR | 0755;
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
  uint32_t rdev = 0;
  uint64_t size = 0;
  uint32_t content = ContentStore::kNone;
};

// A name in the archive's namespace. Several names share an inode when hard-linked; a name
// replaced by a later member of the same path keeps its inode for the links made before.
struct Name {
  uint32_t parent = kNoNode;
  uint32_t inode = 0;
  uint32_t name_offset = 0;
  uint16_t name_length = 0;
  bool removed = false;       // replaced by a later member of the same path
  bool excluded = false;      // --exclude matched it or a directory above it
  bool implicit = false;      // a directory no member named (only implied by a member below it)
  bool has_children = false;  // a directory some member was placed in
};

class Ingest {
 public:
  Ingest(archive* a, std::string name, const TarIngestOptions& opt, ArchiveInput* input)
      : a_(a),
        input_(input),
        name_(std::move(name)),
        opt_(opt),
        store_(std::make_unique<ContentStore>(opt.scratch_dir, opt.memory_limit, opt.keep_duplicates)) {
    inodes_.emplace_back();  // the root's, until a member names the root
    names_.emplace_back();
  }

  TarInput run() {
    for (;;) {
      archive_entry* e = nullptr;
      // What the last member's data left unread (excluded, a link) is skipped here, so that
      // the bound on the next one's headers counts only them.
      if (!last_member_.empty() && archive_read_data_skip(a_) == ARCHIVE_FATAL)
        throw Error(name_ + ": " + archive_message() + " (in member " + last_member_ + ")");
      if (input_) input_->begin_header(a_);
      const int r = archive_read_next_header(a_, &e);
      if (input_) input_->end_header();
      if (r == ARCHIVE_EOF) break;
      bool damaged = r < ARCHIVE_WARN || r == ARCHIVE_RETRY;  // RETRY: a bad header checksum
      if (r == ARCHIVE_WARN) {
        // A name libarchive could not convert (a pax path that is not UTF-8) is kept byte for
        // byte: say which member, and that nothing is lost. Every other warning of a header
        // is damage ("Ignoring malformed pax extended attribute", a record over 1 MB): the
        // member would be stored other than the archive says (its pax path lost for the
        // ustar name), where GNU tar and bsdtar fail.
        const char* path = e ? archive_entry_pathname(e) : nullptr;
        const std::string message = archive_message();
        if (path && message.find("can't be converted") != std::string::npos)
          warn(name_ + ": member " + printable(path) + ": its name is not UTF-8 (" + message +
               "); stored byte for byte");
        else
          damaged = true;
      }
      if (damaged) {
        const std::string after = last_member_.empty() ? "at its start" : "after member " + last_member_;
        throw Error(name_ + ": " + archive_message() + " (" + after + ")" + past_the_end_hint(r));
      }
      member(e);
      member_end_ = archive_filter_bytes(a_, 0);
      if (opt_.entries_seen) opt_.entries_seen->fetch_add(1, std::memory_order_relaxed);
    }
    TarInput out;
    out.tree = build_tree();
    store_->seal();
    out.content = std::move(store_);
    return out;
  }

 private:
  // Archives are read on past their end-of-archive blocks, as `tar -i` reads them (see
  // ingest_tar), so bytes after the end that are no further archive are an error where tar
  // without -i stops reading. When the reader skipped at least the two zero blocks of an end
  // before the bad header, the message says so.
  std::string past_the_end_hint(int r) const {
    // A bad header is a format error (libarchive's ARCHIVE_ERRNO_FILE_FORMAT, EILSEQ on Linux);
    // a decompressor's error (a damaged xz or zstd frame) is not, and gets no such hint. A
    // header whose checksum is wrong comes as ARCHIVE_RETRY ("Damaged tar archive").
    if (r != ARCHIVE_OK && r != ARCHIVE_RETRY && archive_errno(a_) != EILSEQ) return "";
    const int64_t skipped = archive_filter_bytes(a_, 0) - member_end_;
    if (last_member_.empty() || skipped < 1024) return "";
    return "; the archive had most likely ended " + std::to_string(skipped) +
           " bytes earlier: sqar reads on, as tar -i does, so that concatenated archives are read whole, and "
           "what follows an archive's end must be another archive (tar without -i ignores it)";
  }

  static constexpr uint64_t kMaxClaimedBlocks = uint64_t(1) << 27;
  uint64_t claimed_blocks_ = 0;  // by the members read so far (read_content)

  std::string archive_message() const {
    const char* m = archive_error_string(a_);
    return m ? m : "unreadable archive";
  }
  void warn(const std::string& w) const {
    if (opt_.warn) opt_.warn(w);
  }
  [[noreturn]] void fail(const std::string& member, const std::string& why) const {
    throw Error(name_ + ": member " + member + ": " + why);
  }

  static std::string key(uint32_t parent, std::string_view name) {
    std::string k(reinterpret_cast<const char*>(&parent), sizeof parent);
    k += name;
    return k;
  }
  std::string_view name_of(const Name& n) const { return {pool_.data() + n.name_offset, n.name_length}; }
  bool is_dir(uint32_t name) const { return S_ISDIR(inodes_[names_[name].inode].mode); }

  uint32_t add_name(uint32_t parent, std::string_view name, uint32_t inode, bool excluded) {
    Name n;
    n.parent = parent;
    n.inode = inode;
    n.name_offset = uint32_t(pool_.size());
    n.name_length = uint16_t(name.size());
    n.excluded = excluded;
    pool_ += name;
    if (names_.size() >= UINT32_MAX - 1 || pool_.size() > UINT32_MAX) throw Error(name_ + ": too many members");
    const uint32_t idx = uint32_t(names_.size());
    // An excluded member is not in the image: it keeps no directory from being replaced.
    if (parent != kNoNode && !excluded) names_[parent].has_children = true;
    names_.push_back(n);
    lookup_[key(parent, name)] = idx;
    return idx;
  }
  uint32_t add_inode(const Inode& i) {
    if (inodes_.size() >= UINT32_MAX - 1) throw Error(name_ + ": too many members");
    inodes_.push_back(i);
    return uint32_t(inodes_.size() - 1);
  }

  // The name at PATH (normalized), or kNoNode.
  uint32_t find(const std::string& path) const {
    uint32_t at = kRoot;
    size_t pos = 0;
    while (pos < path.size()) {
      size_t slash = path.find('/', pos);
      if (slash == std::string::npos) slash = path.size();
      auto it = lookup_.find(key(at, std::string_view(path).substr(pos, slash - pos)));
      if (it == lookup_.end()) return kNoNode;
      at = it->second;
      pos = slash + 1;
    }
    return at;
  }

  // The member's metadata as an inode (its type from `type`, its size from the caller).
  Inode inode_of(archive_entry* e, mode_t type, const std::string& member) const {
    Inode i;
    i.mode = type | (archive_entry_perm(e) & 07777);
    const la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
    if (uid < 0 || uid > la_int64_t(UINT32_MAX) || gid < 0 || gid > la_int64_t(UINT32_MAX))
      fail(member, "owner " + std::to_string(uid) + ":" + std::to_string(gid) + " does not fit in 32 bits");
    i.uid = uint32_t(uid);
    i.gid = uint32_t(gid);
    i.mtime = archive_entry_mtime_is_set(e) ? int64_t(archive_entry_mtime(e)) : 0;
    if (type == S_IFCHR || type == S_IFBLK) {
      const auto major = archive_entry_rdevmajor(e), minor = archive_entry_rdevminor(e);
      if (major > 0xfff || minor > 0xfffff) fail(member, "device number does not fit in SquashFS's 32 bits");
      i.rdev = fmt::encode_dev(uint32_t(major), uint32_t(minor));
    }
    return i;
  }

  // The directory `comp` below `parent`, made with defaults when no member named it yet.
  // `rel` is its path (a prefix of the member's), and `state` its --exclude state.
  uint32_t directory(uint32_t parent, std::string_view comp, std::string_view rel, std::span<const uint8_t> state,
                     const Inode& like, const std::string& member) {
    if (auto it = lookup_.find(key(parent, comp)); it != lookup_.end()) {
      if (!is_dir(it->second))
        fail(member, std::string(rel) + " is a " + std::string(file_type_name(inodes_[names_[it->second].inode].mode)) +
                         " (an earlier member), not a directory");
      return it->second;
    }
    // As tar2sqfs and sqfstar make them: 0755, with the owner and time of the member below.
    Inode d = like;
    d.mode = S_IFDIR | 0755;
    d.rdev = 0;
    d.size = 0;
    d.content = ContentStore::kNone;
    const bool excluded = names_[parent].excluded || opt_.excludes.excluded(state, comp, true);
    const uint32_t n = add_name(parent, comp, add_inode(d), excluded);
    names_[n].implicit = true;
    return n;
  }

  void member(archive_entry* e) {
    const char* raw = archive_entry_pathname(e);
    if (!raw) raw = archive_entry_pathname_utf8(e);
    if (!raw)
      throw Error(name_ + ": a member without a name (after member " + last_member_ + ")" +
                  past_the_end_hint(ARCHIVE_OK));
    const std::string member(raw);
    last_member_ = member;
    std::string path, why;
    if (!normalize_member_path(member, path, why)) fail(member, why);
    if (member[0] == '/' && !warned_absolute_) {
      warned_absolute_ = true;
      warn(name_ + ": removing leading '/' from member names (" + member + ")");
    }
    const char* hardlink = archive_entry_hardlink(e);
    if (!hardlink) hardlink = archive_entry_hardlink_utf8(e);
    mode_t type = archive_entry_filetype(e);
    if (hardlink)
      type = 0;
    else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFCHR && type != AE_IFBLK &&
             type != AE_IFIFO && type != AE_IFSOCK)
      fail(member, "unsupported member type");
    // A hard link's own owner and time too: the directories it implies take them.
    Inode meta = inode_of(e, hardlink ? 0 : type, member);
    if (!hardlink && !root_named_ && !first_member_seen_) {
      // The root takes the first member's owner and time unless a member names it ("./").
      inodes_[0].uid = meta.uid;
      inodes_[0].gid = meta.gid;
      inodes_[0].mtime = meta.mtime;
    }
    first_member_seen_ = true;

    if (path.empty()) {  // "./" or "/": the image root
      if (type != AE_IFDIR) fail(member, "names the image root but is not a directory");
      inodes_[0] = meta;
      root_named_ = true;
      add_xattrs(e, 0, member);
      return;
    }
    // Walk down to the parent, making the directories no member has named yet. Members come
    // directory by directory, so the last member's parent is usually this one's too: reused
    // until a member replaces any name (that directory or one above it), it saves a lookup
    // per component.
    const size_t last_slash = path.rfind('/');
    const std::string_view parent_path =
        std::string_view(path).substr(0, last_slash == std::string::npos ? 0 : last_slash);
    // The anchored --exclude patterns follow the same walk, one component at a time
    // (common/component_pattern.h): matching each directory's whole path made a member 20,000
    // levels deep (a 50 KB archive) cost seconds, quadratic in its depth.
    const PatternSet& anchored = opt_.excludes.anchored();
    uint32_t parent = kRoot;
    if (!parent_path.empty() && parent_path == last_parent_path_) {
      parent = last_parent_;
    } else {
      last_parent_state_ = anchored.start();
      std::vector<uint8_t> next(last_parent_state_.size());
      size_t pos = 0;
      for (size_t slash; (slash = path.find('/', pos)) != std::string::npos; pos = slash + 1) {
        const std::string_view comp = std::string_view(path).substr(pos, slash - pos);
        anchored.step(last_parent_state_, comp, next);
        parent = directory(parent, comp, std::string_view(path).substr(0, slash), next, meta, member);
        last_parent_state_.swap(next);
      }
      last_parent_path_ = parent_path;
      last_parent_ = parent;
    }
    const std::string_view base = std::string_view(path).substr(last_slash == std::string::npos ? 0 : last_slash + 1);
    std::vector<uint8_t> state(anchored.state_size());  // the member's own
    anchored.step(last_parent_state_, base, state);

    uint32_t inode;
    if (hardlink) {
      std::string target;
      if (!normalize_member_path(hardlink, target, why))
        fail(member, "hard link to " + std::string(hardlink) + ": " + why);
      const uint32_t t = target.empty() ? kRoot : find(target);
      if (t == kNoNode)
        fail(member, "hard link to " + std::string(hardlink) +
                         ", which no earlier member of this archive names (a hard link can only "
                         "name a member before it in the same archive, not an entry of an image)");
      if (is_dir(t)) fail(member, "hard link to the directory " + std::string(hardlink));
      const bool excluded = names_[parent].excluded || opt_.excludes.excluded(state, base, false);
      // A link the patterns leave out too (both names match, or a directory above both) goes
      // as the user asked, without a word: the warning is for a name they meant to keep.
      if (names_[t].excluded && !excluded) {
        warn(name_ + ": member " + member + ": a hard link to the excluded " + std::string(hardlink) + ", left out");
        // Left out as tar -x --exclude leaves it: an earlier member of its name stays.
        if (lookup_.find(key(parent, base)) == lookup_.end()) place(parent, base, path, member, names_[t].inode, true);
        return;
      }
      inode = names_[t].inode;
      place(parent, base, path, member, inode, excluded);
      return;
    }
    const bool excluded = names_[parent].excluded || opt_.excludes.excluded(state, base, type == AE_IFDIR);
    if (type == AE_IFDIR) {
      if (auto it = lookup_.find(key(parent, base)); it != lookup_.end() && is_dir(it->second)) {
        // A directory named again (tar -c a a/b lists a/b twice, and appended archives repeat
        // directories): its new metadata, its content kept, as tar -x does.
        inodes_[names_[it->second].inode] = meta;
        names_[it->second].implicit = false;
        add_xattrs(e, names_[it->second].inode, member);
        return;
      }
    }
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      if (!target) target = archive_entry_symlink_utf8(e);
      if (!target || !*target) fail(member, "symlink without a target");
      if (std::strlen(target) > kMaxSymlinkLength)
        fail(member, "symlink target longer than " + std::to_string(kMaxSymlinkLength) + " bytes");
      inode = add_inode(meta);
      hold_metadata(std::strlen(target), member);
      symlinks_[inode] = target;
    } else {
      inode = add_inode(meta);
    }
    if (type == AE_IFREG && !excluded) read_content(e, inode, member);
    if (!excluded) add_xattrs(e, inode, member);
    place(parent, base, path, member, inode, excluded);
  }

  // Gives PATH (below `parent`, named `base`) to `inode`; an earlier member of that path is
  // replaced, as tar -x replaces it.
  void place(uint32_t parent, std::string_view base, const std::string& path, const std::string& member, uint32_t inode,
             bool excluded) {
    if (auto it = lookup_.find(key(parent, base)); it != lookup_.end()) {
      Name& old = names_[it->second];
      if (is_dir(it->second) && old.has_children && !S_ISDIR(inodes_[inode].mode)) {
        // GNU tar and bsdtar cannot replace a directory that has entries in it either: they
        // report it and keep the directory with everything earlier members put there.
        if (!excluded)
          warn(name_ + ": member " + member + " (a " + std::string(file_type_name(inodes_[inode].mode)) +
               ") would replace the directory " + path +
               " that earlier members put entries in: left out, as tar -x leaves it");
        return;
      }
      if (!old.implicit && !old.excluded && !excluded)
        warn(name_ + ": member " + member + " appears more than once; the last one wins, as with tar -x");
      old.removed = true;
      lookup_.erase(it);
      last_parent_path_.clear();  // the replaced name may be the cached parent or above it
    }
    add_name(parent, base, inode, excluded);
  }

  void read_content(archive_entry* e, uint32_t inode, const std::string& member) {
    const la_int64_t claimed = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
    if (archive_entry_size_is_set(e) && claimed < 0) fail(member, "negative size");
    // A file may have at most fmt::kMaxFileBlocks blocks (what sqar's reader takes back); a
    // bigger claim is refused before anything is read, hashed or allocated for it.
    uint64_t max_size = fmt::kMaxFileBlocks * opt_.block_size;
    if (opt_.max_member_size) max_size = std::min(max_size, opt_.max_member_size);
    if (claimed > 0 && uint64_t(claimed) > max_size)
      fail(member, "size " + std::to_string(claimed) + " exceeds " + std::to_string(max_size) +
                       " bytes (2^25 blocks of " + std::to_string(opt_.block_size) +
                       " bytes; a larger block size (-b) allows more)");
    // Every block a member claims, holes included, costs a 4-byte word of the image's block
    // lists while it is written: twenty 4 TiB sparse members of a 746-byte .tar.gz took
    // 2.6 GB and minutes. The members together may claim 2^27 blocks (512 MiB of words,
    // 16 TiB at 128 KiB blocks); a larger block size allows more bytes.
    const uint64_t blocks = (uint64_t(std::max<la_int64_t>(claimed, 0)) + opt_.block_size - 1) / opt_.block_size;
    if (blocks > kMaxClaimedBlocks - std::min(claimed_blocks_, kMaxClaimedBlocks))
      fail(member, "the members so far claim more than 2^27 blocks of " + std::to_string(opt_.block_size) + " bytes (" +
                       std::to_string((kMaxClaimedBlocks * opt_.block_size) >> 40) +
                       " TiB, holes included); a larger block size (-b) allows more");
    claimed_blocks_ += blocks;
    const uint64_t limit = claimed >= 0 ? uint64_t(claimed) : max_size;
    store_->begin();
    uint64_t pos = 0;
    for (;;) {
      const void* buf = nullptr;
      size_t len = 0;
      la_int64_t off = 0;
      const int r = archive_read_data_block(a_, &buf, &len, &off);
      if (r == ARCHIVE_EOF) break;
      if (r == ARCHIVE_WARN) warn(name_ + ": member " + member + ": " + archive_message());
      if (r < ARCHIVE_WARN) fail(member, archive_message());
      if (off < 0 || uint64_t(off) < pos || uint64_t(off) > limit || len > limit - uint64_t(off))
        fail(member, "data at offset " + std::to_string(off) + " lies outside its size " + std::to_string(limit) +
                         " (a damaged sparse map?)");
      store_->add(uint64_t(off), static_cast<const uint8_t*>(buf), len);
      pos = uint64_t(off) + len;
      if (opt_.bytes_seen) opt_.bytes_seen->fetch_add(len, std::memory_order_relaxed);
    }
    const uint64_t size = claimed >= 0 ? uint64_t(claimed) : pos;
    inodes_[inode].size = size;
    inodes_[inode].content = store_->finish(size);
  }

  void add_xattrs(archive_entry* e, uint32_t inode, const std::string& member) {
    if (archive_entry_acl_count(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS | ARCHIVE_ENTRY_ACL_TYPE_DEFAULT) > 0 &&
        !warned_acl_) {
      warned_acl_ = true;
      // Once per archive, so that a tree of ACLs does not bury other warnings: saying so.
      warn(name_ + ": member " + member +
           " has POSIX ACLs; SquashFS cannot store them (system.posix_acl_*), so they are left out, of this member "
           "and of every later one that has them (access or default ACLs)");
    }
    if (!opt_.xattrs || archive_entry_xattr_reset(e) <= 0) {
      xattrs_.erase(inode);
      return;
    }
    std::vector<std::pair<std::string, std::string>> given;
    size_t names = 0;
    const char* k = nullptr;
    const void* v = nullptr;
    size_t size = 0;
    while (archive_entry_xattr_next(e, &k, &v, &size) == ARCHIVE_OK) {
      names += std::strlen(k) + 1;
      if (size > kMaxXattrValue || names > kMaxXattrNames)
        fail(member, "extended attributes larger than Linux allows (64 KiB per value, 64 KiB of names)");
      given.emplace_back(k, std::string(static_cast<const char*>(v), size));
    }
    decode_pax_xattr_names(given);
    XattrList list;
    for (auto& [key, value] : given) {
      if (storable_xattr(key.c_str()))
        list.stored.emplace_back(std::move(key), std::move(value));
      else
        list.unstorable.emplace_back(std::move(key));
    }
    // A name given twice: the last value wins, as tar -x sets them in order. libarchive lists
    // an entry's xattrs last first (it prepends each as it reads the header): archive order is
    // the reverse.
    std::reverse(list.stored.begin(), list.stored.end());
    std::stable_sort(list.stored.begin(), list.stored.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::reverse(list.stored.begin(), list.stored.end());  // the last of equal names first
    list.stored.erase(std::unique(list.stored.begin(), list.stored.end(),
                                  [](const auto& x, const auto& y) { return x.first == y.first; }),
                      list.stored.end());
    std::reverse(list.stored.begin(), list.stored.end());
    warn_unstorable_xattrs(list, name_ + ": member " + member, opt_.warn);
    if (list.stored.empty()) {
      xattrs_.erase(inode);
      return;
    }
    // Interned: a tree whose files share one label (SELinux, capabilities) holds it once.
    StreamHasher h;
    for (const auto& [key, value] : list.stored) {
      const uint64_t lengths[2] = {key.size(), value.size()};
      h.update(lengths, sizeof lengths);
      h.update(key.data(), key.size());
      h.update(value.data(), value.size());
    }
    auto [set, fresh] = xattr_sets_.try_emplace(h.digest());
    if (fresh) {
      hold_metadata(memory_of(list.stored), member);
      set->second = std::make_shared<const Xattrs>(std::move(list.stored));
    }
    xattrs_[inode] = set->second;
  }

  void hold_metadata(uint64_t bytes, const std::string& member) {
    held_metadata_ += bytes;
    if (held_metadata_ > kMaxHeldMetadata)
      fail(member, "the archive's symlink targets and distinct extended attributes take more than " +
                       std::to_string(kMaxHeldMetadata >> 20) +
                       " MiB, which sqar holds in memory until the image is written; split the archive");
  }

  // The Tree: breadth-first, each directory's entries contiguous and sorted by name (what
  // the metadata writer needs), hard links pointing at their inode's first name.
  Tree build_tree() {
    std::vector<uint32_t> order;
    for (uint32_t i = 1; i < names_.size(); ++i)
      if (!names_[i].removed && !names_[i].excluded) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
      if (names_[x].parent != names_[y].parent) return names_[x].parent < names_[y].parent;
      return name_of(names_[x]) < name_of(names_[y]);
    });
    std::unordered_map<uint32_t, std::pair<size_t, size_t>> children;  // name -> range in order
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j < order.size() && names_[order[j]].parent == names_[order[i]].parent) ++j;
      children[names_[order[i]].parent] = {i, j};
      i = j;
    }

    Tree t;
    t.source_dirs.push_back(name_);
    std::vector<uint32_t> owner(inodes_.size(), kNoNode);  // inode -> its first node
    auto fill = [&](Node& n, uint32_t node, uint32_t inode) {
      const Inode& i = inodes_[inode];
      n.mode = i.mode;
      if (owner[inode] != kNoNode) {
        n.link_target = owner[inode];
        ++t.nodes[owner[inode]].link_count;
        return;
      }
      owner[inode] = node;
      n.uid = i.uid;
      n.gid = i.gid;
      n.mtime = uint32_t(std::clamp<int64_t>(i.mtime, 0, UINT32_MAX));
      if (int64_t(n.mtime) != i.mtime && opt_.warn_unstorable_times && unstorable_times_++ == 0)
        first_unstorable_ = node;
      n.rdev = i.rdev;
      if (S_ISREG(i.mode)) n.size = i.size;
      if (auto s = symlinks_.find(inode); s != symlinks_.end()) t.symlink_targets[node] = std::move(s->second);
      if (auto x = xattrs_.find(inode); x != xattrs_.end()) t.xattrs[node] = x->second;
    };
    t.nodes.emplace_back();
    fill(t.nodes[0], 0, 0);
    t.nodes[0].implied = !root_named_;
    std::deque<std::pair<uint32_t, uint32_t>> queue{{kRoot, 0}};  // (name, node)
    std::vector<uint32_t> node_inode{0};
    while (!queue.empty()) {
      const auto [name, node] = queue.front();
      queue.pop_front();
      t.nodes[node].first_child = uint32_t(t.nodes.size());
      t.nodes[node].child_count = 0;
      const auto range = children.find(name);
      if (range == children.end()) continue;
      for (size_t k = range->second.first; k < range->second.second; ++k) {
        const Name& c = names_[order[k]];
        const uint32_t idx = uint32_t(t.nodes.size());
        Node& n = t.nodes.emplace_back();
        t.set_name(n, name_of(c));
        n.parent = node;
        fill(n, idx, c.inode);
        n.implied = c.implicit;
        node_inode.push_back(c.inode);
        if (S_ISDIR(n.mode) && n.link_target == kNoNode) queue.emplace_back(order[k], idx);
      }
      t.nodes[node].child_count = uint32_t(t.nodes.size()) - t.nodes[node].first_child;
    }
    collect_file_owners(t);
    for (uint32_t f : t.files) store_->bind(f, inodes_[node_inode[f]].content);
    if (unstorable_times_)
      warn(name_ +
           (first_unstorable_ == 0 ? std::string(": the root (the time of its first member)")
                                   : ": member " + printable(t.rel_path_of(t.nodes[first_unstorable_]))) +
           ": modification time cannot be stored in SquashFS (before 1970 or after "
           "2106), stored as the nearest it can hold" +
           (unstorable_times_ > 1 ? " (and " + std::to_string(unstorable_times_ - 1) + " more entries)" : "") +
           ". --mtime sets one time for all entries");
    return t;
  }

  archive* a_;
  ArchiveInput* input_;  // bounds what one member's headers read; null for other inputs
  const std::string name_;
  const TarIngestOptions& opt_;
  std::unique_ptr<ContentStore> store_;
  std::vector<Inode> inodes_;
  std::vector<Name> names_;
  std::string pool_;
  std::unordered_map<std::string, uint32_t> lookup_;  // key(parent, name) -> live name
  std::unordered_map<uint32_t, std::string> symlinks_;
  std::unordered_map<uint32_t, SharedXattrs> xattrs_;                    // never empty sets
  std::unordered_map<Hash128, SharedXattrs, Hash128Hasher> xattr_sets_;  // by the hash of their content
  uint64_t held_metadata_ = 0;  // symlink targets and distinct xattr sets (kMaxHeldMetadata)
  int64_t member_end_ = 0;      // where the last member's data ended in the (decompressed) stream
  std::string last_member_;
  std::string last_parent_path_;  // the last member's parent directory, and its name
  uint32_t last_parent_ = kRoot;
  std::vector<uint8_t> last_parent_state_;  // its --exclude state (ExcludeList::anchored())
  bool root_named_ = false, first_member_seen_ = false, warned_absolute_ = false, warned_acl_ = false;
  uint64_t unstorable_times_ = 0;
  uint32_t first_unstorable_ = 0;
};

struct ArchiveReader {
  archive* a = archive_read_new();
  ~ArchiveReader() {
    if (a) archive_read_free(a);
  }
};

}  // namespace

bool normalize_member_path(std::string_view name, std::string& out, std::string& why) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t slash = name.find('/', pos);
    if (slash == std::string_view::npos) slash = name.size();
    const std::string_view comp = name.substr(pos, slash - pos);
    pos = slash + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") {
      if (parts.empty()) {
        why = "'..' climbs out of the image root";
        return false;
      }
      parts.pop_back();
      continue;
    }
    if (comp.size() > kMaxNameLength) {
      why = "a name component longer than " + std::to_string(kMaxNameLength) + " bytes";
      return false;
    }
    parts.push_back(comp);
  }
  out.clear();
  for (const auto& p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return true;
}

TarInput ingest_tar_archive(struct archive* a, const std::string& name, const TarIngestOptions& opt,
                            ArchiveInput* input) {
  // pax names are UTF-8, converted to the thread's locale (see common/utf8_locale.h).
  ThreadUtf8Locale utf8;
  return Ingest(a, name, opt, input).run();
}

TarInput ingest_tar(const TarIngestOptions& opt) {
  ArchiveReader r;
  if (!r.a) throw Error("out of memory");
  // Every tar dialect; no other archive format, so a zip or an ISO is refused rather than read
  // as something else. No filter: ArchiveInput hands over the decoded stream (every compression
  // libarchive knows), in pieces it can bound.
  archive_read_support_format_tar(r.a);
  archive_read_support_format_gnutar(r.a);
  // Read on past the end-of-archive blocks to the end of the stream: archives concatenated
  // with cat are read whole (GNU tar -i), and a compressor's trailer is checked (a gzip CRC
  // error after the last member would otherwise go unnoticed).
  archive_read_set_options(r.a, "tar:read_concatenated_archives");
  const std::string name = opt.archive == "-" ? "<stdin>" : opt.archive;
  ArchiveInput input(opt.archive, name);
  if (input.open(r.a) != ARCHIVE_OK) {
    const char* m = archive_error_string(r.a);
    throw Error(name + ": " + (m ? m : "cannot be read as a tar archive"));
  }
  TarInput in = ingest_tar_archive(r.a, name, opt, &input);
  return in;
}

}  // namespace sqar
