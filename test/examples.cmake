# The examples, run as users run them, and fsdpc used as users use it: installed
# and built against, and packaged. Included from test/CMakeLists.txt.
# An example passes on its exit code (each checks its own results) and on its
# output (test/consumer/run_checked.cmake checks both; PASS_REGULAR_EXPRESSION
# alone would ignore the exit code).
set(fsdpc_mpirun_2 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --allow-run-as-root ${MPIEXEC_PREFLAGS})
function(fsdpc_add_checked_test name expect)
  add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} "-DEXPECT=${expect}"
           -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run_checked.cmake -- ${ARGN})
endfunction()

fsdpc_add_checked_test("example: capture_custom" "cross_entropy" $<TARGET_FILE:capture_custom>)
set_tests_properties("example: capture_custom" PROPERTIES TIMEOUT 60)

# The training examples under mpirun with 2 ranks; the last line each prints
# comes after its own checks.
fsdpc_add_checked_test("example: train_mlp (mpirun -np 2)" "train_mlp: loss fell from [0-9.]+ to [0-9.]+"
  ${fsdpc_mpirun_2} $<TARGET_FILE:train_mlp> ${MPIEXEC_POSTFLAGS})
fsdpc_add_checked_test("example: train_gpt2 (mpirun -np 2)" "full_state_dict: [0-9]+ parameters, as the model's"
  ${fsdpc_mpirun_2} $<TARGET_FILE:train_gpt2> ${MPIEXEC_POSTFLAGS})
fsdpc_add_checked_test("example: train_and_resume (mpirun -np 2)" "equal bit for bit after resuming"
  ${fsdpc_mpirun_2} $<TARGET_FILE:train_and_resume> ${MPIEXEC_POSTFLAGS} ${CMAKE_CURRENT_BINARY_DIR}/train-and-resume)
set_tests_properties("example: train_mlp (mpirun -np 2)" "example: train_gpt2 (mpirun -np 2)"
  "example: train_and_resume (mpirun -np 2)"
  PROPERTIES TIMEOUT 120 LABELS mpi
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")

# cmake --install into the build tree, then examples/ built against it as a
# standalone project (find_package(fsdpc)) and run, one under mpirun.
add_test(NAME "install: examples against the installed package"
  COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/install-test
    -DGENERATOR=${CMAKE_GENERATOR} -DCXX=${CMAKE_CXX_COMPILER} -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    "-DMPIRUN=${fsdpc_mpirun_2}"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/install_examples.cmake)
set_tests_properties("install: examples against the installed package" PROPERTIES LABELS "install;mpi"
  TIMEOUT 900 ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")

# cpack -G DEB, and the package's Depends checked for the runtime packages of
# what the installed binary links. cpack first runs the build tree's
# `preinstall` target, a no-op once the tree is built, as it is when ctest runs.
find_program(FSDPC_DPKG_DEB dpkg-deb)
if(FSDPC_DPKG_DEB)
  set(fsdpc_deb_depends libdnnl libopenmpi libgomp libstdc libssl libllvm libpcre2 libsentencepiece libutf8proc)
  if(FSDPC_MIMALLOC AND FSDPC_MIMALLOC_LIB)
    list(APPEND fsdpc_deb_depends libmimalloc)
  endif()
  string(REPLACE ";" "," fsdpc_deb_depends "${fsdpc_deb_depends}")
  add_test(NAME "install: cpack -G DEB"
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/package-test
      -DDEPENDS=${fsdpc_deb_depends} -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/deb_package.cmake)
  set_tests_properties("install: cpack -G DEB" PROPERTIES LABELS install TIMEOUT 900)
else()
  message(STATUS "fsdpc: no dpkg-deb, so no test of cpack -G DEB")
endif()
