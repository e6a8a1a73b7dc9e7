// sqar's trailers after the filesystem (docs/format.md): the manifest, the stored-data digests
// and the settings, each found from the one before it. open() walks their three 40-byte
// headers once; the payloads are read when asked for. Every position and size a header gives
// is checked against the file's size before anything is read or allocated, so a hostile
// trailer can neither send a read elsewhere nor ask for more memory than the file holds.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "format/squashfs.h"
#include "reader/image_impl.h"

namespace sqar::reader {

static_assert(kManifestHeaderSize == kDataDigestHeaderSize && kManifestHeaderSize == kImageSettingsHeaderSize,
              "the walk reads every trailer header into one buffer");

void ImageImpl::read_trailer(uint64_t pos, void* dst, size_t len, const char* what) const {
  if (pos > file_size_ || len > file_size_ - pos) fail(std::string(what) + " is truncated");
  auto* out = static_cast<uint8_t*>(dst);
  while (len) {
    const ssize_t n = ::pread(fd_.get(), out, len, off_t(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("reading the " + std::string(what) + ": " + (n < 0 ? strerror(errno) : "unexpected end of file"));
    out += n, pos += uint64_t(n), len -= size_t(n);
  }
}

void ImageImpl::locate_trailers() {
  read_trailer_headers();
  trailers_of_an_earlier_filesystem();
}

void ImageImpl::read_trailer_headers() {
  Trailers& t = trailers_;
  uint8_t h[kManifestHeaderSize];
  // Whether a whole header fits at pos: a trailer that would not is absent, as for an image
  // another tool wrote and that ends there (or that a container's own bytes follow), unless
  // the bytes there begin as every sqar trailer's magic does ("SQAR"): then the file ends
  // inside a header cut short, a damaged trailer.
  const auto header_at = [&](uint64_t pos, const char* what) {
    if (pos >= file_size_) return false;
    if (file_size_ - pos < sizeof h) {
      static constexpr char kMagicStart[4] = {'S', 'Q', 'A', 'R'};  // "SQARMNF1", "SQARDAT1", "SQARSET1"
      const size_t left = size_t(file_size_ - pos);
      read_trailer(pos, h, left, what);
      if (std::memcmp(h, kMagicStart, std::min(left, sizeof kMagicStart)) == 0)
        fail(std::string(what) + " is truncated: the file ends " + std::to_string(left) + " bytes into its header");
      return false;
    }
    read_trailer(pos, h, sizeof h, what);
    return true;
  };
  int trailer = 1;
  try {
    t.manifest_at = offset_ + fmt::align_up(sb_.bytes_used, fmt::kDeviceAlign);
    if (!header_at(t.manifest_at, "manifest trailer")) return;
    t.manifest = decode_manifest_header(h, sizeof h);
    if (!t.manifest) return;
    trailer = 2;
    t.digests_at = t.manifest_at + fmt::align_up(kManifestHeaderSize + t.manifest->payload_size, fmt::kDeviceAlign);
    if (!header_at(t.digests_at, "data digests trailer")) return;
    t.digests = decode_data_digests_header(h, sizeof h, sb_.bytes_used);
    if (!t.digests) return;
    trailer = 3;
    const uint64_t settings_at =
        t.digests_at + fmt::align_up(kDataDigestHeaderSize + t.digests->payload_size, fmt::kDeviceAlign);
    if (!header_at(settings_at, "settings trailer")) return;
    t.settings = decode_image_settings(h, sizeof h, sb_.compressor);
  } catch (const Error& e) {
    if (trailers_of_an_earlier_filesystem()) return;
    const std::string msg = e.what();
    t.problem = msg.rfind(path_, 0) == 0 ? msg : path_ + ": " + msg;
    t.damaged = trailer;
    if (trailer <= 1) t.manifest.reset();
    if (trailer <= 2) t.digests.reset();
    t.settings.reset();
  }
}

// mksquashfs 4.5 appends to an image in place without shortening the file, so after a small
// append the old trailers can still begin at the new end's 4 KiB boundary; taken as this
// filesystem's, they would call the appended files damaged (extract removed them). Each
// trailer is tied to the filesystem it was written with: the digests cover the data up to
// that filesystem's inode table, and a manifest of version 3 or 4 has one fragment digest per
// fragment block. Trailers that do not fit are another filesystem's: the image is read as any
// other tool's (no trailers), as the kernel reads it.
bool ImageImpl::trailers_of_an_earlier_filesystem() {
  Trailers& t = trailers_;
  const bool digests_elsewhere = t.digests && t.digests->data_end != sb_.inode_table_start;
  const bool fragments_differ =
      t.manifest && t.manifest->version >= 3 && t.manifest->fragment_digest_count != sb_.fragment_count;
  if (!digests_elsewhere && !fragments_differ) return false;
  t = Trailers{};
  t.earlier_filesystem = true;
  return true;
}

namespace {

// The payload of a trailer whose header says `size` bytes follow it at `at`, decoded by
// `decode`; errors name the image.
template <class Decode>
auto read_payload(const ImageImpl& image, uint64_t at, uint64_t size, const char* what, Decode decode) {
  if (size > image.file_size() - at) image.fail(std::string(what) + " is truncated");
  std::vector<uint8_t> payload(static_cast<size_t>(size));
  image.read_trailer(at, payload.data(), payload.size(), what);
  try {
    return decode(payload);
  } catch (const Error& e) {
    image.fail(e.what());
  }
}

}  // namespace

std::optional<Manifest> ImageImpl::manifest() {
  if (trailers_.damaged == 1) throw Error(trailers_.problem);
  if (!trailers_.manifest) return std::nullopt;
  const ManifestHeader& h = *trailers_.manifest;
  return read_payload(*this, trailers_.manifest_at + kManifestHeaderSize, h.payload_size, "manifest trailer",
                      [&](const std::vector<uint8_t>& p) { return decode_manifest(h, p.data(), p.size()); });
}

std::optional<DataDigests> ImageImpl::data_digests() {
  if (trailers_.damaged == 1 || trailers_.damaged == 2) throw Error(trailers_.problem);
  if (!trailers_.digests) return std::nullopt;
  const DataDigestsHeader& h = *trailers_.digests;
  return read_payload(*this, trailers_.digests_at + kDataDigestHeaderSize, h.payload_size, "data digests trailer",
                      [&](const std::vector<uint8_t>& p) { return decode_data_digests(h, p.data(), p.size()); });
}

std::optional<ImageSettings> ImageImpl::settings_trailer() {
  if (trailers_.damaged) throw Error(trailers_.problem);
  return trailers_.settings;
}

}  // namespace sqar::reader
