"""gather_mm on mixture-of-experts shapes (mlx-lm's SwitchGLU call: tokens
expanded to (T, 1, 1, D), experts stored (E, N, D) and read transposed,
top-k picks per token): kiln's GatherMM against the composition it
replaced (take the picked matrices, then matmul) and MLX's gather_mm in
the same process; with --gpu, kiln on the GPU against PyTorch's
composition (index the experts, then bmm), PyTorch having no gather_mm.
"kiln sorted" is mlx-lm's route for 64 picks or more: the picks sorted by
expert (sorted_indices=True), then put back in token order. --grad adds
the gradients of both operands of a sum-of-squares loss (kiln, and MLX on
the CPU where its per-pick products stay under 2 GiB).

    cd benchmarks && PYTHONPATH=../build/python python3 gather_mm_bench.py [--gpu] [--grad]

Times are wall milliseconds per call (the call, then a wait for its
result), the best of --repeat after a warm-up. Ratios are peer / kiln
(> 1 means kiln is faster). The GFLOP/s column counts 2 * picks * D * N.
"""

import argparse

import numpy as np

import kiln.core as kc
from timing import best_ms

try:
    import mlx.core as mx
except ImportError:  # pragma: no cover
    mx = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

# (label, tokens, experts, top-k, D, N)
CASES = [
    ("prefill 1024 tok, 16 experts top-2, 512 -> 1024", 1024, 16, 2, 512, 1024),
    ("prefill 512 tok, 64 experts top-8, 2048 -> 1408", 512, 64, 8, 2048, 1408),
    ("decode 8 tok, 64 experts top-8, 2048 -> 1408", 8, 64, 8, 2048, 1408),
]


def kiln_sync(out):
    kc.eval(out)
    kc.synchronize()


def picks(rng, tokens, experts, k):
    """k distinct experts per token, as a router's top-k."""
    return np.stack([rng.choice(experts, k, replace=False) for _ in range(tokens)]).astype(np.uint32)


def composed(x, w, idx):
    """The composition gather_mm replaced: the picked matrices gathered,
    then one batched matmul."""
    T, k = idx.shape
    right = kc.take(kc.swapaxes(w, -1, -2), idx.reshape(-1), axis=0)
    left = kc.take(x.reshape(T, 1, -1), kc.arange(T * k, dtype=kc.uint32) // k, axis=0)
    return kc.matmul(left, right).reshape(T, k, 1, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gpu", action="store_true", help="kiln on the GPU against PyTorch CUDA")
    ap.add_argument("--grad", action="store_true", help="also time the gradients of both operands")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for label, T, E, k, D, N in CASES:
        x = rng.standard_normal((T, D)).astype(np.float32)
        w = (rng.standard_normal((E, N, D)) / D**0.5).astype(np.float32)
        idx = picks(rng, T, E, k)
        gflop = 2 * T * k * D * N / 1e9
        dev = kc.gpu if args.gpu else kc.cpu
        kx, kw, ki = (kc.array(v) for v in (x, w, idx))
        kc.eval(kx, kw, ki)

        def k_gmm():
            with kc.stream(dev):
                return kc.gather_mm(kc.expand_dims(kx, (-2, -3)), kc.swapaxes(kw, -1, -2), rhs_indices=ki)

        # mlx-lm's SwitchGLU sorts 64 picks or more by expert (its
        # _gather_sort): lhs names each sorted pick's token, and the
        # products are put back in token order.
        order = np.argsort(idx.ravel(), kind="stable")
        ks_r, ks_l = kc.array(idx.ravel()[order]), kc.array((order // k).astype(np.uint32))
        ks_inv = kc.array(np.argsort(order).astype(np.uint32))

        def k_sorted():
            with kc.stream(dev):
                y = kc.gather_mm(kc.expand_dims(kx, -2), kc.swapaxes(kw, -1, -2), ks_l, ks_r,
                                 sorted_indices=True)
                return kc.take(y, ks_inv, axis=0).reshape(T, k, 1, N)

        got = k_gmm()
        kc.eval(got)
        # Checked on a few tokens (the whole gathered w can be tens of GB).
        c = min(T, 8)
        ref = np.einsum("td,tknd->tkn", x[:c].astype(np.float64), w[idx[:c]].astype(np.float64))
        err = np.abs(np.array(got).reshape(T, k, N)[:c] - ref).max()
        assert err < 1e-2, f"{label}: max error {err}"
        kt = best_ms(k_gmm, kiln_sync, args.repeat)
        got_sorted = k_sorted()
        kc.eval(got_sorted)
        err = np.abs(np.array(got_sorted).reshape(T, k, N)[:c] - ref).max()
        assert err < 1e-2, f"{label}, sorted: max error {err}"
        peers = {"kiln sorted": best_ms(k_sorted, kiln_sync, args.repeat)}
        gathered = T * k * D * N * 4  # bytes of the picked matrices' copy
        if args.gpu and torch is not None and torch.cuda.is_available() and gathered <= 8 << 30:
            tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
            ti = torch.from_numpy(idx.astype(np.int64)).cuda()

            def t_fn():
                right = tw[ti.reshape(-1)].transpose(-1, -2)  # (T*k, D, N)
                left = tx.repeat_interleave(k, 0)[:, None, :]
                return torch.bmm(left, right)

            peers["torch index+bmm"] = best_ms(t_fn, lambda _: torch.cuda.synchronize(), args.repeat)
        if not args.gpu:
            if gathered <= 2 << 30:
                peers["take+matmul"] = best_ms(lambda: composed(kx, kw, ki), kiln_sync, max(1, args.repeat // 2))
            if mx is not None:
                mxx, mxw, mxi = mx.array(x), mx.array(w), mx.array(idx)
                mx.eval(mxx, mxw, mxi)
                m_fn = lambda: mx.gather_mm(mx.expand_dims(mxx, (-2, -3)), mx.swapaxes(mxw, -1, -2), rhs_indices=mxi)
                peers["MLX gather_mm"] = best_ms(m_fn, mx.eval, args.repeat)
        if args.grad:
            # A training step's gradients of both operands (loss: sum of
            # squares), kiln and MLX on the same picks.
            def k_grad():
                f = lambda x, w: (kc.gather_mm(kc.expand_dims(x, (-2, -3)), kc.swapaxes(w, -1, -2),
                                               rhs_indices=ki) ** 2).sum()
                with kc.stream(dev):
                    return kc.grad(f, argnums=(0, 1))(kx, kw)
            peers["kiln grad"] = best_ms(k_grad, kiln_sync, max(1, args.repeat // 2))
            if mx is not None and not args.gpu and gathered <= 2 << 30:
                mf = lambda x, w: (mx.gather_mm(mx.expand_dims(x, (-2, -3)), mx.swapaxes(w, -1, -2),
                                                rhs_indices=mxi) ** 2).sum()
                peers["MLX grad"] = best_ms(lambda: mx.grad(mf, argnums=(0, 1))(mxx, mxw), mx.eval,
                                            max(1, args.repeat // 2))
        rows.append((label, kt, gflop / kt * 1e3, peers))
        print(f"{label}: kiln {kt:.2f} ms" + "".join(f", {n} {t:.2f} ms" for n, t in peers.items()), flush=True)
    print()
    names = sorted({n for r in rows for n in r[3]})
    where = "GPU" if args.gpu else "CPU"
    print(f"| case (float32, {where}) | kiln ms | kiln GFLOP/s | " + " | ".join(f"{n} ms (/ kiln)" for n in names) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in names) + " |")
    for label, kt, gf, peers in rows:
        cells = [f"{peers[n]:.2f} ({peers[n] / kt:.2f}x)" if n in peers else "n/a" for n in names]
        print(f"| {label} | {kt:.2f} | {gf:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
