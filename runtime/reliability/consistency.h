// Launch consistency: before the first collective, every rank compares what
// it is about to run (options that change the math or the collectives, the
// model, its final traces, the data) with every other rank, so that ranks
// started with different options stop with one message naming the
// difference rather than mismatch collectives (a crash or a silently wrong
// run).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fsdpc {

// What one rank is about to run, as named values in a fixed order.
class LaunchFingerprint {
 public:
  // A short value, shown as it is when ranks differ ("zero3").
  void add(const std::string& name, const std::string& value);
  // A long text (a printed trace): compared by SHA-256; when ranks differ
  // the message names its first differing line.
  void add_text(const std::string& name, const std::string& text);
  // This rank could not get as far as the check (its error message): the
  // check then reports it for every rank and no rank goes on.
  void set_error(const std::string& message) { error_ = message; }

  struct Field {
    std::string name, value, text;  // value: the SHA-256 of text when text is set
  };
  const std::vector<Field>& fields() const { return fields_; }
  const std::optional<std::string>& error() const { return error_; }

 private:
  std::vector<Field> fields_;
  std::optional<std::string> error_;
};

// Collective over MPI_COMM_WORLD (mpi_init() first); every rank calls it
// with its own fingerprint. Returns "" when all ranks agree; otherwise the
// same message on every rank: the error of the lowest rank that had one
// ("rank 1: ..."), else the first field where some rank differs from rank 0
// ("ranks disagree on --strategy: rank 0 has zero3, rank 1 has zero2").
std::string launch_disagreement(const LaunchFingerprint& mine);

// "<bytes> bytes, sha256 <hex of the first and last MiB>": which file a rank
// reads, cheaply enough for a data set of any size. fsdpc::Error when it
// cannot be read.
std::string file_fingerprint(const std::string& path);

// Every rank calls it with the same message: rank 0 prints
// "fsdpc: error: <message>" once, and all ranks exit with `code` through
// MPI_Finalize (no MPI_Abort: they all know).
[[noreturn]] void exit_all_ranks(int code, const std::string& message);

}  // namespace fsdpc
