// The content hash of a file as an image stores it (common/content_hash.h), for the checks
// against a manifest trailer and for hashing images that have none.
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "common/content_hash.h"
#include "reader/image.h"

namespace sqar::reader {

// Feeds a file's whole content, as the image stores it, to each hasher given (append and merge
// check an earlier manifest's hashes while making their own; a null one is skipped). A sparse
// block is fed as a hole, without its bytes: a crafted image claims terabytes of them in a few
// bytes of block list. `buf` holds block_size bytes. Each block's bytes, holes included, are
// added to `bytes_done` when given (verify's progress). Throws sqar::Error on a damaged block
// or content that ends before the inode's size.
void hash_stored_content(Image& image, const Inode& ino, uint8_t* buf, std::initializer_list<ContentHasher*> hashers,
                         std::atomic<uint64_t>* bytes_done = nullptr);
// The content hash of a file as the image stores it, in one scheme.
Hash128 stored_content_hash(Image& image, const Inode& ino, HashScheme scheme);

}  // namespace sqar::reader
