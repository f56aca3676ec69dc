# ctest's install.ConsumerBuildsAgainstTheInstalledPackage: installs the build tree into a fresh
# prefix, builds tests/install/consumer against it with find_package(fraglab), runs it on a sample
# trace, and expects the policies the installed command lists and the peak reserved bytes
# EXPECTED_PEAK (the figure `fraglab replay TRACE -p SPEC --json -` gives, recorded in
# tests/golden/expected/shipped).
# Arguments (-D): BUILD_DIR, SOURCE_DIR, WORK_DIR, BUILD_TYPE, CXX_FLAGS, TRACE, SPEC, EXPECTED_PEAK.
file(REMOVE_RECURSE "${WORK_DIR}")

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/build"
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}" "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
     "-DCMAKE_EXE_LINKER_FLAGS=${CXX_FLAGS}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/prefix/bin/fraglab" policies)
string(REGEX MATCHALL "(^|\n)[a-z_0-9]+" names "${step_output}")
string(REPLACE "\n" "" names "${names}")
list(JOIN names " " names)
set(expected "policies: ${names}\npeak_reserved_bytes ${EXPECTED_PEAK}\n")
step("${WORK_DIR}/build/consumer" "${TRACE}" "${SPEC}")
if(NOT step_output STREQUAL expected)
  message(FATAL_ERROR "consumer printed:\n${step_output}\nexpected:\n${expected}")
endif()
