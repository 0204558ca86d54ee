#include "base/memory.hpp"

#include <cstdlib>  // names the C library: __GLIBC__ is defined from here on, or never

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tightrope {

void return_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace tightrope
