// kubectl-slurm: a kubectl plugin (`kubectl slurm ...`) that shows a Slurm cluster on Kubernetes
// from both sides at once, explains one pod, node or job across them, drains and cordons through
// the operator, and names what is wrong (doctor). Here: flags and wiring; src/cli does the work.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cli/actions.hpp"
#include "cli/report.hpp"
#include "cli/view.hpp"
#include "doctor/checks.hpp"
#include "kube/client.hpp"
#include "kube/config.hpp"
#include "operator/resources.hpp"

namespace {

using namespace tightrope;

constexpr int kProblems = 1;  // doctor found something; an action was refused
constexpr int kError = 2;     // nothing could be asked

struct Flags {
  std::string kubeconfig;
  std::string context;
  std::string namespace_name;
  std::string output = "text";
  std::string color = "auto";
  std::string slurmrestd;
  std::string token;
  int timeout_seconds = 5;
};

bool use_color(const std::string& mode) {
  if (mode == "always") {
    return true;
  }
  if (mode == "never" || std::getenv("NO_COLOR") != nullptr) {
    return false;
  }
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) != 0 && term != nullptr && std::string(term) != "dumb";
}

cli::SlurmAccess slurm_access(const Flags& flags) {
  cli::SlurmAccess access;
  access.url = flags.slurmrestd;
  access.token = flags.token;
  access.timeout = std::chrono::seconds(flags.timeout_seconds);
  return access;
}

// The namespace to look in: -n, else the context's; when that has no Controller and -n was not
// given, the one namespace of the whole cluster that has one.
std::string pick_namespace(kube::Client& kube, const Flags& flags, const std::string& controller) {
  if (!flags.namespace_name.empty()) {
    return flags.namespace_name;
  }
  std::string own = kube.config().namespace_name.empty() ? "default" : kube.config().namespace_name;
  if (!controller.empty()) {
    return own;
  }
  if (auto here = cli::list_controllers(kube, own); here && !here->empty()) {
    return own;
  }
  auto all = kube.list(op::resources::controllers(), "");
  if (all && all->items.size() == 1) {
    return cli::str_at(all->items[0], "/metadata/namespace"_json_pointer);
  }
  return own;
}

int print(const Flags& flags, const nlohmann::json& report, const std::string& text) {
  if (flags.output == "json") {
    std::cout << report.dump(2) << "\n";
  } else if (flags.output == "yaml") {
    std::cout << cli::to_yaml(report);
  } else {
    std::cout << text;
  }
  return 0;
}

// doctor --list: the catalog of checks.
int list_checks(const Flags& flags) {
  nlohmann::json catalog = nlohmann::json::array();
  for (const auto& check : doctor::catalog()) {
    catalog.push_back({{"id", check.id}, {"symptom", check.symptom}, {"fix", check.fix}});
    if (flags.output == "text") {
      std::cout << check.id << "\t" << check.symptom << "\n";
    }
  }
  if (flags.output != "text") {
    print(flags, {{"checks", catalog}}, "");
  }
  return 0;
}

// The first of `ids` the catalog lacks, "" when it has them all.
std::string unknown_check(const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    const auto& catalog = doctor::catalog();
    if (std::none_of(catalog.begin(), catalog.end(),
                     [&](const auto& check) { return check.id == id; })) {
      return id;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kubectl slurm: a Slurm cluster on Kubernetes, seen from both sides"};
  app.require_subcommand(1);
  // kubectl's habit: global flags anywhere (`kubectl slurm status -n slurm`). Subcommands made
  // after this inherit it.
  app.fallthrough();
  Flags flags;
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, ~/.kube/config)");
  app.add_option("--context", flags.context, "kubeconfig context");
  app.add_option("-n,--namespace", flags.namespace_name,
                 "namespace of the Controller (default: the context's, or the only one that has a "
                 "Controller)");
  app.add_option("-o,--output", flags.output, "text, json or yaml")
      ->check(CLI::IsMember({"text", "json", "yaml"}));
  app.add_option("--color", flags.color, "auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  app.add_option("--slurmrestd", flags.slurmrestd,
                 "slurmrestd URL (a port-forward); default: the API server's service proxy");
  app.add_option(
      "--token", flags.token,
      "Slurm JWT, from scontrol token (default: minted from the Controller's jwtKeyRef Secret)");
  app.add_option("--timeout", flags.timeout_seconds, "seconds per Slurm request")
      ->check(CLI::Range(1, 120));

  std::string controller;
  auto* status = app.add_subcommand(
      "status", "one screen: daemons, NodeSets and their Slurm nodes, partitions, drains");
  status->add_option("controller", controller,
                     "Controller name (default: the namespace's only one)");

  std::string kind;
  std::string name;
  auto* explain = app.add_subcommand(
      "explain", "join a pod, a Node (Kubernetes or Slurm) or a Slurm job across both systems");
  explain->add_option("kind", kind, "pod, node or job")
      ->required()
      ->check(CLI::IsMember({"pod", "node", "job"}));
  explain->add_option("name", name, "its name (a job's id)")->required();
  explain->add_option("--controller", controller, "Controller name");

  std::string reason;
  int wait_seconds = 0;
  std::string target;
  auto add_action = [&](const char* verb, const char* help, bool needs_reason) {
    auto* sub = app.add_subcommand(verb, help);
    sub->add_option("name", target, "worker pod, Slurm node or Kubernetes Node")->required();
    auto* r = sub->add_option("--reason", reason, "why (Slurm shows it)");
    if (needs_reason) {
      r->required();
    }
    sub->add_option("--wait", wait_seconds,
                    "seconds to wait for Slurm to show it (0: do not wait)");
    sub->add_option("--controller", controller, "Controller name");
    return sub;
  };
  auto* drain = add_action(
      "drain", "drain a worker's Slurm node through the operator (no new job starts)", true);
  auto* undrain =
      add_action("undrain", "undo a drain (the operator's request, or an administrator's)", false);
  auto* cordon = add_action(
      "cordon", "cordon a Kubernetes Node with a reason: the operator drains its Slurm nodes",
      false);
  auto* uncordon =
      add_action("uncordon", "uncordon a Kubernetes Node: the operator undoes its drains", false);

  bool list = false;
  std::vector<std::string> only;
  auto* doctor = app.add_subcommand(
      "doctor", "run every check; print findings with evidence and fixes (exit 1 if any)");
  doctor->add_option("controller", controller,
                     "Controller name (default: the namespace's only one)");
  doctor->add_flag("--list", list, "print the catalog of checks, one a line, and exit");
  doctor->add_option("--check", only, "run only these checks")->delimiter(',');

  CLI11_PARSE(app, argc, argv);

  if (doctor->parsed() && list) {
    return list_checks(flags);
  }
  if (const std::string unknown = unknown_check(only); !unknown.empty()) {
    std::cerr << "kubectl-slurm: no check " << unknown << " (kubectl slurm doctor --list)\n";
    return kError;
  }

  auto config = kube::load_default(flags.kubeconfig, flags.context);
  if (!config) {
    std::cerr << "kubectl-slurm: " << config.error().to_string() << "\n";
    return kError;
  }
  kube::ClientOptions kube_options;
  kube_options.user_agent = "kubectl-slurm";
  kube_options.timeout = std::chrono::seconds(15);
  kube_options.max_attempts = 2;
  kube::Client kube(*config, kube_options);

  cli::GatherOptions gather;
  gather.namespace_name = pick_namespace(kube, flags, controller);
  gather.controller = controller;
  gather.slurm = slurm_access(flags);
  gather.operator_side = doctor->parsed() || status->parsed() || explain->parsed();
  auto view = cli::gather(kube, gather);
  if (!view) {
    std::cerr << "kubectl-slurm: " << view.error() << "\n";
    return kError;
  }
  const cli::Style style{flags.output == "text" && use_color(flags.color)};

  if (status->parsed()) {
    const auto report = cli::status_report(*view);
    return print(flags, report, cli::render_status(report, style));
  }
  if (explain->parsed()) {
    const auto k = kind == "pod"    ? cli::ExplainKind::kPod
                   : kind == "node" ? cli::ExplainKind::kNode
                                    : cli::ExplainKind::kJob;
    auto report = cli::explain(*view, k, name);
    if (!report) {
      std::cerr << "kubectl-slurm: " << report.error() << "\n";
      return kProblems;
    }
    return print(flags, *report, cli::render_explain(*report, style));
  }
  if (doctor->parsed()) {
    const auto findings = doctor::diagnose(*view, only);
    print(flags, cli::findings_report(findings), cli::render_findings(findings, style));
    return doctor::failing(findings) ? kProblems : 0;
  }
  cli::ActionOptions action{reason, std::chrono::seconds(wait_seconds), gather.slurm};
  cli::ActionResult done = fail(std::string("no command"));
  if (drain->parsed()) {
    done = cli::drain(kube, *view, target, action);
  } else if (undrain->parsed()) {
    done = cli::undrain(kube, *view, target, action);
  } else if (cordon->parsed()) {
    done = cli::cordon(kube, *view, target, action);
  } else if (uncordon->parsed()) {
    done = cli::uncordon(kube, *view, target, action);
  }
  if (!done) {
    std::cerr << "kubectl-slurm: " << done.error() << "\n";
    return kProblems;
  }
  std::cout << *done << "\n";
  return 0;
}
