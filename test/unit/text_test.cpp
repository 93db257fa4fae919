#include "autoresume/text.hpp"

#include <catch2/catch.hpp>

TEST_CASE("join puts the separator between each two items", "[text]") {
  CHECK(ar::join({}, ", ").empty());
  CHECK(ar::join({"a"}, ", ") == "a");
  CHECK(ar::join({"a", "", "b"}, ",") == "a,,b");
}

TEST_CASE("printable escapes control characters and keeps other text", "[text]") {
  CHECK(ar::printable("run 12.0-abc on node[1-4]") == "run 12.0-abc on node[1-4]");
  // A terminal title change and a cursor move chosen by a user.
  CHECK(ar::printable("\x1b]0;owned\x07x\x1b[2J") == "\\x1b]0;owned\\x07x\\x1b[2J");
  CHECK(ar::printable("a\nb\tc\rd\x7f") == "a\\x0ab\\x09c\\x0dd\\x7f");
  // C1 controls as UTF-8 (U+009B is a CSI) are escaped; other UTF-8 stays.
  CHECK(ar::printable("\xc2\x9b"
                      "2J") == "\\xc2\\x9b2J");
  CHECK(ar::printable("Grüße \xc2\xa0 ok") == "Grüße \xc2\xa0 ok");
  CHECK(ar::printable(std::string_view("a\0b", 3)) == "a\\x00b");
}

TEST_CASE("shortened cuts long text with a mark and never inside a character", "[text]") {
  CHECK(ar::shortened("abcdef", 6) == "abcdef");
  CHECK(ar::shortened("abcdefg", 6) == "abc...");
  CHECK(ar::shortened("abcd\xc3\xa9xyz", 8) == "abcd...");  // the two-byte é is not split
  CHECK(ar::shortened("abcdef", 2) == "...");
}
