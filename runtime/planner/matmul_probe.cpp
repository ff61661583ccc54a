// The matmul probe (fsdpc matmul-probe, hidden; advise runs it): the matmul shapes of
// `--hardware local`, timed on every rank of an mpirun world at once. A
// step's ranks run their matmuls together and share the host's memory
// bandwidth and caches; timed alone in advise's process, a 4x512 GPT-2's
// shapes priced its 2-rank steps 7-16% short. Kernels of one process share
// one oneDNN stream, so the ranks must be processes.
//
// Input (--traces): JSON lines, one trace per shape, each holding the one
// statement to time with its inputs as arguments (so a region's statements
// keep the names they read). Output (--out, rank 0): {"call": s, "seconds":
// [s, ...]} in the input's order, each the slowest rank's median seconds of
// one kernel call, and `call` an 8x8x8 matmul's, timed the same way. Every
// rank runs the same number of calls: the count comes from the slowest
// rank's warm-up call, agreed by an all-reduce.
#include "runtime/planner/matmul_probe.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "executors/comm/mpi_check.h"
#include "executors/comm/mpi_world.h"
#include "executors/cpu/cpu_executor.h"
#include "ir/error.h"
#include "ir/json.h"
#include "runtime/planner/planner.h"

namespace fsdpc {

namespace {

// The slowest rank's median seconds of one call of `s`'s kernel, all ranks
// calling it together, about `budget` seconds of calls (3 to 50).
double concurrent_call_seconds(const MatmulSample& s, double budget) {
  SampleCall call(s);
  const double warm = slowest_rank(call());
  const int calls = static_cast<int>(std::clamp(budget / std::max(warm, 1e-7), 3.0, 50.0));
  FSDPC_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  std::vector<double> times(static_cast<size_t>(calls));
  for (double& t : times) t = call();
  return slowest_rank(median(std::move(times)));
}

MatmulSample sample_of(const Trace& t, const std::string& where) {
  if (t.bsyms.size() != 1) fail(where, ": expected one statement, got ", t.bsyms.size());
  MatmulSample s;
  s.statement = t.bsyms[0];
  for (const Operand& o : s.statement.inputs) {
    auto it = std::find_if(t.args.begin(), t.args.end(), [&](const Proxy& a) { return a.name == o.name; });
    if (o.is_scalar() || it == t.args.end()) fail(where, ": input ", o.name, " is not an argument");
    s.inputs.push_back(it->type);
  }
  return s;
}

}  // namespace

std::string matmul_probe_input(const std::vector<MatmulSample>& samples) {
  std::string lines;
  for (const MatmulSample& s : samples) {
    Trace t;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const std::string& name = s.statement.inputs.at(i).name;
      if (std::any_of(t.args.begin(), t.args.end(), [&](const Proxy& a) { return a.name == name; })) continue;
      Proxy a;
      a.name = name;
      a.type = s.inputs[i];
      t.args.push_back(a);
    }
    t.bsyms.push_back(s.statement);
    std::vector<ReturnTree> outs;
    for (const Proxy& o : s.statement.outputs) outs.push_back(ReturnTree::leaf(o.name));
    t.returns = ReturnTree::tuple(std::move(outs));
    lines += trace_to_json(t, -1) + "\n";
  }
  return lines;
}

std::string matmul_probe(const std::string& traces) {
  mpi_init();
  std::ifstream in(traces);
  if (!in) fail("matmul-probe: cannot read ", traces);
  std::vector<MatmulSample> samples;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    const std::string where = traces + ":" + std::to_string(line_no);
    samples.push_back(sample_of(trace_from_json(line, where), where));
  }
  // The ranks share this host's cores, as in fsdpc train.
  set_cpu_ranks_per_host(mpi_ranks_on_host());
  nlohmann::json seconds = nlohmann::json::array();
  const double call = concurrent_call_seconds(square_matmul(8), 0.02);
  for (const MatmulSample& s : samples) seconds.push_back(concurrent_call_seconds(s, 0.05));
  return mpi_world_rank() == 0 ? nlohmann::json{{"call", call}, {"seconds", seconds}}.dump() + "\n" : "";
}

}  // namespace fsdpc
