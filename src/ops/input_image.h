// An existing image as a SOURCE of append and merge: its tree as a sqar::Tree, where each
// regular file's data is, and each file's content hash, all checked before any byte is copied.
#pragma once
#include <sys/stat.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/data_digests.h"
#include "pipeline/data_pipeline.h"
#include "reader/image.h"
#include "scan/tree.h"

namespace sqar::ops {

struct InputImage {
  std::string path;
  std::unique_ptr<reader::Image> image;
  struct stat st {};  // when it was opened: an input that changes meanwhile is refused
  Tree tree;
  // Indexed like tree.files: image-relative blocks_start, first_block into `words`, the
  // image's fragment index and offset, and the content hash.
  std::vector<FileLocation> files;
  std::vector<uint32_t> words;       // every file's block size words
  std::vector<uint8_t> stored_tail;  // per file: its list ends with a stored partial block
  std::vector<reader::Image::StoredBlock> fragments;
  std::optional<DataDigests> digests;       // stored-data digests trailer, when the image has one
  std::vector<reader::InodeRef> file_refs;  // indexed like files: each file's inode
  uint64_t data_end = 0;                    // data blocks and fragment blocks lie in [96, data_end)
  uint64_t decoded_bytes = 0;               // content decoded to hash or check it
  // Its data is decoded and compressed again (another compressor or block size than the
  // output's) instead of copied. Set before load_input_image: it then decodes every file.
  bool recode = false;
};

// Opens an input image and reads its superblock, so the caller can decide how to use it
// (InputImage::recode) before loading it.
InputImage open_input_image(const std::string& path);

// Reads and checks an opened input image. Files the manifest trailer names get its hash; the
// others (small files in fragment blocks; every file of an image without a manifest) are
// decoded and hashed on `threads` threads. Without a stored-data digests trailer, or when the
// image is to be recoded, every file is decoded and checked against the manifest, so no
// damaged byte is copied or compressed again unchecked. Throws sqar::Error naming the image and
// what is damaged.
void load_input_image(InputImage& in, unsigned threads);

// Throws when the image file is no longer the one opened (size, inode or mtime changed): what
// was checked must be what was used.
void check_input_unchanged(const InputImage& in, int fd);

// Checks the image bytes [begin, end) against the digests: every chunk that overlaps them is
// read (pread on fd) and hashed whole. Throws naming the image and the damaged byte range.
void check_stored_bytes(int fd, const std::string& path, const DataDigests& digests, uint64_t begin, uint64_t end,
                        std::vector<uint8_t>& checked_chunks);

}  // namespace sqar::ops
