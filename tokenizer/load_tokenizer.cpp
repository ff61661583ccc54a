// Which file a path names (a checkpoint folder's tokenizer.model, else its
// tokenizer.json), which reader takes it, and the BOS and EOS tokens:
// tokenizer_config.json's bos_token/eos_token beside the file when given,
// else the SentencePiece model's, else a well-known special token.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fsdpc {
namespace {

namespace fs = std::filesystem;

// tokenizer_config.json's `key`: a string or {"content": ...}; "" if absent.
std::string config_token(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
  return "";
}

void read_ends(Tokenizer& tokenizer, const fs::path& file) {
  std::optional<TokenId> bos = tokenizer.bos_id(), eos = tokenizer.eos_id();
  if (!bos && !eos) {  // a tokenizer.json names neither: the usual special tokens
    for (const char* name : {"<|begin_of_text|>", "<s>", "<bos>"})
      if (auto id = tokenizer.token_to_id(name); id && !bos && tokenizer.is_special(*id)) bos = id;
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"})
      if (auto id = tokenizer.token_to_id(name); id && !eos && tokenizer.is_special(*id)) eos = id;
  }
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  std::ifstream in(config_path);
  if (in) {
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail(config_path.string(), ": not JSON: ", e.what());
    }
    if (config.is_object()) {
      for (auto [key, slot] : {std::pair{"bos_token", &bos}, std::pair{"eos_token", &eos}}) {
        if (auto it = config.find(key); it != config.end() && it->is_null()) {
          slot->reset();  // none, said outright (Qwen2's bos_token)
          continue;
        }
        const std::string name = config_token(config, key);
        if (name.empty()) continue;
        std::optional<TokenId> id = tokenizer.token_to_id(name);
        if (!id) fail(config_path.string(), ": ", key, " '", name, "' is not a token of ", tokenizer.source());
        *slot = id;
      }
    }
  }
  tokenizer.set_bos_eos(bos, eos);
}

}  // namespace

std::string find_tokenizer_file(const std::string& path) {
  if (!fs::is_directory(path)) return path;
  for (const char* name : {"tokenizer.model", "tokenizer.json"})
    if (fs::is_regular_file(fs::path(path) / name)) return (fs::path(path) / name).string();
  return "";
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (!fs::exists(path)) fail(path, ": no such file or folder");
  const std::string file = find_tokenizer_file(path);
  if (file.empty()) fail(path, ": the folder has no tokenizer.json or tokenizer.model");
  std::unique_ptr<Tokenizer> tokenizer;
  if (fs::path(file).extension() == ".json") tokenizer = read_hf_tokenizer_json(file);
  else tokenizer = std::make_unique<SentencePieceTokenizer>(file);
  read_ends(*tokenizer, fs::path(file));
  return tokenizer;
}

}  // namespace fsdpc
