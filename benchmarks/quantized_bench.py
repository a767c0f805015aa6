"""Affine-quantized matmul on the CPU, kiln against MLX (mlx[cpu]) in the
same process: x @ W^T with W (4096, 4096) quantized to 4 bits in groups of
64, for a decode step (1 row of x) and a batch (32 rows); the float32
matmul of each, and quantize itself; then gather_qmm as mlx-lm's quantized
SwitchGLU calls it (64 experts, top-8) for 1 and 8 tokens (and 512 with
--prefill).

    PYTHONPATH=build/python python3 benchmarks/quantized_bench.py

Times are the best of repeated calls, in ms; ratios are MLX/kiln (> 1
means kiln is faster).

With --gpu, on the GPU against PyTorch in the same process: float16 x @
W^T with W quantized to 4 bits in groups of 64, for decode (1 row), a few
sequences or a short prompt (8, 16, 32, 64 and 128 rows) and prefill
(512 rows) on Llama-sized layers, and at 8 bits for 1, 8, 32 and 64 rows,
against PyTorch's float16 matmul of the unquantized weight and, where
this PyTorch has it, its int4 kernel (_weight_int4pack_mm, bfloat16,
groups of 64) and, from 16 rows, kiln's own dequantize-then-matmul (the
route past the quantized kernels); GPU time from the CUDA profiler (gpu_bench.py's helpers),
effective bandwidth of the weight's bytes against the device copy
ceiling; and mlx-lm's quantized SwitchGLU decode through gather_qmm
(wall time per call).

    cd benchmarks && PYTHONPATH=../build-gpu-jit/python python3 quantized_bench.py --gpu

With --gpu-modes, the microscaling modes (mxfp4, nvfp4, mxfp8) on the GPU:
bfloat16 x @ W^T for 1, 8 and 16 rows (the matvec that reads the codes)
and 64 (dequantize, then cuBLASLt), against PyTorch's bfloat16 matmul of
the unquantized weight (PyTorch has no microscaling matvec on Hopper) and
kiln's own dequantize-then-matmul; and gather_qmm in mxfp4 at decode.
"""

import argparse

import numpy as np

import kiln.core as kc
from timing import best_ms

try:
    import mlx.core as mc
except ImportError:  # pragma: no cover
    mc = None


def main():
    rng = np.random.default_rng(0)
    n = 4096
    w = (rng.standard_normal((n, n)) * 0.02).astype(np.float32)
    kw = kc.array(w)
    kq = kc.quantize(kw)
    kc.eval(*kq)
    mw = mq = None
    if mc is not None:
        mw = mc.array(w)
        mq = mc.quantize(mw)
        mc.eval(*mq)
    rows = []
    for m in (1, 32):
        x = rng.standard_normal((m, n)).astype(np.float32)
        kx = kc.array(x)
        cases = [(f"quantized_matmul, {m} x {n} by {n} x {n}, 4 bits", lambda: kc.quantized_matmul(kx, *kq),
                  mc and (lambda: mc.quantized_matmul(mc.array(x), *mq))),
                 (f"float32 matmul, {m} x {n} by {n} x {n}", lambda: kx @ kw.T,
                  mc and (lambda: mc.array(x) @ mw.T))]
        for name, kf, mf in cases:
            k = best_ms(kf, kc.eval)
            p = best_ms(mf, mc.eval) if mf else None
            rows.append((name, k, p))
    k = best_ms(lambda: kc.quantize(kw)[0], kc.eval, 3)
    p = best_ms(lambda: mc.quantize(mw)[0], mc.eval, 3) if mc else None
    rows.append((f"quantize {n} x {n}, 4 bits", k, p))
    # The microscaling modes: one row of x against the quantized weight,
    # and qqmm (x quantized too; MLX's CPU takes one row of x).
    x = rng.standard_normal((1, n)).astype(np.float32)
    kx = kc.array(x)
    for mode in ("mxfp4", "mxfp8", "nvfp4"):
        kqm = kc.quantize(kw, mode=mode)
        kc.eval(*kqm)
        mqm = None
        if mc is not None:
            mqm = mc.quantize(mw, mode=mode)
            mc.eval(*mqm)
        cases = [(f"quantized_matmul {mode}, 1 x {n} by {n} x {n}",
                  lambda: kc.quantized_matmul(kx, *kqm, mode=mode),
                  mc and (lambda: mc.quantized_matmul(mc.array(x), *mqm, mode=mode)))]
        if mode != "mxfp4":
            cases.append((f"qqmm {mode}, 1 x {n} by {n} x {n} (w quantized)",
                          lambda: kc.qqmm(kx, *kqm, mode=mode),
                          mc and (lambda: mc.qqmm(mc.array(x), *mqm, mode=mode))))
        for name, kf, mf in cases:
            rows.append((name, best_ms(kf, kc.eval), best_ms(mf, mc.eval) if mf else None))
    print("| workload | kiln ms | MLX ms | MLX/kiln |")
    print("| --- | --- | --- | --- |")
    for name, k, p in rows:
        print(f"| {name} | {k:.1f} | " + (f"{p:.1f} | {p / k:.2f}x |" if p else "| |"))


def torch_int4_us(torch, x, n, k, gs=64):
    """PyTorch's int4 matmul (tinygemm) on random codes, GPU us; None where
    this PyTorch lacks it."""
    try:
        codes = torch.randint(0, 16, (n, k), dtype=torch.int32, device="cuda")
        packed = torch._convert_weight_to_int4pack((codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8), 8)
        sz = torch.rand(k // gs, n, 2, dtype=torch.bfloat16, device="cuda")
        xb = x.to(torch.bfloat16)
        torch._weight_int4pack_mm(xb, packed, gs, sz)
    except Exception as e:  # pragma: no cover - depends on the build
        print(f"(no PyTorch int4 matmul: {type(e).__name__}: {str(e)[:100]})")
        return None
    from gpu_bench import torch_gpu_us
    return torch_gpu_us(lambda: torch._weight_int4pack_mm(xb, packed, gs, sz))


def gpu_main():
    import torch
    from gpu_bench import bench_copy_ceiling, kiln_gpu_us, kiln_throughput_us, torch_gpu_us

    ceiling = bench_copy_ceiling(1 << 26)
    rng = np.random.default_rng(0)
    rows = []
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float16)
        tw = torch.from_numpy(w).cuda()
        quantized = {}
        for bits, m in [(4, m) for m in (1, 8, 16, 32, 64, 128, 512)] + [(8, m) for m in (1, 8, 32, 64)]:
            if bits not in quantized:
                with kc.stream(kc.gpu):
                    quantized[bits] = kc.quantize(kc.array(w), bits=bits)
                    kc.eval(*quantized[bits])
            kq = quantized[bits]
            qbytes = sum(a.nbytes for a in kq)
            x = rng.standard_normal((m, k)).astype(np.float16)
            kx, tx = kc.array(x), torch.from_numpy(x).cuda()
            kc.eval(kx)
            ref = x.astype(np.float32) @ np.array(kc.dequantize(*kq, bits=bits, dtype=kc.float32)).T
            with kc.stream(kc.gpu):
                got = np.array(kc.quantized_matmul(kx, *kq, bits=bits), dtype=np.float32)
            err = np.abs(got - ref).max() / np.abs(ref).max()
            assert err < 1e-2, f"{n} x {k}, {m} rows, {bits} bits: relative error {err}"

            def k_fn():
                with kc.stream(kc.gpu):
                    return kc.quantized_matmul(kx, *kq, bits=bits)

            kg = kiln_gpu_us(k_fn)
            kt = kiln_throughput_us(k_fn)
            tg = torch_gpu_us(lambda: tx @ tw.T)
            t4 = torch_int4_us(torch, tx, n, k) if bits == 4 else None

            def dequantized_fn():  # the route that rows past the kernels take
                with kc.stream(kc.gpu):
                    wd = kc.dequantize(*kq, bits=bits, dtype=kc.float16)
                    return kc.matmul(kx, kc.transpose(wd))

            kd = kiln_gpu_us(dequantized_fn) if m >= 16 else None
            tbps = qbytes / (kg * 1e-6) / 1e12
            rows.append((f"{m} x {k} by {n} x {k}, {bits} bits", kg, kt, tbps, tg, t4, kd))
            print(rows[-1], flush=True)
    print()
    print(f"float16 x, weight in groups of 64; GPU us from the CUDA profiler; copy ceiling {ceiling:.2f} TB/s")
    print("| x by W^T | kiln GPU us | kiln wall us/call | kiln weight TB/s | torch fp16 GPU us (/ kiln) "
          "| torch int4 GPU us (/ kiln) | kiln dequantize + matmul GPU us (/ kiln) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, kg, kt, tbps, tg, t4, kd in rows:
        int4 = f"{t4:.1f} ({t4 / kg:.2f}x)" if t4 else "n/a"
        dq = f"{kd:.1f} ({kd / kg:.2f}x)" if kd else "n/a"
        print(f"| {name} | {kg:.1f} | {kt:.1f} | {tbps:.2f} | {tg:.1f} ({tg / kg:.2f}x) | {int4} | {dq} |")
    gather_qmm_decode(kiln_throughput_us)


def gpu_modes():
    import torch
    from gpu_bench import bench_copy_ceiling, kiln_gpu_us, kiln_throughput_us, torch_gpu_us

    ceiling = bench_copy_ceiling(1 << 26)
    rng = np.random.default_rng(0)
    print("| mode | x by W^T | kiln GPU us | kiln wall us/call | kiln weight TB/s "
          "| torch bf16 GPU us (/ kiln) | kiln dequantize + matmul GPU us (/ kiln) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n, k in ((4096, 4096), (14336, 4096)):
        w = (rng.standard_normal((n, k)) * 0.02).astype(np.float32)
        tw = torch.from_numpy(w).cuda().to(torch.bfloat16)
        wf = kc.array(w)
        for mode in ("mxfp4", "nvfp4", "mxfp8"):
            with kc.stream(kc.gpu):
                kq = kc.quantize(wf, mode=mode)
                kc.eval(*kq)
                wd32 = np.array(kc.dequantize(*kq, mode=mode, dtype=kc.float32))
            qbytes = sum(a.nbytes for a in kq)
            for m in (1, 8, 16, 64):
                x = rng.standard_normal((m, k)).astype(np.float32)
                kx = kc.array(x).astype(kc.bfloat16)
                tx = torch.from_numpy(x).cuda().to(torch.bfloat16)
                kc.eval(kx)
                xr = np.array(kx.astype(kc.float32))
                ref = xr @ wd32.T
                with kc.stream(kc.gpu):
                    got = np.array(kc.quantized_matmul(kx, *kq, mode=mode).astype(kc.float32))
                err = np.abs(got - ref).max() / np.abs(ref).max()
                assert err < 1e-2, f"{mode} {n} x {k}, {m} rows: relative error {err}"

                def k_fn():
                    with kc.stream(kc.gpu):
                        return kc.quantized_matmul(kx, *kq, mode=mode)

                def dequantized_fn():
                    with kc.stream(kc.gpu):
                        wd = kc.dequantize(*kq, mode=mode, dtype=kc.bfloat16)
                        return kc.matmul(kx, kc.transpose(wd))

                kg = kiln_gpu_us(k_fn)
                kt = kiln_throughput_us(k_fn)
                tg = torch_gpu_us(lambda: tx @ tw.T)
                kd = kiln_gpu_us(dequantized_fn)
                print(f"| {mode} | {m} x {k} by {n} x {k} | {kg:.1f} | {kt:.1f} | "
                      f"{qbytes / (kg * 1e-6) / 1e12:.2f} | {tg:.1f} ({tg / kg:.2f}x) | "
                      f"{kd:.1f} ({kd / kg:.2f}x) |", flush=True)
    print(f"copy ceiling {ceiling:.2f} TB/s")
    for tokens in (1, 8):
        x, w, idx = switch_glu_case(tokens, np.float32)
        with kc.stream(kc.gpu):
            kq = kc.quantize(kc.array(w), mode="mxfp4")
            kx, ki = kc.array(x).astype(kc.bfloat16), kc.array(idx)
            kc.eval(*kq, kx, ki)

            def fn():
                with kc.stream(kc.gpu):
                    return kc.gather_qmm(kx, *kq, rhs_indices=ki, transpose=True, mode="mxfp4")

            us = kiln_throughput_us(fn)
        print(f"gather_qmm mxfp4 decode ({tokens} tokens, top-8 of 64 experts, 2048 -> 1408, bfloat16): "
              f"{us:.1f} us per call")


def switch_glu_case(tokens, dtype):
    """mlx-lm's quantized SwitchGLU projection: top-8 of 64 experts, 2048 ->
    1408, 4 bits in groups of 64; x (tokens, 1, 1, 2048), the picks
    (tokens, 8). Returns (x, w, picks) as NumPy arrays."""
    rng = np.random.default_rng(1)
    e, n, k, top = 64, 1408, 2048, 8
    w = (rng.standard_normal((e, n, k)) * 0.02).astype(dtype)
    x = rng.standard_normal((tokens, 1, 1, k)).astype(dtype)
    idx = np.stack([rng.permutation(e)[:top] for _ in range(tokens)]).astype(np.uint32)
    return x, w, idx


def gather_qmm_cpu(prefill):
    """gather_qmm on the CPU against MLX's, decode (1 and 8 tokens) and,
    with --prefill, 512 tokens (MLX's takes about 27 s there)."""
    print()
    print("| gather_qmm, 64 experts 1408 x 2048, 4 bits, top-8, float32 | kiln ms | MLX ms | MLX/kiln |")
    print("| --- | --- | --- | --- |")
    for tokens in (1, 8) + ((512,) if prefill else ()):
        x, w, idx = switch_glu_case(tokens, np.float32)
        kq = kc.quantize(kc.array(w))
        kx, ki = kc.array(x), kc.array(idx)
        kc.eval(*kq, kx, ki)
        repeat = 2 if tokens > 8 else 5
        k = best_ms(lambda: kc.gather_qmm(kx, *kq, rhs_indices=ki), kc.eval, repeat)
        p = None
        if mc is not None:
            mq = mc.quantize(mc.array(w))
            mx_, mi = mc.array(x), mc.array(idx)
            mc.eval(*mq, mx_, mi)
            p = best_ms(lambda: mc.gather_qmm(mx_, *mq, rhs_indices=mi), mc.eval, repeat)
        print(f"| {tokens} tokens | {k:.1f} | " + (f"{p:.1f} | {p / k:.2f}x |" if p else "| |"), flush=True)


def gather_qmm_decode(throughput):
    """The SwitchGLU projection at decode on the GPU (8 tokens, float16)."""
    x, w, idx = switch_glu_case(8, np.float16)
    with kc.stream(kc.gpu):
        kq = kc.quantize(kc.array(w))
        kx, ki = kc.array(x), kc.array(idx)
        kc.eval(*kq, kx, ki)

        def fn():
            with kc.stream(kc.gpu):
                return kc.gather_qmm(kx, *kq, rhs_indices=ki, transpose=True)

        us = throughput(fn)
    print(f"gather_qmm decode (8 tokens, top-8 of 64 experts, 2048 -> 1408, 4 bits, float16): {us:.1f} us per call")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="kiln on the GPU against PyTorch CUDA")
    ap.add_argument("--gpu-modes", action="store_true", help="the microscaling modes on the GPU")
    ap.add_argument("--prefill", action="store_true", help="also gather_qmm over 512 tokens on the CPU")
    args = ap.parse_args()
    if args.gpu_modes:
        gpu_modes()
    elif args.gpu:
        gpu_main()
    else:
        main()
        gather_qmm_cpu(args.prefill)
