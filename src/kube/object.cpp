#include "kube/object.hpp"

namespace tightrope::kube {

std::string object_key(std::string_view namespace_name, std::string_view name) {
  if (namespace_name.empty()) {
    return std::string(name);
  }
  std::string key;
  key.reserve(namespace_name.size() + 1 + name.size());
  key.append(namespace_name).append("/").append(name);
  return key;
}

std::string ObjectMeta::key() const {
  return object_key(namespace_name, name);
}

const std::string* ObjectMeta::label(std::string_view label_name) const {
  for (const auto& [key, value] : labels) {
    if (key == label_name) {
      return &value;
    }
  }
  return nullptr;
}

const OwnerReference* ObjectMeta::controller_ref() const {
  for (const auto& ref : owner_references) {
    if (ref.controller) {
      return &ref;
    }
  }
  return nullptr;
}

std::string_view string_at(simdjson::dom::element object, std::string_view field) {
  std::string_view value;
  if (object[field].get_string().get(value) != simdjson::SUCCESS) {
    return {};
  }
  return value;
}

int64_t int_at(simdjson::dom::element object, std::string_view field) {
  int64_t value = 0;
  if (object[field].get_int64().get(value) != simdjson::SUCCESS) {
    return 0;
  }
  return value;
}

bool bool_at(simdjson::dom::element object, std::string_view field) {
  bool value = false;
  if (object[field].get_bool().get(value) != simdjson::SUCCESS) {
    return false;
  }
  return value;
}

DecodeResult decode_meta(simdjson::dom::element object, ObjectMeta* meta) {
  simdjson::dom::element m;
  if (object["metadata"].get(m) != simdjson::SUCCESS ||
      m.type() != simdjson::dom::element_type::OBJECT) {
    return fail(std::string("the object has no metadata"));
  }
  meta->name = string_at(m, "name");
  if (meta->name.empty()) {
    return fail(std::string("metadata.name is missing"));
  }
  meta->namespace_name = string_at(m, "namespace");
  meta->uid = string_at(m, "uid");
  meta->resource_version = string_at(m, "resourceVersion");
  meta->generation = int_at(m, "generation");
  meta->deleting = !string_at(m, "deletionTimestamp").empty();
  meta->labels.clear();
  simdjson::dom::object labels;
  if (m["labels"].get_object().get(labels) == simdjson::SUCCESS) {
    meta->labels.reserve(labels.size());
    for (const auto field : labels) {
      std::string_view value;
      if (field.value.get_string().get(value) == simdjson::SUCCESS) {
        meta->labels.emplace_back(field.key, value);
      }
    }
  }
  meta->owner_references.clear();
  simdjson::dom::array owners;
  if (m["ownerReferences"].get_array().get(owners) == simdjson::SUCCESS) {
    for (const auto owner : owners) {
      meta->owner_references.push_back(
          {std::string(string_at(owner, "apiVersion")), std::string(string_at(owner, "kind")),
           std::string(string_at(owner, "name")), std::string(string_at(owner, "uid")),
           bool_at(owner, "controller")});
    }
  }
  meta->labels.shrink_to_fit();
  meta->owner_references.shrink_to_fit();
  return std::monostate{};
}

nlohmann::json to_json(simdjson::dom::element element) {
  switch (element.type()) {
    case simdjson::dom::element_type::OBJECT: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto field : simdjson::dom::object(element)) {
        out[std::string(field.key)] = to_json(field.value);
      }
      return out;
    }
    case simdjson::dom::element_type::ARRAY: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto item : simdjson::dom::array(element)) {
        out.push_back(to_json(item));
      }
      return out;
    }
    case simdjson::dom::element_type::STRING:
      return std::string(std::string_view(element));
    case simdjson::dom::element_type::INT64:
      return int64_t(element);
    case simdjson::dom::element_type::UINT64:
      return uint64_t(element);
    case simdjson::dom::element_type::DOUBLE:
      return double(element);
    case simdjson::dom::element_type::BOOL:
      return bool(element);
    case simdjson::dom::element_type::NULL_VALUE:
      return nullptr;
  }
  return nullptr;
}

DecodeResult decode_document(simdjson::dom::element object, Document* out) {
  if (auto meta = decode_meta(object, &out->meta); !meta) {
    return meta;
  }
  // metadata.managedFields is left out: no controller reads it, and on a pod that several
  // writers touched it is a third of the object.
  out->doc = nlohmann::json::object();
  for (const auto field : simdjson::dom::object(object)) {
    if (field.key != "metadata" || field.value.type() != simdjson::dom::element_type::OBJECT) {
      out->doc[std::string(field.key)] = to_json(field.value);
      continue;
    }
    nlohmann::json meta = nlohmann::json::object();
    for (const auto child : simdjson::dom::object(field.value)) {
      if (child.key != "managedFields") {
        meta[std::string(child.key)] = to_json(child.value);
      }
    }
    out->doc["metadata"] = std::move(meta);
  }
  return std::monostate{};
}

DecodeResult decode_meta_only(simdjson::dom::element object, MetaOnly* out) {
  return decode_meta(object, &out->meta);
}

}  // namespace tightrope::kube
