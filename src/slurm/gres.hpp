// Slurm's GRES strings. Text only, without the client: tightrope-health, which carries nothing
// of the operator, counts a node's GPUs with it too.
#pragma once

#include <cstdint>
#include <string_view>

namespace tightrope::slurm {

// GPUs in a node's gres or gres_used string ("gpu:h100:4(S:0-1),gpu:2(IDX:0-1),shard:8"): the
// sum of every gpu entry's count. Unreadable entries count nothing.
int64_t gpu_count(std::string_view gres);

}  // namespace tightrope::slurm
