// The xattr names of a pax member as their writer meant them. libarchive's reader hands on a
// SCHILY.xattr keyword's name as it stands in the archive, but writers %-encode some bytes of
// it: GNU tar '%' and '=' (%25, %3D), libarchive (bsdtar, sqar extract --tar) also every byte
// outside '!'..'~'. libarchive also writes each xattr a second time as LIBARCHIVE.xattr, whose
// name its reader does decode. So "user.a=b" may arrive as "user.a%3Db", or as both names.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace sqar {

// Decodes the names of `xattrs` (name, value) in place. A name is decoded unless another
// name of the member decodes to it: then it is the already decoded LIBARCHIVE.xattr copy,
// and decoding it again would change a literal "%41" in it. A name with a '%' not followed by
// two hex digits, or one that would decode to a NUL byte, is no encoding and stays as it is.
// Names that become equal are left for the caller's rule for repeated names.
void decode_pax_xattr_names(std::vector<std::pair<std::string, std::string>>& xattrs);

}  // namespace sqar
