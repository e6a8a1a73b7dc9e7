// Replays inputs through a harness's LLVMFuzzerTestOneInput without libFuzzer, so the normal
// test suite (and its ASan build) runs every seed and committed crash reproducer:
// `replay_fuzz_image DIR_OR_FILE...`. Files in a directory run in name order; subdirectories
// are not entered. The fuzz runs' memory limit applies (replay_memory_limit.h). Exits 0 when
// every input ran (1 when there was none); a bug aborts, traps or trips a sanitizer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "replay_memory_limit.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open\n", file.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::printf("%s (%zu bytes)\n", file.c_str(), data.size());
  std::fflush(stdout);  // the name is on record before a crash
  LLVMFuzzerTestOneInput(data.data(), data.size());
  sqar::fuzz::check_peak_rss();
}

}  // namespace

int main(int argc, char** argv) {
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::vector<std::filesystem::path> files;
    if (!std::filesystem::exists(arg)) {
      std::fprintf(stderr, "%s: no such file or directory\n", arg.c_str());
      return 1;
    }
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(arg);
    }
    for (const auto& f : files) replay(f);
    count += files.size();
  }
  std::printf("%zu inputs replayed\n", count);
  return count > 0 ? 0 : 1;  // nothing replayed proves nothing
}
