"""CPU sorts of every dtype family, kiln against NumPy (and PyTorch where
installed) in the same process: along the rows of a 2048x2048 array and
a flat sort of 4M values. Inputs are random over each dtype's usual range.

    PYTHONPATH=build/python python3 benchmarks/sort_dtypes.py

Times are the best of repeated calls, in ms; ratios are peer/kiln (> 1
means kiln is faster).
"""

import platform
import time

import numpy as np

import kiln.core as mx

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# dtype, kiln dtype, low, high of the random values
CASES = [
    ("float64", mx.float64, -1, 1),
    ("int64", mx.int64, -1e9, 1e9),
    ("uint64", mx.uint64, 0, 1e12),
    ("float32", mx.float32, -1, 1),
    ("int32", mx.int32, -1e6, 1e6),
    ("float16", mx.float16, -1000, 1000),
    ("int16", mx.int16, -3e4, 3e4),
    ("uint8", mx.uint8, 0, 250),
    ("bool", mx.bool_, 0, 2),
    ("complex64", mx.complex64, -1, 1),  # both parts; MLX's order
]


def best_ms(fn, repeat=5):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def torch_ms(a, axis):
    if torch is None or a.dtype == np.uint64 and not hasattr(torch, "uint64"):
        return None
    try:
        t = torch.from_numpy(a)
        return best_ms(lambda: torch.sort(t, dim=axis))
    except (TypeError, RuntimeError):  # a dtype torch.sort refuses
        return None


def main():
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()}, NumPy {np.__version__}"
          + (f", PyTorch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""))
    head = "| dtype | shape | kiln | NumPy | NumPy/kiln |"
    if torch is not None:
        head += " PyTorch | PyTorch/kiln |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for name, kdt, lo, hi in CASES:
        full = rng.uniform(lo, hi, (2048, 2048)).astype(name)
        if name == "complex64":
            full = full + 1j * rng.uniform(lo, hi, (2048, 2048)).astype(name)
        for shape, a, axis in (("2048x2048, rows", full, 1),
                               ("4M, flat", full.reshape(-1)[: 1 << 22].copy(), 0)):
            x = mx.array(a)
            mx.eval(x)
            k = best_ms(lambda: mx.eval(mx.sort(x, axis=axis)))
            n = best_ms(lambda: np.sort(a, axis=axis))
            line = f"| {name} | {shape} | {k:.1f} | {n:.1f} | {n / k:.2f}x |"
            if torch is not None:
                t = torch_ms(a, axis)
                line += f" {t:.1f} | {t / k:.2f}x |" if t else " n/a | |"
            print(line, flush=True)


if __name__ == "__main__":
    main()
