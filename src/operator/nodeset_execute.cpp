#include "operator/nodeset_execute.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace tightrope::op {

namespace {

// fn(0) ... fn(count - 1), at most `width` at a time, on this thread and helpers.
void run_parallel(size_t count, size_t width, const std::function<void(size_t)>& fn) {
  if (count <= 1 || width <= 1) {
    for (size_t i = 0; i < count; ++i) {
      fn(i);
    }
    return;
  }
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      fn(i);
    }
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < std::min(count, width); ++k) {
    helpers.emplace_back(work);
  }
  work();
  for (auto& t : helpers) {
    t.join();
  }
}

}  // namespace

std::vector<ActionFailure> execute_actions(const std::vector<Action>& actions,
                                           ActionWriter& writer) {
  using Chain = std::vector<const Action*>;
  std::vector<Chain> chains;
  std::map<std::string, size_t> chain_of;
  std::vector<const Action*> creations;
  for (const Action& a : actions) {
    if (std::holds_alternative<CreatePod>(a.change)) {
      creations.push_back(&a);
      continue;
    }
    const auto [it, fresh] = chain_of.emplace(a.chain, chains.size());
    if (fresh) {
      chains.emplace_back();
    }
    chains[it->second].push_back(&a);
  }
  std::vector<const Chain*> decisions;
  std::vector<const Chain*> mirrors;
  for (const auto& chain : chains) {
    const bool mirror_only = std::all_of(chain.begin(), chain.end(), [](const Action* a) {
      return a->on_failure == FailureEffect::kSync;
    });
    (mirror_only ? mirrors : decisions).push_back(&chain);
  }
  std::mutex mu;
  std::vector<ActionFailure> failures;
  const auto run_chain = [&](const Chain& chain) {
    for (const Action* a : chain) {
      if (auto error = writer.write(*a)) {
        std::lock_guard lock(mu);
        failures.push_back({a, to_string(a->change) + ": " + *error});
        if (a->guards_rest) {
          break;
        }
        continue;
      }
      writer.succeeded(*a);
    }
  };
  run_parallel(decisions.size(), kMaxConcurrentWrites, [&](size_t i) { run_chain(*decisions[i]); });
  const bool objects_failed = std::any_of(failures.begin(), failures.end(), [](const auto& f) {
    return f.action->on_failure == FailureEffect::kApply;
  });
  for (size_t next = 0, batch = 1; !objects_failed && next < creations.size();
       batch = std::min(batch * 2, kMaxConcurrentCreates)) {
    const size_t end = std::min(creations.size(), next + batch);
    const size_t failed_before = failures.size();
    run_parallel(end - next, batch, [&](size_t i) { run_chain({creations[next + i]}); });
    next = end;
    if (failures.size() > failed_before) {
      break;
    }
  }
  run_parallel(mirrors.size(), kMaxConcurrentWrites, [&](size_t i) { run_chain(*mirrors[i]); });
  return failures;
}

}  // namespace tightrope::op
