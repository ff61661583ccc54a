# Install-time script (cmake/install.cmake runs it): installs the public
# headers, i.e. frontend/jit.h, frontend/trainer/trainer.h, tokenizer/tokenizer.h and the headers
# the examples include, and every header they include in turn, keeping
# their paths ("ir/trace.h") so user code includes them as the examples do.
# Found by following the quoted includes, so the list cannot go stale.
# In: FSDPC_SOURCE_DIR, FSDPC_HEADER_DESTINATION (relative to the prefix).
cmake_policy(VERSION 3.25)  # cmake_install.cmake sets none; IN_LIST needs one
file(GLOB examples RELATIVE ${FSDPC_SOURCE_DIR} ${FSDPC_SOURCE_DIR}/examples/*.cpp)
set(todo frontend/jit.h frontend/trainer/trainer.h tokenizer/tokenizer.h ${examples})
set(seen "")
set(headers "")
while(todo)
  list(POP_FRONT todo file)
  if(file IN_LIST seen)
    continue()
  endif()
  list(APPEND seen ${file})
  if(NOT file MATCHES "^examples/")
    list(APPEND headers ${file})
  endif()
  file(STRINGS ${FSDPC_SOURCE_DIR}/${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line ${includes})
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
    if(NOT EXISTS ${FSDPC_SOURCE_DIR}/${inc})
      message(FATAL_ERROR "${file} includes \"${inc}\", which is not a path from the source root")
    endif()
    list(APPEND todo ${inc})
  endforeach()
endwhile()
list(SORT headers)
foreach(header ${headers})
  get_filename_component(dir ${header} DIRECTORY)
  file(INSTALL ${FSDPC_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_PREFIX}/${FSDPC_HEADER_DESTINATION}/${dir})
endforeach()
