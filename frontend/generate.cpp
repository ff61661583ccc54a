// Autoregressive sampling: one forward of the logits trace per new token on
// the CPU executors. No KV cache: the contexts are short and the traces
// small, and re-running the whole context keeps this a plain trace run.
#include "frontend/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "executors/claim.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "runtime/random.h"

namespace fsdpc {

int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options, double u) {
  FSDPC_CHECK(!logits.empty()) << "sampling from no logits";
  std::vector<int64_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  auto logit = [&](int64_t id) { return logits[static_cast<size_t>(id)]; };
  auto before = [&](int64_t a, int64_t b) { return logit(a) > logit(b) || (logit(a) == logit(b) && a < b); };
  if (options.temperature == 0.0) return *std::min_element(ids.begin(), ids.end(), before);
  const size_t k = options.top_k > 0 ? std::min(static_cast<size_t>(options.top_k), ids.size()) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), before);
  // Subtracting the maximum keeps exp() finite at any temperature.
  const double top = logit(ids[0]);
  std::vector<double> weight(k);
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += weight[i] = std::exp((logit(ids[i]) - top) / options.temperature);
  double target = u * sum;
  for (size_t i = 0; i < k; ++i) {
    target -= weight[i];
    if (target < 0) return ids[i];
  }
  return ids[k - 1];  // u * sum rounded up to sum
}

Generator::Generator(std::unique_ptr<LanguageModel> model, const HfWeights& weights) : model_(std::move(model)) {
  check_hf_weights(*model_, weights);  // every missing, unexpected or misshapen tensor, before reading
  for (const NamedParam& p : model_->named_parameters()) {
    const HfWeights::Tensor& t = weights.tensors().at(p.path);
    TensorType type;
    type.shape = p.spec->shape;
    TensorValue v = allocate_tensor(allocator_, type, MemCategory::parameters);
    t.file->read_rows_f32(*t.entry, 0, type.shape.empty() ? 1 : type.shape[0], static_cast<float*>(v.data()));
    weights_[p.path] = std::move(v);
  }
  interpreter_ = std::make_unique<Interpreter>(allocator_, executors_for(Target::cpu), context_);
}

Generator::~Generator() = default;

const Trace& Generator::trace_for(int64_t length) {
  auto it = traces_.find(length);
  if (it != traces_.end()) return it->second;
  Tracer tracer("logits");
  Tensor idx = tracer.input("idx", {1, length}, DType::i64);
  model_->bind(tracer);
  Trace trace = tracer.finish({model_->logits(idx)});
  verify(trace);
  return traces_.emplace(length, claim(trace, executors_for(Target::cpu))).first->second;
}

std::vector<float> Generator::next_logits(const std::vector<int64_t>& context) {
  FSDPC_CHECK(!context.empty()) << "next_logits of an empty context";
  const auto length = std::min<int64_t>(static_cast<int64_t>(context.size()), model_->context_length());
  const Trace& trace = trace_for(length);
  std::vector<TensorValue> args;
  for (const Proxy& p : trace.args) {
    if (p.is_param()) {
      args.push_back(weights_.at(p.param_path));
      continue;
    }
    TensorValue idx = allocate_tensor(allocator_, p.type, MemCategory::activations);
    std::copy(context.end() - length, context.end(), static_cast<int64_t*>(idx.data()));
    args.push_back(std::move(idx));
  }
  std::vector<TensorValue> out = interpreter_->run(trace, std::move(args));
  FSDPC_CHECK(out.size() == 1) << "the logits trace returns one tensor";
  const auto vocab = static_cast<size_t>(model_->vocab_size());
  const float* last = static_cast<const float*>(out[0].data()) + static_cast<size_t>(length - 1) * vocab;
  return std::vector<float>(last, last + vocab);
}

std::vector<int64_t> Generator::generate(std::vector<int64_t> prompt, int64_t max_new_tokens,
                                         const SamplingOptions& options, uint64_t seed,
                                         const std::function<void(int64_t)>& on_token) {
  for (int64_t id : prompt)
    if (id < 0 || id >= model_->vocab_size())
      fail("prompt token ", id, " is outside the vocabulary [0, ", model_->vocab_size(), ")");
  if (prompt.empty()) fail("the prompt is empty; give at least one token");
  const uint64_t key = derive_key(seed, hash_string("generate"));
  std::vector<int64_t> added;
  for (int64_t i = 0; i < max_new_tokens; ++i) {
    const double u = uniform01(random_bits(key, static_cast<uint64_t>(i)));
    const int64_t token = sample_token(next_logits(prompt), options, u);
    prompt.push_back(token);
    added.push_back(token);
    if (on_token) on_token(token);
  }
  return added;
}

}  // namespace fsdpc
