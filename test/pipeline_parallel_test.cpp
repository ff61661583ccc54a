// Pipeline parallelism (passes/pipeline_split.h, passes/pipeline_p2p.h) on
// the float64 reference executor: P stages of D data-parallel ranks each,
// run micro-batch by micro-batch with their send/recv through one mailbox,
// in GPipe's order and in 1F1B's, give one process's loss and gradients
// over the whole batch (1e-12). A tied parameter's gradient is the sum of
// the stages that read it. Also: how blocks are balanced, and what is
// refused.
#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "executors/reference/reference.h"
#include "frontend/models/gpt2/gpt2.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "passes/grad.h"
#include "passes/pipeline.h"
#include "passes/pipeline_split.h"
#include "passes/stats.h"
#include "runtime/pipeline_schedule.h"
#include "test/parity_values.h"
#include "test/run_cli.h"
#include "test/scratch.h"

using namespace fsdpc;
using reference::Value;
using test::random_value;
using test::rows;

namespace {

using Order = PipelineSchedule;

struct Case {
  std::string model;
  int pp = 2;
  std::vector<int> balance;
  int micro = 4;
  Strategy strategy = Strategy::zero3;
  Mesh mesh = flat_mesh(1);  // one stage's ranks
  Order order = Order::gpipe;
  bool bucketing = false;
  RematMode remat = RematMode::none;
};

Case case_of(const std::string& model) {
  Case c;
  c.model = model;
  return c;
}

constexpr int64_t kRows = 2;  // a micro-batch's rows on one data-parallel rank

// gpt2-tiny and llama-tiny have 2 blocks; more stages need more.
std::unique_ptr<Model> model_of(const std::string& name) {
  if (name != "gpt2-4") return make_model(name);
  GPT2Config c;
  c.n_layer = 4;
  c.n_head = 2;
  c.n_embd = 32;
  c.vocab_size = 64;
  c.n_positions = 16;
  return std::make_unique<GPT2>(name, c);
}

CaptureOptions capture_options(int64_t batch) {
  CaptureOptions o;
  o.batch = batch;
  o.seq = 8;
  return o;
}

void check_parity(const Case& c) {
  const int dp = c.mesh.data_parallel();
  INFO(c.model << " pp " << c.pp << " micro " << c.micro << " " << strategy_name(c.strategy) << " dp " << dp
               << (c.order == Order::gpipe ? " gpipe" : " 1f1b") << (c.bucketing ? " bucketed" : "") << " remat "
               << remat_name(RematOptions{c.remat}));
  std::mt19937 rng(97 + c.pp * 10 + dp);

  // One process over the whole batch: micro-batch m of data-parallel rank d
  // is rows [(m * dp + d) * kRows, +kRows).
  auto model = model_of(c.model);
  const Trace joint = grad(capture(*model, capture_options(kRows * dp * c.micro)));
  int64_t vocab = 0;
  for (const Proxy& a : joint.args)
    if (a.is_param() && (a.param_path == "wte.weight" || a.param_path == "model.embed_tokens.weight"))
      vocab = a.type.shape[0];
  REQUIRE(vocab > 0);
  std::map<std::string, Value> full;  // argument name -> whole value
  std::vector<Value> args;
  for (const Proxy& a : joint.args) {
    if (a.name == "cotangent") break;
    args.push_back(random_value(a.type, rng, a.is_param() ? 0.3 : 1.0, a.type.dtype == DType::i64 ? vocab : 0));
    full[a.name] = args.back();
  }
  args.push_back(Value{joint.args.back().type, {1.0}});
  const std::vector<Value> expect = reference::run(joint, args);
  std::map<std::string, const Value*> expect_grad;
  size_t gi = 0;
  for (const Proxy& a : joint.args)
    if (a.is_param()) expect_grad[a.name] = &expect.at(1 + gi++);

  PipelineOptions po;
  po.strategy = c.strategy;
  po.mesh = c.mesh;
  po.bucketing = c.bucketing;
  po.remat.mode = c.remat;
  po.pp = c.pp;
  po.pp_balance = c.balance;
  const std::vector<std::vector<Stage>> compiled =
      compile_pipeline(capture(*model_of(c.model), capture_options(kRows)), po);
  REQUIRE(compiled.size() == static_cast<size_t>(c.pp));

  reference::Mailbox mailbox;
  // saved[s][m]: each rank's saved values; grads[name][d]: summed gradients.
  std::vector<std::map<int, std::vector<std::vector<Value>>>> saved(c.pp);
  std::map<std::string, std::vector<Value>> grads;
  std::map<std::string, bool> sharded;
  double loss = 0;
  const int world = c.mesh.world();
  auto run_forward = [&](int s, int m) {
    const Trace& fwd = compiled[s].back().traces.at(0);
    std::vector<std::vector<Value>> in(world);
    for (int r = 0; r < world; ++r) {
      const int d = r, shard = d % c.mesh.shards;
      for (const Proxy& p : fwd.args) {
        const Value& whole = full.at(p.name);
        if (!p.is_param()) {
          const int64_t first = (m * dp + d) * kRows;
          in[r].push_back(rows(whole, first, first + kRows));
        } else if (p.type.dist == DistType::fully_sharded) {
          in[r].push_back(rows(whole, shard * p.type.shape[0], (shard + 1) * p.type.shape[0]));
        } else {
          in[r].push_back(whole);
        }
        in[r].back().type = p.type;
      }
    }
    mailbox.position = s;
    auto out = reference::run_spmd(fwd, c.mesh, in, &mailbox);
    for (int r = 0; r < world; ++r) {
      if (s + 1 == c.pp) loss += out[r][0].data[0] / (dp * c.micro);
      out[r].erase(out[r].begin());  // the output (the loss, or the sent activation)
    }
    saved[s][m] = std::move(out);
  };
  auto run_backward = [&](int s, int m) {
    const Trace& fwd = compiled[s].back().traces.at(0);
    const Trace& bwd = compiled[s].back().traces.at(1);
    std::vector<std::vector<Value>> in = std::move(saved[s].at(m));
    for (int r = 0; r < world; ++r) {
      if (s + 1 == c.pp) in[r].push_back(Value{bwd.args.back().type, {1.0 / c.micro}});
      REQUIRE(in[r].size() == bwd.args.size());
      for (size_t i = 0; i < bwd.args.size(); ++i) in[r][i].type = bwd.args[i].type;
    }
    mailbox.position = s;
    const auto out = reference::run_spmd(bwd, c.mesh, in, &mailbox);
    for (int r = 0; r < world; ++r) {
      size_t k = 0;
      for (const Proxy& p : fwd.args) {
        if (!p.is_param()) continue;
        sharded[p.name] = p.type.dist == DistType::fully_sharded;
        std::vector<Value>& sum = grads[p.name];
        sum.resize(world);
        const Value& g = out[r].at(k++);
        if (sum[r].data.empty()) {
          sum[r] = g;
        } else {
          REQUIRE(sum[r].data.size() == g.data.size());
          for (size_t i = 0; i < g.data.size(); ++i) sum[r].data[i] += g.data[i];
        }
      }
      // After the parameters' gradients, stage s > 0 returns the gradient it sent.
      CHECK(out[r].size() == k + (s > 0 ? 1 : 0));
    }
  };

  // Every stage advances through its order whenever what it needs has
  // arrived (rank 0 of a stage stands for all: they move in lockstep).
  std::vector<std::vector<PipelineOp>> order(c.pp);
  std::vector<size_t> next(c.pp, 0);
  for (int s = 0; s < c.pp; ++s) order[s] = pipeline_order(c.order, s, c.pp, c.micro);
  auto waiting = [&](int from, int to) {
    auto it = mailbox.queues.find({from, to, 0});
    return it != mailbox.queues.end() && !it->second.empty();
  };
  std::vector<int> held(c.pp, 0), in_flight(c.pp, 0);  // micro-batches whose saved values a stage holds
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < c.pp; ++s) {
      while (next[s] < order[s].size()) {
        const auto [forward, m] = order[s][next[s]];
        const bool ready = forward ? (s == 0 || waiting(s - 1, s)) : (s + 1 == c.pp || waiting(s + 1, s));
        if (!ready) break;
        if (forward) in_flight[s] = std::max(in_flight[s], ++held[s]);
        else --held[s];
        forward ? run_forward(s, m) : run_backward(s, m);
        ++next[s];
        moved = true;
      }
    }
  }
  for (int s = 0; s < c.pp; ++s) REQUIRE(next[s] == order[s].size());  // no stage left waiting
  for (const auto& [key, queue] : mailbox.queues) CHECK(queue.empty());
  for (int s = 0; s < c.pp; ++s) {
    // GPipe holds every micro-batch's activations; 1F1B at most P - s.
    const int most = c.order == Order::gpipe ? c.micro : std::min(c.pp - s, c.micro);
    CHECK(in_flight[s] == most);
    CHECK(pipeline_in_flight(order[s]) == most);
  }

  CHECK(loss == Approx(expect[0].data[0]).epsilon(1e-12));
  // grads sums a tied parameter's gradients over the stages that read it
  // (GPT-2's wte: the embedding in the first, the LM head in the last).
  std::map<std::string, int> readers;
  for (int s = 0; s < c.pp; ++s)
    for (const Proxy& p : compiled[s].back().traces.at(0).args)
      if (p.is_param()) ++readers[p.name];
  CHECK(readers.size() == expect_grad.size());  // every parameter is in some stage
  if (c.model == "gpt2-tiny") CHECK(readers.at("t_wte_weight") == 2);
  for (const auto& [name, per_rank] : grads) {
    INFO("gradient of " << name);
    for (int r = 0; r < world; ++r) {
      const Value& got = per_rank[r];
      const int64_t n = got.type.shape[0], shard = r % c.mesh.shards;
      const Value want = sharded.at(name)
                             ? rows(*expect_grad.at(name), shard * n, (shard + 1) * n)
                             : *expect_grad.at(name);
      REQUIRE(got.data.size() == want.data.size());
      CHECK(test::worst_relative_error(got, want) < 1e-12);
    }
  }
}

}  // namespace

TEST_CASE("pipeline parallelism: gpt2-tiny over 2 stages gives one process's loss and gradients", "[pp]") {
  for (Order order : {Order::gpipe, Order::one_f_one_b}) {
    Case c = case_of("gpt2-tiny");
    c.order = order;
    check_parity(c);
  }
}

TEST_CASE("pipeline parallelism: stages times FSDP on each stage's data-parallel ranks", "[pp]") {
  for (Order order : {Order::gpipe, Order::one_f_one_b}) {
    for (Strategy st : {Strategy::zero3, Strategy::zero2, Strategy::no_shard}) {
      Case c = case_of("gpt2-tiny");
      c.order = order;
      c.strategy = st;
      c.mesh = flat_mesh(2);
      check_parity(c);
    }
  }
  Case hybrid = case_of("gpt2-tiny");
  hybrid.strategy = Strategy::hybrid;
  hybrid.mesh = Mesh{2, 1, 1};
  check_parity(hybrid);
  Case buckets = case_of("gpt2-tiny");
  buckets.mesh = flat_mesh(2);
  buckets.bucketing = true;
  buckets.order = Order::one_f_one_b;
  check_parity(buckets);
  Case remat = case_of("gpt2-tiny");
  remat.mesh = flat_mesh(2);
  remat.remat = RematMode::block;
  check_parity(remat);
}

TEST_CASE("pipeline parallelism: llama-tiny, and 3 and 4 stages with fewer and more micro-batches", "[pp]") {
  Case llama = case_of("llama-tiny");
  check_parity(llama);
  llama.mesh = flat_mesh(2);
  llama.order = Order::one_f_one_b;
  check_parity(llama);
  for (Order order : {Order::gpipe, Order::one_f_one_b}) {
    Case three = case_of("gpt2-4");
    three.pp = 3;
    three.micro = 2;  // fewer micro-batches than 1F1B's warm-up on stage 0
    three.order = order;
    check_parity(three);
    Case four = case_of("gpt2-4");
    four.pp = 4;
    four.micro = 6;
    four.order = order;
    four.mesh = flat_mesh(2);
    check_parity(four);
  }
  Case given = case_of("gpt2-4");
  given.balance = {3, 1};
  check_parity(given);
}

namespace {

std::vector<PipelineStageTrace> cut(const std::string& model, int pp, std::vector<int> balance = {}) {
  return pipeline_split(capture(*model_of(model), capture_options(kRows)), PipelineSplitOptions{pp, balance});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> param_paths(const Trace& t) {
  std::vector<std::string> out;
  for (const Proxy& a : t.args)
    if (a.is_param()) out.push_back(a.param_path);
  return out;
}

}  // namespace

TEST_CASE("pipeline split: the stages' blocks, boundaries and arguments", "[pp]") {
  const std::vector<PipelineStageTrace> st = cut("gpt2-4", 2);
  REQUIRE(st.size() == 2);
  // Equal blocks: the embeddings (stage 0) and the final norm with the
  // tied head (stage 1) weigh about the same, so two blocks each.
  CHECK(st[0].blocks == std::vector<std::string>{"h.0", "h.1"});
  CHECK(st[1].blocks == std::vector<std::string>{"h.2", "h.3"});
  CHECK(st[0].input.empty());
  CHECK(st[1].output.empty());
  CHECK(st[0].output == st[1].input);
  CHECK(st[0].trace.name == "stage0");
  // Every stage takes the batch; stage 1 then its boundary activation.
  CHECK(st[0].trace.args.at(0).name == "idx");
  CHECK(st[0].trace.args.at(1).name == "targets");
  CHECK(st[1].trace.args.at(2).name == st[1].input);
  CHECK_FALSE(st[1].trace.args.at(2).is_param());
  const std::vector<std::string> p0 = param_paths(st[0].trace), p1 = param_paths(st[1].trace);
  CHECK(p0.front() == "wte.weight");
  CHECK(p0.size() == 2 + 2 * 12);  // wte, wpe, two blocks of 12
  CHECK(p1.front() == "wte.weight");  // tied: the LM head
  CHECK(p1.size() == 1 + 2 * 12 + 2);  // wte, two blocks, ln_f
  CHECK(std::find(p1.begin(), p1.end(), "wpe.weight") == p1.end());
  // Stage 0 returns the boundary; the last stage the loss, a scalar.
  CHECK(st[0].trace.returns.items.at(0).name == st[0].output);
  std::vector<std::string> ret;
  st[1].trace.returns.collect_names(ret);
  REQUIRE(ret.size() == 1);

  // gpt2 (124M): the tied embedding weighs 38.6M parameters in the first
  // stage and again in the last, a block 7.1M: the least largest stage
  // puts one block beside each embedding and five in each middle stage.
  for (const PipelineStageTrace& s : cut("gpt2-4", 4)) CHECK(s.blocks.size() == 1);
  std::vector<int> counts;
  for (const PipelineStageTrace& s : pipeline_split(capture(*make_model("gpt2"), capture_options(1)),
                                                    PipelineSplitOptions{4, {}}))
    counts.push_back(static_cast<int>(s.blocks.size()));
  CHECK(counts == std::vector<int>{1, 5, 5, 1});
  // A given balance is taken as it is.
  const auto given = cut("gpt2-4", 2, {1, 3});
  CHECK(given[0].blocks == std::vector<std::string>{"h.0"});
  CHECK(given[1].blocks.size() == 3);
}

TEST_CASE("pipeline split: what it refuses, with what and where", "[pp]") {
  CHECK_THAT(error_of([] { cut("gpt2-tiny", 3); }),
             Catch::Contains("--pp 3 needs at least 3 numbered blocks (one per stage); the model has 2"));
  // The tutorial mlp's layers are "0.weight", "2.weight": no numbered blocks.
  CHECK_THAT(error_of([] { pipeline_split(capture(*make_model("mlp")), PipelineSplitOptions{2, {}}); }),
             Catch::Contains("the model has 0"));
  CHECK_THAT(error_of([] { cut("gpt2-4", 2, {4}); }), Catch::Contains("--pp-balance lists 1 stages; --pp is 2"));
  CHECK_THAT(error_of([] { cut("gpt2-4", 2, {1, 2}); }), Catch::Contains("places 3 blocks; the model has 4"));
  CHECK_THAT(error_of([] { cut("gpt2-4", 2, {0, 4}); }), Catch::Contains("stage 0 has 0 blocks"));
  // Block h.1 reads two values of block h.0: no single activation to send.
  const Trace two = parse_trace(R"(# Constructed by trace
def computation(x, t_h_0_w, t_h_1_w):
  # x: "cpu f32[2, 4]"
  # t_h_0_w: "cpu f32[4, 4]" param=h.0.w
  # t_h_1_w: "cpu f32[4, 4]" param=h.1.w
  t0 = matmul(x, t_h_0_w)  # t0: "cpu f32[2, 4]"
  t1 = neg(t0)  # t1: "cpu f32[2, 4]"
  t2 = matmul(t1, t_h_1_w)  # t2: "cpu f32[2, 4]"
  t3 = add(t2, t0)  # t3: "cpu f32[2, 4]"
  t4 = sum(t3, dims=[0, 1])  # t4: "cpu f32[]"
  return t4
)");
  CHECK_THAT(error_of([&] { pipeline_split(two, PipelineSplitOptions{2, {}}); }),
             Catch::Contains("the cut before block h.1 is crossed by 2 values (t0, t1)"));
  PipelineOptions po;
  po.pp = 1;
  po.pp_balance = {1, 1};
  CHECK_THAT(error_of([&] { compile_pipeline(two, po); }), Catch::Contains("--pp-balance lists blocks per pipeline stage"));
}

TEST_CASE("p2p: each boundary moves one activation forward and its gradient back, on group pp", "[pp]") {
  PipelineOptions po;
  po.mesh = flat_mesh(2);
  po.pp = 3;
  const auto compiled = compile_pipeline(capture(*model_of("gpt2-4"), capture_options(kRows)), po);
  REQUIRE(compiled.size() == 3);
  const int64_t activation = kRows * 8 * 32 * 4;  // [rows, seq, n_embd] f32
  for (int s = 0; s < 3; ++s) {
    INFO("stage " << s);
    const TraceStats fwd = trace_stats(compiled[s].back().traces.at(0));
    const TraceStats bwd = trace_stats(compiled[s].back().traces.at(1));
    const int sends_forward = s < 2, sends_back = s > 0;
    CHECK(fwd.of(OpId::Send).count == sends_forward);
    CHECK(fwd.of(OpId::Send).bytes == sends_forward * activation);
    CHECK(fwd.of(OpId::Recv).count == sends_back);
    CHECK(fwd.of(OpId::Recv).bytes == sends_back * activation);
    CHECK(bwd.of(OpId::Send).count == sends_back);
    CHECK(bwd.of(OpId::Recv).count == sends_forward);
    CHECK(bwd.of(OpId::Recv).bytes == sends_forward * activation);
    for (const Trace* t : {&compiled[s].back().traces.at(0), &compiled[s].back().traces.at(1)})
      for (const BoundSymbol& b : t->bsyms)
        if (b.op == OpId::Send || b.op == OpId::Recv) {
          CHECK(b.attrs.get_str("group") == "pp");
          CHECK(b.attrs.get_int("size") == 3);
          // Forward: recv from s-1, send to s+1; backward the other way.
          const bool forward = t == &compiled[s].back().traces.at(0);
          const int64_t want = (b.op == OpId::Send) == forward ? s + 1 : s - 1;
          CHECK(b.attrs.get_int("peer") == want);
        }
  }
}

// autocast re-emits the trace with new names, the stage's output included:
// p2p finds the boundary by place, and it crosses in f32 (autocast returns
// floats in f32), so mixed precision moves the same bytes between stages.
TEST_CASE("p2p: stages compiled with mixed precision send and receive the f32 activation", "[pp]") {
  PipelineOptions po;
  po.mesh = flat_mesh(2);
  po.pp = 2;
  po.precision = DType::bf16;
  const auto compiled = compile_pipeline(capture(*model_of("gpt2-tiny"), capture_options(kRows)), po);
  REQUIRE(compiled.size() == 2);
  const int64_t activation = kRows * 8 * 64 * 4;  // [rows, seq, n_embd] f32
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s);
    const TraceStats fwd = trace_stats(compiled[s].back().traces.at(0));
    const TraceStats bwd = trace_stats(compiled[s].back().traces.at(1));
    CHECK(fwd.of(OpId::Send).bytes + fwd.of(OpId::Recv).bytes == activation);
    CHECK(bwd.of(OpId::Send).bytes + bwd.of(OpId::Recv).bytes == activation);
    CHECK(fwd.of(OpId::AllGather).count > 0);  // zero3 inside the stage, gathering bf16 casts
  }
}

namespace {

// `fsdpc <args>` (np > 0: under mpirun), stdout and stderr together into
// `out`; its exit code.
int run_cli(const std::string& args, std::string& out, int np = 0) {
  const fsdpc::testing::RunOptions merged{.merge = true};
  const fsdpc::testing::Run r =
      np > 0 ? fsdpc::testing::run_fsdpc_mpi(np, args, merged) : fsdpc::testing::run_fsdpc(args, merged);
  out = r.out;
  return r.code;
}

}  // namespace

TEST_CASE("fsdpc dump --pp prints every stage; bad pipeline options exit 2 naming the option", "[pp]") {
  std::string out;
  REQUIRE(run_cli("dump --model gpt2-tiny --world-size 4 --pp 2 --strategy zero3", out) == 0);
  CHECK_THAT(out, Catch::Contains("def stage0_forward(") && Catch::Contains("def stage1_backward("));
  CHECK_THAT(out, Catch::Contains("send(t90, group=pp, size=2, peer=1)"));
  CHECK_THAT(out, Catch::Contains("recv(group=pp, size=2, peer=0, shape=[2, 64, 64]"));
  CHECK_THAT(out, Catch::Contains("all_gather(t_h_1_ln_1_weight, group=dp, size=2, dim=0)"));
  CHECK(run_cli("dump --model gpt2-tiny --world-size 3 --pp 2", out) == 2);
  CHECK_THAT(out, Catch::Contains("--pp 2 does not divide the world of 3 ranks"));
  CHECK(run_cli("dump --model gpt2-tiny --world-size 2 --pp 2 --pp-balance 1,x", out) == 2);
  CHECK_THAT(out, Catch::Contains("--pp-balance '1,x': 'x' is not a whole number"));
  CHECK(run_cli("dump --model gpt2-tiny --world-size 2 --pp-balance 1,1", out) == 2);
  CHECK_THAT(out, Catch::Contains("it needs --pp 2 or more"));
  REQUIRE(run_cli("dump --model gpt2-tiny --world-size 2 --pp 2 --grad-accum 2 --memory", out) == 0);
  CHECK_THAT(out, Catch::Contains("# pipeline stage 0 (1f1b)") && Catch::Contains("# pipeline stage 1 (1f1b)"));
  CHECK_THAT(out, Catch::Contains("forward 2/2"));
  CHECK(run_cli("train --model gpt2-tiny --steps 1 --pp 2", out) == 2);  // one process
  CHECK_THAT(out, Catch::Contains("--pp 2 does not divide the world of 1 ranks (mpirun started 1)"));
}

TEST_CASE("fsdpc train --pp evaluates --val-data as the stages' data-parallel ranks would", "[pp][mpi]") {
  std::string out;
  const std::string text = fsdpc::testing::scratch("pp-val.txt").string();
  const std::string log = fsdpc::testing::scratch("pp-log.jsonl").string();
  {
    std::FILE* f = std::fopen(text.c_str(), "w");
    REQUIRE(f);
    for (int i = 0; i < 3000; ++i) std::fputs(i % 7 ? "gather " : "reduce\n", f);
    std::fclose(f);
  }
  auto val_losses = [&](int np, const std::string& flags) {
    const std::string args = "train --model gpt2-tiny --seq 16 --batch 12 --steps 3 --grad-accum 3 --eval-every 1 "
                             "--strategy zero3 --val-data '" + text + "' --log-json '" + log + "' " + flags;
    INFO("mpirun -n " << np << " fsdpc " << args);
    REQUIRE(run_cli(args, out, np) == 0);
    std::vector<double> v;
    std::FILE* f = std::fopen(log.c_str(), "r");
    REQUIRE(f);
    char line[4096];
    while (std::fgets(line, sizeof line, f)) {
      const char* at = std::strstr(line, "\"val_loss\": ");
      REQUIRE(at);
      v.push_back(std::strtod(at + 12, nullptr));
    }
    std::fclose(f);
    return v;
  };
  // 2 data-parallel ranks either way: the same validation batches.
  const std::vector<double> flat = val_losses(2, ""), staged = val_losses(4, "--pp 2");
  REQUIRE(flat.size() == 3);
  REQUIRE(staged.size() == 3);
  for (size_t i = 0; i < flat.size(); ++i) CHECK(staged[i] == Approx(flat[i]).epsilon(1e-6));
  std::remove(text.c_str());
  std::remove(log.c_str());
}
