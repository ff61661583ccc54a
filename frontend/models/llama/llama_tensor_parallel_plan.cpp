// The Llama family's tensor-parallel plan (Megatron's): q/k/v (k/v by kv
// heads, for grouped-query attention) and the MLP's gate and up
// projections column-parallel, o_proj and down_proj row-parallel, the token
// embedding and the LM head by vocabulary rows. Norms and the row-parallel
// biases stay whole. The tp pass (passes/tensor_parallel.h) applies it.
#include "frontend/models/llama/llama.h"

namespace fsdpc {

TensorParallelPlan llama_tensor_parallel_plan() {
  using Rule = TensorParallelRule;
  // Linear weights are [out, in]: a column split is dim 0, a row split dim 1.
  return {{
      Rule::vocab("embed_tokens.weight"), Rule::vocab("lm_head.weight"),
      Rule::column("self_attn.q_proj.weight", 0), Rule::column("self_attn.q_proj.bias", 0),
      Rule::column("self_attn.k_proj.weight", 0), Rule::column("self_attn.k_proj.bias", 0),
      Rule::column("self_attn.v_proj.weight", 0), Rule::column("self_attn.v_proj.bias", 0),
      Rule::row("self_attn.o_proj.weight", 1),
      Rule::column("mlp.gate_proj.weight", 0), Rule::column("mlp.gate_proj.bias", 0),
      Rule::column("mlp.up_proj.weight", 0), Rule::column("mlp.up_proj.bias", 0),
      Rule::row("mlp.down_proj.weight", 1),
  }};
}

}  // namespace fsdpc
