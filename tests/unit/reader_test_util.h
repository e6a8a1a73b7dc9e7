// Helpers for the reader tests: build a source tree and pack it with mksquashfs at test time.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace sqar::testutil {

namespace fs = std::filesystem;

inline bool have_tool(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

inline int run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sqar-reader-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string random_bytes(size_t n, uint32_t seed, bool compressible) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = compressible ? char('a' + (rng() % 4)) : char(rng());
  return s;
}

inline void write_file(const fs::path& p, const std::string& content) {
  std::ofstream(p, std::ios::binary).write(content.data(), std::streamsize(content.size()));
}

inline std::string read_host_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tree covering the cases the reader must handle. Returns false when xattrs are unsupported.
inline void make_tree(const fs::path& root, bool with_xattrs) {
  fs::create_directories(root / "sub/deeper");
  fs::create_directories(root / "empty");
  fs::create_directories(root / "big");
  write_file(root / "zero", "");
  write_file(root / "one", "x");
  write_file(root / "small.txt", "hello, squashfs\n");
  write_file(root / "sub/4095", random_bytes(4095, 1, true));
  write_file(root / "sub/block", random_bytes(131072, 2, false));
  write_file(root / "sub/deeper/multi", random_bytes(3 * 131072 + 777, 3, true));
  write_file(root / "random", random_bytes(300000, 4, false));
  // Sparse: holes become sparse (size 0) blocks.
  {
    int fd = ::open((root / "sparse").c_str(), O_CREAT | O_WRONLY, 0644);
    std::string d = random_bytes(1000, 5, false);
    if (pwrite(fd, d.data(), d.size(), 5 * 131072 + 10) < 0) std::abort();
    if (ftruncate(fd, 9 * 131072 + 5) != 0) std::abort();
    ::close(fd);
  }
  // Hard links and a duplicate file (dedup).
  write_file(root / "linked", random_bytes(5000, 6, true));
  fs::create_hard_link(root / "linked", root / "sub/linked2");
  write_file(root / "dup", random_bytes(5000, 6, true));
  fs::create_symlink("small.txt", root / "link");
  fs::create_symlink(std::string(200, 'L') + "/target", root / "sub/longlink");
  mkfifo((root / "fifo").c_str(), 0640);
  chmod((root / "small.txt").c_str(), 0600);
  if (chown((root / "one").c_str(), 1234, 5678) != 0) {
  }
  // Large directory: listing spans many metadata blocks, so it gets a directory index.
  for (int i = 0; i < 1500; ++i)
    write_file(root / "big" / ("file-with-a-longish-name-" + std::to_string(i)), std::to_string(i));
  if (with_xattrs) {
    setxattr((root / "small.txt").c_str(), "user.comment", "hi", 2, 0);
    std::string big(3000, 'v');
    setxattr((root / "sub/4095").c_str(), "user.big", big.data(), big.size(), 0);
    setxattr((root / "sub/4095").c_str(), "user.second", "2", 1, 0);
    // Same value on two files: mksquashfs stores it once, out of line.
    setxattr((root / "one").c_str(), "user.big", big.data(), big.size(), 0);
    setxattr((root / "sub").c_str(), "user.dir", "d", 1, 0);
  }
}

}  // namespace sqar::testutil
