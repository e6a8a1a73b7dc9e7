// Files whose data is already in the image being written (append and merge copy it from their
// input images): the data pipeline stores only the other files, and dedups them against these.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/data_pipeline.h"

namespace sqar {

struct PrestoredData {
  std::vector<uint8_t> stored;              // indexed like Tree::files: 1 when the file's data is stored
  std::vector<FileLocation> files;          // indexed like Tree::files; final positions, hash set
  std::vector<uint32_t> block_sizes;        // size words; FileLocation::first_block indexes them
  std::vector<FragmentLocation> fragments;  // the first fragment table entries of the image
  // Files whose block list ends with a partial block stored as a block (no fragment): images
  // made by mksquashfs without -always-use-fragments. Sorted; their extra word follows the
  // full blocks' in block_sizes.
  std::vector<uint32_t> stored_tail_files;
};

}  // namespace sqar
