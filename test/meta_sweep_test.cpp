// Every op of ir/ops.def through its meta function once: the inferred output
// types (shape, dtype, device, distribution, future) compared with what
// docs/ir.md gives for the op-sample table's inputs (test/op_samples.h).
#include <catch2/catch.hpp>

#include <vector>

#include "test/op_samples.h"

using namespace fsdpc;
using fsdpc::test::op_sample;
using fsdpc::test::OpSample;

TEST_CASE("every op in ops.def infers the output types docs/ir.md gives", "[meta]") {
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    if (op == OpId::Fusion) continue;
    const OpSample c = op_sample(op);
    INFO(op_name(op));
    std::vector<TensorType> got;
    REQUIRE_NOTHROW(got = infer_types(op, c.inputs, c.attrs));
    REQUIRE(got.size() == c.outputs.size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO("output " << k << ": got " << type_str(got[k]) << " " << dist_name(got[k].dist) << ", expected "
                     << type_str(c.outputs[k]) << " " << dist_name(c.outputs[k].dist));
      CHECK(got[k] == c.outputs[k]);
    }
  }
}
