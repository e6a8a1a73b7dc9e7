// Reading an entry's extended attributes, either by name relative to its directory (the scan)
// or from a file already open for its content (create's readers: it saves a path lookup per
// file; docs/architecture.md, "Parallel, adaptive scan").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "scan/tree.h"

namespace sqar {

// SquashFS can store only the user., trusted. and security. namespaces.
bool storable_xattr(const std::string& key);

// What one entry holds: the storable attributes sorted by key, and the keys left out.
struct XattrList {
  Xattrs stored;
  std::vector<std::string> unstorable;
};

// The attributes of `name` in the directory open as `dirfd` (AT_FDCWD: `name` is a path),
// without following a final symlink. Returns 0 or an errno value (`failed_key` names the
// attribute whose value could not be read, empty for the listing itself).
int read_xattrs_at(int dirfd, const char* name, XattrList& out, std::string& failed_key);

// The same for an open file.
int read_xattrs_of_fd(int fd, XattrList& out, std::string& failed_key);

// What an error message names: "PATH", or "PATH (xattr KEY)" when reading that attribute failed.
std::string xattr_error_subject(const std::string& path, const std::string& failed_key);

// Warns "PATH: xattr KEY cannot be stored in SquashFS, skipped" for each attribute left out.
void warn_unstorable_xattrs(const XattrList& found, const std::string& path,
                            const std::function<void(const std::string&)>& warn);

}  // namespace sqar
