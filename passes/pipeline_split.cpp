// pipeline_split: pipeline parallelism's cut of one captured trace into one
// trace per stage (GPipe's and Megatron's partition of the layers).
//
// Pre:  a captured trace whose parameters carry module paths with numbered
//       blocks; at least as many blocks as stages.
// Post: a trace per stage (passes/pipeline_split.h). Each statement runs in
//       one stage: the latest stage of the blocks whose parameters it reads
//       and of the statements it reads, so the embedding falls in the first
//       stage and the final norm, LM head and loss in the last; a statement
//       computed from the batch alone is copied into every stage that needs
//       it. One value, the residual stream, crosses each cut.
//
//   captured:  t4 = add(t2, t3) ... [h.0] ... t60 = add(t40, t59) [h.1] ... return t196
//   stage0(idx, targets, t_embed_weight, t_pos_weight, t_h_0_*):      ... return t60
//   stage1(idx, targets, t60, t_embed_weight, t_h_1_*, t_ln_f_*):     ... return t196
#include "passes/pipeline_split.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "passes/dce.h"
#include "passes/wrap.h"

namespace fsdpc {

namespace {

constexpr int kData = -1;  // computed from the batch alone: any stage recomputes it

struct Blocks {
  std::vector<std::string> names;                 // in order of first parameter
  std::unordered_map<std::string, int> of_param;  // param proxy -> block index; absent: root
  std::vector<int64_t> numel;                     // parameters per block
};

Blocks find_blocks(const Trace& t) {
  Blocks b;
  std::unordered_map<std::string, int> index;
  for (const Proxy& a : t.args) {
    if (!a.is_param()) continue;
    const std::string block = block_of(a.param_path);
    if (block.empty()) continue;
    auto [it, added] = index.emplace(block, static_cast<int>(b.names.size()));
    if (added) {
      b.names.push_back(block);
      b.numel.push_back(0);
    }
    b.of_param[a.name] = it->second;
    b.numel[it->second] += numel(a.type.shape);
  }
  return b;
}

// Root parameters read before the first block (the embeddings: stage 0's
// load) and after the last (final norm, LM head: the last stage's); a tied
// embedding counts in both.
std::pair<int64_t, int64_t> root_loads(const Trace& t, const Blocks& blocks) {
  std::unordered_map<std::string, int64_t> root;
  for (const Proxy& a : t.args)
    if (a.is_param() && !blocks.of_param.count(a.name)) root[a.name] = numel(a.type.shape);
  size_t first = t.bsyms.size(), last = 0;
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Operand& in : t.bsyms[i].inputs)
      if (blocks.of_param.count(in.name)) {
        first = std::min(first, i);
        last = std::max(last, i);
      }
  std::unordered_set<std::string> head, tail;
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Operand& in : t.bsyms[i].inputs) {
      if (!root.count(in.name)) continue;
      if (i < first) head.insert(in.name);
      if (i > last) tail.insert(in.name);
    }
  int64_t h = 0, l = 0;
  for (const std::string& p : head) h += root.at(p);
  for (const std::string& p : tail) l += root.at(p);
  return {h, l};
}

// Blocks per stage: contiguous runs minimising the largest stage's
// parameters (the first stage also holds `head`, the last `tail`), and among
// those the sum of squared loads, so the middle stages come out even.
std::vector<int> balanced(const Blocks& b, int stages, int64_t head, int64_t tail) {
  const int n = static_cast<int>(b.names.size());
  std::vector<int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + b.numel[i];
  auto load = [&](int s, int j, int i) {  // stage s (1-based) holding blocks [j, i)
    return static_cast<double>(prefix[i] - prefix[j] + (s == 1 ? head : 0) + (s == stages ? tail : 0));
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][i]: the least cost placing the first i blocks in s stages, where
  // cost combines loads by `combine` (max, then sum of squares under a cap).
  auto solve = [&](auto combine, double cap, std::vector<int>* counts) {
    std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
    std::vector<std::vector<int>> from(stages + 1, std::vector<int>(n + 1, 0));
    best[0][0] = 0;
    for (int s = 1; s <= stages; ++s)
      for (int i = s; i <= n - (stages - s); ++i)
        for (int j = s - 1; j < i; ++j) {
          const double l = load(s, j, i);
          if (best[s - 1][j] == kInf || l > cap) continue;
          const double cost = combine(best[s - 1][j], l);
          if (cost < best[s][i]) {
            best[s][i] = cost;
            from[s][i] = j;
          }
        }
    if (counts) {
      counts->assign(stages, 0);
      for (int s = stages, i = n; s > 0; --s) {
        (*counts)[s - 1] = i - from[s][i];
        i = from[s][i];
      }
    }
    return best[stages][n];
  };
  const double largest = solve([](double a, double l) { return std::max(a, l); }, kInf, nullptr);
  std::vector<int> counts;
  solve([](double a, double l) { return a + l * l; }, largest, &counts);
  return counts;
}

std::vector<int> blocks_per_stage(const Trace& t, const Blocks& blocks, const PipelineSplitOptions& o) {
  const int n = static_cast<int>(blocks.names.size());
  if (o.stages < 1) fail("--pp must be at least 1, got ", o.stages);
  if (n < o.stages)
    fail("--pp ", o.stages, " needs at least ", o.stages, " numbered blocks (one per stage); the model has ", n);
  if (o.balance.empty()) {
    const auto [head, tail] = root_loads(t, blocks);
    return balanced(blocks, o.stages, head, tail);
  }
  if (static_cast<int>(o.balance.size()) != o.stages)
    fail("--pp-balance lists ", o.balance.size(), " stages; --pp is ", o.stages);
  int sum = 0;
  for (size_t s = 0; s < o.balance.size(); ++s) {
    if (o.balance[s] < 1) fail("--pp-balance: stage ", s, " has ", o.balance[s], " blocks; each needs at least 1");
    sum += o.balance[s];
  }
  if (sum != n) fail("--pp-balance places ", sum, " blocks; the model has ", n);
  return o.balance;
}

}  // namespace

std::vector<PipelineStageTrace> pipeline_split(const Trace& t, const PipelineSplitOptions& o) {
  const Blocks blocks = find_blocks(t);
  const std::vector<int> counts = blocks_per_stage(t, blocks, o);
  const int stages = o.stages;
  std::vector<int> stage_of_block;
  for (int s = 0; s < stages; ++s) stage_of_block.insert(stage_of_block.end(), counts[s], s);

  // Each value's stage: kData for the batch and what derives from it alone.
  std::unordered_map<std::string, int> stage_of;
  std::unordered_map<std::string, const Proxy*> params;
  for (const Proxy& a : t.args) {
    if (a.is_param())
      params[a.name] = &a;
    else
      stage_of[a.name] = kData;
  }
  std::vector<int> stmt_stage(t.bsyms.size());
  for (size_t i = 0; i < t.bsyms.size(); ++i) {
    const BoundSymbol& b = t.bsyms[i];
    int s = kData;
    for (const Operand& in : b.inputs) {
      if (in.is_scalar()) continue;
      if (auto p = blocks.of_param.find(in.name); p != blocks.of_param.end())
        s = std::max(s, stage_of_block[p->second]);
      else if (params.count(in.name))
        s = std::max(s, 0);  // a root parameter: wherever the rest places it
      else
        s = std::max(s, stage_of.at(in.name));
    }
    stmt_stage[i] = s;
    for (const Proxy& out : b.outputs) stage_of[out.name] = s;
  }
  std::vector<std::string> returned;
  t.returns.collect_names(returned);

  // The values each cut carries: defined at or before stage c, read after it.
  std::vector<std::vector<std::string>> crossing(stages > 0 ? stages - 1 : 0);
  auto note_use = [&](const std::string& name, int user) {
    const auto it = stage_of.find(name);
    if (it == stage_of.end() || it->second == kData) return;
    for (int c = it->second; c < user; ++c)
      if (std::find(crossing[c].begin(), crossing[c].end(), name) == crossing[c].end())
        crossing[c].push_back(name);
  };
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Operand& in : t.bsyms[i].inputs)
      if (!in.is_scalar() && stmt_stage[i] != kData) note_use(in.name, stmt_stage[i]);
  for (const std::string& r : returned) note_use(r, stages - 1);
  std::unordered_map<std::string, size_t> defined_at;
  for (size_t i = 0; i < t.bsyms.size(); ++i)
    for (const Proxy& out : t.bsyms[i].outputs) defined_at[out.name] = i;
  size_t first_block = 0;
  for (int c = 0; c + 1 < stages; ++c) {
    std::sort(crossing[c].begin(), crossing[c].end(),
              [&](const std::string& a, const std::string& b) { return defined_at.at(a) < defined_at.at(b); });
    first_block += counts[c];
    const std::string where = "the cut before block " + blocks.names[first_block];
    if (crossing[c].size() != 1) {
      std::string names;
      for (const std::string& n : crossing[c]) names += (names.empty() ? "" : ", ") + n;
      fail("pipeline split: ", where, " is crossed by ", crossing[c].size(), " values (", names,
           "); a stage boundary must carry exactly one activation");
    }
    if (stage_of.at(crossing[c][0]) != c)
      fail("pipeline split: ", crossing[c][0], " crosses ", where, " from stage ", stage_of.at(crossing[c][0]),
           "; a boundary value must be made by the stage just before it");
  }

  std::unordered_map<std::string, const TensorType*> types;
  for (const Proxy& a : t.args) types[a.name] = &a.type;
  for (const BoundSymbol& b : t.bsyms)
    for (const Proxy& out : b.outputs) types[out.name] = &out.type;

  std::vector<PipelineStageTrace> out(stages);
  size_t block = 0;
  for (int s = 0; s < stages; ++s) {
    PipelineStageTrace& st = out[s];
    for (int k = 0; k < counts[s]; ++k) st.blocks.push_back(blocks.names[block++]);
    if (s > 0) st.input = crossing[s - 1][0];
    if (s + 1 < stages) st.output = crossing[s][0];
    Trace& tr = st.trace;
    tr.name = "stage" + std::to_string(s);
    tr.provenance = "pp";
    tr.next_id = t.next_id;
    std::unordered_set<std::string> read;
    for (size_t i = 0; i < t.bsyms.size(); ++i) {
      if (stmt_stage[i] != s && stmt_stage[i] != kData) continue;
      tr.bsyms.push_back(t.bsyms[i]);
      for (const Operand& in : t.bsyms[i].inputs)
        if (!in.is_scalar()) read.insert(in.name);
    }
    for (const Proxy& a : t.args)
      if (!a.is_param()) tr.args.push_back(a);
    if (s > 0) tr.args.push_back(Proxy{st.input, *types.at(st.input), "", true});
    for (const Proxy& a : t.args)
      if (a.is_param() && read.count(a.name)) tr.args.push_back(a);
    tr.returns = s + 1 < stages ? ReturnTree::tuple({ReturnTree::leaf(st.output)}) : t.returns;
    tr = dce(std::move(tr));  // the batch-derived statements this stage does not read
    tr.provenance = "pp";
  }
  return out;
}

}  // namespace fsdpc
