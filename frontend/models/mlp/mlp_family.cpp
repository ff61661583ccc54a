// The model of the Thunder/PyTorch FSDP tutorial, registered as a family of
// one preset (frontend/models/families.def): no Hugging Face counterpart,
// no config.json, and no tensor-parallel plan (--tp leaves it whole).
#include "frontend/layers.h"
#include "frontend/models/registry.h"

namespace fsdpc {

ModelFamily mlp_family() {
  ModelFamily f;
  f.name = "mlp";
  f.display = "MLP";
  f.presets = {{"mlp", "FSDP tutorial: Linear(64,64,bias=False) -> Tanh -> Linear(64,64,bias=False), x [64, 64]", [] {
                  // Linear(64, 64, bias=False) -> Tanh -> Linear(64, 64, bias=False).
                  auto seq = std::make_unique<Sequential>();
                  seq->add(std::make_unique<Linear>(64, 64, /*bias=*/false));
                  seq->add(std::make_unique<Tanh>());
                  seq->add(std::make_unique<Linear>(64, 64, /*bias=*/false));
                  return std::unique_ptr<Model>(
                      std::make_unique<LayerModel>("mlp", std::move(seq), Shape{64}, /*default_batch=*/64));
                }}};
  return f;
}

}  // namespace fsdpc
