#!/usr/bin/env python3
"""PyTorch's training step on the CPU, for the comparison beside fsdpc's
bench/train_bench: the same GPT-2 (pre-norm blocks, GELU with the tanh
approximation, tied input and output embeddings, layer norm eps 1e-5), the
same tokens per step, AdamW (lr 1e-3, no weight decay), one process,
torch.set_num_threads(--threads); f32, or with --precision bf16 the forward
under torch.autocast("cpu", torch.bfloat16) (f32 weights and optimizer, as
fsdpc --precision bf16). Runs eager and torch.compile (inductor) and prints
one JSON line each: the median step's wall and process-CPU
milliseconds and, for compile, the seconds spent before the first step ends.
A benchmark: it asserts nothing, and no build or test needs it.

    py=$(bench/torch_venv.sh) && "$py" bench/torch_cpu_step.py --model gpt2-4x512 --threads 1
(bench/torch_cpu_step.sh runs it beside fsdpc in the same run.)
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch

from torch_gpt2 import GPT2

# name: (layers, heads, width, vocab, context, batch, seq), as bench/train_bench.cpp.
MODELS = {
    "gpt2-tiny": (2, 2, 64, 256, 64, 8, 64),
    "gpt2-4x512": (4, 8, 512, 8192, 256, 4, 256),
}


def run(mode, model_name, steps, threads, precision):
    layers, heads, width, vocab, context, batch, seq = MODELS[model_name]
    torch.manual_seed(0)
    model = GPT2(layers, heads, width, vocab, context)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    fwd = torch.compile(model) if mode == "compile" else model
    gen = torch.Generator().manual_seed(1)
    batches = [(torch.randint(vocab, (batch, seq), generator=gen), torch.randint(vocab, (batch, seq), generator=gen))
               for _ in range(4)]

    def step(s):
        idx, tgt = batches[s % len(batches)]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = fwd(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    t0 = time.perf_counter()
    step(0)  # compile (for torch.compile), optimizer state
    first_s = time.perf_counter() - t0
    walls, cpus = [], []
    for s in range(1, steps + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        loss = step(s)
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.process_time() - c0) * 1e3)
    params = sum(p.numel() for p in model.parameters())
    return {
        "impl": "pytorch-" + mode + ("-bf16" if precision == "bf16" else ""), "torch": torch.__version__,
        "precision": precision, "model": model_name, "threads": threads,
        "tokens_per_step": batch * seq, "parameters": params, "step_ms": round(statistics.median(walls), 1),
        "step_cpu_ms": round(statistics.median(cpus), 1), "first_step_s": round(first_s, 2),
        "loss": round(loss, 4) if math.isfinite(loss) else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2-4x512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile", help="eager, compile, or both (comma-separated)")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1:
        print("torch_cpu_step.py: --threads and --steps must be at least 1", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    for mode in a.modes.split(","):
        if mode not in ("eager", "compile"):
            print(f"torch_cpu_step.py: unknown mode {mode!r} (eager or compile)", file=sys.stderr)
            return 2
        print(json.dumps(run(mode, a.model, a.steps, a.threads, a.precision)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
