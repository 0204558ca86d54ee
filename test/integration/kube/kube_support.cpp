#include "kube_support.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "testbed.hpp"

namespace tightrope::kube::testing {

Config bed_config() {
  auto config = load_kubeconfig(tightrope::testing::TestBed::var("KUBECONFIG"));
  if (!config) {
    throw std::runtime_error(config.error().to_string());
  }
  return *config;
}

std::unique_ptr<Client> make_client(ClientOptions options) {
  return std::make_unique<Client>(bed_config(), std::move(options));
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

std::string fresh_namespace(Client& client) {
  std::string name = unique_name("t");
  auto created =
      client.create(resources::namespaces(), "",
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  if (!created) {
    ADD_FAILURE() << "namespace " << name << ": " << created.error().message;
    return name;
  }
  wait_until_it_holds_pods(client, name);
  return name;
}

void wait_until_it_holds_pods(Client& client, const std::string& ns) {
  // The API server refuses pods in a namespace until the controller-manager has made its
  // "default" ServiceAccount, which takes seconds on a bed that has just started.
  if (!eventually([&] { return client.get(resources::service_accounts(), ns, "default").ok(); },
                  std::chrono::seconds(30))) {
    ADD_FAILURE() << "namespace " << ns << ": no default ServiceAccount within 30 s";
  }
}

}  // namespace tightrope::kube::testing
