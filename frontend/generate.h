// Sampling from a checkpoint on the CPU (`fsdpc generate`): a Generator runs
// the claimed trace of the model's logits (any LanguageModel: GPT-2, Llama)
// for the current context on one rank, and sample_token picks the next token
// from the last position's logits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "frontend/models/language_model.h"
#include "frontend/hf_checkpoint.h"
#include "runtime/interpreter.h"

namespace fsdpc {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: every token; otherwise the k most likely (clipped to the vocabulary)
};

// The token drawn from `logits` (one per vocabulary entry) given `u`, uniform
// in [0, 1): greedy takes the first maximum; otherwise softmax(logits / T)
// over the top-k (ties broken by the lower id) and the inverse CDF at u.
int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options, double u);

class Generator {
 public:
  // Loads every parameter fully; fails (fsdpc::Error) on a missing,
  // unexpected or misshapen tensor, as `train --init` does.
  Generator(std::unique_ptr<LanguageModel> model, const HfWeights& weights);
  ~Generator();
  const LanguageModel& model() const { return *model_; }

  // The logits of the token after `context` (non-empty), seeing at most its
  // last context_length() tokens.
  std::vector<float> next_logits(const std::vector<int64_t>& context);

  // Appends `max_new_tokens` sampled tokens to `prompt` and returns them
  // (without the prompt); draw i uses stream `seed` at counter i, so a seed
  // reproduces its output. `on_token` sees each token as it is chosen.
  std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t max_new_tokens, const SamplingOptions& options,
                                uint64_t seed, const std::function<void(int64_t)>& on_token = {});

 private:
  const Trace& trace_for(int64_t length);

  std::unique_ptr<LanguageModel> model_;
  Allocator allocator_;
  KernelContext context_;  // the logits trace has no collectives: no MPI needed
  std::unique_ptr<Interpreter> interpreter_;
  std::map<std::string, TensorValue> weights_;  // by parameter path
  std::map<int64_t, Trace> traces_;             // claimed, by context length
};

}  // namespace fsdpc
