// The xattr names of a pax member as their writers meant them (tarin/pax_xattr_names.h).
#include "tarin/pax_xattr_names.h"

#include <gtest/gtest.h>

namespace sqar {
namespace {

using Xattrs = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> names_after_decoding(Xattrs x) {
  decode_pax_xattr_names(x);
  std::vector<std::string> out;
  for (const auto& [name, value] : x) out.push_back(name);
  return out;
}

TEST(PaxXattrNames, GnuTarEncodesPercentAndEquals) {
  EXPECT_EQ(names_after_decoding({{"user.a%3Db", "1"}, {"user.p%2541", "2"}, {"user.plain", "3"}}),
            (std::vector<std::string>{"user.a=b", "user.p%41", "user.plain"}));
}

TEST(PaxXattrNames, LibarchiveEncodesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(names_after_decoding({{"user.caf%C3%A9", ""}, {"user.my%20key", ""}}),
            (std::vector<std::string>{"user.caf\xC3\xA9", "user.my key"}));
}

// libarchive writes LIBARCHIVE.xattr (its reader decodes the name) beside SCHILY.xattr (raw):
// the decoded copy is not decoded again, or its literal "%41" would become "A".
TEST(PaxXattrNames, TheAlreadyDecodedCopyStaysAsItIs) {
  EXPECT_EQ(names_after_decoding({{"user.p%41", "v"}, {"user.p%2541", "v"}}),
            (std::vector<std::string>{"user.p%41", "user.p%41"}));
  EXPECT_EQ(names_after_decoding({{"user.a=b", "v"}, {"user.a%3Db", "v"}}),
            (std::vector<std::string>{"user.a=b", "user.a=b"}));
}

TEST(PaxXattrNames, WhatIsNoEncodingStays) {
  EXPECT_EQ(names_after_decoding({{"user.100%", ""}, {"user.%zz", ""}, {"user.%4", ""}, {"user.nul%00", ""}}),
            (std::vector<std::string>{"user.100%", "user.%zz", "user.%4", "user.nul%00"}));
}

}  // namespace
}  // namespace sqar
