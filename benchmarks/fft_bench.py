"""FFTs on the CPU: kiln against NumPy (pocketfft) and MLX (mlx[cpu]) in the
same process, on complex64 / float32 inputs: one long line, many short
lines, 2-d transforms, a non-power-of-two and a prime length, and the real
transforms.

    PYTHONPATH=build/python python3 benchmarks/fft_bench.py

Times are the best of repeated calls, in ms; ratios are peer / kiln (> 1
means kiln is faster). NumPy runs one thread; kiln and MLX use the cores.
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
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
