"""The GPT-2 the PyTorch side of the benchmarks trains (bench/torch_cpu_step.py,
bench/torch_fsdp2_step.py, bench/gpu/torch_gpu_step.py): fsdpc's GPT-2 layer
for layer (pre-norm blocks, fused QKV, tanh GELU, a head tied to wte), with
GPT-2's init scale. One definition, so every comparison times the same model.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, width, heads, eps=1e-5):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=eps)
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=eps)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, layers, heads, width, vocab, context, eps=1e-5):
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.h = nn.ModuleList(Block(width, heads, eps) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=eps)
        for p in self.parameters():  # GPT-2's init scale; values do not affect timing
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the head is tied to wte
        # The loss in f32 whatever the autocast precision, as fsdpc's is.
        return F.cross_entropy(logits.view(-1, self.vocab).float(), targets.view(-1))
