# run(COMMAND...): runs a command in a -P script; its stdout and stderr end up
# in `out` (the caller's scope), and a non-zero exit fails the script with both.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "${out}\nexited with ${rc}: ${ARGN}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
