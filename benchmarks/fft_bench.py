"""FFTs: kiln against its peers in the same process, on complex64 / float32
inputs: one long line, many short lines, 2-d transforms, a non-power-of-two
and a prime length, and the real transforms.

    PYTHONPATH=build/python python3 benchmarks/fft_bench.py
    PYTHONPATH=build-gpu-jit/python python3 benchmarks/fft_bench.py --gpu

On the CPU the peers are NumPy (pocketfft, one thread) and MLX (mlx[cpu]);
times are the best of repeated calls, in ms. With --gpu the peer is
PyTorch's torch.fft on CUDA (cuFFT, as kiln's), at larger sizes; times are
the GPU's own (kernels and copies per call, from the CUDA profiler), in us,
with the bytes each transform must read and write as an effective
bandwidth. Ratios are peer / kiln (> 1 means kiln is faster).
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--gpu", action="store_true", help="kiln on the GPU against torch.fft")
    args = ap.parse_args()
    if args.gpu:
        return main_gpu()
    rng = np.random.default_rng(0)

    def crand(*shape):
        return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)

    def rrand(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    # (label, input, kiln/mlx function name, kwargs, numpy function)
    cases = [
        ("fft, 1 x 2^20 complex64", crand(1 << 20), "fft", {}, np.fft.fft),
        ("fft, 4096 lines of 1024", crand(4096, 1024), "fft", {}, np.fft.fft),
        ("fft along axis 0, 1024 x 4096", crand(1024, 4096), "fft", {"axis": 0}, lambda a, axis: np.fft.fft(a, axis=axis)),
        ("fft2, 1024 x 1024", crand(1024, 1024), "fft2", {}, np.fft.fft2),
        ("fft, 1000 lines of 1000", crand(1000, 1000), "fft", {}, np.fft.fft),
        ("fft, 1000 lines of 1009 (prime)", crand(1000, 1009), "fft", {}, np.fft.fft),
        ("rfft, 1 x 2^20 float32", rrand(1 << 20), "rfft", {}, np.fft.rfft),
        ("rfft, 4096 lines of 1024", rrand(4096, 1024), "rfft", {}, np.fft.rfft),
        ("rfft2, 1024 x 1024", rrand(1024, 1024), "rfft2", {}, np.fft.rfft2),
        ("irfft, 4096 lines of 513 -> 1024", crand(4096, 513), "irfft", {}, np.fft.irfft),
    ]
    rows = []
    for label, x, name, kw, np_fn in cases:
        kx = kc.array(x)
        kc.eval(kx)
        k = best_ms(lambda: getattr(kc.fft, name)(kx, **kw), kc.eval, args.repeat)
        n = best_ms(lambda: np_fn(x, **kw), lambda r: r, max(3, args.repeat // 2))
        m = None
        if mc is not None:
            mx_ = mc.array(x)
            mc.eval(mx_)
            m = best_ms(lambda: getattr(mc.fft, name)(mx_, **kw), mc.eval, args.repeat)
        rows.append((label, k, n, m))
        print(f"{label}: kiln {k:.2f} ms, numpy {n:.2f} ms" + (f", mlx {m:.2f} ms" if m else ""), flush=True)
    print()
    print("| transform | kiln ms | NumPy ms | NumPy / kiln | MLX ms | MLX / kiln |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, k, n, m in rows:
        mcol = f"{m:.2f} | {m / k:.2f}x" if m else "| "
        print(f"| {label} | {k:.2f} | {n:.2f} | {n / k:.2f}x | {mcol} |")


def main_gpu():
    import torch

    from gpu_bench import kiln_gpu_us, torch_gpu_us

    kc.set_default_device(kc.gpu)
    rng = np.random.default_rng(0)

    def crand(*shape):
        return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)

    def rrand(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    # (label, input, function name, kwargs, torch function)
    tf = torch.fft
    cases = [
        ("fft, 1 x 2^24", crand(1 << 24), "fft", {}, lambda a: tf.fft(a)),
        ("fft, 16384 lines of 1024", crand(16384, 1024), "fft", {}, lambda a: tf.fft(a)),
        ("fft along axis 0, 4096 x 4096", crand(4096, 4096), "fft", {"axis": 0}, lambda a: tf.fft(a, dim=0)),
        ("fft2, 4096 x 4096", crand(4096, 4096), "fft2", {}, lambda a: tf.fft2(a)),
        ("fft, 16384 lines of 1009 (prime)", crand(16384, 1009), "fft", {}, lambda a: tf.fft(a)),
        ("rfft, 16384 lines of 1024", rrand(16384, 1024), "rfft", {}, lambda a: tf.rfft(a)),
        ("rfft2, 4096 x 4096", rrand(4096, 4096), "rfft2", {}, lambda a: tf.rfft2(a)),
        ("irfft, 16384 lines of 513 -> 1024", crand(16384, 513), "irfft", {}, lambda a: tf.irfft(a)),
        ("irfft2, 4096 x 2049 -> 4096 x 4096", crand(4096, 2049), "irfft2", {}, lambda a: tf.irfft2(a)),
    ]
    rows = []
    for label, x, name, kw, t_fn in cases:
        kx = kc.array(x)
        kc.eval(kx)
        out = getattr(kc.fft, name)(kx, **kw)
        moved = x.nbytes + np.asarray(out).nbytes
        k = kiln_gpu_us(lambda: getattr(kc.fft, name)(kx, **kw))
        tx = torch.from_numpy(x).cuda()
        t = torch_gpu_us(lambda: t_fn(tx))
        rows.append((label, k, t, moved / (k * 1e-6) / 1e12))
        print(f"{label}: kiln {k:.1f} us, torch {t:.1f} us", flush=True)
    print()
    print("| transform (GPU time) | kiln us | torch.fft us | torch / kiln | kiln effective TB/s |")
    print("| --- | --- | --- | --- | --- |")
    for label, k, t, tbps in rows:
        print(f"| {label} | {k:.1f} | {t:.1f} | {t / k:.2f}x | {tbps:.2f} |")


if __name__ == "__main__":
    main()
