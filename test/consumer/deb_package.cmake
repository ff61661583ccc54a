# The package test (test/examples.cmake): cpack -G DEB on BUILD_DIR into
# WORK_DIR; the .deb must hold the CLI, the library, the headers and the
# package files, and its Depends must name the runtime packages of what the
# installed binary links (DEPENDS: comma-separated name prefixes).
# In: BUILD_DIR WORK_DIR DEPENDS
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

file(REMOVE_RECURSE ${WORK_DIR})
get_filename_component(cmake_bin ${CMAKE_COMMAND} DIRECTORY)
run(${cmake_bin}/cpack -G DEB --config ${BUILD_DIR}/CPackConfig.cmake -B ${WORK_DIR})
message("${out}")
file(GLOB deb ${WORK_DIR}/*.deb)
list(LENGTH deb n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one .deb in ${WORK_DIR}, found: ${deb}")
endif()

run(dpkg-deb -f ${deb} Package Version Depends Recommends)
message("${out}")
run(dpkg-deb -f ${deb} Depends)
string(REPLACE "," ";" expected "${DEPENDS}")
foreach(package ${expected})
  if(NOT out MATCHES "(^|, )${package}[^ ,]*( |,|$)")
    message(FATAL_ERROR "Depends lacks ${package}*: ${out}")
  endif()
endforeach()

run(dpkg-deb -c ${deb})
foreach(file usr/bin/fsdpc /libfsdpc.a usr/include/fsdpc/frontend/jit.h /fsdpcConfig.cmake
             /fsdpcTargets.cmake /fsdpc.pc)
  string(FIND "${out}" "${file}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the package holds no ${file}:\n${out}")
  endif()
endforeach()
