// Llama checkpoints in Hugging Face's layout through `fsdpc train` as users
// run it: a folder written here the way save_pretrained writes one (an index
// and two shards, one of them BF16; "model." names) loads on 2 ranks, an
// lr-0 step saves it back unchanged, training continues from the export,
// and the export loads again; tied heads (no lm_head.weight), Qwen2's biases;
// missing, unexpected and misshapen tensors are named; generate samples.
// And the FSDP promise under mpirun: llama-tiny trained sharded over N
// processes gives one process's losses and weights to 1e-5 (SGD).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "frontend/models/llama/llama.h"
#include "runtime/io/safetensors.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Contains;
using namespace fsdpc;

namespace {

using fsdpc::testing::Run;
using fsdpc::testing::scratch;

fs::path corpus() {
  fs::path p = scratch("corpus.txt");
  if (fs::exists(p)) return p;
  std::ofstream out(p);
  const char* words[] = {"shard ", "gather ", "reduce ", "scatter ", "the ", "model ", "state ", "rank ", "step\n"};
  for (int i = 0; i < 4000; ++i) out << words[(i * 7 + i / 9) % 9];
  return p;
}

// `mpirun -n np fsdpc train <flags>`; its output and errors together.
Run train(int np, const std::string& flags) {
  return fsdpc::testing::run_fsdpc_mpi(np, "train " + flags, {.merge = true});
}

using Weights = std::map<std::string, std::pair<Shape, std::vector<float>>>;

// Every parameter of `config`'s model, random and rounded to BF16 (so a BF16
// file holds them exactly).
Weights random_weights(const LlamaConfig& config, unsigned seed) {
  Llama model("llama", config);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  Weights w;
  for (const NamedParam& p : model.named_parameters()) {
    std::vector<float> v(static_cast<size_t>(numel(p.spec->shape)));
    for (float& x : v) {
      x = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      bits &= 0xffff0000u;
      std::memcpy(&x, &bits, 4);
    }
    w[p.path] = {p.spec->shape, std::move(v)};
  }
  return w;
}

// A safetensors file of BF16 tensors, written by hand (write_safetensors writes F32).
void write_bf16(const fs::path& path, const Weights& w) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : w) {
    const uint64_t bytes = 2 * t.second.size();
    header[name] = {{"dtype", "BF16"}, {"shape", t.first}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text;
  for (const auto& [name, t] : w)
    for (float x : t.second) {
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      const uint16_t hi = static_cast<uint16_t>(bits >> 16);
      out.write(reinterpret_cast<const char*>(&hi), 2);
    }
}

void write_f32(const fs::path& path, const Weights& w) {
  std::vector<SafetensorsTensor> ts;
  for (const auto& [name, t] : w) ts.push_back({name, t.first, t.second.data()});
  write_safetensors(path.string(), ts, {{"format", "pt"}});
}

// save_pretrained's sharded layout: the first half of the tensors F32 in
// shard 1, the rest BF16 in shard 2, and model.safetensors.index.json.
fs::path write_sharded_folder(const std::string& name, const LlamaConfig& config, const Weights& w) {
  const fs::path dir = scratch(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  Weights parts[2];
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  const std::string files[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  size_t i = 0;
  for (const auto& [n, t] : w) {
    const int part = i++ < w.size() / 2 ? 0 : 1;
    parts[part][n] = t;
    index["weight_map"][n] = files[part];
  }
  write_f32(dir / files[0], parts[0]);
  write_bf16(dir / files[1], parts[1]);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
  std::ofstream(dir / "config.json") << llama_config_json(config);
  return dir;
}

Weights read_all(const fs::path& file) {
  SafetensorsFile f(file.string());
  Weights w;
  for (const SafetensorsEntry& e : f.entries()) {
    std::vector<float> v(static_cast<size_t>(numel(e.shape)));
    f.read_rows_f32(e, 0, e.shape.empty() ? 1 : e.shape[0], v.data());
    w[e.name] = {e.shape, std::move(v)};
  }
  return w;
}

LlamaConfig tiny_config(const std::string& model_type, bool tied) {
  LlamaConfig c;
  c.model_type = model_type;
  c.vocab_size = 256;
  c.hidden_size = 33;  // odd sizes: every rank count leaves a remainder
  c.intermediate_size = 47;
  c.head_dim = 6;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = 32;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  c.qkv_bias = model_type == "qwen2";
  return c;
}

const std::string kData = " --seq 16 --batch 4 --data ";

}  // namespace

TEST_CASE("a Hugging Face Llama folder (index, F32 and BF16 shards) loads sharded and saves back unchanged",
          "[mpi][llama][checkpoint]") {
  for (const auto& [type, tied] : std::vector<std::pair<std::string, bool>>{{"llama", false}, {"llama", true}, {"qwen2", false}}) {
    INFO(type << (tied ? " tied" : ""));
    const LlamaConfig config = tiny_config(type, tied);
    const Weights w = random_weights(config, 5);
    CHECK(w.count("lm_head.weight") == (tied ? 0u : 1u));
    CHECK(w.count("model.layers.1.self_attn.k_proj.bias") == (type == "qwen2" ? 1u : 0u));
    const fs::path in = write_sharded_folder("in-" + type + (tied ? "-tied" : ""), config, w);
    const fs::path out = scratch("out-" + type + (tied ? "-tied" : ""));
    fs::remove_all(out);
    // SGD at lr 1e-30 moves no weight by a float32 ulp, so the export is the
    // input, gathered from 2 ranks' shards (rows split with remainders: 33, 47).
    Run r = train(2, "--init '" + in.string() + "' --steps 1 --optimizer sgd --lr 1e-30 --weight-decay 0 --save '" +
                         out.string() + "'" + kData + "'" + corpus().string() + "'");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(read_all(out / "model.safetensors") == w);
    const LlamaConfig saved = llama_config_from_file((out / "config.json").string());
    CHECK(llama_config_json(saved) == llama_config_json(config));
    std::ifstream cj(out / "config.json");
    const nlohmann::json j = nlohmann::json::parse(cj);
    CHECK(j["model_type"] == type);
    CHECK(j["architectures"][0] == (type == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"));

    // Train from the export on 3 ranks, save, and load that again.
    const fs::path again = scratch("again-" + type);
    fs::remove_all(again);
    r = train(3, "--init '" + out.string() + "' --steps 3 --lr 3e-3 --strategy zero2 --save '" + again.string() + "'" +
                     " --seq 16 --batch 6 --data '" + corpus().string() + "'");
    REQUIRE(r.code == 0);
    CHECK(read_all(again / "model.safetensors") != w);
    r = train(1, "--init '" + again.string() + "' --steps 1" + kData + "'" + corpus().string() + "'");
    CHECK(r.code == 0);
  }
}

TEST_CASE("a Llama checkpoint that does not fit the model names every problem", "[mpi][llama][checkpoint]") {
  const LlamaConfig config = tiny_config("llama", true);
  Weights w = random_weights(config, 9);
  const fs::path dir = scratch("bad");
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << llama_config_json(config);
  auto attempt = [&](const Weights& ws) {
    write_f32(dir / "model.safetensors", ws);
    return train(1, "--init '" + dir.string() + "' --steps 1" + kData + "'" + corpus().string() + "'");
  };
  Weights missing = w;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  missing.erase("model.norm.weight");
  Run r = attempt(missing);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("missing tensors: model.layers.1.mlp.up_proj.weight, model.norm.weight"));

  Weights extra = w;
  extra["model.layers.7.mlp.up_proj.weight"] = {{2}, {1, 2}};
  extra["model.layers.0.self_attn.rotary_emb.inv_freq"] = {{4}, {1, 2, 3, 4}};  // a buffer: ignored
  r = attempt(extra);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("unexpected tensors: model.layers.7.mlp.up_proj.weight"));
  CHECK_THAT(r.out, !Contains("inv_freq"));

  Weights shaped = w;
  shaped["model.layers.0.self_attn.k_proj.weight"] = {{33, 33}, std::vector<float>(33 * 33)};
  r = attempt(shaped);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("model.layers.0.self_attn.k_proj.weight has shape [33, 33], the model expects [12, 33]"));

  // Tied: a stored lm_head equal to the embedding loads; a different one is named.
  Weights head = w;
  head["lm_head.weight"] = w.at("model.embed_tokens.weight");
  CHECK(attempt(head).code == 0);
  head["lm_head.weight"].second[40] += 1.0f;
  r = attempt(head);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Contains("lm_head.weight differs from the tied model.embed_tokens.weight at row 1"));
}

TEST_CASE("llama-tiny trains on text under mpirun, saves, and generate samples from it", "[mpi][llama][generate]") {
  const fs::path ck = scratch("trained");
  fs::remove_all(ck);
  Run r = train(2, "--model llama-tiny --steps 40 --lr 3e-3 --save '" + ck.string() + "'" + kData + "'" +
                       corpus().string() + "'");
  REQUIRE(r.code == 0);
  const std::string generate =
      "generate --init '" + ck.string() + "' --prompt 'shard gather ' --max-new-tokens 24 --temperature 0";
  r = fsdpc::testing::run_fsdpc(generate, {.merge = true});
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("shard gather ", 0) == 0);
  CHECK(r.out.size() >= std::string("shard gather ").size() + 24);
  const Run again = fsdpc::testing::run_fsdpc(generate, {.merge = true});
  CHECK(again.out == r.out);  // greedy is deterministic
}

namespace {

struct Trained {
  std::vector<double> losses;
  nlohmann::json state;
};

Trained train_state(int np, const std::string& flags, const std::string& tag) {
  const fs::path log = scratch(tag + ".jsonl"), state = scratch(tag + ".json");
  const Run r = train(np, "--model llama-tiny --seq 16 --batch 12 --steps 8 --clip 1.0 --seed 5 "
                          "--optimizer sgd --lr 5e-2 --momentum 0.9 " + flags + " --log-json '" + log.string() +
                          "' --save-state '" + state.string() + "' --data '" + corpus().string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  Trained t;
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) t.losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  std::ifstream in(state);
  t.state = nlohmann::json::parse(in);
  return t;
}

}  // namespace

TEST_CASE("llama-tiny trained over N processes matches one process to 1e-5", "[mpi][llama][train]") {
  const Trained base = train_state(1, "--strategy zero3", "base");
  CHECK(base.losses.back() < base.losses.front());
  for (const std::pair<int, std::string>& c : std::vector<std::pair<int, std::string>>{
           {2, "--strategy zero3"},
           {3, "--strategy zero3 --bucketing unit"},
           {4, "--strategy zero2 --bucketing unit"},
           {2, "--strategy no_shard"},
           {4, "--strategy hybrid --mesh 2,2"}}) {
    INFO("np " << c.first << " " << c.second);
    const Trained t = train_state(c.first, c.second, "np" + std::to_string(c.first));
    REQUIRE(t.losses.size() == base.losses.size());
    for (size_t i = 0; i < t.losses.size(); ++i) CHECK(t.losses[i] == Approx(base.losses[i]).epsilon(1e-5));
    REQUIRE(t.state.size() == base.state.size());
    for (auto it = base.state.begin(); it != base.state.end(); ++it) {
      const auto& want = it.value()["data"];
      const auto& got = t.state.at(it.key())["data"];
      REQUIRE(got.size() == want.size());
      double scale = 1e-12, worst = 0;
      for (size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want[i].get<double>()));
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(got[i].get<double>() - want[i].get<double>()));
      INFO(it.key());
      CHECK(worst / scale < 1e-5);
    }
  }
}

TEST_CASE("save with --save-shard-size writes save_pretrained's shards and index, which load back", "[mpi][llama][checkpoint]") {
  const fs::path dir = scratch("sharded-save");
  fs::remove_all(dir);
  Run r = train(2, "--model llama-tiny --steps 2 --save '" + dir.string() + "' --save-shard-size 40K" + kData + "'" +
                       corpus().string() + "'");
  REQUIRE(r.code == 0);
  CHECK(!fs::exists(dir / "model.safetensors"));
  std::ifstream in(dir / "model.safetensors.index.json");
  const nlohmann::json index = nlohmann::json::parse(in);
  // 288,792 bytes of f32 weights; a 55 KB embedding is a file of its own.
  CHECK(index["metadata"]["total_size"] == 288792);
  std::set<std::string> files;
  Weights all;
  for (const auto& [tensor, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  CHECK(files.size() == 7);
  for (const std::string& f : files) {
    CHECK(f.find("-of-00007.safetensors") != std::string::npos);
    CHECK(fs::file_size(dir / f) < 40 * 1024 + 55 * 1024);
    for (auto& [name, t] : read_all(dir / f)) all[name] = t;
  }
  CHECK(all.size() == index["weight_map"].size());
  CHECK(all.size() == 21);  // llama-tiny's parameters, each in exactly one file
  // It loads (3 ranks), and saving unsharded into the same folder leaves no shard behind.
  r = train(3, "--init '" + dir.string() + "' --steps 1 --optimizer sgd --lr 1e-30 --save '" + dir.string() + "'" +
                   " --seq 16 --batch 6 --data '" + corpus().string() + "'");
  REQUIRE(r.code == 0);
  CHECK(!fs::exists(dir / "model.safetensors.index.json"));
  CHECK(!fs::exists(dir / *files.begin()));
  CHECK(read_all(dir / "model.safetensors") == all);
}
