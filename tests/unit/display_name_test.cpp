#include "common/display_name.h"

#include <gtest/gtest.h>

namespace sqar {
namespace {

TEST(DisplayName, PlainNamesAndPrintableUtf8PassUnchanged) {
  EXPECT_EQ(escape_name("usr/include/stdio.h"), "usr/include/stdio.h");
  EXPECT_EQ(escape_name("caf\xC3\xA9/\xE6\x97\xA5\xE6\x9C\xAC/\xF0\x9F\x98\x80"),
            "caf\xC3\xA9/\xE6\x97\xA5\xE6\x9C\xAC/\xF0\x9F\x98\x80");
  EXPECT_EQ(escape_name(""), "");
}

TEST(DisplayName, ControlCharactersAreEscapedAsLsDashB) {
  EXPECT_EQ(escape_name("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(escape_name("e\033[31mred"), "e\\033[31mred");
  EXPECT_EQ(escape_name(std::string("nul\0x", 5)), "nul\\000x");
  EXPECT_EQ(escape_name("del\x7F"), "del\\177");
  // The eight-byte fast path must not miss a byte in any position of a long name.
  for (size_t at = 0; at < 24; ++at) {
    std::string name(24, 'a');
    name[at] = '\n';
    std::string want(24, 'a');
    want.replace(at, 1, "\\n");
    EXPECT_EQ(escape_name(name), want) << at;
  }
}

TEST(DisplayName, C1ControlsAndInvalidUtf8AreEscapedByteForByte) {
  EXPECT_EQ(escape_name("u\xC2\x9Bx"), "u\\302\\233x");  // U+009B, CSI on some terminals
  EXPECT_EQ(escape_name("u\xC2\xA0x"), "u\xC2\xA0x");    // U+00A0 is printable
  EXPECT_EQ(escape_name("bad\xFF\xFEname"), "bad\\377\\376name");
  EXPECT_EQ(escape_name("cut\xE6\x97"), "cut\\346\\227");           // sequence cut short
  EXPECT_EQ(escape_name("over\xC0\xAF"), "over\\300\\257");         // overlong '/'
  EXPECT_EQ(escape_name("sur\xED\xA0\x80"), "sur\\355\\240\\200");  // a UTF-16 surrogate
  EXPECT_EQ(escape_name("stray\x80"), "stray\\200");
}

TEST(DisplayName, BidirectionalFormattingCharactersAreEscaped) {
  // "evil<U+202E>txt.exe" would show as "evilexe.txt".
  EXPECT_EQ(escape_name("evil\xE2\x80\xAEtxt.exe"), "evil\\342\\200\\256txt.exe");
  EXPECT_EQ(printable("a\xE2\x80\xAA"
                      "b"),
            "a\\342\\200\\252b");                                                        // U+202A
  EXPECT_EQ(escape_name("\xE2\x80\x8E\xE2\x80\x8F"), "\\342\\200\\216\\342\\200\\217");  // U+200E, U+200F
  EXPECT_EQ(escape_name("\xE2\x81\xA6\xE2\x81\xA9"), "\\342\\201\\246\\342\\201\\251");  // U+2066, U+2069
  EXPECT_EQ(escape_name("\xD8\x9C"), "\\330\\234");                                      // U+061C
  // Their neighbours are ordinary text: U+2010 (hyphen), U+2030 (per mille), U+2070.
  EXPECT_EQ(escape_name("\xE2\x80\x90\xE2\x80\xB0\xE2\x81\xB0"), "\xE2\x80\x90\xE2\x80\xB0\xE2\x81\xB0");
}

TEST(DisplayName, BackslashIsEscapedInNamesButNotInMessages) {
  EXPECT_EQ(escape_name("back\\slash"), "back\\\\slash");
  EXPECT_EQ(printable("img.sqfs: back\\slash: not found"), "img.sqfs: back\\slash: not found");
  EXPECT_EQ(printable("img.sqfs: new\nline\033[2J: not found"), "img.sqfs: new\\nline\\033[2J: not found");
}

}  // namespace
}  // namespace sqar
