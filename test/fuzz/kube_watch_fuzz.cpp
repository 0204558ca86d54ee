// libFuzzer: arbitrary bytes as a watch stream, cut into chunks at points the input chooses,
// through the line splitter, the event parser and the decoders an informer uses. Nothing may
// crash, hang or leak; garbage must come back as errors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kube/object.hpp"
#include "kube/watch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tightrope::kube;  // NOLINT(google-build-using-namespace): a fuzz entry point
  if (size == 0) {
    return 0;
  }
  // The first byte sets the chunk size, as a network would cut the stream.
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1),
                                size - 1);  // NOLINT: libFuzzer's bytes
  LineSplitter splitter(1 << 16);
  simdjson::dom::parser parser;
  for (size_t at = 0; at < stream.size(); at += chunk) {
    const bool go_on = splitter.feed(stream.substr(at, chunk), [&](std::string_view line) {
      auto event = parse_watch_event(parser, line);
      if (!event) {
        return true;
      }
      Document doc;
      (void)decode_document(event->object, &doc);
      MetaOnly meta;
      (void)decode_meta_only(event->object, &meta);
      return true;
    });
    if (!go_on) {
      splitter.reset();
    }
  }
  return 0;
}
