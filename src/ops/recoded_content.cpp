#include "ops/recoded_content.h"

#include <cerrno>

#include "common/error.h"

namespace sqar::ops {

void RecodedContent::add(uint32_t node, uint32_t input, uint32_t file) {
  if (node >= by_node_.size()) by_node_.resize(size_t(node) + 1);
  by_node_[node] = {input, file};
  ++count_;
}

const RecodedContent::Origin& RecodedContent::origin(uint32_t node) const {
  if (node >= by_node_.size() || by_node_[node].input == UINT32_MAX)
    throw Error("internal error: tree node " + std::to_string(node) + " is no file of a recoded input");
  return by_node_[node];
}

int RecodedContent::read(uint32_t node, uint64_t offset, uint64_t len, uint8_t* out) const {
  try {
    const Origin& o = origin(node);
    const InputImage& in = inputs_[o.input];
    const reader::Inode ino = in.image->read_inode(in.file_refs[o.file], true);
    // load_input_image decoded this file and checked it against the manifest; a shorter
    // read now means the image changed underneath.
    return in.image->read_file(ino, offset, out, size_t(len)) == len ? 0 : EIO;
  } catch (const std::exception&) {
    return EIO;
  }
}

Hash128 RecodedContent::hash(uint32_t node) const {
  const Origin& o = origin(node);
  return inputs_[o.input].files[o.file].hash;
}

}  // namespace sqar::ops
