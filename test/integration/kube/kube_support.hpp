// What the Kubernetes integration tests share: a client for the bed's API server and a fresh
// namespace a test.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "kube/client.hpp"

namespace tightrope::kube::testing {

// The bed's admin kubeconfig ($KUBECONFIG).
Config bed_config();
std::unique_ptr<Client> make_client(ClientOptions options = {});
// "<prefix>-<a number unique in this process run>"
std::string unique_name(const std::string& prefix);
// Creates a namespace of its own for one test, waits until it can hold pods, returns its name.
std::string fresh_namespace(Client& client);
// Waits (30 s at most) until the API server takes pods in `ns`: a failure of the test otherwise.
void wait_until_it_holds_pods(Client& client, const std::string& ns);

// The value at a JSON pointer ("/status/observedGeneration"), or `fallback` where the document
// has nothing there yet (a status not written, a field not defaulted).
template <typename T>
T field(const nlohmann::json& doc, const char* pointer, T fallback) {
  const nlohmann::json::json_pointer p(pointer);
  return doc.contains(p) ? doc.at(p).get<T>() : fallback;
}

// Polls `pred` every 20 ms until it holds (true) or `timeout` passes (false).
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace tightrope::kube::testing
