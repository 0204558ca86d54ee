# Compiler cache: a fresh clone in another folder (CI's) reuses the objects of an earlier build of
# the same sources. The cache lives outside the repository, beside the test bed's tools; paths under
# the source tree are hashed relative to it so that the clone's folder does not matter.
find_program(TIGHTROPE_CCACHE ccache)
if(TIGHTROPE_CCACHE AND NOT DEFINED CMAKE_CXX_COMPILER_LAUNCHER)
  if(DEFINED ENV{TIGHTROPE_CACHE})
    set(_tightrope_ccache_dir "$ENV{TIGHTROPE_CACHE}/ccache")
  else()
    set(_tightrope_ccache_dir "$ENV{HOME}/.cache/tightrope/ccache")
  endif()
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env CCACHE_DIR=${_tightrope_ccache_dir} CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}
      CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=12G ${TIGHTROPE_CCACHE})
endif()
