// What the cache keeps of an object. Every cached type carries an ObjectMeta (the identity and
// ownership fields controllers read) and whatever else its decoder projects from the document:
// the whole document (Document) or a few fields (a projection). Decoders read simdjson DOM
// elements, which the informer parses once per list page or watch event. Knows nothing of Slurm.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace tightrope::kube {

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
};

struct ObjectMeta {
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  bool deleting = false;  // deletionTimestamp is set
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<OwnerReference> owner_references;

  // "namespace/name", or "name" for a cluster-scoped object: the cache and work-queue key.
  std::string key() const;
  const std::string* label(std::string_view name) const;
  const OwnerReference* controller_ref() const;
};

std::string object_key(std::string_view namespace_name, std::string_view name);

using DecodeResult = tightrope::Result<std::monostate, std::string>;

// The identity fields of an object element (its "metadata"); annotations are left out on
// purpose: they hold kubectl's last-applied copy of the whole object.
DecodeResult decode_meta(simdjson::dom::element object, ObjectMeta* meta);

// The whole document (but metadata.managedFields), for controllers that need fields nobody
// projected.
struct Document {
  ObjectMeta meta;
  nlohmann::json doc;
};
DecodeResult decode_document(simdjson::dom::element object, Document* out);

// Only the identity: enough for a controller that reads the rest from the API when it acts.
struct MetaOnly {
  ObjectMeta meta;
};
DecodeResult decode_meta_only(simdjson::dom::element object, MetaOnly* out);

// simdjson DOM to nlohmann::json, for a Document.
nlohmann::json to_json(simdjson::dom::element element);

// Small readers for projection decoders: a missing or mistyped field reads as empty.
std::string_view string_at(simdjson::dom::element object, std::string_view field);
int64_t int_at(simdjson::dom::element object, std::string_view field);
bool bool_at(simdjson::dom::element object, std::string_view field);

}  // namespace tightrope::kube
