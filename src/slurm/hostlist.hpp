// Slurm hostlist expressions ("n[1-3,7],gpu-0[08-10]"): expanded to node names, and written from
// them. Knows nothing of Kubernetes.
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

// One expression naming `names` as Slurm writes one: names that differ only in a trailing number
// of the same width share a bracket ("slinky-[0-3,7],gpu-1"); prefixes in the order first met,
// numbers ascending, duplicates once. Expanding it gives the names back as a set.
std::string compress_hostlist(const std::vector<std::string>& names);

}  // namespace tightrope::slurm
