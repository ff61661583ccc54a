// Commands run as a user runs them, through the shell: the built fsdpc
// (FSDPC_BIN), alone or under mpirun (FSDPC_MPIEXEC), or any command line.
// Their output goes to files in the scratch folder (scratch.h), read back
// and removed; each run has its own files, so runs on several threads at
// once do not mix. Command lines are trusted test strings: quote paths in
// them with '...'.
#pragma once

#include <string>
#include <vector>

namespace fsdpc::testing {

struct Run {
  int code = -1;         // the exit status; 128 + its number when a signal ended the shell; -1 if none ran
  std::string out, err;  // standard output and error (both in out under RunOptions::merge)
};

// Every member has an initializer, so that {.merge = true} leaves the rest
// as they are without -Wmissing-field-initializers.
struct RunOptions {
  std::string env = {};         // "NAME=value ..." set for the command
  std::string stdin_file = {};  // its standard input; /dev/null when empty
  bool merge = false;           // standard error into out (2>&1), interleaved as written
  int timeout_s = 0;            // > 0: under timeout(1), which ends it with SIGTERM and exits 124
};

// `command`: `env` and `timeout_s` apply to its first simple command, the
// redirections to its last.
Run run_shell(const std::string& command, const RunOptions& options = {});

// `fsdpc <args>`.
Run run_fsdpc(const std::string& args, const RunOptions& options = {});

// `mpirun -n <np> fsdpc <args>`, launched as mpirun_command says.
Run run_fsdpc_mpi(int np, const std::string& args, const RunOptions& options = {});

// The pieces, for the command lines a test builds itself: "'FSDPC_BIN' <args>".
std::string fsdpc_command(const std::string& args);

// "FSDPC_MPIEXEC -n <np> --oversubscribe --allow-run-as-root": more ranks
// than cores may run, and root may run them. np 0 leaves out -n (mpirun's
// MPMD form gives -np per program).
std::string mpirun_command(int np = 0);

// The "loss" of each line of a `fsdpc train --log-json` file, in order.
std::vector<double> logged_losses(const std::string& path);

}  // namespace fsdpc::testing
