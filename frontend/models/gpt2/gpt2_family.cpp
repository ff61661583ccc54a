// The GPT-2 family's registration (frontend/models/families.def): its
// presets, sized as published, and its config.json reader.
#include "frontend/models/gpt2/gpt2.h"
#include "frontend/models/registry.h"

namespace fsdpc {

namespace {

ModelPreset preset(const char* name, const char* description, const GPT2Config& config) {
  return {name, description, [name, config] { return std::make_unique<GPT2>(name, config); }};
}

}  // namespace

ModelFamily gpt2_family() {
  ModelFamily f;
  f.name = "gpt2";
  f.display = "GPT-2";
  f.model_types = {{"gpt2", "GPT-2"}};
  f.reads_untyped_config = true;  // GPT-2's own exports wrote no model_type
  f.presets = {
      preset("gpt2-tiny", "GPT-2, 2 layers, 2 heads, 64 wide, vocab 256, context 64", {2, 2, 64, 256, 64, 1e-5}),
      preset("gpt2", "GPT-2 124M: 12 layers, 12 heads, 768 wide, context 1024", {12, 12, 768, 50257, 1024, 1e-5}),
      preset("gpt2-medium", "GPT-2 350M: 24 layers, 16 heads, 1024 wide", {24, 16, 1024, 50257, 1024, 1e-5}),
      preset("gpt2-large", "GPT-2 774M: 36 layers, 20 heads, 1280 wide", {36, 20, 1280, 50257, 1024, 1e-5}),
      preset("gpt2-xl", "GPT-2 1.5B: 48 layers, 25 heads, 1600 wide", {48, 25, 1600, 50257, 1024, 1e-5}),
  };
  f.from_config = [](const std::string&, const std::string& path) -> std::unique_ptr<Model> {
    return std::make_unique<GPT2>("gpt2", gpt2_config_from_file(path));
  };
  f.tensor_parallel_plan = gpt2_tensor_parallel_plan();
  return f;
}

}  // namespace fsdpc
