#include "nodeset/nodeset_support.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "kube/base64.hpp"
#include "operator/resources.hpp"
#include "testbed.hpp"

namespace tightrope::op::testing {

using nlohmann::json;
using ::tightrope::testing::TestBed;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void create(kube::Client& client, const kube::ResourceType& type, const std::string& ns,
            json object) {
  object["metadata"]["namespace"] = ns;
  auto created = client.create(type, ns, object);
  if (!created) {
    throw std::runtime_error("creating " + type.kind + ": " + created.error().message);
  }
}

json secret(const std::string& name, const std::string& key, const std::string& file) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}}},
          {"data", {{key, kube::encode_base64(read_file(file))}}}};
}

}  // namespace

void create_external_cluster(kube::Client& client, const std::string& ns,
                             const json& controller_spec) {
  create(client, kube::resources::secrets(), ns,
         secret("slurm-key", "slurm.key", TestBed::var("SLURM_KEY")));
  create(client, kube::resources::secrets(), ns,
         secret("jwt-key", "jwt.key", TestBed::var("SLURM_JWT_KEY")));
  const std::string ctld = TestBed::var("SLURMCTLD_URL");
  const int port = std::stoi(ctld.substr(ctld.rfind(':') + 1));
  json controller = {{"apiVersion", "slinky.slurm.net/v1beta1"},
                     {"kind", "Controller"},
                     {"metadata", {{"name", "slurm"}}},
                     {"spec",
                      {{"slurmKeyRef", {{"name", "slurm-key"}, {"key", "slurm.key"}}},
                       {"jwtKeyRef", {{"name", "jwt-key"}, {"key", "jwt.key"}}},
                       {"external", true},
                       {"externalConfig", {{"host", "localhost"}, {"port", port}}}}}};
  controller["spec"].update(controller_spec);
  create(client, resources::controllers(), ns, controller);
  create(client, resources::restapis(), ns,
         {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "RestApi"},
          {"metadata", {{"name", "slurm"}}},
          {"spec", {{"controllerRef", {{"name", "slurm"}}}}}});
}

void create_nodeset(kube::Client& client, const std::string& ns, const std::string& name,
                    int64_t replicas, const json& annotations) {
  create(client, resources::nodesets(), ns,
         {{"apiVersion", "slinky.slurm.net/v1beta1"},
          {"kind", "NodeSet"},
          {"metadata", {{"name", name}, {"annotations", annotations}}},
          {"spec",
           {{"controllerRef", {{"name", "slurm"}}},
            {"replicas", replicas},
            {"extraConf", "Features=" + TestBed::var("SLURM_PARTITION")}}}});
}

}  // namespace tightrope::op::testing
