#include "base/text.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tightrope {
namespace {

TEST(ValidUtf8, KeepsWellFormedTextAsItIs) {
  const std::string text = "Lüfter 3 \xE2\x82\xAC \xF0\x9F\x94\xA5";  // ü, €, an emoji
  EXPECT_EQ(valid_utf8(text), text);
  EXPECT_EQ(utf8_error_at(text), std::string_view::npos);
}

TEST(ValidUtf8, ReplacesEachStrayByteAndNothingElse) {
  // Latin-1 ü, a lone continuation byte, an overlong '/', a surrogate, a character cut short.
  const std::string text =
      "L\xFC"
      "fter \x80 \xC0\xAF \xED\xA0\x80 \xE2\x82";
  EXPECT_EQ(utf8_error_at(text), 1U);
  const std::string repaired = valid_utf8(text);
  EXPECT_EQ(utf8_error_at(repaired), std::string_view::npos);
  EXPECT_TRUE(
      repaired.starts_with("L\xEF\xBF\xBD"
                           "fter \xEF\xBF\xBD "));
  EXPECT_NO_THROW((void)nlohmann::json(repaired).dump());
}

TEST(Utf8Prefix, NeverCutsInsideACharacter) {
  const std::string text = "ab\xC3\xBC";  // "abü"
  EXPECT_EQ(utf8_prefix(text, 3), "ab");
  EXPECT_EQ(utf8_prefix(text, 4), text);
  EXPECT_EQ(utf8_prefix(text, 2), "ab");
  EXPECT_EQ(utf8_prefix("\xF0\x9F\x94\xA5", 3), "");
}

TEST(PrintableText, TurnsControlCharactersIntoSpacesAndKeepsToTheLimit) {
  EXPECT_EQ(printable_text("fan\nfailed\t\x1B[31mnow\x7F"), "fan failed  [31mnow ");
  EXPECT_EQ(printable_text(std::string("a\0b", 3)), "a b");
  const std::string cut = printable_text("\xC3\xBC\xC3\xBC\xC3\xBC", 5);
  EXPECT_EQ(cut, "\xC3\xBC\xC3\xBC");
  EXPECT_NO_THROW((void)nlohmann::json(printable_text("\xFF\xFE", 1)).dump());
}

TEST(JsonNesting, CountsArraysAndObjectsButNothingInsideStrings) {
  EXPECT_FALSE(json_nested_deeper_than(R"({"a":[{"b":[]}]})", 4));
  EXPECT_TRUE(json_nested_deeper_than(R"({"a":[{"b":[]}]})", 3));
  EXPECT_FALSE(json_nested_deeper_than(R"(["[[[", "\"[[[", {}])", 2));
  EXPECT_TRUE(json_nested_deeper_than(std::string(100000, '['), 64));
}

}  // namespace
}  // namespace tightrope
