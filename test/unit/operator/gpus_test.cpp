// A NodeSet's GPUs: the GRES type from GPU Feature Discovery's product label, the gpu item slurmd
// registers (from the slurmd container's nvidia.com/gpu limit, typed from the template, an
// annotation or extraConf), the refusals that keep Slurm from handing out GPUs a pod lacks, and
// the NodeSet's nodes in gres.conf.
#include "operator/build/gpus.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../api/support.hpp"
#include "api/codec.hpp"
#include "operator/build/compute_domain.hpp"
#include "operator/build/controller.hpp"
#include "operator/build/nodeset.hpp"
#include "samples.hpp"

namespace tightrope::op {
namespace {

using api::testing::decoded;
using nlohmann::json;

api::NodeSet nodeset(const std::string& extra_yaml, const std::string& annotations = "") {
  return decoded(api::decode_nodeset(
      api::testing::yaml_to_json("apiVersion: slinky.slurm.net/v1beta1\n"
                                 "kind: NodeSet\n"
                                 "metadata:\n"
                                 "  name: gpu\n"
                                 "  namespace: hpc\n" +
                                 (annotations.empty() ? "" : "  annotations:\n" + annotations) +
                                 "spec:\n"
                                 "  controllerRef: {name: slurm}\n" +
                                 extra_yaml)
          .front()));
}

const std::string kLimit4 = "  slurmd:\n    resources:\n      limits:\n        nvidia.com/gpu: 4\n";

TEST(GpuType, IsTheProductLabelAsSlurmAutodetectionNamesIt) {
  EXPECT_EQ(build::slurm_gpu_type("NVIDIA-H100-80GB-HBM3"), "nvidia_h100_80gb_hbm3");
  EXPECT_EQ(build::slurm_gpu_type("NVIDIA-H200"), "nvidia_h200");
  EXPECT_EQ(build::slurm_gpu_type("NVIDIA-GB200"), "nvidia_gb200");
  EXPECT_EQ(build::slurm_gpu_type("Tesla-T4"), "tesla_t4");
  // Counts of replicas or slices, not of GPUs: no type stands for them.
  EXPECT_EQ(build::slurm_gpu_type("NVIDIA-A100-SXM4-40GB-SHARED"), std::nullopt);
  EXPECT_EQ(build::slurm_gpu_type("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"), std::nullopt);
  EXPECT_EQ(build::slurm_gpu_type(""), std::nullopt);
}

TEST(GpuRequest, NoLimitNoGpus) {
  auto r = build::nodeset_gpus(nodeset(""));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_FALSE(r->wants_gpus());
  auto conf = build::slurmd_conf(nodeset(""));
  ASSERT_TRUE(conf);
  EXPECT_EQ(*conf, "Features=gpu");
}

TEST(GpuRequest, LimitGivesAnUntypedCountAndTheDefaultAutodetect) {
  auto r = build::nodeset_gpus(nodeset(kLimit4));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->item, "gpu:4");
  EXPECT_EQ(r->autodetect, "full");
  auto conf = build::slurmd_conf(nodeset(kLimit4 + "  extraConf: \"Gres=nic:1 Weight=5\"\n"));
  ASSERT_TRUE(conf) << conf.error();
  EXPECT_EQ(*conf, "Features=gpu Gres=nic:1,gpu:4 Weight=5");
}

TEST(GpuRequest, TemplateContainerLimitWinsAsInThePod) {
  auto r = build::nodeset_gpus(nodeset(kLimit4 + "  template:\n    spec:\n      containers:\n"
                                                 "        - name: slurmd\n          resources:\n"
                                                 "            limits: {nvidia.com/gpu: \"2\"}\n"));
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->item, "gpu:2");
}

TEST(GpuRequest, TypedFromTheNodeSelectorAffinityOrAnnotation) {
  auto selected = build::nodeset_gpus(
      nodeset(kLimit4 + "  template:\n    spec:\n      nodeSelector:\n"
                        "        nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n"));
  ASSERT_TRUE(selected) << selected.error().to_string();
  EXPECT_EQ(selected->item, "gpu:nvidia_h100_80gb_hbm3:4");

  const std::string affinity =
      "  template:\n    spec:\n      affinity:\n        nodeAffinity:\n"
      "          requiredDuringSchedulingIgnoredDuringExecution:\n"
      "            nodeSelectorTerms:\n"
      "              - matchExpressions:\n"
      "                  - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H200]}\n";
  auto affine = build::nodeset_gpus(nodeset(kLimit4 + affinity));
  ASSERT_TRUE(affine) << affine.error().to_string();
  EXPECT_EQ(affine->item, "gpu:nvidia_h200:4");

  // Two products allowed: which one a pod lands on is unknown, so no type.
  auto two = build::nodeset_gpus(nodeset(
      kLimit4 + affinity +
      "              - matchExpressions:\n"
      "                  - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-L4]}\n"));
  ASSERT_TRUE(two) << two.error().to_string();
  EXPECT_EQ(two->item, "gpu:4");

  auto annotated =
      build::nodeset_gpus(nodeset(kLimit4 + affinity, "    tightrope.slurm.net/gpu-type: h200\n"));
  ASSERT_TRUE(annotated) << annotated.error().to_string();
  EXPECT_EQ(annotated->item, "gpu:h200:4");
}

TEST(GpuRequest, ExtraConfGresIsTheAdministratorsWord) {
  const api::NodeSet n = nodeset(kLimit4 + "  extraConf: \"Gres=gpu:gb200:4,nic:2\"\n");
  auto r = build::nodeset_gpus(n);
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_TRUE(r->from_extra_conf);
  EXPECT_EQ(r->item, "gpu:gb200:4");
  auto conf = build::slurmd_conf(n);
  ASSERT_TRUE(conf);
  EXPECT_EQ(*conf, "Features=gpu Gres=gpu:gb200:4,nic:2");

  // Without a limit the administrator asserts the pod sees the devices (a privileged pod does).
  auto bare = build::nodeset_gpus(nodeset("  extraConf: \"Gres=gpu:2(S:0,1)\"\n"));
  ASSERT_TRUE(bare) << bare.error().to_string();
  EXPECT_EQ(bare->item, "gpu:2(S:0,1)");
}

TEST(GpuRequest, MoreGpusThanThePodGetsIsRefused) {
  auto r = build::nodeset_gpus(nodeset(kLimit4 + "  extraConf: \"Gres=gpu:h100:8\"\n"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "spec.extraConf");
  EXPECT_NE(r.error().message.find("registers 8 GPUs, but spec.slurmd.resources.limits"
                                   "[nvidia.com/gpu] gives each pod 4"),
            std::string::npos)
      << r.error().message;
  auto conf = build::slurmd_conf(nodeset(kLimit4 + "  extraConf: \"Gres=gpu:h100:8\"\n"));
  ASSERT_FALSE(conf);
  EXPECT_NE(conf.error().find("spec.extraConf: Gres gpu:h100:8"), std::string::npos);
}

TEST(GpuRequest, ALimitThatIsNotWholeGpusIsRefused) {
  auto r = build::nodeset_gpus(
      nodeset("  slurmd:\n    resources:\n      limits:\n        nvidia.com/gpu: 500m\n"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "spec.slurmd.resources.limits[nvidia.com/gpu]");
  EXPECT_NE(r.error().message.find("whole number of GPUs"), std::string::npos);
}

TEST(GpuRequest, SharedAndMigProductsAreRefusedUnlessSaidHow) {
  const std::string shared = kLimit4 +
                             "  template:\n    spec:\n      nodeSelector:\n"
                             "        nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB-SHARED\n";
  auto s = build::nodeset_gpus(nodeset(shared));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().field, "spec.template.spec.nodeSelector[nvidia.com/gpu.product]");
  EXPECT_NE(s.error().message.find("time-sliced"), std::string::npos);
  // The administrator's Gres= names the real devices.
  auto asserted = build::nodeset_gpus(nodeset(shared + "  extraConf: Gres=gpu:a100:1\n"));
  ASSERT_TRUE(asserted) << asserted.error().to_string();
  EXPECT_EQ(asserted->item, "gpu:a100:1");

  const std::string mig =
      "  slurmd:\n    resources:\n      limits:\n        nvidia.com/mig-1g.5gb: 3\n";
  auto m = build::nodeset_gpus(nodeset(mig));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().field, "spec.slurmd.resources.limits[nvidia.com/mig-1g.5gb]");
  EXPECT_NE(m.error().message.find("AutoDetect=nvml"), std::string::npos);
  auto nvml = build::nodeset_gpus(nodeset(mig,
                                          "    tightrope.slurm.net/gres-autodetect: nvml\n"
                                          "    tightrope.slurm.net/gpu-type: 1g.5gb\n"));
  ASSERT_TRUE(nvml) << nvml.error().to_string();
  EXPECT_EQ(nvml->item, "gpu:1g.5gb:3");
  EXPECT_EQ(nvml->autodetect, "nvml");
}

TEST(GpuRequest, AnnotationsAreChecked) {
  auto mode =
      build::nodeset_gpus(nodeset(kLimit4, "    tightrope.slurm.net/gres-autodetect: yes\n"));
  ASSERT_FALSE(mode);
  EXPECT_EQ(mode.error().field, "metadata.annotations[tightrope.slurm.net/gres-autodetect]");
  auto type = build::nodeset_gpus(nodeset(kLimit4, "    tightrope.slurm.net/gpu-type: \"a:b\"\n"));
  ASSERT_FALSE(type);
  EXPECT_EQ(type.error().field, "metadata.annotations[tightrope.slurm.net/gpu-type]");
  auto named = build::nodeset_gpus(nodeset(
      kLimit4, "    tightrope.slurm.net/gres-conf: \"NodeName=x Name=gpu File=/dev/nvidia0\"\n"));
  ASSERT_FALSE(named);
  EXPECT_NE(named.error().message.find("leave NodeName= out"), std::string::npos);
  auto lines =
      build::nodeset_gpus(nodeset(kLimit4,
                                  "    tightrope.slurm.net/gres-conf: |\n      # comment\n\n"
                                  "      Name=gpu File=/dev/nvidia[0-3]\n"));
  ASSERT_TRUE(lines) << lines.error().to_string();
  EXPECT_EQ(lines->gres_conf_lines, std::vector<std::string>{"Name=gpu File=/dev/nvidia[0-3]"});
  EXPECT_EQ(lines->autodetect, "off");  // the lines name the devices
}

TEST(GpuRequest, AutodetectionWithoutACountIsAskedForByTheAnnotation) {
  auto plain = build::nodeset_gpus(nodeset(""));
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->in_gres_conf());
  auto asked =
      build::nodeset_gpus(nodeset("", "    tightrope.slurm.net/gres-autodetect: nvidia\n"));
  ASSERT_TRUE(asked) << asked.error().to_string();
  EXPECT_FALSE(asked->wants_gpus());  // no Gres= in --conf: slurmd adds what it finds
  EXPECT_TRUE(asked->in_gres_conf());
  EXPECT_EQ(asked->autodetect, "nvidia");
  auto conf = build::slurmd_conf(nodeset("", "    tightrope.slurm.net/gres-autodetect: nvidia\n"));
  ASSERT_TRUE(conf);
  EXPECT_EQ(*conf, "Features=gpu");
}

TEST(ComputeDomain, IsTheNodeSetsOwnWithEveryChannelAndEachPodClaimsIt) {
  const api::NodeSet plain = nodeset(kLimit4);
  const api::NodeSet imex = nodeset(kLimit4, "    tightrope.slurm.net/compute-domain: \"true\"\n");
  EXPECT_FALSE(build::wants_compute_domain(plain));
  ASSERT_TRUE(build::wants_compute_domain(imex));
  const nlohmann::json domain = build::build_compute_domain(imex);
  EXPECT_EQ(domain["apiVersion"], "resource.nvidia.com/v1beta1");
  EXPECT_EQ(domain["metadata"]["name"], "gpu-imex");
  EXPECT_EQ(domain["spec"],
            nlohmann::json::parse(R"({"numNodes": 0, "channel": {"allocationMode": "All",
                                   "resourceClaimTemplate": {"name": "gpu-imex-channel"}}})"));
  EXPECT_EQ(domain["metadata"]["ownerReferences"][0]["kind"], "NodeSet");

  const api::Controller c = testing::controller();
  auto pod = build::build_nodeset_pod(imex, {c}, 0);
  ASSERT_TRUE(pod) << pod.error();
  EXPECT_EQ((*pod)["spec"]["resourceClaims"],
            nlohmann::json::parse(R"([{"name": "compute-domain-channel",
                                      "resourceClaimTemplateName": "gpu-imex-channel"}])"));
  EXPECT_EQ((*pod)["spec"]["containers"][0]["resources"]["claims"],
            nlohmann::json::parse(R"([{"name": "compute-domain-channel"}])"));
  EXPECT_FALSE((*build::build_nodeset_pod(plain, {c}, 0))["spec"].contains("resourceClaims"));
  // Asking for the domain rolls the pods onto it.
  EXPECT_NE(build::nodeset_revision_name(plain, {c}), build::nodeset_revision_name(imex, {c}));

  // Wired by hand, as Slinky's documentation does it: left as it is.
  const api::NodeSet by_hand = nodeset(
      "  template:\n    spec:\n      resourceClaims:\n"
      "        - {name: compute-domain-channel, resourceClaimTemplateName: site-channel}\n",
      "    tightrope.slurm.net/compute-domain: \"true\"\n");
  auto kept = build::build_nodeset_pod(by_hand, {c}, 0);
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ((*kept)["spec"]["resourceClaims"].size(), 1U);
  EXPECT_EQ((*kept)["spec"]["resourceClaims"][0]["resourceClaimTemplateName"], "site-channel");
}

TEST(ComputeDomain, SlurmHandsEachJobAChannelUnlessTheAdministratorSaysOtherwise) {
  build::ControllerInputs in;
  in.nodesets = {nodeset(kLimit4, "    tightrope.slurm.net/compute-domain: \"true\"\n")};
  api::Controller c = testing::controller();
  EXPECT_NE(build::build_slurm_conf(c, in).find("\nSwitchType=switch/nvidia_imex\n"),
            std::string::npos);
  c.spec.extra_conf = "SwitchType=switch/none\n";
  const std::string conf = build::build_slurm_conf(c, in);
  EXPECT_EQ(conf.find("switch/nvidia_imex"), std::string::npos) << conf;
  in.nodesets = {nodeset(kLimit4)};
  EXPECT_EQ(build::build_slurm_conf(testing::controller(), in).find("SwitchType"),
            std::string::npos);
}

TEST(GpuConfinement, IsTheDefaultUnlessTheAdministratorChoseOtherwise) {
  build::ControllerInputs in;
  in.nodesets = {nodeset(kLimit4)};
  api::Controller c = testing::controller();
  EXPECT_NE(build::build_slurm_conf(c, in).find("\nTaskPlugin=task/cgroup,task/affinity\n"),
            std::string::npos);
  const auto cgroup = build::build_cgroup_conf(in);
  ASSERT_TRUE(cgroup);
  EXPECT_EQ(
      *cgroup,
      "CgroupPlugin=autodetect\nIgnoreSystemd=yes\nConstrainCores=yes\nConstrainRAMSpace=yes\n"
      "ConstrainSwapSpace=yes\nConstrainDevices=yes\n");
  // The administrator's TaskPlugin wins.
  c.spec.extra_conf = "TaskPlugin=task/none\n";
  std::string conf = build::build_slurm_conf(c, in);
  EXPECT_EQ(conf.find("task/cgroup"), std::string::npos) << conf;
  // So does a cgroup.conf of theirs without cgroups: task/cgroup would stop slurmd.
  c.spec.extra_conf.clear();
  c.spec.config_file_refs = {{"cgroup"}};
  in.config_maps["cgroup"] = {{"cgroup.conf", "CgroupPlugin=disabled\n"}};
  conf = build::build_slurm_conf(c, in);
  EXPECT_EQ(conf.find("TaskPlugin"), std::string::npos) << conf;
  // Without GPUs, Slurm's default (no task plugin), as Slinky writes it.
  in.config_maps.clear();
  in.nodesets = {nodeset("")};
  EXPECT_EQ(build::build_slurm_conf(testing::controller(), in).find("TaskPlugin"),
            std::string::npos);
}

TEST(GpuNodes, HostlistCoversEveryOrdinalSlurmAccepts) {
  EXPECT_EQ(build::nodeset_hostlist(nodeset(""), 1024), "gpu-[0-1023]");
  EXPECT_EQ(build::nodeset_hostlist(
                nodeset("  ordinalPadding: 3\n  template:\n    spec: {hostname: dgx}\n"), 2048),
            "dgx[000-2047]");
}

// ---- new pods wait until slurmctld runs a configuration with their NodeSet.

struct Rolled {
  json config_map;
  json statefulset;
};

// The Controller's ConfigMap and StatefulSet as the operator writes them for these NodeSets,
// with the StatefulSet's pods all at its template and Ready.
Rolled rolled_out(const std::vector<api::NodeSet>& nodesets) {
  const api::Controller c = testing::controller();
  build::ControllerInputs in;
  in.nodesets = nodesets;
  Rolled r{build::build_controller_config_map(c, in), build::build_controller_statefulset(c, in)};
  r.statefulset["metadata"]["generation"] = 2;
  r.statefulset["status"] = {
      {"observedGeneration", 2}, {"replicas", 1}, {"updatedReplicas", 1}, {"readyReplicas", 1}};
  return r;
}

TEST(SlurmctldLoaded, ANodeSetInTheRunningConfigurationMayStartPods) {
  const api::NodeSet n = nodeset(kLimit4);
  const Rolled r = rolled_out({n});
  EXPECT_EQ(build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset), std::nullopt);
}

TEST(SlurmctldLoaded, ANodeSetTheControllerHasNotWrittenWaits) {
  const api::NodeSet n = nodeset(kLimit4);
  const Rolled r = rolled_out({});
  const auto why = build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("no NodeSet=gpu line"), std::string::npos) << *why;
}

TEST(SlurmctldLoaded, AGpuRequestNotYetInGresConfWaits) {
  // The ConfigMap was written for 4 GPUs; the NodeSet now asks for 8.
  const Rolled r = rolled_out({nodeset(kLimit4)});
  const api::NodeSet eight =
      nodeset("  slurmd:\n    resources:\n      limits:\n        nvidia.com/gpu: 8\n");
  const auto why = build::slurmctld_lacks_nodeset(eight, r.config_map, r.statefulset);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("gres.conf does not yet have \"# NodeSet gpu: gpu:8\""), std::string::npos)
      << *why;
}

TEST(SlurmctldLoaded, WaitsWhileSlurmctldRollsToTheNewConfiguration) {
  const api::NodeSet n = nodeset(kLimit4);
  Rolled r = rolled_out({n});
  // The ConfigMap is new, the StatefulSet not yet written.
  const Rolled before = rolled_out({});
  auto why = build::slurmctld_lacks_nodeset(n, r.config_map, before.statefulset);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("pod template is not yet at ConfigMap slurm-config's content"),
            std::string::npos)
      << *why;
  // Written, not yet seen by the StatefulSet controller.
  r.statefulset["metadata"]["generation"] = 3;
  why = build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("has not yet seen its new pod template"), std::string::npos) << *why;
  // Seen: the old pod goes, the new one starts.
  r.statefulset["status"] = {
      {"observedGeneration", 3}, {"replicas", 1}, {"updatedReplicas", 0}, {"readyReplicas", 1}};
  why = build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("0 of 1 pods of StatefulSet slurm-controller at the new template, 1 Ready"),
            std::string::npos)
      << *why;
  r.statefulset["status"]["updatedReplicas"] = 1;
  r.statefulset["status"]["readyReplicas"] = 0;
  EXPECT_TRUE(build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset));
  r.statefulset["status"]["readyReplicas"] = 1;
  EXPECT_EQ(build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset), std::nullopt);
}

TEST(SlurmctldLoaded, AnUnschedulableBackupDoesNotHoldTheWorkersBack) {
  const api::NodeSet n = nodeset(kLimit4);
  Rolled r = rolled_out({n});
  r.statefulset["spec"]["replicas"] = 2;
  r.statefulset["status"] = {
      {"observedGeneration", 2}, {"replicas", 2}, {"updatedReplicas", 2}, {"readyReplicas", 1}};
  EXPECT_EQ(build::slurmctld_lacks_nodeset(n, r.config_map, r.statefulset), std::nullopt);
}

TEST(SlurmctldLoaded, InPlaceReconfigureHasNoHashToCompare) {
  api::Controller c = testing::controller();
  c.spec.inplace_reconfigure = true;
  const api::NodeSet n = nodeset(kLimit4);
  build::ControllerInputs in;
  in.nodesets = {n};
  json sts = build::build_controller_statefulset(c, in);
  sts["status"] = {{"updatedReplicas", 1}, {"readyReplicas", 1}};
  EXPECT_EQ(build::slurmctld_lacks_nodeset(n, build::build_controller_config_map(c, in), sts),
            std::nullopt);
}

}  // namespace
}  // namespace tightrope::op
