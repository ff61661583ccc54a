#!/usr/bin/env python3
"""PyTorch FSDP2's step on the model bench/multinode_bench.cpp measures, for
comparing fsdpc with PyTorch launched the same way (bench/multinode_bench.sh
TORCH=1; across the emulated nodes through tools/netns_cluster.sh --each).

The model is frontend/gpt2's GPT-2 at 4 layers x 8 heads x 512 wide, vocab
8192, context 256 (tied embeddings, GELU tanh, layer norm eps 1e-5), 4x256
tokens per rank, AdamW lr 1e-3, f32 on the CPU, one thread per rank; with
--precision bf16, FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32) and the forward under CPU autocast, as fsdpc
--precision bf16 (DDP: autocast only).
torch.distributed on gloo, rendezvous env:// (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; GLOO_SOCKET_IFNAME picks the interface). Strategies:
  zero3     fully_shard per block and at the root, reshard_after_forward=True
  zero2     the same with reshard_after_forward=False
  no_shard  DistributedDataParallel
  hybrid    fully_shard over a 2-D DeviceMesh (replicate, shard) = HSDP;
            --mesh R,S (default 2,WORLD/2)
Rank 0 prints one JSON line: the median step over --steps after one warm-up
step. A benchmark: it asserts nothing.
Usage: python bench/torch_fsdp2_step.py STRATEGY [--mesh R,S] [--steps N] [--precision f32|bf16]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_gpt2 import GPT2

N_LAYER, N_HEAD, N_EMBD, VOCAB, CONTEXT, EPS = 4, 8, 512, 8192, 256, 1e-5
BATCH, SEQ = 4, 256


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("strategy", choices=["zero3", "zero2", "no_shard", "hybrid"])
    ap.add_argument("--mesh", default="")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = GPT2(N_LAYER, N_HEAD, N_EMBD, VOCAB, CONTEXT, EPS)
    replicas, shards = 1, world
    if args.strategy == "no_shard":
        model = nn.parallel.DistributedDataParallel(model)
        replicas, shards = world, 1
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if args.strategy == "hybrid":
            if args.mesh:
                replicas, shards = (int(v) for v in args.mesh.split(","))
            else:
                replicas, shards = 2, world // 2
            if replicas * shards != world:
                print(f"torch_fsdp2_step: --mesh {replicas},{shards} needs {replicas * shards} ranks, not {world}",
                      file=sys.stderr)
                sys.exit(2)
            mesh = init_device_mesh("cpu", (replicas, shards), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (world,))
        reshard = args.strategy != "zero2"
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if args.precision == "bf16" else MixedPrecisionPolicy()
        for block in model.h:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
    api = {"no_shard": "ddp", "hybrid": "fsdp2-hsdp"}.get(args.strategy, "fsdp2")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1000 + rank)

    def step():
        idx = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
        tgt = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(idx, tgt)
        loss.backward()
        opt.step()
        loss = loss.item()
        return time.perf_counter() - t0, loss

    step()  # allocations, gloo's connections
    times, loss = [], math.nan
    for _ in range(args.steps):
        dist.barrier()
        t, loss = step()
        times.append(t)
    times.sort()
    if rank == 0:
        print(json.dumps({"strategy": args.strategy, "mesh": f"{replicas}x{shards}", "world": world,
                          "precision": args.precision,
                          "progress": "pytorch", "framework": f"torch {torch.__version__} {api}/gloo",
                          "steps": args.steps, "step_ms": round(times[len(times) // 2] * 1e3, 1),
                          "step_ms_min": round(times[0] * 1e3, 1), "threads": torch.get_num_threads(),
                          "loss": round(loss, 6)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
