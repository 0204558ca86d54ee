// A controller on the framework, end to end on the bed: a CRD (Widget) whose reconciler owns a
// ConfigMap through server-side apply and reports status, driven by watches on the Widget and
// on the ConfigMaps it owns; a reconcile that throws is retried without stopping the others; a
// controller stopped and started again catches up.
#include "kube/controller.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kube/discovery.hpp"
#include "kube/events.hpp"
#include "kube_support.hpp"

namespace tightrope::kube {
namespace {

using nlohmann::json;
using testing::eventually;
using testing::field;
using testing::fresh_namespace;
using testing::make_client;

const char* const kGroup = "test.tightrope.dev";

void install_widget_crd(Client& client) {
  const json crd = {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", std::string("widgets.") + kGroup}}},
      {"spec",
       {{"group", kGroup},
        {"scope", "Namespaced"},
        {"names",
         {{"plural", "widgets"},
          {"singular", "widget"},
          {"kind", "Widget"},
          {"listKind", "WidgetList"}}},
        {"versions",
         json::array(
             {{{"name", "v1"},
               {"served", true},
               {"storage", true},
               {"subresources", {{"status", json::object()}}},
               {"schema",
                {{"openAPIV3Schema",
                  {{"type", "object"},
                   {"properties",
                    {{"spec",
                      {{"type", "object"}, {"properties", {{"size", {{"type", "integer"}}}}}}},
                     {"status",
                      {{"type", "object"},
                       {"properties",
                        {{"observedGeneration", {{"type", "integer"}}},
                         {"configMap", {{"type", "string"}}}}}}}}}}}}}}})}}}};
  auto applied =
      client.apply(resources::custom_resource_definitions(), "", crd, {"tightrope-test", true});
  ASSERT_TRUE(applied) << applied.error().message;
  ASSERT_TRUE(eventually([&] {
    auto got =
        client.get(resources::custom_resource_definitions(), "", std::string("widgets.") + kGroup);
    if (!got) {
      return false;
    }
    for (const auto& c : field(*got, "/status/conditions", json::array())) {
      if (c.value("type", "") == "Established" && c.value("status", "") == "True") {
        return true;
      }
    }
    return false;
  }));
}

class WidgetReconciler : public Reconciler {
 public:
  WidgetReconciler(Client& client, Informer<Document>& widgets, ResourceType type)
      : client_(client), widgets_(widgets), type_(std::move(type)) {}

  ReconcileOutcome reconcile(const Request& request) override {
    ++reconciles;
    if (request.name == "boom") {
      ++booms;
      throw std::runtime_error("a bug in the reconciler");
    }
    auto widget = widgets_.store().get(request.key());
    if (!widget) {
      return ReconcileResult{};  // deleted: the ConfigMap goes with it (garbage collection)
    }
    const json& doc = widget->doc;
    const std::string cm_name = request.name + "-widget";
    const json cm = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata",
                      {{"name", cm_name},
                       {"ownerReferences", json::array({{{"apiVersion", type_.api_version()},
                                                         {"kind", "Widget"},
                                                         {"name", request.name},
                                                         {"uid", widget->meta.uid},
                                                         {"controller", true}}})}}},
                     {"data", {{"size", std::to_string(field(doc, "/spec/size", 0))}}}};
    if (auto applied = client_.apply(resources::config_maps(), request.namespace_name, cm,
                                     {"widget-controller", true});
        !applied) {
      return fail(applied.error().message);
    }
    const json status = {
        {"apiVersion", type_.api_version()},
        {"kind", "Widget"},
        {"metadata", {{"name", request.name}}},
        {"status", {{"observedGeneration", widget->meta.generation}, {"configMap", cm_name}}}};
    if (auto applied = client_.apply(type_, request.namespace_name, status,
                                     {"widget-controller", true}, "status");
        !applied) {
      return fail(applied.error().message);
    }
    return ReconcileResult{};
  }

  std::atomic<int> reconciles{0};
  std::atomic<int> booms{0};

 private:
  Client& client_;
  Informer<Document>& widgets_;
  ResourceType type_;
};

TEST(Controller, ReconcilesACustomResourceEndToEnd) {
  auto client = make_client();
  install_widget_crd(*client);
  Discovery discovery(*client);
  auto widget_type = discovery.for_kind(std::string(kGroup) + "/v1", "Widget");
  ASSERT_TRUE(widget_type) << widget_type.error().message;
  EXPECT_EQ(widget_type->resource, "widgets");
  EXPECT_TRUE(widget_type->namespaced);
  const std::string ns = fresh_namespace(*client);

  metrics::Registry registry;
  InformerFactory factory(*client);
  auto& widgets = factory.informer<Document>(*widget_type, ns, decode_document);
  auto& config_maps = factory.informer<MetaOnly>(resources::config_maps(), ns, decode_meta_only);
  EXPECT_EQ(&widgets, &factory.informer<Document>(*widget_type, ns, decode_document));  // shared
  WidgetReconciler reconciler(*client, widgets, *widget_type);
  ControllerOptions options;
  options.name = "widget";
  options.workers = 2;
  options.metrics = &registry;
  options.queue.base_delay = std::chrono::milliseconds(50);
  options.queue.max_delay = std::chrono::milliseconds(400);
  Controller controller(options, reconciler);
  // The informers deliver to the controller until they stop: stop them before it goes, however
  // the test ends.
  struct InformersStopped {
    InformerFactory& factory;
    ~InformersStopped() { factory.stop_all(); }
  } informers_stopped{factory};
  controller.watch_primary(widgets);
  controller.watch_owned(config_maps, "Widget");
  factory.start_all();
  ASSERT_TRUE(factory.wait_for_sync(std::chrono::seconds(20)));
  controller.start();

  const auto widget = [&](const std::string& name, int size) {
    return json{{"apiVersion", widget_type->api_version()},
                {"kind", "Widget"},
                {"metadata", {{"name", name}}},
                {"spec", {{"size", size}}}};
  };
  ASSERT_TRUE(client->create(*widget_type, ns, widget("boom", 1)));
  ASSERT_TRUE(client->create(*widget_type, ns, widget("w", 1)));
  const auto cm_size = [&]() -> std::string {
    auto cm = client->get(resources::config_maps(), ns, "w-widget");
    return cm ? field<std::string>(*cm, "/data/size", "") : "";
  };
  const auto observed = [&]() -> int64_t {
    auto w = client->get(*widget_type, ns, "w");
    return w ? field<int64_t>(*w, "/status/observedGeneration", 0) : 0;
  };
  ASSERT_TRUE(eventually([&] { return cm_size() == "1" && observed() == 1; }));

  ASSERT_TRUE(client->patch(*widget_type, ns, "w", PatchType::kMerge, {{"spec", {{"size", 5}}}}));
  EXPECT_TRUE(eventually([&] { return cm_size() == "5" && observed() == 2; }));

  // An owned object deleted behind the controller's back is put back.
  ASSERT_TRUE(client->remove(resources::config_maps(), ns, "w-widget"));
  EXPECT_TRUE(eventually([&] { return cm_size() == "5"; }));

  // The throwing key is retried with backoff and does not block the others.
  EXPECT_TRUE(eventually([&] { return reconciler.booms.load() >= 3; }));

  // Stopped (its process lost the lease), it acts on nothing; started again (a new term), it
  // finds what changed meanwhile.
  controller.stop();
  ASSERT_TRUE(client->patch(*widget_type, ns, "w", PatchType::kMerge, {{"spec", {{"size", 7}}}}));
  ASSERT_TRUE(eventually([&] {
    auto cached = widgets.store().get(ns + "/w");
    return cached && cached->meta.generation == 3;
  }));
  const int reconciles_when_stopped = reconciler.reconciles.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(reconciler.reconciles.load(), reconciles_when_stopped);
  EXPECT_EQ(cm_size(), "5");
  controller.start();
  EXPECT_TRUE(eventually([&] { return cm_size() == "7" && observed() == 3; }));
  controller.stop();
  factory.stop_all();
  const std::string text = registry.render();
  EXPECT_NE(text.find(R"(controller_runtime_reconcile_errors_total{controller="widget"})"),
            std::string::npos);
  EXPECT_NE(text.find(R"(workqueue_adds_total{name="widget"})"), std::string::npos) << text;
}

TEST(EventRecorder, AggregatesRepeatsIntoOneEvent) {
  auto client = make_client();
  const std::string ns = fresh_namespace(*client);
  auto cm = client->create(
      resources::config_maps(), ns,
      {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "subject"}}}});
  ASSERT_TRUE(cm);
  EventRecorder recorder(*client, {"tightrope-test", "test-instance"});
  const ObjectReference ref{"v1", "ConfigMap", ns, "subject", (*cm)["metadata"]["uid"]};
  for (int i = 0; i < 3; ++i) {
    recorder.warning(ref, "Drifted", "the subject drifted");
  }
  recorder.normal(ref, "Settled", "the subject settled");
  ASSERT_TRUE(recorder.flush(std::chrono::seconds(20)));
  auto events = client->list(resources::events(), ns);
  ASSERT_TRUE(events);
  std::map<std::string, int64_t> counts;
  for (const auto& e : events->items) {
    counts[e["reason"]] = e.value("count", int64_t{0});
    EXPECT_EQ(e["involvedObject"]["name"], "subject");
  }
  EXPECT_EQ(counts.size(), 2U);
  EXPECT_EQ(counts["Drifted"], 3);
  EXPECT_EQ(counts["Settled"], 1);
  EXPECT_EQ(recorder.dropped(), 0U);
}

}  // namespace
}  // namespace tightrope::kube
