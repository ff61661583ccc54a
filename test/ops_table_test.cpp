// The traits column of ir/ops.def: which ops carry each flag. These sets were
// lists of their own in the step simulator, the profiler, split and the
// verifier; a change to one is a change to how those price, save or check.
#include <catch2/catch.hpp>

#include <set>

#include "ir/ops.h"

using namespace fsdpc;

namespace {

std::set<OpId> with(OpTrait t) {
  std::set<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (op_info(static_cast<OpId>(i)).has(t)) ops.insert(static_cast<OpId>(i));
  return ops;
}

}  // namespace

TEST_CASE("op traits: the ops that carry each flag", "[ops]") {
  CHECK(with(OpTrait::issue) == std::set<OpId>{OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce,
                                               OpId::Broadcast, OpId::Send, OpId::Recv});
  CHECK(with(OpTrait::p2p) == std::set<OpId>{OpId::Send, OpId::Recv});
  CHECK(with(OpTrait::reduces) == std::set<OpId>{OpId::ReduceScatter, OpId::AllReduce});
  CHECK(with(OpTrait::cheap) == std::set<OpId>{OpId::BroadcastInDim, OpId::Reshape, OpId::Permute, OpId::Slice,
                                               OpId::ConvertElementType, OpId::Full, OpId::Iota,
                                               OpId::AxisIndex});
  CHECK(with(OpTrait::takes_sharded) ==
        std::set<OpId>{OpId::Synchronize, OpId::AllGather, OpId::ReduceScatter, OpId::AllReduce, OpId::Broadcast,
                       OpId::Wait, OpId::Pack, OpId::Unpack, OpId::Del, OpId::ConvertElementType,
                       OpId::Quantize});  // a shard quantizes where it lies, before its gather
}

TEST_CASE("op traits: has() asks for every flag given", "[ops]") {
  CHECK(op_info(OpId::Send).has(OpTrait::issue | OpTrait::p2p));
  CHECK_FALSE(op_info(OpId::AllGather).has(OpTrait::issue | OpTrait::p2p));
  CHECK(op_info(OpId::AllGather).has(OpTrait::issue | OpTrait::takes_sharded));
  CHECK_FALSE(op_info(OpId::Neg).has(OpTrait::none));
  CHECK_FALSE(op_info(OpId::AllGather).has(OpTrait::none));
}
