// The tp plan and layout (passes/tensor_parallel.h): which parameters tensor
// parallelism cuts, and where a tp rank's part sits in the full tensor.
// Init, checkpoints and the tests cut and reassemble by these; the tp pass
// (tensor_parallel.cpp) splits by the same plan.
#include <algorithm>

#include "ir/error.h"
#include "passes/tensor_parallel.h"

namespace fsdpc {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::optional<TensorParallelSplit> tensor_parallel_split(const std::string& path, const Shape& full, int tp) {
  // Vocabulary rows; a vocabulary T does not divide (GPT-2's 50257) is
  // padded, as Megatron does, rather than left whole on every rank (GPT-2
  // small's wte is 30% of the model). Only a vocabulary may be padded: a
  // padded head or feature would change what the model computes.
  for (const char* tail : {"wte.weight", "embed_tokens.weight", "lm_head.weight"})
    if (path == tail || ends_with(path, std::string(".") + tail)) {
      if (tp > 1 && full.size() == 2) return TensorParallelSplit{path, 0, 1, full[0] % tp != 0};
      return std::nullopt;
    }
  struct Row {
    const char* tail;
    int64_t dim, blocks;
  };
  // GPT-2's Conv1D weights are [in, out]; Llama's Linear weights [out, in].
  static const Row kPlan[] = {
      {"attn.c_attn.weight", 1, 3}, {"attn.c_attn.bias", 0, 3},   // column: q|k|v heads
      {"attn.c_proj.weight", 0, 1},                                // row
      {"mlp.c_fc.weight", 1, 1},    {"mlp.c_fc.bias", 0, 1},      // column
      {"mlp.c_proj.weight", 0, 1},                                 // row
      {"self_attn.q_proj.weight", 0, 1}, {"self_attn.q_proj.bias", 0, 1},
      {"self_attn.k_proj.weight", 0, 1}, {"self_attn.k_proj.bias", 0, 1},
      {"self_attn.v_proj.weight", 0, 1}, {"self_attn.v_proj.bias", 0, 1},
      {"self_attn.o_proj.weight", 1, 1},                           // row
      {"mlp.gate_proj.weight", 0, 1},    {"mlp.gate_proj.bias", 0, 1},
      {"mlp.up_proj.weight", 0, 1},      {"mlp.up_proj.bias", 0, 1},
      {"mlp.down_proj.weight", 1, 1},                              // row
  };
  for (const Row& r : kPlan)
    if (ends_with(path, std::string(".") + r.tail)) return TensorParallelSplit{path, r.dim, r.blocks};
  return std::nullopt;
}

std::vector<TensorParallelSplit> tensor_parallel_splits(const Trace& captured, int tp) {
  std::vector<TensorParallelSplit> out;
  for (const Proxy& p : captured.args)
    if (p.is_param())
      if (auto s = tensor_parallel_split(p.param_path, p.type.shape, tp)) out.push_back(*s);
  return out;
}

namespace {

// The split dim's size n and the entries of each part on it: n / T, or
// ceil(n / T) when padded. Fails for a cut the shape cannot take.
int64_t part_extent(const TensorParallelSplit& split, const Shape& full, int tp, int rank) {
  if (split.dim < 0 || split.dim >= static_cast<int64_t>(full.size()))
    fail("tensor_parallel_part: ", split.param_path, " has no dim ", split.dim);
  const int64_t n = full[split.dim];
  const bool cuts = split.pad ? split.blocks == 1 && n > 0 : n % (split.blocks * tp) == 0;
  if (tp < 1 || rank < 0 || rank >= tp || split.blocks < 1 || !cuts)
    fail("tensor_parallel_part: ", split.param_path, " of shape ", shape_str(full), " cannot be cut into ", tp,
         split.pad ? " padded" : "", " parts on dim ", split.dim, " in ", split.blocks, " blocks (rank ", rank, ")");
  return split.pad ? (n + tp - 1) / tp : n / tp;
}

}  // namespace

Shape tensor_parallel_part_shape(const TensorParallelSplit& split, const Shape& full, int tp) {
  Shape part = full;
  part[split.dim] = part_extent(split, full, tp, 0);
  return part;
}

std::vector<TensorParallelRun> tensor_parallel_runs(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                                    int tp, int rank) {
  const int64_t extent = part_extent(split, full, tp, rank);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < split.dim; ++i) outer *= full[i];
  for (size_t i = split.dim + 1; i < full.size(); ++i) inner *= full[i];
  const int64_t n = full[split.dim];
  std::vector<TensorParallelRun> runs;
  if (split.pad) {
    // The full entries [rank * extent, n) this part holds, then padding: the
    // last parts may hold fewer, or none (a rank of padding only).
    const int64_t real = std::clamp<int64_t>(n - rank * extent, 0, extent);
    if (real > 0)
      for (int64_t o = 0; o < outer; ++o)
        runs.push_back({o * extent * inner, (o * n + rank * extent) * inner, real * inner});
    return runs;
  }
  const int64_t block = n / split.blocks, chunk = block / tp;
  runs.reserve(static_cast<size_t>(outer * split.blocks));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < split.blocks; ++b)
      runs.push_back({(o * split.blocks + b) * chunk * inner, (o * n + b * block + rank * chunk) * inner, chunk * inner});
  return runs;
}

std::vector<double> tensor_parallel_part(const TensorParallelSplit& split, const std::vector<int64_t>& full,
                                         const std::vector<double>& data, int tp, int rank) {
  const std::vector<TensorParallelRun> runs = tensor_parallel_runs(split, full, tp, rank);
  if (static_cast<int64_t>(data.size()) != numel(full))
    fail("tensor_parallel_part: ", split.param_path, " of shape ", shape_str(full), " given ", data.size(),
         " values");
  std::vector<double> out(static_cast<size_t>(numel(tensor_parallel_part_shape(split, full, tp))), 0.0);
  for (const TensorParallelRun& r : runs) std::copy_n(data.begin() + r.full, r.count, out.begin() + r.part);
  return out;
}

}  // namespace fsdpc
