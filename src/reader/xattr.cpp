// Extended attributes: xattr id table -> key/value pairs (with out-of-line values).
#include "common/display_name.h"
#include "common/error.h"
#include "reader/meta_reader.h"

namespace sqar::reader {

namespace {
constexpr uint32_t kMaxXattrsPerInode = 65536;
constexpr uint32_t kMaxXattrValue = 65536;      // Linux XATTR_SIZE_MAX
constexpr uint64_t kMaxXattrNameBytes = 65536;  // Linux XATTR_LIST_MAX: names + NULs of one inode
// Out-of-line values let one stored value stand for any number of keys, so the bytes an inode
// decodes to are not bounded by the image size: cap the values copied (64 of the largest
// size). xattr_names and xattr_value copy at most one value, so a set the kernel serves
// (71 values of 64 KiB, which XFS holds) they serve too.
constexpr uint64_t kMaxXattrValueBytes = 4u << 20;
constexpr uint16_t kValueOutOfLine = 0x100;
const char* prefix_for(uint16_t type) {
  switch (type & 0xff) {
    case 0: return "user.";
    case 1: return "trusted.";
    case 2: return "security.";
    default: return nullptr;
  }
}
}  // namespace

std::vector<std::pair<std::string, std::string>> ImageImpl::xattrs(const Inode& inode) {
  std::vector<std::pair<std::string, std::string>> out;
  visit_xattrs(
      inode, [](const std::string&) { return true; },
      [&](std::string& name, std::string* value) { out.emplace_back(std::move(name), std::move(*value)); });
  return out;
}

std::vector<std::string> ImageImpl::xattr_names(const Inode& inode) {
  std::vector<std::string> out;
  visit_xattrs(
      inode, [](const std::string&) { return false; }, [&](std::string& name, std::string*) { out.push_back(name); });
  return out;
}

std::optional<std::string> ImageImpl::xattr_value(const Inode& inode, std::string_view name) {
  std::optional<std::string> out;
  visit_xattrs(
      inode, [&](const std::string& n) { return !out && n == name; },
      [&](std::string&, std::string* value) {
        if (value) out = std::move(*value);
      });
  return out;
}

uint32_t ImageImpl::xattr_stored_size(const Inode& inode) {
  uint8_t e[16];
  return xattr_id_entry(inode, e) ? load_le32(e + 12) : 0;
}

bool ImageImpl::xattr_id_entry(const Inode& inode, uint8_t e[16]) {
  if (inode.xattr_index == fmt::kNoXattr || sb_.xattr_table_start == fmt::kTableAbsent) return false;
  xattr_once_([&] {
    uint8_t h[16];
    read_exact(sb_.xattr_table_start, h, sizeof h, "xattr id table header");
    uint64_t kv = load_le64(h);
    uint32_t count = load_le32(h + 8);
    if (kv >= sb_.xattr_table_start) fail("xattr key/value table start " + hex(kv) + " is invalid");
    auto ptrs = load_pointer_array(sb_.xattr_table_start + 16, count, 16, "xattr id table");
    xattr_kv_start_ = kv;
    xattr_id_count_ = count;
    xattr_ptrs_ = std::move(ptrs);
  });
  if (inode.xattr_index >= xattr_id_count_)
    fail("inode " + std::to_string(inode.inode_number) + " has xattr index " + std::to_string(inode.xattr_index) +
         " outside the xattr id table");
  read_table_entry(xattr_ptrs_, inode.xattr_index, 16, e, "xattr id table");
  return true;
}

void ImageImpl::visit_xattrs(const Inode& inode, const std::function<bool(const std::string&)>& want_value,
                             const std::function<void(std::string&, std::string*)>& fn) {
  uint8_t e[16];
  if (!xattr_id_entry(inode, e)) return;
  const uint64_t ref = load_le64(e);
  const uint32_t count = load_le32(e + 8);
  if (count > kMaxXattrsPerInode)
    fail("inode " + std::to_string(inode.inode_number) + " claims " + std::to_string(count) + " xattrs");
  const uint32_t off = uint32_t(ref & 0xffff);
  if (off >= fmt::kMetadataBlockSize || (ref >> 16) >= sb_.bytes_used - xattr_kv_start_)
    fail("xattr reference " + hex(ref) + " is invalid");
  MetaReader r(*this, xattr_kv_start_ + (ref >> 16), off, "xattrs");
  const auto too_large = [&](const char* what, uint64_t limit) {
    r.fail("inode " + std::to_string(inode.inode_number) + ": its xattr " + what + " exceed " + std::to_string(limit) +
           " bytes");
  };
  uint64_t name_bytes = 0, value_bytes = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint16_t type = r.u16();
    uint16_t name_len = r.u16();
    const char* prefix = prefix_for(type);
    if (!prefix) r.fail("unknown xattr prefix type " + std::to_string(type & 0xff));
    name_bytes += std::string_view(prefix).size() + name_len + 1;
    if (name_bytes > kMaxXattrNameBytes) too_large("names", kMaxXattrNameBytes);
    std::string name(prefix);
    name.resize(name.size() + name_len);
    r.read(name.data() + std::string_view(prefix).size(), name_len);
    // No filesystem takes such a name: extract would set the part before a NUL (two names
    // then collide), and sqarfs's NUL-separated listxattr would show pieces of it.
    if (name_len == 0)
      r.fail("inode " + std::to_string(inode.inode_number) + ": xattr with an empty name after '" + prefix + "'");
    if (name.find('\0') != std::string::npos)
      r.fail("inode " + std::to_string(inode.inode_number) + ": xattr name " + escape_name(name) +
             " contains a NUL byte");
    uint32_t vlen = r.u32();
    const bool wanted = want_value(name);
    std::string value;
    if (type & kValueOutOfLine) {
      if (vlen != 8) r.fail("out-of-line xattr value reference has size " + std::to_string(vlen));
      uint64_t vref = r.u64();
      uint32_t voff = uint32_t(vref & 0xffff);
      if (voff >= fmt::kMetadataBlockSize || (vref >> 16) >= sb_.bytes_used - xattr_kv_start_)
        r.fail("out-of-line xattr value reference " + hex(vref) + " is invalid");
      MetaReader v(*this, xattr_kv_start_ + (vref >> 16), voff, "xattr value");
      uint32_t len = v.u32();
      if (len > kMaxXattrValue) v.fail("xattr value of " + std::to_string(len) + " bytes is too large");
      if (wanted && (value_bytes += len) > kMaxXattrValueBytes) too_large("values", kMaxXattrValueBytes);
      if (wanted) {
        value.resize(len);
        v.read(value.data(), len);
      }
    } else {
      if (vlen > kMaxXattrValue) r.fail("xattr value of " + std::to_string(vlen) + " bytes is too large");
      if (wanted && (value_bytes += vlen) > kMaxXattrValueBytes) too_large("values", kMaxXattrValueBytes);
      if (wanted) {
        value.resize(vlen);
        r.read(value.data(), vlen);
      } else {
        r.skip(vlen);
      }
    }
    fn(name, wanted ? &value : nullptr);
  }
}

}  // namespace sqar::reader
