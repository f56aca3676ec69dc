# FRAGLAB_FUZZ (tools/fuzz.sh): every target of this build is instrumented for libFuzzer's coverage
# feedback and runs under AddressSanitizer + UBSan, so a bug in a reader the harnesses reach is
# found in the reader, not only in the harness. Only the harnesses link libFuzzer's main
# (tests/fuzz/CMakeLists.txt). FRAGLAB_FUZZ_COVERAGE instead builds for source-based coverage
# (tools/fuzz.sh coverage): no sanitizers, the harnesses only replay their corpus.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "FRAGLAB_FUZZ needs clang++ (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
endif()
option(FRAGLAB_FUZZ_COVERAGE "With FRAGLAB_FUZZ: build for llvm-cov instead of with the sanitizers" OFF)
if(FRAGLAB_FUZZ_COVERAGE)
  add_compile_options(-fprofile-instr-generate -fcoverage-mapping)
  add_link_options(-fprofile-instr-generate)
else()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
