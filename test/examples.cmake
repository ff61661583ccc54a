# The examples, run as users run them. Included from test/CMakeLists.txt.
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
set_tests_properties("example: train_mlp (mpirun -np 2)" "example: train_gpt2 (mpirun -np 2)"
  PROPERTIES TIMEOUT 120 LABELS mpi
  ENVIRONMENT "OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")
