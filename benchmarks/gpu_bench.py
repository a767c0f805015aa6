"""GPU benchmarks: kiln against PyTorch in the same process, on the workloads
the CUDA backend's targets name (fused elementwise, bf16 GEMM, the seed's
Linear step and broadcast chain, exp of a transposed array, the host cost of
a compiled call, and a new fused kernel's compile time), and the other
kernel families: reductions against the copy ceiling, a scan, a sort,
attention (the tensor-core forward) and conv2d against PyTorch's, and fused
regions with per-row and per-column broadcasts (LayerNorm's and
cross-entropy's backward).

    PYTHONPATH=build-gpu-py/python python3 benchmarks/gpu_bench.py [--quick]

Timing: PyTorch with CUDA events (median of repeats). kiln has no event API
in Python, so its throughput figures queue `reps` independent evaluations of
the workload, evaluate them at once and divide the wall time (launch gaps are
hidden as they are for PyTorch's back-to-back launches); its "GPU time" figures
sum the kernels' device time recorded by the CUDA profiler (torch.profiler
sees every kernel of the process, kiln's included). Inputs are random, never
zeros. The last lines are a table: `| workload | kiln | peer | ratio |`.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import kiln.core as mx
from host_overhead import seed_broadcast_chain

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

ROWS = []


def row(name, kiln_value, peer_name, peer_value, unit, higher_is_better=False):
    if peer_value and kiln_value:
        ratio = (kiln_value / peer_value) if higher_is_better else (peer_value / kiln_value)
        ratio_s = f"{ratio:.2f}x"
    else:
        ratio_s = "n/a"
    fmt = lambda v: "n/a" if v is None else f"{v:.3g} {unit}"
    ROWS.append((name, fmt(kiln_value), f"{peer_name} {fmt(peer_value)}", ratio_s))
    print(f"{name}: kiln {fmt(kiln_value)}, {peer_name} {fmt(peer_value)} ({ratio_s}; >1 means kiln is better)", flush=True)


def kiln_throughput_us(fn, reps=20, rounds=3):
    """Wall microseconds per call of fn, reps calls evaluated together."""
    mx.eval(fn())
    mx.synchronize()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        outs = [fn() for _ in range(reps)]
        mx.eval(outs)
        mx.synchronize()
        times.append((time.perf_counter() - t0) / reps * 1e6)
        del outs
    return min(times)


def kiln_wall_us(fn, iters=200):
    """Wall microseconds of one call evaluated alone (host included)."""
    for _ in range(5):
        mx.eval(fn())
    mx.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        mx.eval(fn())
    mx.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def kiln_gpu_us(fn, iters=50):
    """Device microseconds of kernels and copies per call, from the CUDA
    profiler (None when it is unavailable)."""
    if torch is None:
        return None
    try:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    for _ in range(5):
        mx.eval(fn())
    mx.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            mx.eval(fn())
        mx.synchronize()
    total = sum(e.device_time for e in prof.events() if e.device_type == DeviceType.CUDA)
    return total / iters if total > 0 else None


def torch_us(fn, reps=50):
    """Median CUDA-event microseconds of fn on PyTorch's stream."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def torch_gpu_us(fn, iters=50):
    """Device microseconds per call from the profiler, as kiln_gpu_us."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    total = sum(e.device_time for e in prof.events() if e.device_type == DeviceType.CUDA)
    return total / iters


def to_torch(a, dtype):
    return torch.from_numpy(np.asarray(a)).to("cuda", dtype)


def bench_copy_ceiling(n):
    if torch is None:
        return None
    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    us = torch_us(lambda: y.copy_(x))
    tbps = 2 * x.numel() * 4 / (us * 1e-6) / 1e12
    print(f"device copy ceiling (torch copy_ of {n} float32): {us:.1f} us, {tbps:.2f} TB/s", flush=True)
    ROWS.append(("device copy ceiling (PyTorch copy_)", f"{tbps:.2f} TB/s", "", ""))
    return tbps


def bench_fused(n, dtype_name, torch_compile):
    kdt = getattr(mx, dtype_name)
    rng = np.random.default_rng(0)
    xn = rng.uniform(-2, 2, n).astype(np.float32)
    yn = rng.uniform(-2, 2, n).astype(np.float32)
    x = mx.array(xn).astype(kdt)
    y = mx.array(yn).astype(kdt)
    mx.eval(x, y)

    def f(x, y):
        return mx.tanh(x * y + 1) * 0.5 + x

    fc = mx.compile(f)
    item = 4 if dtype_name == "float32" else 2
    moved = 3 * n * item  # two inputs read, one output written
    kc = kiln_throughput_us(lambda: fc(x, y))
    ku = kiln_throughput_us(lambda: f(x, y))
    tbps = lambda us: moved / (us * 1e-6) / 1e12
    peer = None
    peer_c = None
    if torch is not None:
        tdt = getattr(torch, dtype_name)
        tx, ty = to_torch(xn, tdt), to_torch(yn, tdt)
        tf = lambda: torch.tanh(tx * ty + 1) * 0.5 + tx
        peer = torch_us(tf)
        if torch_compile:
            try:
                tc = torch.compile(lambda a, b: torch.tanh(a * b + 1) * 0.5 + a)
                peer_c = torch_us(lambda: tc(tx, ty))
            except Exception as e:  # pragma: no cover
                print(f"torch.compile failed: {e}", flush=True)
    name = f"fused tanh(x*y+1)*0.5+x, {n >> 20}M {dtype_name}"
    print(f"{name}: kiln compiled {kc:.1f} us ({tbps(kc):.2f} TB/s), uncompiled {ku:.1f} us", flush=True)
    row(name + ", compiled vs torch eager", kc, "torch eager", peer, "us")
    if peer_c:
        row(name + ", compiled vs torch.compile", kc, "torch.compile", peer_c, "us")
    row(name + ", kiln effective bandwidth", tbps(kc), "torch eager", peer and tbps(peer), "TB/s", True)


def bench_rows_broadcast(which, rows, n, dtype_name):
    """A fused region with per-row and per-column broadcasts (the rows
    kernel), rows x n in dtype: LayerNorm's backward (x - mean) * rstd * w * g
    or cross-entropy's gradient exp(x - lse) * g with per-row lse and g.
    Effective bandwidth counts the full inputs and the output."""
    kdt = getattr(mx, dtype_name)
    rng = np.random.default_rng(3)
    full, per_row, per_column = (rows, n), (rows, 1), (n,)
    if which == "layernorm":
        label = "LayerNorm backward (x - mean) * rstd * w * g"
        shapes = (full, per_row, per_row, per_column, full)
        f = lambda x, mean, rstd, w, g: (x - mean) * rstd * w * g
        tf = f
    else:
        label = "cross-entropy gradient exp(x - lse) * g"
        shapes = (full, per_row, per_row)
        f = lambda x, lse, g: mx.exp(x - lse) * g
        tf = lambda x, lse, g: torch.exp(x - lse) * g
    values = [rng.uniform(-2, 2, s).astype(np.float32) for s in shapes]
    args = [mx.array(v).astype(kdt) for v in values]
    mx.eval(args)
    fc = mx.compile(f)
    kc = kiln_throughput_us(lambda: fc(*args))
    item = 4 if dtype_name == "float32" else 2
    moved = (sum(s == full for s in shapes) + 1) * rows * n * item
    tbps = lambda us: moved / (us * 1e-6) / 1e12
    peer = None
    if torch is not None:
        targs = [to_torch(v, getattr(torch, dtype_name)) for v in values]
        peer = torch_us(lambda: tf(*targs))
    name = f"fused {label}, {rows}x{n} {dtype_name}"
    print(f"{name}: kiln compiled {kc:.1f} us ({tbps(kc):.2f} TB/s)", flush=True)
    row(name + ", compiled vs torch eager", kc, "torch eager", peer, "us")
    row(name + ", kiln effective bandwidth", tbps(kc), "torch eager", peer and tbps(peer), "TB/s", True)
    # The kernel's own time, apart from the wall clock's run-to-run noise,
    # is read by the profiler later (bench_rows_gpu_time).
    ROWS_GPU_LATER.append((name, lambda: mx.eval(fc(*args)), peer))


ROWS_GPU_LATER = []


def bench_rows_gpu_time():
    """GPU time of the rows kernels measured above (the CUDA profiler, so
    after the host-bound workloads; see main)."""
    for name, fn, peer in ROWS_GPU_LATER:
        row(name + ", kiln GPU time", kiln_gpu_us(fn), "torch eager", peer, "us")


def bench_gemm(m):
    rng = np.random.default_rng(1)
    an = rng.standard_normal((m, m), dtype=np.float32)
    bn = rng.standard_normal((m, m), dtype=np.float32)
    a = mx.array(an).astype(mx.bfloat16)
    b = mx.array(bn).astype(mx.bfloat16)
    mx.eval(a, b)
    flops = 2 * m**3
    k = kiln_throughput_us(lambda: a @ b, reps=10)
    peer = None
    if torch is not None:
        ta, tb = to_torch(an, torch.bfloat16), to_torch(bn, torch.bfloat16)
        peer = torch_us(lambda: ta @ tb, reps=20)
    tf = lambda us: us and flops / (us * 1e-6) / 1e12
    row(f"bf16 GEMM {m}^3", tf(k), "torch.matmul", tf(peer), "TFLOP/s", True)


def bench_seed_step():
    import kiln.nn as nn
    from kiln.utils import tree_map

    model = nn.Linear(1024, 3072, bias=True)
    params = model.trainable_parameters()
    mx.eval(params)
    x = mx.random.uniform(shape=(4, 512, 1024), dtype=mx.bfloat16)
    mx.eval(x)

    def step(x, params):
        model.update(tree_map(lambda p: p.astype(mx.bfloat16), params))
        return model(x)

    cstep = mx.compile(step)
    kc = kiln_gpu_us(lambda: cstep(x, params))
    ku = kiln_gpu_us(lambda: step(x, params))
    kc_wall = kiln_wall_us(lambda: cstep(x, params))
    peer = None
    if torch is not None:
        tw = torch.from_numpy(np.asarray(params["weight"])).cuda()
        tb = torch.from_numpy(np.asarray(params["bias"])).cuda()
        tx = torch.from_numpy(np.asarray(x.astype(mx.float32))).cuda().to(torch.bfloat16)
        tstep = lambda: torch.nn.functional.linear(tx, tw.to(torch.bfloat16), tb.to(torch.bfloat16))
        peer = torch_gpu_us(tstep)
    row("seed step (bf16 Linear+bias, (4,512,1024)->3072), compiled, GPU time", kc, "torch eager", peer, "us")
    row("seed step, uncompiled, GPU time", ku, "torch eager", peer, "us")
    print(f"seed step wall time per compiled call (host included): {kc_wall:.1f} us", flush=True)


def bench_broadcast_chain():
    fun, cfun, chain = seed_broadcast_chain()
    for f in (fun, cfun):
        chain(f)
    mx.synchronize()
    res = {}
    for name, f in (("uncompiled", fun), ("compiled", cfun)):
        times = []
        for _ in range(15):
            t0 = time.perf_counter()
            chain(f)
            mx.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        res[name] = statistics.median(times)
    ROWS.append(("seed broadcast chain x10, compiled / uncompiled", f"{res['compiled']:.3f} / {res['uncompiled']:.3f} ms", "torch eager 36.9 ms (issue)", ""))
    print(f"broadcast chain: compiled {res['compiled']:.3f} ms, uncompiled {res['uncompiled']:.3f} ms", flush=True)


def bench_exp_transposed(m):
    rng = np.random.default_rng(2)
    xn = rng.uniform(-2, 2, (m, m)).astype(np.float32)
    x = mx.array(xn)
    xt = x.T
    mx.eval(x)
    k = kiln_throughput_us(lambda: mx.exp(xt))
    peer = None
    if torch is not None:
        tx = to_torch(xn, torch.float32).t()
        peer = torch_us(lambda: torch.exp(tx))
    row(f"exp of a transposed {m}x{m} float32", k, "torch", peer, "us")


def bench_transposed_copies():
    """Copies that transpose, made row-major: a bfloat16 NHWC activation
    with its batch moved innermost (a depthwise convolution's weight
    gradient reads it so) and an 8192^2 float32 matrix's x.T, against
    PyTorch's .contiguous(); bytes moved (read + write) / time for the copy
    ceiling's comparison."""
    rng = np.random.default_rng(3)
    for name, shape, perm, dtype in (
        ("NHWC (32, 56, 56, 128) bf16 -> batch innermost", (32, 56, 56, 128), (1, 2, 3, 0), "bfloat16"),
        ("8192x8192 float32 x.T", (8192, 8192), (1, 0), "float32"),
    ):
        xn = rng.uniform(-2, 2, shape).astype(np.float32)
        x = mx.array(xn).astype(getattr(mx, dtype))
        mx.eval(x)
        xt = mx.transpose(x, perm)
        us = kiln_throughput_us(lambda: mx.contiguous(xt))
        moved = 2 * x.size * x.itemsize
        peer = None
        if torch is not None:
            tx = to_torch(xn, getattr(torch, dtype)).permute(*perm)
            peer = torch_us(lambda: tx.contiguous())
        tbps = moved / (us * 1e-6) / 1e12
        row(f"transposing copy {name} ({tbps:.2f} TB/s)", us, "torch", peer, "us")


def bench_reductions(m):
    """Sums of an m x m float32 array over all of it, its rows and its
    columns: bytes read / time against the copy ceiling's bandwidth."""
    rng = np.random.default_rng(3)
    xn = rng.uniform(-1, 1, (m, m)).astype(np.float32)
    x = mx.array(xn)
    mx.eval(x)
    tx = to_torch(xn, torch.float32) if torch is not None else None
    for name, kf, tf in (
        ("all", lambda: mx.sum(x), lambda: tx.sum()),
        ("rows (axis 1)", lambda: mx.sum(x, axis=1), lambda: tx.sum(dim=1)),
        ("columns (axis 0)", lambda: mx.sum(x, axis=0), lambda: tx.sum(dim=0)),
    ):
        k = kiln_throughput_us(kf)
        peer = torch_us(tf) if tx is not None else None
        row(f"sum over {name} of a {m}x{m} float32 ({4 * m * m / k / 1e6:.2f} TB/s)", k, "torch", peer, "us")
    # A bias gradient: a bfloat16 (8192, 2048) summed over its rows (float
    # accumulation), few wide columns.
    rows, cols = 8192, 2048
    gn = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
    g = mx.array(gn).astype(mx.bfloat16)
    mx.eval(g)
    tg = to_torch(gn, torch.bfloat16) if torch is not None else None
    k = kiln_throughput_us(lambda: mx.sum(g, axis=0))
    peer = torch_us(lambda: tg.sum(dim=0)) if tg is not None else None
    row(f"bias gradient: sum over rows of {rows}x{cols} bfloat16 ({2 * rows * cols / k / 1e6:.2f} TB/s)",
        k, "torch", peer, "us")


def bench_scan_sort(n):
    rng = np.random.default_rng(4)
    xn = rng.uniform(-1, 1, (n,)).astype(np.float32)
    x = mx.array(xn)
    mx.eval(x)
    tx = to_torch(xn, torch.float32) if torch is not None else None
    k = kiln_throughput_us(lambda: mx.cumsum(x))
    peer = torch_us(lambda: torch.cumsum(tx, 0)) if tx is not None else None
    row(f"cumsum of {n} float32", k, "torch", peer, "us")
    rows = xn.reshape(-1, 1024)
    xr = mx.array(rows)
    mx.eval(xr)
    txr = to_torch(rows, torch.float32) if torch is not None else None
    k = kiln_throughput_us(lambda: mx.sort(xr, axis=-1), reps=5)
    peer = torch_us(lambda: torch.sort(txr, dim=-1)) if txr is not None else None
    row(f"sort of {rows.shape[0]} rows of 1024 float32", k, "torch", peer, "us")


def bench_attention():
    """The attention forward (inference: no gradient), bfloat16, causal,
    against PyTorch's scaled_dot_product_attention: cuDNN's engines where
    cuDNN is present, kiln's tensor-core kernel with KILN_CUDNN_ATTENTION=0."""
    for b, h, t, d in ((32, 8, 256, 64), (4, 16, 4096, 128)):
        rng = np.random.default_rng(5)
        qn, kn, vn = (rng.uniform(-1, 1, (b, h, t, d)).astype(np.float32) for _ in range(3))
        q, k, v = (mx.array(a).astype(mx.bfloat16) for a in (qn, kn, vn))
        mx.eval(q, k, v)
        scale = 1.0 / d ** 0.5
        us = kiln_throughput_us(
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal"), reps=10)
        flops = 4 * b * h * t * t * d / 2  # causal: half the scores
        peer = None
        if torch is not None:
            import torch.nn.functional as F

            tq, tk, tv = (to_torch(a, torch.bfloat16) for a in (qn, kn, vn))
            peer = torch_us(lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True))
        row(f"attention forward, causal bf16 ({b},{h},{t},{d}) ({flops / us / 1e6:.0f} TFLOP/s)", us,
            "torch SDPA", peer, "us")


def compiled_vjp(fn, n_primals):
    """fn's outputs and its primals' gradients, compiled as a training step
    compiles them (so the rows time the GPU's work, not tracing vjp in
    Python per call): a function of the primals and the cotangent."""

    def step(*args):
        outs, grads = mx.vjp(fn, list(args[:n_primals]), [args[n_primals]])
        return outs + grads

    return mx.compile(step)


def bench_attention_training(shapes=((32, 8, 256, 64), (4, 16, 4096, 128))):
    """Attention forward and backward (q, k, v gradients), bfloat16, causal,
    compiled, against PyTorch's scaled_dot_product_attention with
    autograd."""
    for b, h, t, d in shapes:
        rng = np.random.default_rng(6)
        qn, kn, vn, cn = (rng.uniform(-1, 1, (b, h, t, d)).astype(np.float32) for _ in range(4))
        q, k, v, ct = (mx.array(a).astype(mx.bfloat16) for a in (qn, kn, vn, cn))
        mx.eval(q, k, v, ct)
        scale = 1.0 / d ** 0.5

        def attention(q, k, v):
            return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal")

        step = compiled_vjp(attention, 3)
        us = kiln_throughput_us(lambda: step(q, k, v, ct), reps=5)
        flops = 3.5 * 4 * b * h * t * t * d / 2  # FlashAttention's count: forward 2 products, backward 5
        peer = None
        if torch is not None:
            import torch.nn.functional as F

            tq, tk, tv = (to_torch(a, torch.bfloat16).requires_grad_() for a in (qn, kn, vn))
            tc = to_torch(cn, torch.bfloat16)

            def torch_step():
                out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
                return torch.autograd.grad(out, (tq, tk, tv), tc)

            peer = torch_us(torch_step, reps=20)
        row(f"attention forward + backward, causal bf16 ({b},{h},{t},{d}) ({flops / us / 1e6:.0f} TFLOP/s)",
            us, "torch SDPA", peer, "us")


CONV_SHAPES = (
    # (name, input (N, spatial..., C), weight (C_out, kernel..., C_in /
    # groups), stride, padding, groups): conv2d, or conv1d for one axis
    ("ResNet 3x3", (32, 56, 56, 64), (64, 3, 3, 64), 1, 1, 1),
    ("ResNet 3x3 stride 2", (32, 56, 56, 128), (128, 3, 3, 128), 2, 1, 1),
    ("depthwise 3x3", (32, 56, 56, 128), (128, 3, 3, 1), 1, 1, 128),
    ("ResNeXt grouped 3x3 stride 2 (32 groups)", (32, 56, 56, 256), (256, 3, 3, 8), 2, 1, 32),
    ("Conformer depthwise conv1d, 31 taps", (32, 512, 256), (256, 31, 1), 1, 15, 256),
)


def bench_conv(training=False):
    """conv2d and conv1d, bfloat16, channels last (kiln's layout; PyTorch's
    channels_last memory format, so both read NHWC), against
    torch.nn.functional's (cuDNN): the forward, or with training the
    forward and both gradients, compiled. KILN_CUDNN_CONV=0 in the
    environment times kiln's im2col path instead."""
    for name, xs, ws, stride, padding, groups in CONV_SHAPES:
        rng = np.random.default_rng(8)
        xn = rng.uniform(-1, 1, xs).astype(np.float32)
        wn = rng.uniform(-1, 1, ws).astype(np.float32) / np.sqrt(np.prod(ws[1:]))
        x, w = (mx.array(a).astype(mx.bfloat16) for a in (xn, wn))
        mx.eval(x, w)

        one_axis = len(xs) == 3
        kiln_conv = mx.conv1d if one_axis else mx.conv2d

        def conv(x, w):
            return kiln_conv(x, w, stride=stride, padding=padding, groups=groups)

        y = conv(x, w)
        mx.eval(y)
        flops = 2 * y.size * np.prod(ws[1:])
        if training:
            ct = mx.array(rng.uniform(-1, 1, y.shape).astype(np.float32)).astype(mx.bfloat16)
            step = compiled_vjp(conv, 2)
            us = kiln_throughput_us(lambda: step(x, w, ct), reps=10)
            flops *= 3
        else:
            us = kiln_throughput_us(lambda: conv(x, w), reps=10)
        peer = None
        if torch is not None:
            import torch.nn.functional as F

            torch_conv = F.conv1d if one_axis else F.conv2d

            def nchw(a, grad=False):  # NHWC memory seen as NCHW: channels_last
                t = to_torch(a, torch.bfloat16)
                t = t.permute(0, 2, 1) if one_axis else t.permute(0, 3, 1, 2)
                return t.requires_grad_() if grad else t

            tx, tw = nchw(xn, training), nchw(wn, training)
            if training:
                tc = nchw(np.asarray(ct.astype(mx.float32)))

                def torch_step():
                    out = torch_conv(tx, tw, stride=stride, padding=padding, groups=groups)
                    return torch.autograd.grad(out, (tx, tw), tc)

                peer = torch_us(torch_step, reps=20)
            else:
                peer = torch_us(lambda: torch_conv(tx, tw, stride=stride, padding=padding, groups=groups))
        what = "forward + backward, compiled vjp" if training else "forward"
        row(f"{'conv1d' if one_axis else 'conv2d'} {name} {what}, bf16 x{xs} w{ws} ({flops / us / 1e6:.0f} TFLOP/s)", us, "torch", peer, "us")


def bench_norm_backward(rows=8192, n=512):
    """LayerNorm's forward and gradients (x, weight, bias), compiled, at the
    GPT step's shape, (8192, 512) bfloat16, against PyTorch's layer_norm
    with autograd."""
    rng = np.random.default_rng(7)
    xn, cn = (rng.uniform(-2, 2, (rows, n)).astype(np.float32) for _ in range(2))
    wn, bn = (rng.uniform(0.5, 2, (n,)).astype(np.float32) for _ in range(2))
    x, ct, w, bias = (mx.array(a).astype(mx.bfloat16) for a in (xn, cn, wn, bn))
    mx.eval(x, ct, w, bias)

    def layer_norm(x, w, bias):
        return mx.fast.layer_norm(x, w, bias, 1e-5)

    step = compiled_vjp(layer_norm, 3)
    us = kiln_throughput_us(lambda: step(x, w, bias, ct), reps=20)
    peer = None
    if torch is not None:
        tx, tw, tb = (to_torch(a, torch.bfloat16).requires_grad_() for a in (xn, wn, bn))
        tc = to_torch(cn, torch.bfloat16)

        def torch_step():
            out = torch.nn.functional.layer_norm(tx, (n,), tw, tb, 1e-5)
            return torch.autograd.grad(out, (tx, tw, tb), tc)

        peer = torch_us(torch_step)
    row(f"LayerNorm forward + backward ({rows},{n}) bfloat16", us, "torch", peer, "us")


def bench_host_time():
    x = mx.random.uniform(shape=(1024,))
    mx.eval(x)
    f = mx.compile(lambda a: mx.exp(a) * 2 + 1)
    mx.eval(f(x))
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        y = f(x)
    call_us = (time.perf_counter() - t0) / n * 1e6
    mx.eval(y)
    full = kiln_wall_us(lambda: f(x), iters=1000)
    ROWS.append(("host time of a compiled call (cache hit): call / call+eval+sync", f"{call_us:.1f} / {full:.1f} us", "torch.compile 71 us (issue)", ""))
    print(f"compiled call: {call_us:.1f} us to call, {full:.1f} us with eval and sync", flush=True)


COLD = textwrap.dedent(
    """
    import sys, time
    import kiln.core as mx
    x = mx.random.uniform(shape=(1 << 20,))
    mx.eval(mx.abs(x) + 1)  # the context and NVRTC are loaded
    c = float(sys.argv[1])
    f = mx.compile(lambda a: mx.tanh(a * c + 1.5) * 0.25 - a)
    t0 = time.perf_counter()
    mx.eval(f(x))
    print((time.perf_counter() - t0) * 1e3)
    """
)


CUSTOM_FUSED = """
    int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
    if (i + 3 < n[0]) {
        float4 a = *reinterpret_cast<const float4*>(x + i);
        float4 b = *reinterpret_cast<const float4*>(y + i);
        float4 r;
        r.x = tanhf(a.x * b.x + 1.0f) * 0.5f + a.x;
        r.y = tanhf(a.y * b.y + 1.0f) * 0.5f + a.y;
        r.z = tanhf(a.z * b.z + 1.0f) * 0.5f + a.z;
        r.w = tanhf(a.w * b.w + 1.0f) * 0.5f + a.w;
        *reinterpret_cast<float4*>(out + i) = r;
    } else {
        for (; i < n[0]; ++i) out[i] = tanhf(x[i] * y[i] + 1.0f) * 0.5f + x[i];
    }
"""


def bench_custom_kernel(n):
    """The fused workload written as a user's kernel (fast.cuda_kernel, four
    float32 per thread), against kiln's compiled fusion of the same
    expression; and a custom kernel's first call (NVRTC compile, a body the
    disk cache has not seen)."""
    rng = np.random.default_rng(0)
    x = mx.array(rng.uniform(-2, 2, n).astype(np.float32))
    y = mx.array(rng.uniform(-2, 2, n).astype(np.float32))
    count = mx.array(n)
    mx.eval(x, y, count)
    kernel = mx.fast.cuda_kernel(name="fused_tanh", input_names=["x", "y", "n"], output_names=["out"],
                                 source=CUSTOM_FUSED)
    call = lambda k: k(inputs=[x, y, count], grid=((n + 3) // 4, 1, 1), threadgroup=(256, 1, 1),
                       output_shapes=[(n,)], output_dtypes=[mx.float32])[0]
    got = call(kernel)
    fc = mx.compile(lambda a, b: mx.tanh(a * b + 1) * 0.5 + a)
    assert mx.allclose(got, fc(x, y), rtol=1e-5, atol=1e-5).item()
    ku = kiln_throughput_us(lambda: call(kernel))
    kc = kiln_throughput_us(lambda: fc(x, y))
    tbps = 3 * n * 4 / (ku * 1e-6) / 1e12
    row(f"custom kernel tanh(x*y+1)*0.5+x, {n >> 20}M float32 ({tbps:.2f} TB/s), vs kiln compiled", ku,
        "kiln compiled", kc, "us")
    fresh = mx.fast.cuda_kernel(name="fused_tanh", input_names=["x", "y", "n"], output_names=["out"],
                                header=f"// {time.time_ns()}", source=CUSTOM_FUSED)
    t0 = time.perf_counter()
    mx.eval(call(fresh))
    mx.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    ROWS.append(("custom kernel: first call of a new body (NVRTC compile)", f"{first:.1f} ms", "", ""))
    print(f"custom kernel: {ku:.1f} us ({tbps:.2f} TB/s), kiln compiled {kc:.1f} us; first call {first:.1f} ms",
          flush=True)


def bench_cold_kernel():
    """A new fused kernel's first call in a fresh process with an empty
    cache (median of three processes, each with its own cache), then the
    same kernel from the disk cache in a new process."""
    run = lambda env: float(subprocess.run([sys.executable, "-c", COLD, "0.625"], env=env,
                                           capture_output=True, text=True, check=True).stdout.split()[-1])
    colds = []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, KILN_CACHE_DIR=d)
            colds.append(run(env))
            warm = run(env)
    cold = statistics.median(colds)
    spread = ", ".join(f"{c:.1f}" for c in colds)
    ROWS.append(("new fused kernel: cold cache (median of 3) / disk-cache hit in a new process",
                 f"{cold:.1f} / {warm:.1f} ms", "JAX 112 / 11 ms (issue)", ""))
    print(f"new fused kernel: first call {cold:.1f} ms cold (runs: {spread}), {warm:.1f} ms from the disk cache",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, no torch.compile")
    ap.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--only", default="", metavar="NAMES",
                    help="comma-separated workloads to run (a word of each name is enough: 'scan,attention')")
    ap.add_argument("--json", metavar="PATH", help="also write the table's rows to PATH (scripts/gpu-check compare)")
    args = ap.parse_args()
    if not mx.is_available(mx.gpu):
        sys.exit("gpu_bench: kiln has no GPU here")
    mx.set_default_device(mx.gpu)
    info = mx.device_info(mx.gpu)
    print(f"GPU: {info['device_name']} ({info['architecture']}); torch {torch.__version__ if torch else 'absent'}", flush=True)
    n = (1 << 24) if args.quick else (1 << 26)
    use_tc = not (args.quick or args.no_torch_compile)
    steps = [
        ("copy ceiling", lambda: bench_copy_ceiling(n)),
        ("fused float32", lambda: bench_fused(n, "float32", use_tc)),
        ("fused bfloat16", lambda: bench_fused(n, "bfloat16", use_tc)),
        ("rows broadcast layernorm",
         lambda: bench_rows_broadcast("layernorm", 8192 if args.quick else 32768, 512, "bfloat16")),
        ("rows broadcast cross-entropy",
         lambda: bench_rows_broadcast("cross_entropy", 2048 if args.quick else 8192, 8192, "bfloat16")),
        # Host-bound workloads run before the first use of torch.profiler:
        # the profiler's CUDA callbacks stay installed once it has run and
        # add to every later launch of the process, kiln's included.
        ("broadcast chain", bench_broadcast_chain),
        ("host time", bench_host_time),
        ("gemm", lambda: bench_gemm(4096 if args.quick else 8192)),
        ("seed step", bench_seed_step),
        ("rows broadcast GPU time", bench_rows_gpu_time),
        ("exp transposed", lambda: bench_exp_transposed(4096 if args.quick else 8192)),
        ("transposing copies", bench_transposed_copies),
        ("reductions", lambda: bench_reductions(4096 if args.quick else 8192)),
        ("scan and sort", lambda: bench_scan_sort(1 << 22 if args.quick else 1 << 24)),
        ("attention", bench_attention),
        ("attention training", bench_attention_training),
        ("norm backward", bench_norm_backward),
        ("conv forward", bench_conv),
        ("conv training", lambda: bench_conv(training=True)),
        ("cold kernel", bench_cold_kernel),
        ("custom kernel", lambda: bench_custom_kernel(n)),
    ]
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    for name, fn in steps:
        if wanted and not any(w in name for w in wanted):
            continue
        try:
            fn()
        except Exception as e:  # one failing workload must not hide the rest
            print(f"{name}: FAILED: {type(e).__name__}: {e}", flush=True)
            ROWS.append((name, "FAILED", "", ""))
    print()
    print("| workload | kiln | peer | ratio (>1: kiln better) |")
    print("| --- | --- | --- | --- |")
    for r in ROWS:
        print("| " + " | ".join(r) + " |")
    if args.json:
        import json

        with open(args.json, "w") as f:
            json.dump(ROWS, f)


if __name__ == "__main__":
    main()
