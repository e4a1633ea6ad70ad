# The `fuzzers` target: configures and builds the clang fuzz tree (build/fuzz) when clang++ can
# link a libFuzzer target here (Debian: clang, libfuzzer-14-dev). MAPD_WITH_FUZZ: auto|on|off.
# scripts/build.sh builds it after the main tree (one build at a time: the machine has 2 cores);
# tests/fuzz runs the harnesses for a bounded time; scripts/fuzz.sh runs them by hand.
set(MAPD_WITH_FUZZ "auto" CACHE STRING "Build the libFuzzer harnesses in build/fuzz with clang: auto|on|off")
set_property(CACHE MAPD_WITH_FUZZ PROPERTY STRINGS auto on off)
set(MAPD_FUZZ_ENABLED OFF CACHE INTERNAL "the fuzzers target exists")
if(MAPD_FUZZ_BUILD OR MAPD_WITH_FUZZ STREQUAL "off")
  return()
endif()

find_program(MAPD_CLANGXX NAMES clang++ clang++-14 clang++-16 clang++-19)
set(_mapd_fuzz_ok OFF)
if(MAPD_CLANGXX)
  set(_probe_dir ${CMAKE_BINARY_DIR}/fuzz-probe)
  file(WRITE ${_probe_dir}/probe.cc
       "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
  execute_process(COMMAND ${MAPD_CLANGXX} -fsanitize=fuzzer,address,undefined ${_probe_dir}/probe.cc -o ${_probe_dir}/probe
                  RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_QUIET)
  if(_probe_rc EQUAL 0)
    set(_mapd_fuzz_ok ON)
  endif()
endif()
if(NOT _mapd_fuzz_ok)
  if(MAPD_WITH_FUZZ STREQUAL "on")
    message(FATAL_ERROR "MAPD_WITH_FUZZ=on but clang++ cannot link a libFuzzer target (install clang and libfuzzer-14-dev)")
  endif()
  message(STATUS "MAP: fuzz harnesses: OFF (no clang++ with libFuzzer)")
  return()
endif()

set(MAPD_FUZZ_ENABLED ON CACHE INTERNAL "the fuzzers target exists")
set(MAPD_FUZZ_JOBS 2 CACHE STRING "parallel compile jobs of the fuzz tree")
add_custom_target(fuzzers
  COMMAND ${CMAKE_COMMAND} -S ${CMAKE_SOURCE_DIR} -B ${CMAKE_BINARY_DIR}/fuzz -G ${CMAKE_GENERATOR}
          -DCMAKE_CXX_COMPILER=${MAPD_CLANGXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAPD_FUZZ_BUILD=ON
          -DMAPD_WITH_CUDA=off -DMAPD_WITH_TORCH=${MAPD_WITH_TORCH} -DMAPD_BUILD_TESTS=OFF -DMAPD_BUILD_BENCH=OFF
  COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR}/fuzz --target mapd_fuzzers -j ${MAPD_FUZZ_JOBS}
  USES_TERMINAL VERBATIM)
message(STATUS "MAP: fuzz harnesses: ON (${MAPD_CLANGXX}; cmake --build <build> --target fuzzers)")
