// Weights and data in, checkpoints out, through `fsdpc train` as users run
// it: a checkpoint written by the project loads with 2 ranks (zero3) and 1
// rank and the loss curves agree to 1e-5; the files follow the safetensors
// format and a Hugging Face config.json; bad weight and data files fail
// before training with exit code 2 and a message that names the problem.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "frontend/models/registry.h"
#include "runtime/io/safetensors.h"
#include "test/run_cli.h"
#include "test/scratch.h"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

using fsdpc::testing::scratch;

// A small deterministic text corpus (byte-level tokens).
fs::path corpus() {
  fs::path p = scratch("corpus.txt");
  if (fs::exists(p)) return p;
  std::ofstream out(p);
  const char* words[] = {"shard ", "gather ", "reduce ", "scatter ", "the ", "model ", "state ", "rank ", "step\n"};
  for (int i = 0; i < 4000; ++i) out << words[(i * 7 + i / 9) % 9];
  return p;
}

struct Result {
  int code;
  std::string output;
  std::vector<double> losses;
};

Result train(int np, const std::string& flags) {
  fs::path log = scratch("log.jsonl");
  fs::remove(log);
  const fsdpc::testing::Run run =
      fsdpc::testing::run_fsdpc_mpi(np, "train " + flags + " --log-json '" + log.string() + "'", {.merge = true});
  Result r{run.code, run.out, {}};
  std::ifstream l(log);
  for (std::string line; std::getline(l, line);) r.losses.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return r;
}

const std::string kData = " --seq 32 --batch 8 --lr 1e-3 --data ";

}  // namespace

TEST_CASE("a saved checkpoint is Hugging Face safetensors and loads at any world size", "[mpi][checkpoint]") {
  const fs::path ck = scratch("ck");
  Result first = train(1, "--model gpt2-tiny --steps 4 --save '" + ck.string() + "'" + kData + "'" + corpus().string() + "'");
  INFO(first.output);
  REQUIRE(first.code == 0);

  // The files: safetensors with the model's names and shapes, and a config
  // that builds the same model.
  fsdpc::SafetensorsFile file((ck / "model.safetensors").string());
  auto model = fsdpc::make_model_from_config((ck / "config.json").string());
  auto params = model->named_parameters();
  REQUIRE(file.entries().size() == params.size());
  for (const auto& p : params) {
    const fsdpc::SafetensorsEntry* e = file.find(p.path);
    REQUIRE(e != nullptr);
    CHECK(e->dtype == "F32");
    CHECK(e->shape == p.spec->shape);
  }
  CHECK(!fs::exists(ck / "model.safetensors.tmp"));

  // Training from it: one rank, two ranks under zero3 and zero2, and four
  // as tensor parallelism 2 x zero3 (each rank cuts its part of the full
  // weights), agree.
  const std::string from = "--init '" + ck.string() + "' --steps 4" + kData + "'" + corpus().string() + "'";
  Result one = train(1, from), two = train(2, from + " --strategy zero3"), z2 = train(2, from + " --strategy zero2");
  Result tp = train(4, from + " --strategy zero3 --tp 2");
  INFO(one.output << two.output << tp.output);
  REQUIRE(one.code == 0);
  REQUIRE(two.code == 0);
  REQUIRE(z2.code == 0);
  REQUIRE(tp.code == 0);
  REQUIRE(one.losses.size() == 4);
  REQUIRE(two.losses.size() == 4);
  REQUIRE(tp.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(two.losses[i] == Approx(one.losses[i]).epsilon(1e-5));
    CHECK(z2.losses[i] == Approx(one.losses[i]).epsilon(1e-5));
    CHECK(tp.losses[i] == Approx(one.losses[i]).epsilon(1e-5));
  }
  // It starts where the first run ended (the loaded weights are the trained ones).
  CHECK(one.losses[0] < first.losses[0]);
}

TEST_CASE("bad weight and data files fail before training with exit code 2", "[mpi][checkpoint]") {
  const fs::path ck = scratch("ck-bad");
  REQUIRE(train(1, "--model gpt2-tiny --steps 1 --save '" + ck.string() + "'" + kData + "'" + corpus().string() + "'")
              .code == 0);
  auto model = fsdpc::make_model("gpt2-tiny");
  std::vector<float> zeros(256 * 64, 0.0f);

  // Missing tensors are listed, unexpected ones too, and a wrong shape names both.
  fs::path partial = scratch("partial.safetensors");
  fsdpc::write_safetensors(partial.string(), {{"wte.weight", {256, 64}, zeros.data()}, {"extra.weight", {4}, zeros.data()}});
  Result r = train(1, "--model gpt2-tiny --steps 1 --init '" + partial.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("missing tensors: wpe.weight, h.0.ln_1.weight"));
  fs::path shaped = scratch("shaped.safetensors");
  fsdpc::write_safetensors(shaped.string(), {{"wte.weight", {128, 64}, zeros.data()}});
  r = train(1, "--model gpt2-tiny --steps 1 --init '" + shaped.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("wte.weight has shape [128, 64], the model expects [256, 64]"));

  // A truncated file.
  fs::path cut = scratch("cut.safetensors");
  fs::copy_file(ck / "model.safetensors", cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  r = train(2, "--model gpt2-tiny --steps 1 --strategy zero3 --init '" + cut.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains(cut.string()));

  // Data: a token id the vocabulary does not have, and a file shorter than one window.
  fs::path big = scratch("big.bin");
  {
    std::ofstream out(big, std::ios::binary);
    for (int i = 0; i < 1000; ++i) {
      uint16_t t = i == 5 ? 300 : static_cast<uint16_t>(i % 200);
      out.write(reinterpret_cast<const char*>(&t), 2);
    }
  }
  r = train(1, "--model gpt2-tiny --steps 1" + kData + "'" + big.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("300"));
  fs::path tiny = scratch("tiny.txt");
  std::ofstream(tiny) << "too short";
  r = train(1, "--model gpt2-tiny --steps 1" + kData + "'" + tiny.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("shorter than one window"));
}

TEST_CASE("resume continues bit for bit, and at other world sizes; a kill mid-save keeps the last checkpoint",
          "[mpi][checkpoint]") {
  const std::string data = kData + "'" + corpus().string() + "' --strategy zero3 --optimizer adamw";
  const Result whole = train(2, "--model gpt2-tiny --steps 6" + data);
  REQUIRE(whole.code == 0);
  REQUIRE(whole.losses.size() == 6);

  // Save at steps 2 and 4, then get killed while saving step 6's state.
  const fs::path ck = scratch("ck-resume");
  fs::remove_all(ck);
  setenv("FSDPC_TEST_KILL_DURING_SAVE", "6", 1);
  Result killed = train(2, "--model gpt2-tiny --steps 6 --save-every 2 --save '" + ck.string() + "'" + data);
  unsetenv("FSDPC_TEST_KILL_DURING_SAVE");
  INFO(killed.output);
  CHECK(killed.code != 0);
  std::ifstream latest(ck / "state" / "latest");
  std::string name;
  latest >> name;
  CHECK(name == "step-4");  // the interrupted save never became the latest
  CHECK(fs::exists(ck / "state" / "step-4" / "rank-0.safetensors"));
  CHECK(fs::exists(ck / "state" / "step-4" / "rank-1.safetensors"));

  // Resuming continues from step 4 exactly as the uninterrupted run did.
  Result resumed = train(2, "--resume '" + ck.string() + "' --steps 6" + data);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  REQUIRE(resumed.losses.size() == 2);
  CHECK(resumed.losses[0] == whole.losses[4]);
  CHECK(resumed.losses[1] == whole.losses[5]);

  // At another world size and strategy each rank reads its rows from the
  // shards that hold them; the run continues to 1e-5.
  for (const std::string& other : {std::string("1 zero3"), std::string("4 zero2"), std::string("2 no_shard")}) {
    const int np = other[0] - '0';
    std::string flags = "--resume '" + ck.string() + "' --steps 6" + kData + "'" + corpus().string() +
                        "' --optimizer adamw --strategy " + other.substr(2);
    Result moved = train(np, flags);
    INFO(other << "\n" << moved.output);
    REQUIRE(moved.code == 0);
    REQUIRE(moved.losses.size() == 2);
    CHECK(moved.losses[0] == Approx(whole.losses[4]).epsilon(1e-5));
    CHECK(moved.losses[1] == Approx(whole.losses[5]).epsilon(1e-5));
  }
}

TEST_CASE("a sharded checkpoint holds no gathered model and resumes at another world size", "[mpi][checkpoint]") {
  const std::string data = kData + "'" + corpus().string() + "' --optimizer adamw";
  const Result whole = train(2, "--model gpt2-tiny --steps 4 --strategy zero3" + data);
  REQUIRE(whole.code == 0);
  const fs::path ck = scratch("ck-sharded");
  fs::remove_all(ck);
  Result saved = train(2, "--model gpt2-tiny --steps 2 --strategy zero3 --checkpoint sharded --save '" + ck.string() +
                              "'" + data);
  INFO(saved.output);
  REQUIRE(saved.code == 0);
  CHECK(!fs::exists(ck / "model.safetensors"));  // no rank gathered the model
  CHECK(fs::exists(ck / "config.json"));
  std::ifstream index(ck / "state" / "step-2" / "index.json");
  nlohmann::json j = nlohmann::json::parse(index);
  CHECK(j["world"] == 2);
  CHECK(j["files"].size() == 2);

  Result resumed = train(1, "--resume '" + ck.string() + "' --steps 4 --strategy zero2" + data);
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  REQUIRE(resumed.losses.size() == 2);
  CHECK(resumed.losses[0] == Approx(whole.losses[2]).epsilon(1e-5));
  CHECK(resumed.losses[1] == Approx(whole.losses[3]).epsilon(1e-5));

  // Another seed would not continue the same run.
  Result reseeded = train(1, "--resume '" + ck.string() + "' --steps 4 --seed 9" + data);
  CHECK(reseeded.code == 2);
  CHECK_THAT(reseeded.output, Contains("trained with --seed 0"));
}

namespace {

// Rewrites rank file `file` with metadata `key` set to `value` (the tensors
// unchanged), as a damaged or hand-edited checkpoint would be.
void set_rank_meta(const fs::path& file, const std::string& key, const std::string& value) {
  std::vector<std::vector<float>> data;
  std::vector<fsdpc::SafetensorsTensor> tensors;
  std::map<std::string, std::string> meta;
  {
    fsdpc::SafetensorsFile f(file.string());
    meta = f.metadata();
    for (const auto& e : f.entries()) {
      data.emplace_back(static_cast<size_t>(fsdpc::numel(e.shape)));
      f.read_rows_f32(e, 0, e.shape.empty() ? 1 : e.shape[0], data.back().data());
      tensors.push_back({e.name, e.shape, data.back().data()});
    }
  }
  meta[key] = value;
  fsdpc::write_safetensors(file.string(), tensors, meta);
}

}  // namespace

// Each rank file records which tp part its rows are of; a resume puts the
// full tensors (parameters and AdamW state) together from the files and
// cuts its own part, so a tp 2 x zero3 checkpoint continues at tp 2, at
// tp 1 and a tp 1 checkpoint at tp 2, as the uninterrupted run did.
TEST_CASE("a tensor-parallel checkpoint resumes at the same layout, at tp 1, and a tp 1 one at tp 2",
          "[mpi][checkpoint][tp]") {
  const std::string data = kData + "'" + corpus().string() + "' --strategy zero3 --optimizer adamw";
  const Result whole = train(4, "--model gpt2-tiny --steps 4 --tp 2" + data);
  INFO(whole.output);
  REQUIRE(whole.code == 0);
  REQUIRE(whole.losses.size() == 4);
  const fs::path ck = scratch("ck-tp"), ck1 = scratch("ck-tp1");
  fs::remove_all(ck);
  fs::remove_all(ck1);
  Result saved = train(4, "--model gpt2-tiny --steps 2 --tp 2 --save '" + ck.string() + "'" + data);
  INFO(saved.output);
  REQUIRE(saved.code == 0);
  // The Hugging Face export holds the full parameters, gathered over tp.
  {
    fsdpc::SafetensorsFile hf((ck / "model.safetensors").string());
    const fsdpc::SafetensorsEntry* c_attn = hf.find("h.0.attn.c_attn.weight");
    REQUIRE(c_attn != nullptr);
    CHECK(c_attn->shape == fsdpc::Shape{64, 192});
    // World rank 1 is tp rank 1 of data-parallel rank 0: its file says so.
    fsdpc::SafetensorsFile r1((ck / "state" / "step-2" / "rank-1.safetensors").string());
    CHECK(r1.metadata().at("h.0.attn.c_attn.weight.tp") == "2");
    CHECK(r1.metadata().at("h.0.attn.c_attn.weight.tp_rank") == "1");
    CHECK(r1.metadata().at("wte.weight.tp") == "2");  // vocabulary rows
    CHECK(r1.metadata().at("wte.weight.tp_dim") == "0");
    CHECK(r1.metadata().at("wpe.weight.tp") == "1");  // replicated on the tp group
    const fsdpc::SafetensorsEntry* wte = hf.find("wte.weight");
    REQUIRE(wte != nullptr);
    CHECK(wte->shape == fsdpc::Shape{256, 64});
  }

  auto resume = [&](int np, const std::string& dir, const std::string& layout) {
    Result r = train(np, "--resume '" + dir + "' --steps 4" + data + layout);
    INFO(np << " ranks" << layout << "\n" << r.output);
    REQUIRE(r.code == 0);
    REQUIRE(r.losses.size() == 2);
    CHECK(r.losses[0] == Approx(whole.losses[2]).epsilon(1e-5));
    CHECK(r.losses[1] == Approx(whole.losses[3]).epsilon(1e-5));
    return r;
  };
  // Permuting heads consistently over q, k, v and the output projection is
  // a symmetry of the model, so the losses alone would not see a part put
  // back in the wrong place: the parameters a resume restores must be the
  // export's, value for value (--steps 2: resumed, no step taken).
  auto restores_export = [&](int np, const fs::path& dir, const std::string& layout) {
    const fs::path state = scratch("tp-state.json");
    Result r = train(np, "--resume '" + dir.string() + "' --steps 2 --save-state '" + state.string() + "'" + data +
                             layout);
    INFO(np << " ranks" << layout << "\n" << r.output);
    REQUIRE(r.code == 0);
    std::ifstream in(state);
    const nlohmann::json j = nlohmann::json::parse(in);
    fsdpc::SafetensorsFile hf((dir / "model.safetensors").string());
    REQUIRE(j.size() == hf.entries().size());
    for (const auto& e : hf.entries()) {
      std::vector<float> want(static_cast<size_t>(fsdpc::numel(e.shape)));
      hf.read_rows_f32(e, 0, e.shape.empty() ? 1 : e.shape[0], want.data());
      const nlohmann::json& got = j.at(e.name).at("data");
      REQUIRE(got.size() == want.size());
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) differ += static_cast<float>(got[i].get<double>()) != want[i];
      INFO(e.name);
      CHECK(differ == 0);
    }
  };
  restores_export(1, ck, "");

  // The same layout continues bit for bit.
  const Result same = resume(4, ck.string(), " --tp 2");
  CHECK(same.losses[0] == whole.losses[2]);
  CHECK(same.losses[1] == whole.losses[3]);
  resume(2, ck.string(), "");  // tp 1, 2 data-parallel ranks
  resume(1, ck.string(), "");  // tp 1, one rank

  // A tp 1 checkpoint at tp 2.
  Result saved1 = train(2, "--model gpt2-tiny --steps 2 --save '" + ck1.string() + "'" + data);
  INFO(saved1.output);
  REQUIRE(saved1.code == 0);
  resume(4, ck1.string(), " --tp 2");
  restores_export(4, ck1, " --tp 2");

  // Bad files: a missing rank file, and metadata that puts a part nowhere,
  // name the file (and the tensor) and exit with code 2. Without the index
  // the digests are not checked first, so the metadata is what is read.
  const fs::path step = ck / "state" / "step-2";
  const std::string flight = " --flight-dir '" + scratch("flight").string() + "'";  // the failures' records
  fs::remove(step / "index.json");
  set_rank_meta(step / "rank-1.safetensors", "h.0.attn.c_attn.weight.tp_rank", "5");
  Result bad = train(2, "--resume '" + ck.string() + "' --steps 4" + data + flight);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("rank-1.safetensors: h.0.attn.c_attn.weight.tp_rank is 5, not a rank of tp 2"));
  set_rank_meta(step / "rank-1.safetensors", "h.0.attn.c_attn.weight.tp_rank", "0");  // two copies of part 0
  bad = train(4, "--resume '" + ck.string() + "' --steps 4 --tp 2" + data + flight);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("elements of h.0.attn.c_attn.weight") && Contains("are not in any rank file"));
  fs::remove(step / "rank-3.safetensors");
  bad = train(4, "--resume '" + ck.string() + "' --steps 4 --tp 2" + data + flight);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("rank-3.safetensors"));
}

// A vocabulary tp does not divide is padded (257 rows at tp 2: 129 per
// rank, the last one padding): the rank files hold padded parts and say so,
// the padding stays 0 in the weights and in AdamW's state, the export holds
// the 257 real rows, and a resume at tp 2 x zero3, at 1 rank and from a
// 1-rank checkpoint at tp 2 continues as the uninterrupted run did.
TEST_CASE("a padded vocabulary's tensor-parallel checkpoint resumes at tp 2 and at 1 rank", "[mpi][checkpoint][tp]") {
  const fs::path config = scratch("odd-vocab.json");
  std::ofstream(config) << R"({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 64, "vocab_size": 257,
                              "n_positions": 64})";
  const std::string model = "--config '" + config.string() + "'";
  const std::string data = kData + "'" + corpus().string() + "' --strategy zero3 --optimizer adamw";
  const Result whole = train(4, model + " --steps 4 --tp 2" + data);
  INFO(whole.output);
  REQUIRE(whole.code == 0);
  REQUIRE(whole.losses.size() == 4);
  const fs::path ck = scratch("ck-tp-vocab"), ck1 = scratch("ck-tp-vocab1");
  fs::remove_all(ck);
  fs::remove_all(ck1);
  const Result saved = train(4, model + " --steps 2 --tp 2 --save '" + ck.string() + "'" + data);
  INFO(saved.output);
  REQUIRE(saved.code == 0);
  {
    fsdpc::SafetensorsFile hf((ck / "model.safetensors").string());
    const fsdpc::SafetensorsEntry* wte = hf.find("wte.weight");
    REQUIRE(wte != nullptr);
    CHECK(wte->shape == fsdpc::Shape{257, 64});
    // World rank 3: tp rank 1 of data-parallel rank 1, rows 65..129 of the
    // part of 129 rows: 65..127 real (the vocabulary's rows 194..256), 128
    // the vocabulary's padding, 129 FSDP's.
    fsdpc::SafetensorsFile r3((ck / "state" / "step-2" / "rank-3.safetensors").string());
    CHECK(r3.metadata().at("wte.weight.tp_rank") == "1");
    CHECK(r3.metadata().at("wte.weight.tp_pad") == "1");
    CHECK(r3.metadata().at("wte.weight.row_begin") == "65");
    for (const char* name : {"wte.weight", "wte.weight.state0", "wte.weight.state1"}) {
      INFO(name);
      const fsdpc::SafetensorsEntry* e = r3.find(name);
      REQUIRE(e != nullptr);
      REQUIRE(e->shape == fsdpc::Shape{65, 64});
      std::vector<float> rows(65 * 64);
      r3.read_rows_f32(*e, 0, 65, rows.data());
      size_t nonzero_real = 0, nonzero_padding = 0;
      for (size_t i = 0; i < rows.size(); ++i) (i < 63 * 64 ? nonzero_real : nonzero_padding) += rows[i] != 0.0f;
      CHECK(nonzero_real > 0);
      CHECK(nonzero_padding == 0);
      // The export's last row is the part's row 127, this file's row 62.
      if (std::string(name) == "wte.weight") {
        std::vector<float> last(64);
        hf.read_rows_f32(*wte, 256, 1, last.data());
        CHECK(std::vector<float>(rows.begin() + 62 * 64, rows.begin() + 63 * 64) == last);
      }
    }
  }
  auto resume = [&](int np, const fs::path& dir, const std::string& layout) {
    Result r = train(np, "--resume '" + dir.string() + "' --steps 4" + data + layout);
    INFO(np << " ranks" << layout << "\n" << r.output);
    REQUIRE(r.code == 0);
    REQUIRE(r.losses.size() == 2);
    CHECK(r.losses[0] == Approx(whole.losses[2]).epsilon(1e-5));
    CHECK(r.losses[1] == Approx(whole.losses[3]).epsilon(1e-5));
    return r;
  };
  const Result same = resume(4, ck, " --tp 2");  // the same layout continues bit for bit
  CHECK(same.losses[0] == whole.losses[2]);
  CHECK(same.losses[1] == whole.losses[3]);
  resume(1, ck, "");  // tp 1, one rank: the full rows, never the padding
  const Result saved1 = train(1, model + " --steps 2 --save '" + ck1.string() + "'" + data);
  INFO(saved1.output);
  REQUIRE(saved1.code == 0);
  resume(4, ck1, " --tp 2");  // cut into padded parts
}

// A pipeline stage's rank file holds its stage's parameters only (and says
// pp in its metadata); a resume reads each parameter from the files that
// hold it, so a --pp 2 checkpoint continues at pp 2, at 1 rank and at zero3
// on 2 ranks, and a 1-rank one at pp 2 x zero3, as the uninterrupted run.
TEST_CASE("a pipeline-parallel checkpoint resumes at the same layout and without stages, and back",
          "[mpi][checkpoint][pp]") {
  const std::string data = kData + "'" + corpus().string() + "' --optimizer adamw --grad-accum 2";
  const Result whole = train(2, "--model gpt2-tiny --steps 4 --pp 2" + data);
  INFO(whole.output);
  REQUIRE(whole.code == 0);
  REQUIRE(whole.losses.size() == 4);
  const fs::path ck = scratch("ck-pp"), ck1 = scratch("ck-pp1");
  fs::remove_all(ck);
  fs::remove_all(ck1);
  Result saved = train(2, "--model gpt2-tiny --steps 2 --pp 2 --save '" + ck.string() + "'" + data);
  INFO(saved.output);
  REQUIRE(saved.code == 0);
  {
    // Stage 1's file: its block, the final norm and the tied wte; not h.0.
    fsdpc::SafetensorsFile r1((ck / "state" / "step-2" / "rank-1.safetensors").string());
    CHECK(r1.metadata().at("pp") == "2");
    CHECK(r1.find("h.1.attn.c_attn.weight") != nullptr);
    CHECK(r1.find("wte.weight") != nullptr);
    CHECK(r1.find("h.0.attn.c_attn.weight") == nullptr);
    CHECK(r1.find("wpe.weight") == nullptr);
    // The export holds every parameter, gathered from both stages.
    fsdpc::SafetensorsFile hf((ck / "model.safetensors").string());
    CHECK(hf.find("h.0.attn.c_attn.weight") != nullptr);
    CHECK(hf.find("h.1.attn.c_attn.weight") != nullptr);
    CHECK(hf.find("ln_f.weight") != nullptr);
  }
  auto resume = [&](int np, const fs::path& dir, const std::string& layout) {
    Result r = train(np, "--resume '" + dir.string() + "' --steps 4" + data + layout);
    INFO(np << " ranks" << layout << "\n" << r.output);
    REQUIRE(r.code == 0);
    REQUIRE(r.losses.size() == 2);
    CHECK(r.losses[0] == Approx(whole.losses[2]).epsilon(1e-5));
    CHECK(r.losses[1] == Approx(whole.losses[3]).epsilon(1e-5));
    return r;
  };
  const Result same = resume(2, ck, " --pp 2");
  CHECK(same.losses[0] == whole.losses[2]);  // bit for bit
  CHECK(same.losses[1] == whole.losses[3]);
  resume(1, ck, "");
  resume(2, ck, " --strategy zero3");
  Result saved1 = train(1, "--model gpt2-tiny --steps 2 --save '" + ck1.string() + "'" + data);
  INFO(saved1.output);
  REQUIRE(saved1.code == 0);
  resume(4, ck1, " --pp 2 --strategy zero3");
  // A stage file that lost a parameter of its stage: the rows are nowhere.
  const fs::path step = ck / "state" / "step-2";
  fs::remove(step / "index.json");
  fs::copy_file(step / "rank-0.safetensors", step / "rank-1.safetensors", fs::copy_options::overwrite_existing);
  Result bad = train(2, "--resume '" + ck.string() + "' --steps 4 --pp 2" + data + " --flight-dir '" +
                            scratch("flight").string() + "'");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Contains("h.1.") && Contains("not in any rank file"));
}

TEST_CASE("a checkpoint with tensors the model does not have lists them", "[mpi][checkpoint]") {
  const fs::path ck = scratch("ck-extra");
  REQUIRE(train(1, "--model gpt2-tiny --steps 1 --save '" + ck.string() + "'" + kData + "'" + corpus().string() + "'")
              .code == 0);
  fsdpc::SafetensorsFile f((ck / "model.safetensors").string());
  std::vector<std::vector<float>> data;
  std::vector<fsdpc::SafetensorsTensor> tensors;
  for (const auto& e : f.entries()) {
    const int64_t rows = e.shape.empty() ? 1 : e.shape[0];
    data.emplace_back(static_cast<size_t>(fsdpc::numel(e.shape)));
    f.read_rows_f32(e, 0, rows, data.back().data());
    tensors.push_back({e.name, e.shape, data.back().data()});
  }
  std::vector<float> extra(3, 1.0f);
  tensors.push_back({"h.7.mlp.c_fc.weight", {3}, extra.data()});
  tensors.push_back({"h.0.attn.masked_bias", {1}, extra.data()});  // a GPT-2 buffer: ignored
  fs::path file = scratch("extra.safetensors");
  fsdpc::write_safetensors(file.string(), tensors);
  Result r = train(1, "--model gpt2-tiny --steps 1 --init '" + file.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("unexpected tensors: h.7.mlp.c_fc.weight"));
  CHECK_THAT(r.output, !Contains("masked_bias"));

  // A stored lm_head must be the tied wte: equal loads (with the HF
  // "transformer." prefix too), different fails.
  tensors.pop_back();
  tensors.pop_back();
  std::vector<fsdpc::SafetensorsTensor> prefixed;
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back("transformer." + t.name);
  for (size_t i = 0; i < tensors.size(); ++i) prefixed.push_back({names[i], tensors[i].shape, tensors[i].data});
  const fsdpc::SafetensorsTensor* wte = nullptr;
  for (const auto& t : tensors)
    if (t.name == "wte.weight") wte = &t;
  REQUIRE(wte != nullptr);
  prefixed.push_back({"lm_head.weight", wte->shape, wte->data});
  fs::path tied = scratch("tied.safetensors");
  fsdpc::write_safetensors(tied.string(), prefixed);
  CHECK(train(2, "--model gpt2-tiny --steps 1 --strategy zero3 --init '" + tied.string() + "'").code == 0);
  std::vector<float> other(wte->data, wte->data + fsdpc::numel(wte->shape));
  other[5] += 1.0f;
  prefixed.back().data = other.data();
  fsdpc::write_safetensors(tied.string(), prefixed);
  r = train(1, "--model gpt2-tiny --steps 1 --init '" + tied.string() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("lm_head.weight differs from the tied wte.weight at row 0"));
}

// ---- --val-data / --eval-every, --log-every, --init from a sharded index ----

namespace {

// The JSON lines of the last train() run's --log-json.
std::vector<nlohmann::json> log_lines() {
  std::vector<nlohmann::json> out;
  std::ifstream l(scratch("log.jsonl"));
  for (std::string line; std::getline(l, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The step numbers of the printed "step N  loss ..." lines, and the text
// after "val " on each (empty when the line has no val loss).
std::vector<std::pair<int, std::string>> printed_steps(const std::string& output) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step ", 0) != 0) continue;
    const size_t v = line.find(" val ");
    std::string val;
    if (v != std::string::npos) val = line.substr(v + 5, line.find(' ', v + 5) - (v + 5));
    out.emplace_back(std::stoi(line.substr(5)), val);
  }
  return out;
}

fs::path text_file(const std::string& name, int variant) {
  fs::path p = scratch(name);
  std::ofstream out(p);
  const char* words[] = {"alpha ", "beta ", "gamma ", "delta ", "omega\n", "zeta ", "eta ", "theta "};
  for (int i = 0; i < 3000; ++i) out << words[(i * (3 + 2 * variant) + i / (5 + variant)) % 8];
  return p;
}

}  // namespace

TEST_CASE("train --val-data with --eval-every K: a finite val loss after every K-th step and the last",
          "[mpi][checkpoint][eval]") {
  const fs::path val_a = text_file("val-a.txt", 0), val_b = text_file("val-b.txt", 1);
  const std::string base = "--model gpt2-tiny --steps 7 --eval-every 3" + kData + "'" + corpus().string() + "'";
  Result a = train(2, base + " --strategy zero3 --val-data '" + val_a.string() + "'");
  INFO(a.output);
  REQUIRE(a.code == 0);
  // Evaluations after steps 3 and 6 (0-based 2 and 5) and after the last (6).
  const std::set<int> expected = {2, 5, 6};
  const std::vector<nlohmann::json> lines = log_lines();
  REQUIRE(lines.size() == 7);
  std::vector<double> val_a_losses;
  for (const nlohmann::json& j : lines) {
    const int step = j["step"].get<int>();
    INFO("step " << step);
    CHECK(j.contains("val_loss") == (expected.count(step) == 1));
    if (j.contains("val_loss")) {
      const double v = j["val_loss"].get<double>();
      CHECK(std::isfinite(v));
      CHECK(v > 0);
      val_a_losses.push_back(v);
    }
  }
  REQUIRE(val_a_losses.size() == 3);
  // The printout shows the same values (4 decimals) on the same steps, rank 0 only.
  const auto printed = printed_steps(a.output);
  REQUIRE(printed.size() == 7);
  size_t k = 0;
  for (const auto& [step, val] : printed) {
    INFO("printed step " << step);
    CHECK(val.empty() == (expected.count(step) == 0));
    if (!val.empty()) CHECK(std::stod(val) == Approx(val_a_losses.at(k++)).margin(1.5e-4));
  }

  // Other validation text: other val losses, the same training.
  Result b = train(2, base + " --strategy zero3 --val-data '" + val_b.string() + "'");
  REQUIRE(b.code == 0);
  std::vector<double> val_b_losses;
  for (const nlohmann::json& j : log_lines())
    if (j.contains("val_loss")) val_b_losses.push_back(j["val_loss"].get<double>());
  REQUIRE(val_b_losses.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(val_b_losses[i] != val_a_losses[i]);
  CHECK(b.losses == a.losses);

  // One rank sees the same val losses (the mean over ranks' windows is the
  // mean over the same windows).
  Result one = train(1, base + " --val-data '" + val_a.string() + "'");
  REQUIRE(one.code == 0);
  std::vector<double> one_losses;
  for (const nlohmann::json& j : log_lines())
    if (j.contains("val_loss")) one_losses.push_back(j["val_loss"].get<double>());
  REQUIRE(one_losses.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(one_losses[i] == Approx(val_a_losses[i]).epsilon(1e-5));

  // --eval-every 0 never evaluates.
  REQUIRE(train(1, "--model gpt2-tiny --steps 3 --eval-every 0" + kData + "'" + corpus().string() + "' --val-data '" +
                       val_a.string() + "'")
              .code == 0);
  for (const nlohmann::json& j : log_lines()) CHECK(!j.contains("val_loss"));

  // --val-data without --eval-every evaluates once, after the last step.
  REQUIRE(train(1, "--model gpt2-tiny --steps 3" + kData + "'" + corpus().string() + "' --val-data '" +
                       val_a.string() + "'")
              .code == 0);
  std::vector<int> evaluated;
  for (const nlohmann::json& j : log_lines())
    if (j.contains("val_loss")) evaluated.push_back(j["step"].get<int>());
  CHECK(evaluated == std::vector<int>{2});

  // --eval-every without --val-data is a mistake, not a silent no-op.
  Result no_val = train(1, "--model gpt2-tiny --steps 3 --eval-every 2");
  CHECK(no_val.code == 2);
  CHECK_THAT(no_val.output, Catch::Contains("--eval-every 2") && Catch::Contains("--val-data"));
}

TEST_CASE("train --log-every K prints step 0, every K-th step, every evaluation and the last step", "[mpi][checkpoint][log]") {
  // train_command.cpp: print = eval || step % K == 0 || step + 1 == steps;
  // the --log-json file keeps every step.
  auto steps_of = [](const Result& r) {
    std::vector<int> s;
    for (const auto& [step, val] : printed_steps(r.output)) s.push_back(step);
    return s;
  };
  Result r = train(2, "--model gpt2-tiny --steps 8 --log-every 3" + kData + "'" + corpus().string() + "'");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(steps_of(r) == std::vector<int>{0, 3, 6, 7});  // rank 0 alone prints
  CHECK(r.losses.size() == 8);
  // The last step is not printed twice when it is also a K-th step.
  r = train(1, "--model gpt2-tiny --steps 7 --log-every 3" + kData + "'" + corpus().string() + "'");
  REQUIRE(r.code == 0);
  CHECK(steps_of(r) == std::vector<int>{0, 3, 6});
  // Evaluations are printed whatever K says (after 0-based steps 4 and 7).
  r = train(1, "--model gpt2-tiny --steps 8 --log-every 3 --eval-every 5" + kData + "'" + corpus().string() +
                   "' --val-data '" + text_file("val-log.txt", 2).string() + "'");
  REQUIRE(r.code == 0);
  CHECK(steps_of(r) == std::vector<int>{0, 3, 4, 6, 7});
  // K = 1 (the default) prints every step.
  r = train(1, "--model gpt2-tiny --steps 3" + kData + "'" + corpus().string() + "'");
  REQUIRE(r.code == 0);
  CHECK(steps_of(r) == std::vector<int>{0, 1, 2});
}

TEST_CASE("train --init from a sharded Hugging Face folder (index + 2 files) trains from those weights",
          "[mpi][checkpoint][init]") {
  // Weights worth telling apart from an init: a model trained for 6 steps.
  const fs::path ck = scratch("ck-for-index");
  fs::remove_all(ck);
  REQUIRE(train(1, "--model gpt2-tiny --steps 6 --save '" + ck.string() + "'" + kData + "'" +
                       corpus().string() + "'")
              .code == 0);
  fsdpc::SafetensorsFile f((ck / "model.safetensors").string());
  std::vector<std::vector<float>> data;
  for (const auto& e : f.entries()) {
    data.emplace_back(static_cast<size_t>(fsdpc::numel(e.shape)));
    f.read_rows_f32(e, 0, e.shape.empty() ? 1 : e.shape[0], data.back().data());
  }

  // Hugging Face's save_pretrained layout: model-0000K-of-00002.safetensors
  // with "transformer."-prefixed names, and model.safetensors.index.json
  // mapping each name to its file.
  const fs::path dir = scratch("sharded-hf");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(ck / "config.json", dir / "config.json");
  const std::string files[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  std::vector<fsdpc::SafetensorsTensor> parts[2];
  std::vector<std::string> names;
  names.reserve(f.entries().size());
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int64_t total = 0;
  for (size_t i = 0; i < f.entries().size(); ++i) {
    const auto& e = f.entries()[i];
    const int part = e.name.rfind("h.1.", 0) == 0 || e.name.rfind("ln_f.", 0) == 0 ? 1 : 0;
    names.push_back("transformer." + e.name);
    parts[part].push_back({names.back(), e.shape, data[i].data()});
    index["weight_map"][names.back()] = files[part];
    total += 4 * fsdpc::numel(e.shape);
  }
  index["metadata"]["total_size"] = total;
  REQUIRE(!parts[0].empty());
  REQUIRE(!parts[1].empty());
  for (int p = 0; p < 2; ++p) fsdpc::write_safetensors((dir / files[p]).string(), parts[p], {{"format", "pt"}});
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);

  // The same weights as one file (the checkpoint folder itself), and the
  // default init: the sharded folder trains exactly as the single file does
  // (bit for bit on one rank, to 1e-5 on two), not as the init does.
  const std::string run = " --steps 3" + kData + "'" + corpus().string() + "'";
  Result single = train(1, "--init '" + ck.string() + "'" + run);
  Result sharded = train(1, "--init '" + dir.string() + "'" + run);
  Result sharded2 = train(2, "--init '" + dir.string() + "' --strategy zero3" + run);
  Result fresh = train(1, "--model gpt2-tiny" + run);
  INFO(single.output << sharded.output << sharded2.output);
  REQUIRE(single.code == 0);
  REQUIRE(sharded.code == 0);
  REQUIRE(sharded2.code == 0);
  REQUIRE(sharded.losses.size() == 3);
  CHECK(sharded.losses == single.losses);
  for (size_t i = 0; i < 3; ++i) CHECK(sharded2.losses[i] == Approx(single.losses[i]).epsilon(1e-5));
  CHECK(std::fabs(sharded.losses[0] - fresh.losses[0]) > 1e-3);

  // A tensor the index names but its file lacks: listed as missing.
  const fs::path gap = scratch("sharded-gap");
  fs::remove_all(gap);
  fs::copy(dir, gap);
  std::vector<fsdpc::SafetensorsTensor> fewer;
  for (const auto& t : parts[1])
    if (t.name != "transformer.ln_f.bias") fewer.push_back(t);
  REQUIRE(fewer.size() + 1 == parts[1].size());
  fsdpc::write_safetensors((gap / files[1]).string(), fewer);
  Result r = train(1, "--init '" + gap.string() + "'" + run);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains("missing tensors: ln_f.bias"));

  // A shard file that is not there: exit 2 naming it, on every rank count.
  fs::remove(gap / files[1]);
  r = train(2, "--init '" + gap.string() + "' --strategy zero3" + run);
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Contains(files[1]));
  CHECK(r.losses.empty());  // nothing trained
}
