// Loading and saving Hugging Face weights, shard by shard.
#include "frontend/hf_checkpoint.h"

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "runtime/io/files.h"

namespace fsdpc {

namespace fs = std::filesystem;

namespace {

std::string strip_prefix(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

}  // namespace

HfWeights::HfWeights(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path dir(path), single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    if (fs::exists(single)) {
      add_file(single.string(), nullptr);
    } else if (fs::exists(index)) {
      SafetensorsIndex idx = read_safetensors_index(index.string());
      std::map<std::string, std::map<std::string, std::string>> by_file;
      for (const auto& [tensor, file] : idx.weight_map) by_file[file][tensor] = file;
      for (const auto& [file, names] : by_file) add_file(file, &names);
    } else {
      fail(path, ": no model.safetensors or model.safetensors.index.json in this folder");
    }
    if (fs::exists(dir / "config.json")) config_path_ = (dir / "config.json").string();
  } else {
    add_file(path, nullptr);
    fs::path beside = fs::path(path).parent_path() / "config.json";
    if (fs::exists(beside)) config_path_ = beside.string();
  }
}

void HfWeights::add_file(const std::string& path, const std::map<std::string, std::string>* only) {
  files_.push_back(std::make_unique<SafetensorsFile>(path));
  const SafetensorsFile* f = files_.back().get();
  for (const SafetensorsEntry& e : f->entries()) {
    if (only && !only->count(e.name)) continue;  // the index assigns this tensor to another file
    std::string name = strip_prefix(e.name);
    if (tensors_.count(name)) fail(path, ": tensor ", e.name, " appears twice in the checkpoint");
    tensors_[name] = Tensor{f, &e};
  }
}

void check_hf_weights(const LanguageModel& model, const HfWeights& weights) {
  std::string missing, unexpected;
  std::map<std::string, bool> wanted;
  for (const NamedParam& p : model.named_parameters()) {
    wanted[p.path] = true;
    auto it = weights.tensors().find(p.path);
    if (it == weights.tensors().end()) {
      missing += (missing.empty() ? "" : ", ") + p.path;
    } else if (it->second.entry->shape != p.spec->shape) {
      fail("checkpoint tensor ", p.path, " has shape ", shape_str(it->second.entry->shape),
           ", the model expects ", shape_str(p.spec->shape));
    }
  }
  for (const auto& [name, t] : weights.tensors())
    if (!wanted.count(name) && !model.is_ignored_buffer(name) &&
        !(name == "lm_head.weight" && !model.tied_head().empty()))
      unexpected += (unexpected.empty() ? "" : ", ") + name;
  if (!missing.empty()) fail("checkpoint is missing tensors: ", missing);
  if (!unexpected.empty()) fail("checkpoint has unexpected tensors: ", unexpected);
}

void load_hf_weights(Engine& engine, const LanguageModel& model, const HfWeights& weights) {
  check_hf_weights(model, weights);
  engine.load_parameters([&](const std::string& path, const Shape&, int64_t row_begin, int64_t rows, float* out) {
    const HfWeights::Tensor& t = weights.tensors().at(path);
    t.file->read_rows_f32(*t.entry, row_begin, rows, out);
  });
  // A tied head: a checkpoint that stores both must agree.
  const std::string tied = model.tied_head();
  if (tied.empty()) return;
  auto head = weights.tensors().find("lm_head.weight");
  auto wte = weights.tensors().find(tied);
  if (head != weights.tensors().end() && wte != weights.tensors().end()) {
    if (head->second.entry->shape != wte->second.entry->shape)
      fail("lm_head.weight has shape ", shape_str(head->second.entry->shape), " but the tied ", tied, " has ",
           shape_str(wte->second.entry->shape));
    for (const Engine::Shard& s : engine.shards()) {
      if (s.path != tied) continue;
      const int64_t rows = s.value->type.shape[0], cols = numel(s.value->type.shape) / rows;
      std::vector<float> h(static_cast<size_t>(rows * cols));
      head->second.file->read_rows_f32(*head->second.entry, s.row_begin, rows, h.data());
      const std::vector<float> w = engine.to_host(*s.value);
      for (size_t i = 0; i < h.size(); ++i)
        if (h[i] != w[i])
          fail("lm_head.weight differs from the tied ", tied, " at row ", s.row_begin + static_cast<int64_t>(i) / cols);
    }
  }
}

std::vector<std::string> save_hf_checkpoint(Engine& engine, const LanguageModel& model, const std::string& dir,
                                            int64_t shard_bytes) {
  if (shard_bytes <= 0) fail("the largest checkpoint shard must be positive, got ", shard_bytes, " bytes");
  std::map<std::string, HostTensor> state = engine.full_state_dict();
  if (engine.rank() != 0) return {};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, ": cannot create the checkpoint folder (", ec.message(), ")");
  // Shards in name order; a tensor larger than the limit gets a file of its own.
  std::vector<std::vector<SafetensorsTensor>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const auto& [name, t] : state) {
    const int64_t bytes = 4 * numel(t.shape);
    if (!shards.back().empty() && in_shard + bytes > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back({name, t.shape, t.f32.data()});
    in_shard += bytes;
    total += bytes;
  }
  const fs::path folder(dir), single = folder / "model.safetensors", index = folder / "model.safetensors.index.json";
  // The other layout's files, from an earlier save: a folder with both
  // would load model.safetensors and ignore the index.
  auto is_shard_file = [](const std::string& f) {
    return f.rfind("model-", 0) == 0 && f.find("-of-") != std::string::npos && f.size() > 12 &&
           f.compare(f.size() - 12, 12, ".safetensors") == 0;
  };
  for (const fs::directory_entry& e : fs::directory_iterator(folder))
    if (is_shard_file(e.path().filename().string())) fs::remove(e.path());
  std::vector<std::string> written;
  if (shards.size() == 1) {
    fs::remove(index);
    write_safetensors(single.string(), shards[0], {{"format", "pt"}});
    written.push_back("model.safetensors");
  } else {
    fs::remove(single);
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    char file[64];
    for (size_t k = 0; k < shards.size(); ++k) {
      std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
      write_safetensors((folder / file).string(), shards[k], {{"format", "pt"}});
      for (const SafetensorsTensor& t : shards[k]) weight_map[t.name] = file;
      written.push_back(file);
    }
    nlohmann::ordered_json j = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomically(index.string(), j.dump(2) + "\n");
    written.push_back("model.safetensors.index.json");
  }
  save_hf_config(model, dir);
  return written;
}

void save_hf_config(const LanguageModel& model, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, ": cannot create the checkpoint folder (", ec.message(), ")");
  write_file_atomically((fs::path(dir) / "config.json").string(), model.hf_config_json());
}

}  // namespace fsdpc
