// Slurm hostlist expressions ("n[1-3,7],gpu-0[08-10]") expanded to node names. Knows nothing
// of Kubernetes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tightrope::slurm {

// The names in `expression`, in order; nullopt when it does not parse (an unclosed bracket, a
// range that runs backwards) or names more than `limit` hosts.
std::optional<std::vector<std::string>> expand_hostlist(std::string_view expression,
                                                        size_t limit = 1000000);

}  // namespace tightrope::slurm
