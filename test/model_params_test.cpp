// The GPT-2 presets have Hugging Face's parameter counts (GPT2LMHeadModel's
// num_parameters(), the tied lm_head counted once), counted from the module
// specs and from the captured trace's parameter arguments: metadata only, no
// weight is ever allocated.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <set>

#include "frontend/models/gpt2/gpt2.h"
#include "frontend/models/registry.h"

using namespace fsdpc;

namespace {

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace

TEST_CASE("gpt2 presets count Hugging Face's parameters, without allocating them", "[model][gpt2]") {
  // sum(p.numel() for p in GPT2LMHeadModel.from_pretrained(name).parameters()):
  // lm_head.weight is wte.weight, so it counts once.
  const std::vector<std::pair<std::string, int64_t>> hf = {
      {"gpt2", 124'439'808}, {"gpt2-medium", 354'823'168}, {"gpt2-large", 774'030'080}, {"gpt2-xl", 1'557'611'200}};
  const int64_t rss_before = peak_rss_bytes();
  for (const auto& [name, expected] : hf) {
    INFO(name);
    auto model = make_model(name);
    const auto* gpt2 = dynamic_cast<const GPT2*>(model.get());
    REQUIRE(gpt2 != nullptr);
    const GPT2Config& c = gpt2->config();

    // From the module tree: every parameter once, the head not among them.
    int64_t from_specs = 0;
    std::set<std::string> paths;
    for (const NamedParam& p : model->named_parameters()) {
      CHECK(paths.insert(p.path).second);
      from_specs += numel(p.spec->shape);
    }
    CHECK(from_specs == expected);
    CHECK(paths.count("wte.weight") == 1);
    CHECK(paths.count("lm_head.weight") == 0);
    // 2 embeddings + 12 tensors per block + ln_f's 2.
    CHECK(paths.size() == static_cast<size_t>(2 + 12 * c.n_layer + 2));
    // The same count as a closed form of the config (Hugging Face's layout).
    const int64_t d = c.n_embd;
    const int64_t per_block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * 4 * d + 4 * d) + (4 * d * d + d);
    CHECK(c.vocab_size * d + c.n_positions * d + c.n_layer * per_block + 2 * d == expected);

    // From the trace: the parameter arguments of a capture (shapes only).
    const Trace t = capture(*model, CaptureOptions{1, 8, {}});
    int64_t from_trace = 0;
    size_t params = 0;
    for (const Proxy& a : t.args)
      if (a.is_param()) {
        from_trace += numel(a.type.shape);
        ++params;
      }
    CHECK(from_trace == expected);
    CHECK(params == paths.size());
  }
  // gpt2-xl's weights alone are 6.2 GB in f32, gpt2's 0.5 GB; counting all
  // four grew the process by far less than the smallest of them.
  const int64_t grown = peak_rss_bytes() - rss_before;
  INFO("peak RSS grew by " << grown << " bytes");
  CHECK(grown < 128 * 1024 * 1024);
}

TEST_CASE("gpt2-tiny's count follows from its config too", "[model][gpt2]") {
  auto model = make_model("gpt2-tiny");  // 2 layers, 64 wide, vocab 256, context 64
  int64_t n = 0;
  for (const NamedParam& p : model->named_parameters()) n += numel(p.spec->shape);
  // wte 256*64 + wpe 64*64 + 2 blocks of 12*64^2 + 13*64 + ln_f 2*64.
  CHECK(n == 256 * 64 + 64 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64);
}
