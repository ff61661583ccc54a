#!/usr/bin/env python3
"""PyTorch's training step on one GPU, for the side-by-side with fsdpc's
bench/gpu/run.sh (tools/gpu_check.sh's last stage): the same GPT-2 as
fsdpc's presets (pre-norm blocks, GELU with the tanh approximation, tied
input and output embeddings, layer norm eps 1e-5, vocab 50257, context
1024), the same batch and sequence, AdamW (lr 3e-4, no weight decay, as
run.sh), random tokens. Modes:
  eager    the model as written
  compile  torch.compile(model) (inductor, default mode)
  fsdp2    fully_shard per block and at the root over a world of one rank
           (NCCL), as FSDP2 runs on one GPU
bf16 (the default) is fsdpc's --precision bf16: for eager and compile f32
weights and optimizer with the forward under torch.autocast("cuda",
bfloat16); for fsdp2 MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32) and the same autocast (bench/torch_fsdp2_step.py's
setting). f32 runs with TF32 off, fsdpc's default. Prints one JSON line:
the median step after 3 warm-up steps (run.sh drops 3 too), tokens/s, the
first step's seconds (torch.compile's compile time), peak device memory.
A benchmark: it asserts nothing, and no build or test needs it. --device
cpu runs the same code on the CPU (gloo for fsdp2), to try the script where
there is no GPU with a small --batch and --seq.

    python3 bench/gpu/torch_gpu_step.py --model gpt2 --mode eager
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_gpt2 import GPT2  # noqa: E402  (bench/, beside this folder)

# name: (layers, heads, width, batch, seq), the batch and seq of bench/gpu/run.sh.
MODELS = {
    "gpt2": (12, 12, 768, 16, 1024),
    "gpt2-medium": (24, 16, 1024, 8, 1024),
}
VOCAB, CONTEXT, EPS = 50257, 1024, 1e-5
WARMUP = 3


def run(a):
    layers, heads, width, batch, seq = MODELS[a.model]
    batch = a.batch or batch
    seq = a.seq or seq
    cuda = a.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = GPT2(layers, heads, width, VOCAB, CONTEXT, EPS).to(dev)
    params = sum(p.numel() for p in model.parameters())
    bf16 = a.precision == "bf16"
    if a.mode == "fsdp2":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if cuda:
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=dev)
        else:
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        mesh = init_device_mesh(a.device, (1,))
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 \
            else MixedPrecisionPolicy()
        for block in model.h:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    fwd = torch.compile(model) if a.mode == "compile" else model
    gen = torch.Generator(device=dev).manual_seed(1)
    batches = [(torch.randint(VOCAB, (batch, seq), generator=gen, device=dev),
                torch.randint(VOCAB, (batch, seq), generator=gen, device=dev)) for _ in range(4)]

    def step(s):
        idx, tgt = batches[s % len(batches)]
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=bf16):
            loss = fwd(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()  # synchronises

    t0 = time.perf_counter()
    loss = step(0)
    first_s = time.perf_counter() - t0
    for s in range(1, WARMUP):
        step(s)
    times = []
    for s in range(WARMUP, a.steps):
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        loss = step(s)
        times.append((time.perf_counter() - t) * 1e3)
    ms = statistics.median(times)
    out = {
        "impl": "pytorch-" + a.mode, "model": a.model, "precision": a.precision, "batch": batch, "seq": seq,
        "parameters": params, "step_ms": round(ms, 2), "tokens_per_s": round(batch * seq / (ms / 1e3)),
        "first_step_s": round(first_s, 2), "steps_timed": len(times),
        "peak_gib": round(torch.cuda.max_memory_allocated(dev) / 2**30, 2) if cuda else None,
        "loss": round(loss, 4) if math.isfinite(loss) else None,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if cuda else "cpu",
    }
    if a.mode == "fsdp2":
        import torch.distributed as dist
        dist.destroy_process_group()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    ap.add_argument("--mode", choices=["eager", "compile", "fsdp2"], default="eager")
    ap.add_argument("--precision", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--steps", type=int, default=20, help="steps in all, the first 3 untimed (default 20, as run.sh)")
    ap.add_argument("--batch", type=int, default=0, help="default: run.sh's for the model")
    ap.add_argument("--seq", type=int, default=0, help="default: run.sh's for the model")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    a = ap.parse_args()
    if a.steps <= WARMUP or a.batch < 0 or a.seq < 0 or a.seq > CONTEXT:
        print(f"torch_gpu_step.py: --steps must exceed {WARMUP}, --batch be positive and --seq at most {CONTEXT}",
              file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_gpu_step.py: torch sees no CUDA device", file=sys.stderr)
        return 77
    print(json.dumps(run(a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
