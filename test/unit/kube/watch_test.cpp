#include "kube/watch.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tightrope::kube {
namespace {

std::vector<std::string> split(LineSplitter& splitter, const std::vector<std::string>& chunks) {
  std::vector<std::string> lines;
  for (const auto& chunk : chunks) {
    splitter.feed(chunk, [&](std::string_view line) {
      lines.emplace_back(line);
      return true;
    });
  }
  return lines;
}

TEST(LineSplitter, RebuildsLinesCutAcrossChunks) {
  LineSplitter splitter;
  EXPECT_EQ(split(splitter, {"{\"a\":", "1}\n{\"b\"", ":2}\n{\"c\":3}", "\n"}),
            (std::vector<std::string>{R"({"a":1})", R"({"b":2})", R"({"c":3})"}));
  EXPECT_EQ(splitter.buffered(), 0U);
}

TEST(LineSplitter, SkipsEmptyLines) {
  LineSplitter splitter;
  EXPECT_EQ(split(splitter, {"\n\nx\n\n"}), std::vector<std::string>{"x"});
}

TEST(LineSplitter, RefusesALineOverTheLimit) {
  LineSplitter splitter(8);
  EXPECT_FALSE(splitter.feed("0123456789", [](std::string_view) { return true; }));
  EXPECT_TRUE(splitter.overflowed());
}

TEST(LineSplitter, StopsWhenTheHandlerSaysSo) {
  LineSplitter splitter;
  int seen = 0;
  EXPECT_FALSE(splitter.feed("a\nb\nc\n", [&](std::string_view) { return ++seen < 2; }));
  EXPECT_EQ(seen, 2);
}

TEST(WatchEvent, ParsesTypeAndObject) {
  simdjson::dom::parser parser;
  auto event =
      parse_watch_event(parser, R"({"type":"MODIFIED","object":{"metadata":{"name":"x"}}})");
  ASSERT_TRUE(event) << event.error();
  EXPECT_EQ(event->type, WatchEventType::kModified);
  EXPECT_EQ(std::string_view(event->object["metadata"]["name"]), "x");
}

TEST(WatchEvent, ReadsTheStatusOfAnErrorEvent) {
  simdjson::dom::parser parser;
  auto event = parse_watch_event(
      parser,
      R"json({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old resource version: 1 (5)"}})json");
  ASSERT_TRUE(event);
  EXPECT_EQ(event->type, WatchEventType::kError);
  EXPECT_EQ(event->status.code, 410);
  EXPECT_EQ(event->status.reason, "Expired");
}

TEST(WatchEvent, GarbledLinesAreErrorsNotCrashes) {
  simdjson::dom::parser parser;
  for (const char* line : {"{", "not json", R"({"type":"ADDED"})", R"({"type":"ADDED","object":3})",
                           R"({"type":"EXPLODED","object":{}})", R"({"object":{}})", "[]"}) {
    EXPECT_FALSE(parse_watch_event(parser, line)) << line;
  }
}

}  // namespace
}  // namespace tightrope::kube
