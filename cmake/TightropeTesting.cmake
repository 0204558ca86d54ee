# Test helpers. Every test carries exactly one of the labels below, so that
#   ctest -L unit          runs without a test bed,
#   ctest -L integration   runs against the local test bed (Kubernetes + Slurm on loopback),
#   ctest -L e2e           runs against a bed with a real node (kubelet + containerd).
# Tests labelled integration or e2e require the CTest fixture "testbed", which brings one bed up
# for the whole run and takes it down at the end (see test/CMakeLists.txt).
include(GoogleTest)

set(TIGHTROPE_TEST_LABELS unit integration e2e)

# tightrope_add_gtest(NAME <target> LABEL <unit|integration|e2e> SOURCES ... [LIBS ...])
function(tightrope_add_gtest)
  cmake_parse_arguments(T "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  if(NOT T_LABEL IN_LIST TIGHTROPE_TEST_LABELS)
    message(FATAL_ERROR "test ${T_NAME}: LABEL must be one of ${TIGHTROPE_TEST_LABELS}")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gmock GTest::gtest)
  if(T_LABEL STREQUAL "unit")
    target_link_libraries(${T_NAME} PRIVATE GTest::gtest_main)
    set_property(GLOBAL APPEND PROPERTY TIGHTROPE_UNIT_TESTS ${T_NAME})
    gtest_discover_tests(${T_NAME} PROPERTIES LABELS unit TIMEOUT 120)
  else()
    # One CTest entry per binary: the cases of a binary share the bed and run in order.
    add_test(NAME ${T_NAME} COMMAND ${T_NAME})
    set_tests_properties(${T_NAME} PROPERTIES LABELS ${T_LABEL} FIXTURES_REQUIRED testbed
                         TIMEOUT 900 ENVIRONMENT "${TIGHTROPE_TESTBED_ENV}")
  endif()
endfunction()
