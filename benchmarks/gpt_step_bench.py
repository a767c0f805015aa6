"""A GPT-style training step: kiln against PyTorch eager, same model, data and
optimizer, in tokens per second.

    PYTHONPATH=build-gpu-jit/python python3 benchmarks/gpt_step_bench.py
    PYTHONPATH=build/python python3 benchmarks/gpt_step_bench.py --cpu --small

    python -m kiln.launch -n 2 --backend nccl benchmarks/gpt_step_bench.py --distributed

runs the step data parallel, one GPU per process (each with the batch one
GPU takes alone, gradients averaged by nn.average_gradients inside the
compiled step; PyTorch with DistributedDataParallel over NCCL in the same
processes), and prints the tokens/s of the whole group. With --cpu the
group is MPI's (python -m kiln.launch -n 2) and PyTorch's is gloo.

The default configuration is the CUDA backend's target workload: 6 layers,
d_model 512, 8 heads, sequence 256, batch 32, vocabulary 8192, bfloat16
parameters and activations, AdamW, pre-norm blocks with causal attention
(fast.scaled_dot_product_attention / F.scaled_dot_product_attention) and a
GELU MLP. kiln's step is compiled with its model and optimizer state; both
steps are timed over the same number of iterations after warm-up, each
iteration waiting for its loss.
"""

import argparse
import math
import time
from functools import partial

import numpy as np

import kiln.core as mx
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.utils import tree_map

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def __call__(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = mx.split(self.qkv(self.ln1(x)), 3, axis=-1)
        q, k, v = (a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for a in (q, k, v))
        o = mx.fast.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(d // h), mask="causal")
        x = x + self.proj(o.transpose(0, 2, 1, 3).reshape(b, t, d))
        return x + self.fc2(nn.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, seq, d, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = [Block(d, heads) for _ in range(layers)]
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def __call__(self, ids):
        x = self.tok(ids) + self.pos(mx.arange(ids.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def kiln_step_rate(cfg, ids, targets, iters, warmup, profile_steps=0, group=None):
    model = GPT(cfg.vocab, cfg.seq, cfg.d, cfg.heads, cfg.layers)
    model.set_dtype(mx.bfloat16 if cfg.bf16 else mx.float32)
    opt = optim.AdamW(learning_rate=3e-4)

    def loss_fn(model, x, y):
        logits = model(x).astype(mx.float32)
        return nn.losses.cross_entropy(logits, y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    if group is not None:
        # Every process starts from rank 0's weights.
        model.update(tree_map(lambda p: mx.distributed.all_sum(
            p if group.rank() == 0 else mx.zeros_like(p), group=group), model.parameters()))
        mx.eval(model.parameters())

    @partial(mx.compile, inputs=state, outputs=state)
    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        if group is not None:
            grads = nn.average_gradients(grads, group=group)
        opt.update(model, grads)
        return loss

    x, y = mx.array(ids), mx.array(targets)
    losses = []
    for _ in range(warmup):
        loss = step(x, y)
        mx.eval(loss, state)
        losses.append(loss.item())
    mx.synchronize()
    # With KILN_HOST_PROFILE set, the host table (printed at exit) covers the
    # timed steps only.
    mx._host_profile_reset()
    t0 = time.perf_counter()
    for _ in range(iters):
        loss = step(x, y)
        mx.eval(loss, state)
    mx.synchronize()
    dt = time.perf_counter() - t0
    losses.append(loss.item())
    if profile_steps:
        profile_kiln(lambda: mx.eval(step(x, y), state), profile_steps)
    return ids.size * iters / dt, losses


def profile_kiln(run_step, steps):
    """Prints where a step's GPU time goes, from the CUDA profiler (CUPTI sees
    every kernel and copy in the process, kiln's included)."""
    if torch is None or not torch.cuda.is_available():
        print("profile: needs PyTorch with CUDA for its profiler")
        return
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    mx.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run_step()
        mx.synchronize()
    wall = (time.perf_counter() - t0) / steps * 1e3
    rows = {}
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        r = rows.setdefault(e.name, [0, 0.0])
        r[0] += 1
        r[1] += e.device_time
    total = sum(t for _, t in rows.values()) / steps / 1e3
    print(f"profile of {steps} steps: wall {wall:.2f} ms per step, GPU busy {total:.2f} ms per step")
    print("| kernel or copy | calls per step | ms per step |")
    print("| --- | --- | --- |")
    for name, (n, t) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:40]:
        print(f"| {name[:90]} | {n / steps:g} | {t / steps / 1e3:.3f} |")


def torch_step_rate(cfg, ids, targets, iters, warmup, device, group=None):
    class TBlock(torch.nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1 = torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.proj = torch.nn.Linear(d, d)
            self.ln2 = torch.nn.LayerNorm(d)
            self.fc1 = torch.nn.Linear(d, 4 * d)
            self.fc2 = torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            h = self.heads
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (a.view(b, t, h, d // h).transpose(1, 2) for a in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class TGPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(cfg.vocab, cfg.d)
            self.pos = torch.nn.Embedding(cfg.seq, cfg.d)
            self.blocks = torch.nn.ModuleList([TBlock(cfg.d, cfg.heads) for _ in range(cfg.layers)])
            self.ln = torch.nn.LayerNorm(cfg.d)
            self.head = torch.nn.Linear(cfg.d, cfg.vocab, bias=False)

        def forward(self, ids):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    model = TGPT().to(device)
    if cfg.bf16:
        model = model.to(torch.bfloat16)
    if group is not None:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.from_numpy(ids).to(device)
    y = torch.from_numpy(targets).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        logits = model(x).float()
        loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1))
        loss.backward()
        opt.step()
        return loss

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(warmup):
        step().item()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        loss = step()
        loss.item()
    sync()
    return ids.size * iters / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", action="store_true", help="run on the CPU")
    ap.add_argument("--small", action="store_true", help="a small configuration (a quick check)")
    ap.add_argument("--float32", action="store_true", help="float32 instead of bfloat16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--distributed", action="store_true",
                    help="data parallel over the launcher's processes (see above)")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="also print where kiln's GPU time goes over this many steps")
    args = ap.parse_args()

    cfg = argparse.Namespace(layers=6, d=512, heads=8, seq=256, batch=32, vocab=8192, bf16=not args.float32)
    if args.small:
        cfg = argparse.Namespace(layers=2, d=64, heads=4, seq=32, batch=4, vocab=256, bf16=not args.float32)
    use_gpu = not args.cpu and mx.is_available(mx.gpu)
    mx.set_default_device(mx.gpu if use_gpu else mx.cpu)
    group, n, rank = None, 1, 0
    if args.distributed:
        group = mx.distributed.init(strict=True, backend="nccl" if use_gpu else "mpi")
        n, rank = group.size(), group.rank()
        if torch is not None:
            import os

            import torch.distributed as dist

            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29519")
            if use_gpu:
                torch.cuda.set_device(int(os.environ.get("KILN_LOCAL_RANK", rank)))
            dist.init_process_group("nccl" if use_gpu else "gloo", rank=rank, world_size=n)
    rng = np.random.default_rng(rank)
    ids = rng.integers(0, cfg.vocab, (cfg.batch, cfg.seq)).astype(np.int32)
    targets = np.roll(ids, -1, axis=1).astype(np.int32)
    say = print if rank == 0 else (lambda *a, **k: None)
    where = f"{n} x {'GPU' if use_gpu else 'CPU process'}" if group else ('GPU' if use_gpu else 'CPU')
    say(f"GPT step: {cfg.layers} layers, d_model {cfg.d}, {cfg.heads} heads, seq {cfg.seq}, "
        f"batch {cfg.batch}{' per process' if group else ''}, vocab {cfg.vocab}, "
        f"{'bfloat16' if cfg.bf16 else 'float32'}, AdamW, on {where}", flush=True)
    k_rate, losses = kiln_step_rate(cfg, ids, targets, args.iters, args.warmup, args.profile, group)
    # The processes step in lockstep: the group's rate is n times one's.
    k_rate *= n
    say(f"kiln compiled: {k_rate:,.0f} tokens/s (loss {losses[0]:.3f} -> {losses[-1]:.3f})", flush=True)
    if not np.all(np.isfinite(losses)) or losses[-1] >= losses[0]:
        say("kiln: the loss did not fall", flush=True)
    t_rate = None
    if torch is not None and (not use_gpu or torch.cuda.is_available()):
        t_rate = n * torch_step_rate(cfg, ids.astype(np.int64), targets.astype(np.int64), args.iters,
                                     args.warmup, "cuda" if use_gpu else "cpu", group)
        say(f"PyTorch eager{' DDP' if group else ''}: {t_rate:,.0f} tokens/s", flush=True)
    say()
    say("| workload | kiln tokens/s | PyTorch eager tokens/s | ratio (>1: kiln faster) |")
    say("| --- | --- | --- | --- |")
    ratio = f"{k_rate / t_rate:.2f}x" if t_rate else "n/a"
    t_s = f"{t_rate:,.0f}" if t_rate else "n/a"
    say(f"| GPT step ({where}) | {k_rate:,.0f} | {t_s} | {ratio} |")


if __name__ == "__main__":
    main()
