# The Quick start's main job (tools/main_job.sh) runs in CI on the built tree,
# with its failure path: what a new user runs first is tested first.
add_test(NAME "quickstart: main job"
  COMMAND bash ${PROJECT_SOURCE_DIR}/test/quickstart_test.sh ${PROJECT_BINARY_DIR})
set_tests_properties("quickstart: main job" PROPERTIES LABELS "mpi;quickstart" TIMEOUT 300)
