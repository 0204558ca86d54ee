// What the benchmark harnesses that drive a test bed share: seconds since a moment, a failed
// request that ends the run, a pod's condition, an option's value.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tightrope::bench {

inline double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A request the run cannot go on without: its failure ends the run with `what` and the error.
template <typename Result>
void must(const Result& r, const std::string& what) {
  if (!r) {
    throw std::runtime_error(what + ": " + r.error().message);
  }
}

// Whether the object's status has condition `type` True.
inline bool has_condition(const nlohmann::json& object, const std::string& type) {
  for (const auto& c : object.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (c.value("type", "") == type && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
}

// The value of the option at argv[i], which moves `i` past it.
inline std::string option_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    throw std::invalid_argument(std::string(argv[i]) + " needs a value");
  }
  return argv[++i];
}

}  // namespace tightrope::bench
