"""Affine-quantized matmul on the CPU, kiln against MLX (mlx[cpu]) in the
same process: x @ W^T with W (4096, 4096) quantized to 4 bits in groups of
64, for a decode step (1 row of x) and a batch (32 rows); the float32
matmul of each, and quantize itself.

    PYTHONPATH=build/python python3 benchmarks/quantized_bench.py

Times are the best of repeated calls, in ms; ratios are MLX/kiln (> 1
means kiln is faster).
"""


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
    print("| workload | kiln ms | MLX ms | MLX/kiln |")
    print("| --- | --- | --- | --- |")
    for name, k, p in rows:
        print(f"| {name} | {k:.1f} | " + (f"{p:.1f} | {p / k:.2f}x |" if p else "| |"))


if __name__ == "__main__":
    main()
