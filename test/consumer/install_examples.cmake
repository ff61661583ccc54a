# The install test (test/examples.cmake): fsdpc used as another project uses
# it. Installs BUILD_DIR into WORK_DIR/prefix, builds SOURCE_DIR/examples as a
# standalone project with find_package(fsdpc) against that prefix (never the
# source tree), runs three of the examples, builds one with fsdpc.pc's flags
# alone, and runs the installed CLI.
# In: BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR CXX [LAUNCHER] MPIRUN (a list)
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)
function(run_checked expect)
  run(${CMAKE_COMMAND} -DEXPECT=${expect} -P ${CMAKE_CURRENT_LIST_DIR}/run_checked.cmake -- ${ARGN})
  message("${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/examples)
file(REMOVE_RECURSE ${WORK_DIR})
# --strip: the archive without debug sections links the examples faster.
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --strip)
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
list(SORT installed)
list(JOIN installed "\n  " listing)
message("installed into ${prefix}:\n  ${listing}")
if(EXISTS ${prefix}/include/fsdpc/passes/fsdp.h)
  message(FATAL_ERROR "a header outside the API's include closure was installed")
endif()
# The installed headers are the API alone: none of them includes an MPI,
# CUDA, cuBLAS, NCCL, oneDNN or LLVM header, so a program built against
# them needs only the library to link.
file(GLOB_RECURSE headers ${prefix}/include/fsdpc/*.h)
foreach(header ${headers})
  file(STRINGS ${header} leaks REGEX "^[ \t]*#[ \t]*include[ \t]*<(mpi|cuda|cublas|nccl|dnnl|llvm)[^>]*>")
  if(leaks)
    message(FATAL_ERROR "the installed ${header} includes ${leaks}")
  endif()
endforeach()

# No build type: no optimisation or debug info, the quickest build.
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples -B ${build} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    ${launcher} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=)
message("${out}")
run(${CMAKE_COMMAND} --build ${build})
if(EXISTS ${build}/build.ninja)
  file(READ ${build}/build.ninja ninja)
  string(FIND "${ninja}" "-I${SOURCE_DIR} " from_source)
  if(NOT from_source EQUAL -1)
    message(FATAL_ERROR "the standalone examples include fsdpc's source tree")
  endif()
endif()

run_checked("cross_entropy" ${build}/capture_custom)
run_checked("full_state_dict: [0-9]+ parameters, as the model's" ${MPIRUN} ${build}/train_gpt2)
# The library's Trainer: a checkpoint written, resumed, and the resumed run
# equal to one that never stopped.
run_checked("equal bit for bit after resuming" ${MPIRUN} ${build}/train_and_resume ${WORK_DIR}/train-and-resume)
run_checked("Subcommands:" ${prefix}/bin/fsdpc --help)

# pkg-config finds the package through its relocatable .pc file.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  file(GLOB_RECURSE pc ${prefix}/fsdpc.pc)
  get_filename_component(pc_dir "${pc}" DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  run(${PKG_CONFIG} --cflags --libs fsdpc)
  message("pkg-config --cflags --libs fsdpc: ${out}")
  if(NOT out MATCHES "-I[^ ]*/include/fsdpc " OR NOT out MATCHES "-lfsdpc ")
    message(FATAL_ERROR "fsdpc.pc gives no -I<prefix>/include/fsdpc or -lfsdpc")
  endif()
  # ... and its flags alone build an example.
  separate_arguments(flags UNIX_COMMAND "${out}")
  run(${LAUNCHER} ${CXX} -std=c++20 ${SOURCE_DIR}/examples/capture_custom.cpp ${flags}
      -o ${WORK_DIR}/capture_custom_pkg_config)
  run_checked("cross_entropy" ${WORK_DIR}/capture_custom_pkg_config)
endif()
