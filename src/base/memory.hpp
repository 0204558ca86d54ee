// Giving the memory of a large answer back to the system once it is read. glibc keeps what a
// thread freed in that thread's arena for the next allocation; after a page of hundreds of pods
// or a Slurm node list of megabytes, that is the process's resident size for good unless it is
// returned.
#pragma once

namespace tightrope {

// Returns the free pages of every malloc arena to the system (glibc's malloc_trim); nothing
// elsewhere. Costs a walk of the free lists: for after a large answer, not for every request.
void return_free_memory();

}  // namespace tightrope
