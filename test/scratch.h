// A scratch folder per test process, for the files a test writes and the
// output of the commands it runs (run_cli.h): $TMPDIR/fsdpc-<test>-<pid>,
// <test> being the test executable's name, which is its source file's.
// CTest runs the cases of one file in parallel as separate processes, so
// each has its own folder. It is left behind, for a failed test's files to
// be read.
#pragma once

#include <filesystem>
#include <string>

namespace fsdpc::testing {

// The folder, created (again, if a test removed it).
std::filesystem::path scratch_dir();

// `name` inside the folder (the folder is created, `name` is not).
std::filesystem::path scratch(const std::string& name);

// `name` inside the folder, holding `content` byte for byte.
std::filesystem::path write_scratch(const std::string& name, const std::string& content);

}  // namespace fsdpc::testing
