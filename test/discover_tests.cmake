# Registers each Catch2 case of one test executable as the CTest test
# "<prefix><case>", as Catch's catch_discover_tests does, and gives the cases
# tagged [mpi] (they launch mpirun) the CTest label mpi: Catch2 v2's module
# maps no tag to a label. Cases tagged [serial] (they time steps against a
# prediction) run alone: RUN_SERIAL, so no other test loads the cores
# meanwhile. Included by ctest through the file that
# fsdpc_discover_tests() (test/CMakeLists.txt) writes, with TEST_EXECUTABLE,
# TEST_PREFIX, TEST_WORKING_DIR and CTEST_FILE set; the list is cached in
# CTEST_FILE until the executable or this script changes.
#
# A case tagged [gpu] registers as a failing test instead: without a device
# it would return early and count as passed. GPU cases live in test/gpu/,
# whose main exits 77 (skipped) without one.

if(NOT EXISTS "${TEST_EXECUTABLE}")
  add_test("${TEST_PREFIX}NOT_BUILT" "${TEST_PREFIX}NOT_BUILT")
  return()
endif()

if(NOT EXISTS "${CTEST_FILE}" OR "${TEST_EXECUTABLE}" IS_NEWER_THAN "${CTEST_FILE}"
   OR "${CMAKE_CURRENT_LIST_FILE}" IS_NEWER_THAN "${CTEST_FILE}")
  string(ASCII 1 semicolon)
  string(ASCII 2 open)
  string(ASCII 3 close)
  # The cases a test spec selects. --list-test-names-only exits with their
  # count; anything else (a crash, an executable still being linked) leaves
  # `failed` set.
  function(fsdpc_list_cases spec out)
    execute_process(COMMAND "${TEST_EXECUTABLE}" ${spec} --list-test-names-only
                    OUTPUT_VARIABLE text ERROR_VARIABLE err RESULT_VARIABLE rc WORKING_DIRECTORY "${TEST_WORKING_DIR}")
    if(NOT rc MATCHES "^[0-9]+$")
      set(failed "${TEST_EXECUTABLE} ${spec} --list-test-names-only failed (${rc}): ${text}${err}" PARENT_SCOPE)
      return()
    endif()
    # ; [ ] would split or join CMake list items: held as control characters.
    string(REPLACE ";" "${semicolon}" text "${text}")
    string(REPLACE "[" "${open}" text "${text}")
    string(REPLACE "]" "${close}" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(cases)
    foreach(line IN LISTS lines)
      if(NOT line STREQUAL "")
        list(APPEND cases "${line}")
      endif()
    endforeach()
    set(${out} "${cases}" PARENT_SCOPE)
  endfunction()

  set(failed "")
  fsdpc_list_cases("" all_cases)
  fsdpc_list_cases("[mpi]" mpi_cases)
  fsdpc_list_cases("[gpu]" gpu_cases)
  fsdpc_list_cases("[serial]" serial_cases)
  if(failed)
    # Not cached: the next ctest run tries again.
    string(REPLACE "'" "" failed "${failed}")
    add_test("${TEST_PREFIX}NOT_LISTED" /bin/sh -c "echo '${failed}'; exit 1")
    return()
  endif()
  set(script "")
  foreach(held IN LISTS all_cases)
    string(REPLACE "${semicolon}" ";" case "${held}")
    string(REPLACE "${open}" "[" case "${case}")
    string(REPLACE "${close}" "]" case "${case}")
    set(arg "${case}")
    foreach(char , [ ])  # Catch reads these as test-spec syntax
      string(REPLACE "${char}" "\\${char}" arg "${arg}")
    endforeach()
    set(name "${TEST_PREFIX}${case}")
    list(FIND gpu_cases "${held}" gpu)
    if(NOT gpu EQUAL -1)
      string(APPEND script
        "add_test([==[${name}]==] /bin/sh -c [==[echo '[gpu] case outside test/gpu/: it would pass without a device; move it there (its main skips with exit 77)'; exit 1]==])\n")
      continue()
    endif()
    string(APPEND script "add_test([==[${name}]==] [==[${TEST_EXECUTABLE}]==] [==[${arg}]==])\n")
    set(labels "")
    list(FIND mpi_cases "${held}" mpi)
    if(NOT mpi EQUAL -1)
      set(labels " LABELS mpi")
    endif()
    list(FIND serial_cases "${held}" serial)
    if(NOT serial EQUAL -1)
      string(APPEND labels " RUN_SERIAL TRUE")
    endif()
    string(APPEND script
      "set_tests_properties([==[${name}]==] PROPERTIES WORKING_DIRECTORY [==[${TEST_WORKING_DIR}]==]${labels})\n")
  endforeach()
  # Written aside and renamed: two ctest runs may refresh the list at once.
  string(RANDOM LENGTH 8 tag)
  file(WRITE "${CTEST_FILE}.${tag}" "${script}")
  file(RENAME "${CTEST_FILE}.${tag}" "${CTEST_FILE}")
endif()
include("${CTEST_FILE}")
