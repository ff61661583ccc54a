// fsdpc tokenize: text files to the token files `fsdpc train --data`
// reads, with a checkpoint's tokenizer (tokenizer/tokenize_files.h does
// the work; this file turns the flags into its options and reports).
// Progress goes to stderr on a terminal, or now and then when it is slow.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "ir/error.h"
#include "runtime/io/files.h"
#include "tokenizer/tokenize_files.h"
#include "tools/cli_io.h"
#include "tools/commands.h"

namespace fsdpc::cli {
namespace {

// Off a terminal a progress line every this many seconds, once a run has
// taken that long.
constexpr double kSlowReportSeconds = 10;

struct TokenizeArgs {
  std::string tokenizer, out, eot;
  std::vector<std::string> inputs;
  double val_fraction = 0;
  int threads = 0;
  bool parse_special = false;
};

void report_progress(const TokenizeProgress& p) {
  static double last_slow_report = 0;
  const bool terminal = ::isatty(STDERR_FILENO);
  if (!terminal && p.seconds - last_slow_report < kSlowReportSeconds) return;
  last_slow_report = p.seconds;
  const double mb = static_cast<double>(p.bytes_done) / 1e6, total = static_cast<double>(p.bytes_total) / 1e6;
  std::fprintf(stderr, "%stokenize: %.0f of %.0f MB (%.0f%%), %lld tokens, %.1f MB/s%s", terminal ? "\r" : "", mb, total,
               total > 0 ? 100 * mb / total : 100.0, static_cast<long long>(p.tokens), p.seconds > 0 ? mb / p.seconds : 0.0,
               terminal ? "" : "\n");
  std::fflush(stderr);
}

void run_tokenize(const TokenizeArgs& a) {
  std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(a.tokenizer);
  TokenizeOptions options;
  options.inputs = a.inputs;
  options.out = a.out;
  options.val_fraction = a.val_fraction;
  options.threads = a.threads;
  options.parse_special = a.parse_special;
  options.separator = tokenizer->eos_id();
  if (!a.eot.empty()) {
    options.separator = tokenizer->token_to_id(a.eot);
    if (!options.separator) fail("--eot '", a.eot, "' is not a token of ", tokenizer->source());
  }
  token_file_width(a.out, tokenizer->vocab_size());
  check_writable_file("--out", a.out);
  if (a.val_fraction > 0) check_writable_file("--val-fraction's file", val_path_for(a.out));
  bool reported = false;
  options.progress = [&](const TokenizeProgress& p) {
    report_progress(p);
    reported = true;
  };
  const TokenizeResult r = tokenize_files(*tokenizer, options);
  if (reported && ::isatty(STDERR_FILENO)) std::fputc('\n', stderr);
  std::printf("tokenize: %zu file%s, %lld bytes -> %lld tokens (%s, %s ids) in %.2f s, %.0f tokens/s\n", a.inputs.size(),
              a.inputs.size() == 1 ? "" : "s", static_cast<long long>(r.bytes), static_cast<long long>(r.tokens),
              tokenizer->source().c_str(), r.width == 2 ? "uint16" : "uint32", r.seconds,
              r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0);
  std::printf("  %s: %lld tokens\n", r.train_path.c_str(), static_cast<long long>(r.train_tokens));
  if (!r.val_path.empty()) std::printf("  %s: %lld tokens\n", r.val_path.c_str(), static_cast<long long>(r.val_tokens));
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "Turn text files into the token file --data reads, with a Hugging Face tokenizer (each file one document)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "A checkpoint folder (its tokenizer.model, else tokenizer.json), a tokenizer.json or a SentencePiece .model")
      ->required()->check(CLI::ExistingPath);
  cmd->add_option("inputs", a->inputs, "UTF-8 text files, each a document")->required();
  cmd->add_option("--out", a->out, "train.bin (uint16 ids, vocabularies up to 65536) or train.u32 (uint32 ids)")
      ->required();
  cmd->add_option("--val-fraction", a->val_fraction,
                  "Put the last fraction of the tokens in the validation file beside --out (train.bin -> val.bin)")
      ->check(real_number(0, true, 1, false));
  cmd->add_option("--threads", a->threads, "Encoding threads (default: one per core)")->check(whole_number(1, 4096));
  cmd->add_option("--eot", a->eot, "The token between documents (default: the tokenizer's end of text)");
  cmd->add_flag("--parse-special", a->parse_special,
                "Read special tokens written in the text (<|endoftext|>) as those tokens (default: as text, like nanoGPT's encode_ordinary)");
  return Command{cmd, [a] { run_tokenize(*a); }};
}

}  // namespace fsdpc::cli
