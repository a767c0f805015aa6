"""First-call cost of GPU attention, kiln against PyTorch: each figure is
measured in a fresh process (the CUDA context and a small kernel are
warmed up first, so what is left is loading the attention library,
building its plan and any kernel compiled at run time).

    PYTHONPATH=build-gpu-jit/python python3 benchmarks/attention_startup.py

Rows: the first forward, the second forward (a warm call), the first
forward and backward, and a forward of a new sequence length after that.
Shape (32, 8, 256, 64) bfloat16, causal; the new length is 384. kiln runs
cuDNN's fused attention where cuDNN is present, and its own kernels with
KILN_CUDNN_ATTENTION=0; PyTorch is timed with its default SDPA choice and
with its cuDNN backend forced.

The columns take turns, `--rounds` times (default 3), after a first round
that is printed but not counted: on a machine that has just started, the
first process to load cuDNN (about 1 GB of libraries) reads it from disk,
and whichever column ran first would pay for it. The table gives each
column's median over the counted rounds.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

B, H, T, D, T2 = 32, 8, 256, 64, 384

KILN = textwrap.dedent(f"""
    import json, time
    import numpy as np
    import kiln.core as mx
    mx.set_default_device(mx.gpu)
    rng = np.random.default_rng(0)
    def inputs(t):
        a = [mx.array(rng.uniform(-1, 1, ({B}, {H}, t, {D})).astype(np.float32)).astype(mx.bfloat16)
             for _ in range(3)]
        mx.eval(*a)
        return a
    mx.eval(mx.exp(mx.ones((4,))))  # context and a first kernel
    mx.synchronize()
    q, k, v = inputs({T})
    attn = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale={D} ** -0.5, mask="causal")
    loss = lambda q, k, v: mx.sum(attn(q, k, v).astype(mx.float32))
    def timed(fn):
        t0 = time.perf_counter()
        mx.eval(fn())
        mx.synchronize()
        return (time.perf_counter() - t0) * 1e3
    out = {{}}
    out["first forward"] = timed(lambda: attn(q, k, v))
    out["second forward"] = timed(lambda: attn(q, k, v))
    out["first forward and backward"] = timed(lambda: mx.grad(loss, argnums=(0, 1, 2))(q, k, v))
    q2, k2, v2 = inputs({T2})
    out["forward of a new length"] = timed(lambda: attn(q2, k2, v2))
    print(json.dumps(out))
""")

TORCH = textwrap.dedent(f"""
    import json, sys, time, contextlib
    import torch
    import torch.nn.functional as F
    backend = sys.argv[1]
    ctx = contextlib.nullcontext
    if backend == "cudnn":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        ctx = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    torch.exp(torch.ones(4, device="cuda"))
    torch.cuda.synchronize()
    def inputs(t, grad=False):
        return [torch.empty(({B}, {H}, t, {D}), device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
                .requires_grad_(grad) for _ in range(3)]
    q, k, v = inputs({T})
    def timed(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with ctx():
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3
    attn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = {{}}
    out["first forward"] = timed(lambda: attn(q, k, v))
    out["second forward"] = timed(lambda: attn(q, k, v))
    qg, kg, vg = inputs({T}, grad=True)
    out["first forward and backward"] = timed(lambda: attn(qg, kg, vg).float().sum().backward())
    q2, k2, v2 = inputs({T2})
    out["forward of a new length"] = timed(lambda: attn(q2, k2, v2))
    print(json.dumps(out))
""")


def run(code, *args, env=None):
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **(env or {})})
    if r.returncode != 0:
        print(r.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


CALLS = ("first forward", "second forward", "first forward and backward", "forward of a new length")


def table(title, columns):
    print(title)
    print("| call | " + " | ".join(name for name, _ in columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for key in CALLS:
        print(f"| {key} | " + " | ".join(f"{c[key]:.1f}" for _, c in columns) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    kinds = [("kiln", (KILN,), {}), ("kiln own kernels", (KILN,), {"KILN_CUDNN_ATTENTION": "0"})]
    try:
        import torch  # noqa: F401

        kinds += [("torch SDPA default", (TORCH, "default"), {}), ("torch SDPA cuDNN", (TORCH, "cudnn"), {})]
    except ImportError:
        pass
    runs = {name: [] for name, _, _ in kinds}
    for _ in range(args.rounds + 1):
        for name, cmd, env in kinds:
            runs[name].append(run(*cmd, env=env))
    head = f"({B}, {H}, {T}, {D}) bfloat16 causal; ms, one fresh process each"
    first = [(name, r[0]) for name, r in runs.items() if r[0]]
    table(f"first round, not counted (cold file cache on a new machine), {head}", first)
    print()
    columns = []
    for name, r in runs.items():
        counted = [c for c in r[1:] if c]
        if counted:
            columns.append((name, {key: statistics.median(c[key] for c in counted) for key in CALLS}))
    table(f"attention first-call cost, median of {args.rounds} rounds, {head}", columns)


if __name__ == "__main__":
    main()
