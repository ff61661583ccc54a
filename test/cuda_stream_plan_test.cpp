// The stream plan of CUDA execution traces (executors/cuda/stream_plan.h):
// which stream each statement runs on, and that no buffer a collective still
// uses is freed before the compute stream has waited for it. Host logic only.
#include <catch2/catch.hpp>

#include "executors/claim.h"
#include "executors/cuda/stream_plan.h"
#include "ir/parser.h"
#include "ir/printer.h"

using namespace fsdpc;

namespace {

// A zero3-style forward where `del` frees the gathered weight's source and
// the reduce_scatter's input before their waits, as a hand-written or
// differently scheduled trace might.
const char* kTrace = R"(# Constructed by del
def forward(x, w, g):
  # x: "cuda:0 f32[4, 4]"
  # w: "cuda:0 f32[2, 4]" fully_sharded
  # g: "cuda:0 f32[4, 4]"
  ft0 = all_gather(w, group=dp, size=2, dim=0)  # ft0: "FUTURE cuda:0 f32[4, 4]" replicated
  t1 = tanh(x)  # t1: "cuda:0 f32[4, 4]"
  ft2 = reduce_scatter(g, group=dp, size=2, dim=0, op=sum)  # ft2: "FUTURE cuda:0 f32[2, 4]" fully_sharded
  del w, g
  t3 = wait(ft0)  # t3: "cuda:0 f32[4, 4]" replicated
  t4 = matmul(t1, t3)  # t4: "cuda:0 f32[4, 4]"
  del t1, t3
  t5 = wait(ft2)  # t5: "cuda:0 f32[2, 4]" fully_sharded
  return (t4, t5)
)";

std::vector<std::string> lines_of(const Trace& t) {
  std::vector<std::string> out;
  for (const BoundSymbol& b : t.bsyms) {
    std::string s = b.op == OpId::Del ? "del" : symbol_name(b.op, b.executor);
    for (const Operand& o : b.inputs) s += " " + o.name;
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("collectives run on the comm stream and waits on compute", "[cuda][streams]") {
  Trace planned = execution_trace(parse_trace(kTrace), Target::cuda);
  int comm = 0, waits = 0;
  for (const BoundSymbol& b : planned.bsyms) {
    if (b.op == OpId::Del) {
      CHECK(cuda::stream_of(b) == cuda::StreamKind::host);
    } else if (b.op == OpId::AllGather || b.op == OpId::ReduceScatter) {
      CHECK(b.executor == "nccl");
      CHECK(b.attrs.get_str("stream") == "comm");
      CHECK(cuda::stream_of(b) == cuda::StreamKind::comm);
      ++comm;
    } else if (b.op == OpId::Wait) {
      CHECK(b.executor == "nccl");
      CHECK(b.attrs.get_str("stream") == "compute");
      CHECK(cuda::stream_of(b) == cuda::StreamKind::compute);
      ++waits;
    } else {
      CHECK(b.executor == "cuda");
      CHECK(cuda::stream_of(b) == cuda::StreamKind::compute);
    }
  }
  CHECK(comm == 2);
  CHECK(waits == 2);
  // The attributes print, so golden execution traces pin the structure.
  CHECK(print_trace(planned).find("nccl_all_gather(w, group=dp, size=2, dim=0, stream=comm)") != std::string::npos);
}

TEST_CASE("a collective's buffers are freed only after its wait", "[cuda][streams]") {
  Trace planned = execution_trace(parse_trace(kTrace), Target::cuda);
  const std::vector<std::string> want = {
      "nccl_all_gather w",
      "cuda_tanh x",
      "nccl_reduce_scatter g",
      "nccl_wait ft0",
      "del w",  // moved from before the wait: the all_gather reads w until then
      "cuda_matmul t1 t3",
      "del t1 t3",
      "nccl_wait ft2",
      "del g",  // the reduce_scatter reads g until its wait
  };
  CHECK(lines_of(planned) == want);
}

TEST_CASE("a trace whose dels already follow the waits is left in order", "[cuda][streams]") {
  std::string text = kTrace;
  text.replace(text.find("  del w, g\n"), 11, "");
  text.replace(text.find("  return"), 0, "  del w, g\n");
  Trace claimed = claim(parse_trace(text), executors_for(Target::cuda));
  Trace planned = cuda::plan_streams(claimed);
  REQUIRE(planned.bsyms.size() == claimed.bsyms.size());
  for (size_t i = 0; i < planned.bsyms.size(); ++i) {
    CHECK(planned.bsyms[i].op == claimed.bsyms[i].op);
    CHECK(planned.bsyms[i].inputs == claimed.bsyms[i].inputs);
  }
}

TEST_CASE("a buffer two collectives read is freed after the later of their waits", "[cuda][streams]") {
  const char* text = R"(# Constructed by del
def forward(g):
  # g: "cuda:0 f32[4, 4]"
  ft0 = all_reduce(g, group=dp, size=2, op=sum)  # ft0: "FUTURE cuda:0 f32[4, 4]" replicated
  ft1 = reduce_scatter(g, group=dp, size=2, dim=0, op=sum)  # ft1: "FUTURE cuda:0 f32[2, 4]" fully_sharded
  del g
  t2 = wait(ft1)  # t2: "cuda:0 f32[2, 4]" fully_sharded
  t3 = wait(ft0)  # t3: "cuda:0 f32[4, 4]" replicated
  return (t2, t3)
)";
  const std::vector<std::string> want = {"nccl_all_reduce g", "nccl_reduce_scatter g", "nccl_wait ft1",
                                         "nccl_wait ft0", "del g"};
  CHECK(lines_of(execution_trace(parse_trace(text), Target::cuda)) == want);
}
