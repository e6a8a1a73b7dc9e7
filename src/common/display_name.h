// Names from images and trees shown to people. A name is bytes: one holding a newline, an
// escape sequence or a C1 control (U+0080-U+009F, which some terminals take as CSI) would
// break line-oriented output or drive the terminal, and a bidirectional formatting character
// (U+202E...) would make it show another name. These escape such bytes as ls -b and GNU tar
// do ('\n', '\t', '\r', '\ooo'); other printable UTF-8 passes unchanged.
#pragma once
#include <string>

namespace sqar {

// For output a script reads one entry per line (list, diff): backslash is escaped too
// ('\\'), so the escaping can be undone.
std::string escape_name(const std::string& name);
// For diagnostics: control characters, C1 controls and bytes that are not UTF-8 escaped,
// backslashes kept as they are, so ordinary paths read as typed.
std::string printable(const std::string& message);

}  // namespace sqar
