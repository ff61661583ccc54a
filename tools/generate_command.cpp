// fsdpc generate: samples a continuation of a prompt from a checkpoint of any
// registered family with Hugging Face weights (frontend/models/registry.h)
// on one CPU rank. With a tokenizer (--tokenizer, or the one in the --init
// folder) the prompt is text and the continuation prints as text; without
// one a byte-level model (vocab 256) reads and prints bytes, any other
// vocabulary space-separated token ids. Under mpirun only rank 0 generates
// (the others have nothing to share the work of).
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "executors/comm/mpi_world.h"
#include "frontend/generate.h"
#include "frontend/models/registry.h"
#include "ir/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {

namespace {

constexpr int64_t kByteVocab = 256;

struct GenerateArgs {
  std::string init, config, prompt, tokenizer;
  int64_t max_new_tokens = 0, top_k = 0;
  double temperature = 1.0;
  uint64_t seed = 0;
};

std::vector<int64_t> parse_prompt(const std::string& prompt, int64_t vocab) {
  std::vector<int64_t> ids;
  if (vocab == kByteVocab) {
    for (unsigned char c : prompt) ids.push_back(c);
    return ids;
  }
  std::istringstream in(prompt);
  for (std::string word; in >> word;) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) fail("--prompt: '", word, "' is not a token id (vocab ", vocab, " models take ids)");
    if (id < 0 || id >= vocab) fail("--prompt: token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    ids.push_back(id);
  }
  return ids;
}

void print_token(int64_t id, bool bytes, bool first) {
  if (bytes) std::putchar(static_cast<int>(id));
  else std::printf("%s%lld", first ? "" : " ", static_cast<long long>(id));
}

// The tokenizer of --tokenizer, else of the --init folder (or the folder
// of an --init file); null when there is none.
std::unique_ptr<Tokenizer> find_tokenizer(const GenerateArgs& a) {
  if (!a.tokenizer.empty()) return load_tokenizer(a.tokenizer);
  const std::filesystem::path init(a.init);
  const std::string folder = std::filesystem::is_directory(init) ? init.string() : init.parent_path().string();
  if (folder.empty() || find_tokenizer_file(folder).empty()) return nullptr;
  return load_tokenizer(folder);
}

// Samples and prints text: the prompt's ids (after BOS where the tokenizer
// has one of its own, as Llama's tokenizers add it) and, after each token,
// whatever the decoded text gained, held back while it ends in a cut
// character (U+FFFD); decoding the whole keeps SentencePiece's spaces.
void generate_text(Generator& generator, const Tokenizer& tokenizer, const GenerateArgs& a) {
  if (tokenizer.vocab_size() > generator.model().vocab_size())
    fail(tokenizer.source(), " has ", tokenizer.vocab_size(), " ids, more than the model's vocabulary of ",
         generator.model().vocab_size());
  std::vector<TokenId> ids;
  if (tokenizer.bos_id() && tokenizer.bos_id() != tokenizer.eos_id()) ids.push_back(*tokenizer.bos_id());
  tokenizer.encode_into(a.prompt, ids);
  if (ids.empty()) fail("--prompt is empty; give at least one character");
  std::fputs(a.prompt.c_str(), stdout);
  const std::string base = tokenizer.decode(ids, /*skip_special=*/true);
  size_t printed = base.size();
  const std::string cut = "\xEF\xBF\xBD";
  std::vector<int64_t> prompt(ids.begin(), ids.end());
  generator.generate(prompt, a.max_new_tokens, SamplingOptions{a.temperature, a.top_k}, a.seed, [&](int64_t id) {
    ids.push_back(static_cast<TokenId>(id));
    const std::string text = tokenizer.decode(ids, /*skip_special=*/true);
    if (text.size() <= printed || text.compare(0, base.size(), base) != 0) return;
    if (text.size() >= cut.size() && text.compare(text.size() - cut.size(), cut.size(), cut) == 0) return;
    std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
    std::fflush(stdout);
    printed = text.size();
  });
  std::putchar('\n');
}

void run_generate(const GenerateArgs& a) {
  mpi_init();
  if (mpi_world_rank() != 0) return;
  HfWeights weights(a.init);
  std::string config_path = a.config.empty() ? weights.config_path() : a.config;
  if (config_path.empty()) fail("--init ", a.init, ": no config.json beside the weights; pass --config");
  std::unique_ptr<Model> model = make_model_from_config(config_path);
  auto* lm = dynamic_cast<LanguageModel*>(model.get());
  FSDPC_CHECK(lm != nullptr) << "a config.json makes a language model";
  model.release();
  Generator generator(std::unique_ptr<LanguageModel>(lm), weights);
  if (std::unique_ptr<Tokenizer> tokenizer = find_tokenizer(a)) return generate_text(generator, *tokenizer, a);
  const int64_t vocab = generator.model().vocab_size();
  const bool bytes = vocab == kByteVocab;
  std::vector<int64_t> prompt = parse_prompt(a.prompt, vocab);
  if (prompt.empty()) fail("--prompt is empty; give at least one ", bytes ? "character" : "token id");
  SamplingOptions options{a.temperature, a.top_k};
  for (size_t i = 0; i < prompt.size(); ++i) print_token(prompt[i], bytes, i == 0);
  // Streamed, so a long generation shows progress.
  generator.generate(prompt, a.max_new_tokens, options, a.seed, [&](int64_t id) {
    print_token(id, bytes, false);
    std::fflush(stdout);
  });
  std::putchar('\n');
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd =
      app.add_subcommand("generate", "Sample a continuation of a prompt from a " + supported_families_text() + " checkpoint (CPU, one rank)");
  cmd->add_option("--init", a->init, "Hugging Face weights (" + supported_architectures_text() + "): a .safetensors file or a folder")
      ->required()->check(CLI::ExistingPath);
  cmd->add_option("--config", a->config, "config.json of the model (default: the one beside the weights)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--prompt", a->prompt,
                  "Text with a tokenizer or a byte-level (vocab 256) model, else space-separated token ids")
      ->required();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "The tokenizer (a folder, tokenizer.json or .model; default: the one in the --init folder, if any)")
      ->check(CLI::ExistingPath);
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "Tokens to sample")->required()->check(whole_number(0));
  cmd->add_option("--temperature", a->temperature, "Softmax temperature (0: greedy)")->check(real_number(0, true))
      ->capture_default_str();
  cmd->add_option("--top-k", a->top_k, "Sample from the K most likely tokens (default: all)")
      ->check(whole_number(1));
  cmd->add_option("--seed", a->seed, "Seed of the sampling")->capture_default_str();
  return Command{cmd, [a] { run_generate(*a); }};
}

}  // namespace fsdpc::cli
