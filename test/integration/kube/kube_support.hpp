// What the Kubernetes integration tests share: a client for the bed's API server and a fresh
// namespace a test.
#pragma once

#include <memory>
#include <string>

#include "kube/client.hpp"

namespace tightrope::kube::testing {

// The bed's admin kubeconfig ($KUBECONFIG).
Config bed_config();
std::unique_ptr<Client> make_client(ClientOptions options = {});
// "<prefix>-<a number unique in this process run>"
std::string unique_name(const std::string& prefix);
// Creates a namespace of its own for one test and returns its name.
std::string fresh_namespace(Client& client);

}  // namespace tightrope::kube::testing
