"""Linear algebra on the GPU: kiln (cuSOLVER) against torch.linalg on CUDA
in the same process, with kiln's CPU path (LAPACK; where a GPU array's
factorization ran before kiln had GPU routines) for reference.

    PYTHONPATH=build-gpu-jit/python python3 benchmarks/linalg_bench.py [--no-cpu]

Factorizations read their status back (a failure raises), so each call
ends in a wait on both libraries: times are wall milliseconds per call
(the call, then a synchronize), the best of --repeat after a warm-up.
Inputs are random float32, shifted or made positive definite where the
factorization needs it. Ratios are torch / kiln (> 1 means kiln is
faster).
"""

import argparse

import numpy as np

import kiln.core as kc
from timing import best_ms

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def kiln_sync(out):
    kc.eval(out)
    kc.synchronize()


def torch_sync(out):
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-cpu", action="store_true", help="skip kiln's CPU column")
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def general(*shape):
        n = shape[-1]
        return (rng.uniform(-1, 1, shape) + n**0.5 * np.eye(n)).astype(np.float32)

    def spd(*shape):
        a = rng.uniform(-1, 1, shape).astype(np.float32)
        n = shape[-1]
        return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(np.float32)

    def plain(*shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    L, T = kc.linalg, torch.linalg
    # (label, inputs, kiln function, torch function)
    cases = [
        ("cholesky 4096", [spd(4096, 4096)], L.cholesky, T.cholesky),
        ("cholesky, 512 x 64x64", [spd(512, 64, 64)], L.cholesky, T.cholesky),
        ("solve 4096, 1 side", [general(4096, 4096), plain(4096, 1)], L.solve, T.solve),
        ("solve 4096, 512 sides", [general(4096, 4096), plain(4096, 512)], L.solve, T.solve),
        ("inv 2048", [general(2048, 2048)], L.inv, T.inv),
        ("inv, 512 x 32x32", [general(512, 32, 32)], L.inv, T.inv),
        ("inv, 512 x 64x64", [general(512, 64, 64)], L.inv, T.inv),
        ("solve, 512 x 48x48, 48 sides", [general(512, 48, 48), plain(512, 48, 48)], L.solve, T.solve),
        ("lu_factor 4096", [general(4096, 4096)], L.lu_factor, T.lu_factor),
        ("lu_factor, 512 x 32x32", [general(512, 32, 32)], L.lu_factor, T.lu_factor),
        ("qr 4096 x 1024", [plain(4096, 1024)], L.qr, T.qr),
        ("eigh 1024", [spd(1024, 1024)], L.eigh, T.eigh),
        ("eigvalsh 2048", [spd(2048, 2048)], L.eigvalsh, T.eigvalsh),
        ("svd 1024", [plain(1024, 1024)], L.svd, lambda a: T.svd(a, full_matrices=True)),
        ("svd, 512 x 16x16", [plain(512, 16, 16)], L.svd, lambda a: T.svd(a, full_matrices=True)),
        ("eig 512", [plain(512, 512)], L.eig, T.eig),
        ("svd values 2048 x 512", [plain(2048, 512)], lambda a, stream=None: L.svd(a, compute_uv=False, stream=stream), T.svdvals),
        ("tri_inv 4096", [np.tril(general(4096, 4096))], L.tri_inv, lambda a: T.solve_triangular(a, torch.eye(a.shape[-1], device=a.device), upper=False)),
    ]
    rows = []
    for label, xs, k_fn, t_fn in cases:
        kg = [kc.array(x) for x in xs]
        kc.eval(kg)
        k = best_ms(lambda: k_fn(*kg, stream=kc.gpu), kiln_sync, args.repeat)
        tx = [torch.from_numpy(x).cuda() for x in xs]
        t = best_ms(lambda: t_fn(*tx), torch_sync, args.repeat)
        c = None
        if not args.no_cpu:
            c = best_ms(lambda: k_fn(*kg, stream=kc.cpu), kiln_sync, max(1, args.repeat // 2))
        rows.append((label, k, t, c))
        print(f"{label}: kiln {k:.2f} ms, torch {t:.2f} ms" + (f", kiln CPU {c:.1f} ms" if c else ""), flush=True)
    print()
    print("| op (float32, wall per call) | kiln GPU ms | torch.linalg ms | torch / kiln | kiln CPU ms |")
    print("| --- | --- | --- | --- | --- |")
    for label, k, t, c in rows:
        cs = f"{c:.1f}" if c else "n/a"
        print(f"| {label} | {k:.2f} | {t:.2f} | {t / k:.2f}x | {cs} |")


if __name__ == "__main__":
    main()
