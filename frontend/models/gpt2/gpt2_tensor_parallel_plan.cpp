// GPT-2's tensor-parallel plan (Megatron's): attention's fused q|k|v and the
// MLP's first projection column-parallel, their output projections
// row-parallel, the token embedding (and so the tied head) by vocabulary
// rows. Norms, the position embedding and the row-parallel biases stay
// whole. The tp pass (passes/tensor_parallel.h) applies it.
#include "frontend/models/gpt2/gpt2.h"

namespace fsdpc {

TensorParallelPlan gpt2_tensor_parallel_plan() {
  using Rule = TensorParallelRule;
  // Conv1D weights are [in, out]: a column split is dim 1, a row split dim 0.
  return {{
      Rule::vocab("wte.weight"),  // 50257 rows: padded at T = 2
      Rule::column("attn.c_attn.weight", 1, 3), Rule::column("attn.c_attn.bias", 0, 3),  // q|k|v heads
      Rule::row("attn.c_proj.weight", 0),
      Rule::column("mlp.c_fc.weight", 1), Rule::column("mlp.c_fc.bias", 0),
      Rule::row("mlp.c_proj.weight", 0),
  }};
}

}  // namespace fsdpc
