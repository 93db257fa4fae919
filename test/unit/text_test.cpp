#include "autoresume/text.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>
#include <vector>

TEST_CASE("join puts the separator between each two items", "[text]") {
  CHECK(ar::join({}, ", ").empty());
  CHECK(ar::join({"a"}, ", ") == "a");
  CHECK(ar::join({"a", "", "b"}, ",") == "a,,b");
  // A table's names, through a member pointer; string_views as they are.
  struct Row {
    std::string_view name;
    int value;
  };
  const Row rows[] = {{"x", 1}, {"y", 2}};
  CHECK(ar::join(rows, ", ", &Row::name) == "x, y");
  const std::string_view words[] = {"p", "q"};
  CHECK(ar::join(words, "+", std::identity{}) == "p+q");
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
  // The line and paragraph separators and the bidirectional controls: a
  // line that seems to start anew, or text shown in another order.
  CHECK(ar::printable("r\u2028uid=0 op=replace") == "r\\u2028uid=0 op=replace");
  CHECK(ar::printable("a\u2029b\u202ecba\u202c") == "a\\u2029b\\u202ecba\\u202c");
  CHECK(ar::printable("\u200e\u200f\u2066\u2069\u061c") == "\\u200e\\u200f\\u2066\\u2069\\u061c");
  // Their neighbours stay: an en dash, a dagger, an ellipsis, Arabic.
  CHECK(ar::printable("\u2013 \u2020 \u2026 \u061b") == "\u2013 \u2020 \u2026 \u061b");
  // A cut sequence is left as it is.
  CHECK(ar::printable("\xe2\x80") == "\xe2\x80");
}

TEST_CASE("shortened cuts long text with a mark and never inside a character", "[text]") {
  CHECK(ar::shortened("abcdef", 6) == "abcdef");
  CHECK(ar::shortened("abcdefg", 6) == "abc...");
  CHECK(ar::shortened("abcd\xc3\xa9xyz", 8) == "abcd...");  // the two-byte é is not split
  CHECK(ar::shortened("abcdef", 2) == "...");
}

TEST_CASE("blank_split splits on spaces and tabs and keeps no empty word", "[text]") {
  using V = std::vector<std::string_view>;
  CHECK(ar::blank_split("").empty());
  CHECK(ar::blank_split(" \t ").empty());
  CHECK(ar::blank_split("a") == V{"a"});
  CHECK(ar::blank_split("  /bin/x\t--node {node}  ") == V{"/bin/x", "--node", "{node}"});
  CHECK(ar::blank_split("a\nb c") == V{"a\nb", "c"});  // only blanks split
}

TEST_CASE("is_slurm_name takes letters, digits, '_' and '-' after a letter, up to a size",
          "[text]") {
  CHECK(ar::is_slurm_name("gpu-a_1", 40));
  CHECK(ar::is_slurm_name(std::string(40, 'g'), 40));
  CHECK_FALSE(ar::is_slurm_name(std::string(41, 'g'), 40));
  CHECK_FALSE(ar::is_slurm_name("", 40));
  CHECK_FALSE(ar::is_slurm_name("1gpu", 40));
  CHECK_FALSE(ar::is_slurm_name("-gpu", 40));
  CHECK_FALSE(ar::is_slurm_name("gpu.a", 40));
  CHECK_FALSE(ar::is_slurm_name("gpu a", 40));
  CHECK_FALSE(ar::is_slurm_name("g\xc3\xa9", 40));  // only ASCII letters
}
