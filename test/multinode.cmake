# Beyond one machine (issue 17): jobs across two nodes emulated on this host
# (tools/netns_cluster.sh; network namespaces need root, else the tests are
# reported skipped, exit 77), and the MPI collectives in both progress modes
# (FSDPC_MPI_PROGRESS, executors/comm/mpi_world.h).
function(fsdpc_add_multinode_test name progress slots np)
  add_test(NAME "multinode: ${name}"
    COMMAND bash ${PROJECT_SOURCE_DIR}/test/multinode_test.sh ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:fsdpc>
            ${progress} ${slots} ${np} ${ARGN})
  set_tests_properties("multinode: ${name}" PROPERTIES
    LABELS "multinode;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
fsdpc_add_multinode_test("zero3, 2 nodes x 1 rank, progress thread" thread 1 2 --strategy zero3)
fsdpc_add_multinode_test("zero3, 2 nodes x 1 rank, progress poll" poll 1 2 --strategy zero3)
fsdpc_add_multinode_test("zero3 unit buckets, 2 nodes x 1 rank, progress auto" auto 1 2 --strategy zero3 --bucketing unit)
fsdpc_add_multinode_test("hybrid 2x2, 2 nodes x 2 ranks, progress thread" thread 2 4
                         --strategy hybrid --mesh 2,2 --bucketing unit)
# Slow links' remedies (issue 31): DiLoCo's replicas one per node, meeting
# every 2 steps over an int8 exchange; zero3 gathering int8 codes.
fsdpc_add_multinode_test("DiLoCo H=2 int8 exchange, 2 nodes x 1 rank, progress auto" auto 1 2
                         --strategy hybrid --mesh 2,1 --outer-steps 2 --outer-dtype int8)
fsdpc_add_multinode_test("zero3 int8 gathers unit buckets, 2 nodes x 1 rank, progress auto" auto 1 2
                         --strategy zero3 --bucketing unit --gather-dtype int8)

# The collectives test in each progress mode, on one host.
foreach(progress poll thread)
  add_test(NAME "mpi_collectives_test: np 2, progress ${progress}"
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe --allow-run-as-root
            -x FSDPC_MPI_PROGRESS ${MPIEXEC_PREFLAGS} $<TARGET_FILE:mpi_collectives_test> ${MPIEXEC_POSTFLAGS}
            "~[mesh2x2]")
  set_tests_properties("mpi_collectives_test: np 2, progress ${progress}" PROPERTIES
    LABELS mpi TIMEOUT 120
    ENVIRONMENT "FSDPC_MPI_PROGRESS=${progress};OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_mpi_yield_when_idle=1")
endforeach()

# The collectives test across the two nodes, over TCP.
function(fsdpc_add_multinode_collectives name slots np)
  add_test(NAME "multinode: mpi_collectives_test ${name}"
    COMMAND bash ${PROJECT_SOURCE_DIR}/tools/netns_cluster.sh --slots ${slots} -- ${MPIEXEC_EXECUTABLE}
            ${MPIEXEC_NUMPROC_FLAG} ${np} --allow-run-as-root $<TARGET_FILE:mpi_collectives_test> ${ARGN})
  set_tests_properties("multinode: mpi_collectives_test ${name}" PROPERTIES
    LABELS "multinode;mpi" SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
fsdpc_add_multinode_collectives("np 2, 2 nodes x 1 rank" 1 2 "~[mesh2x2]")
fsdpc_add_multinode_collectives("np 4, 2x2 mesh, 2 nodes x 2 ranks" 2 4 "[mesh2x2]")

# The watchdog with the progress thread running: a stopped rank still ends
# the job at --timeout with exit 4 and the collective named (the MPI_Abort
# path, with the thread alive), as watchdog_test checks in poll mode.
add_test(NAME "watchdog_test: a stopped rank, progress thread"
  COMMAND $<TARGET_FILE:watchdog_test> --warn NoTests "a stopped rank ends the job at --timeout*")
set_tests_properties("watchdog_test: a stopped rank, progress thread" PROPERTIES
  LABELS "mpi;watchdog" TIMEOUT 180 ENVIRONMENT "FSDPC_MPI_PROGRESS=thread")
