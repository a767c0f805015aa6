"""Run by test_distributed_mpi.py in every process of a group (python -m
kiln.launch -n N checks.py NAME...): each check draws every rank's input
from a seed of that rank, so each process computes the expected result of
the whole group with NumPy and compares its own answer with it. A check
that fails raises, and the launcher ends the job with the error."""

import os
import sys
import time

import numpy as np

import kiln.core as kc
import kiln.nn as nn

D = kc.distributed
world = D.init(strict=True, backend="mpi")
R, N = world.rank(), world.size()

DTYPES = {  # kiln dtype, NumPy dtype of the reference, tolerance
    "float32": (kc.float32, np.float64, 1e-5),
    "float16": (kc.float16, np.float64, 2e-3),
    "bfloat16": (kc.bfloat16, np.float64, 1e-2),
    "float64": (kc.float64, np.float64, 1e-12),
    "int8": (kc.int8, np.int8, 0),
    "uint16": (kc.uint16, np.uint16, 0),
    "int32": (kc.int32, np.int32, 0),
    "uint32": (kc.uint32, np.uint32, 0),
    "int64": (kc.int64, np.int64, 0),
    "bool": (kc.bool_, np.bool_, 0),
    "complex64": (kc.complex64, np.complex128, 1e-5),
}


def rank_input(rank, shape, name, seed=0):
    rng = np.random.default_rng(1000 * seed + rank)
    if name == "bool":
        return rng.random(shape) < 0.5
    if name.startswith(("int", "uint")):
        info = np.iinfo(DTYPES[name][1])
        lo, hi = max(info.min, -50), min(info.max, 50)
        return rng.integers(lo, hi, shape).astype(DTYPES[name][1])
    x = rng.standard_normal(shape)
    if name == "complex64":
        x = x + 1j * rng.standard_normal(shape)
    # Round through the kiln dtype so the reference sees the same inputs.
    return np.asarray(kc.array(x).astype(DTYPES[name][0]).astype(
        kc.complex64 if name == "complex64" else kc.float32 if name != "float64" else kc.float64))


def as_np(a, name):
    if name in ("float16", "bfloat16"):
        a = a.astype(kc.float32)
    return np.asarray(a)


def close(got, want, tol, what):
    got = np.asarray(got)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape}, expected {want.shape}")
    if tol == 0:
        ok = np.array_equal(got, want)
    else:
        ok = np.allclose(got, want, rtol=tol, atol=tol)
    if not ok:
        raise AssertionError(f"{what} on rank {R}: got {got.ravel()[:6]}, expected {want.ravel()[:6]}")


def kiln_input(x, name, noncontiguous):
    a = kc.array(x).astype(DTYPES[name][0])
    if noncontiguous:  # the same values through a transposed view
        a = kc.array(np.ascontiguousarray(x.T)).astype(DTYPES[name][0]).T
    return a


def check_reductions():
    shape = (3, 5)
    for name, (dt, ref, tol) in DTYPES.items():
        xs = [rank_input(r, shape, name, seed=1) for r in range(N)]
        for nc in (False, True):
            a = kiln_input(xs[R], name, nc)
            if name == "bool":
                want_sum = np.logical_or.reduce(xs)
            else:
                want_sum = np.sum(np.stack(xs).astype(ref), axis=0)
            close(as_np(D.all_sum(a), name), want_sum.astype(as_np(a, name).dtype), tol, f"all_sum {name}")
            close(as_np(D.all_max(a), name), np.max(np.stack(xs), axis=0), tol, f"all_max {name}")
            close(as_np(D.all_min(a), name), np.min(np.stack(xs), axis=0), tol, f"all_min {name}")


def check_exchanges():
    # With the check on, an all_reduce of up to 1 KB travels with its shape
    # and dtype in one exchange, chosen from the size of the last agreed
    # all_reduce: sizes on both sides of 1 KB, in orders that make each
    # process guess right and wrong, give the same answers.
    for name, (dt, ref, tol) in DTYPES.items():
        item = np.dtype(ref).itemsize if name not in ("float16", "bfloat16", "complex64") else \
            {"float16": 2, "bfloat16": 2, "complex64": 8}[name]
        at = 1024 // item
        for count in (1, at, at + 1, 1, 3 * at, at, at + 1, at + 1, 0, at):
            xs = [rank_input(r, (count,), name, seed=count) for r in range(N)]
            a = kiln_input(xs[R], name, False)
            if name == "bool":
                want = np.logical_or.reduce(xs)
            else:
                want = np.sum(np.stack(xs).astype(ref), axis=0)
            close(as_np(D.all_sum(a), name), want.astype(as_np(a, name).dtype), tol,
                  f"all_sum {name} of {count}")
            close(as_np(D.all_max(a), name), np.max(np.stack(xs), axis=0), tol, f"all_max {name} of {count}")
    # NaN wins max and min wherever it sits (as in kiln.maximum), small or
    # large, float32 or float64.
    for count in (4, 4000):
        for dt in (np.float32, np.float64):
            xs = [np.arange(count, dtype=dt) * (r + 1) for r in range(N)]
            for r in range(N):
                xs[r][r] = np.nan
            for f, ref in ((D.all_max, np.max), (D.all_min, np.min)):
                got = np.asarray(f(kc.array(xs[R])))
                want = ref(np.stack(xs), axis=0)
                if not np.array_equal(got, want, equal_nan=True):
                    raise AssertionError(f"{f.__name__} of {count} {dt.__name__} with NaN: "
                                         f"got {got[:4]}, expected {want[:4]}")
    # Arrays that differ raise on every process whichever exchange is
    # taken: both small, one small and one large (after a small and after a
    # large agreed all_reduce), and the same size in other dtypes.
    cases = [(lambda r: kc.ones((r + 1,)), "(1,) float32"),
             (lambda r: kc.ones((4 if r == 0 else 4096,)), "(4,) float32"),
             (lambda r: kc.ones((8,), kc.float32 if r == 0 else kc.int32), "int32")]
    for warm in (kc.ones((2,)), kc.ones((4096,))):
        for make, says in cases:
            kc.eval(D.all_sum(warm))
            try:
                kc.eval(D.all_sum(make(R)))
            except ValueError as e:
                assert "all_sum" in str(e) and says in str(e), e
            else:
                raise AssertionError(f"all_sum of different arrays ({says}) did not raise")
    close(np.asarray(D.all_sum(kc.array([1.0]))), np.array([float(N)]), 0, "all_sum after errors")


def check_gather_scatter():
    for name, (dt, ref, tol) in DTYPES.items():
        xs = [rank_input(r, (2, 3), name, seed=2) for r in range(N)]
        for nc in (False, True):
            a = kiln_input(xs[R], name, nc)
            close(as_np(D.all_gather(a), name), np.concatenate(xs), 0, f"all_gather {name}")
        # 0-d inputs give one element per process.
        s = kc.array(xs[R][0, 0]).astype(dt)
        close(as_np(D.all_gather(s), name), np.array([x[0, 0] for x in xs]), 0, f"all_gather 0-d {name}")
        if name == "bool":
            continue
        ys = [rank_input(r, (2 * N, 3), name, seed=3) for r in range(N)]
        total = np.sum(np.stack(ys).astype(ref), axis=0)
        got = D.sum_scatter(kiln_input(ys[R], name, True))
        close(as_np(got, name), total[2 * R:2 * R + 2].astype(as_np(got, name).dtype), tol, f"sum_scatter {name}")


def check_large():
    # Past one piece of a single MPI call's chunk is not tested here (2^30
    # elements); a few MB exercise the large-message protocols.
    x = kc.ones((1 << 20,)) * (R + 1)
    y = D.all_sum(x)
    assert float(y[0].item()) == N * (N + 1) / 2 and float(y[-1].item()) == N * (N + 1) / 2


def check_grads():
    x = kc.array(rank_input(R, (4,), "float32", seed=4))
    # all_sum passes the cotangent through (as MLX's).
    g = kc.grad(lambda a: (D.all_sum(a) ** 2).sum())(x)
    total = D.all_sum(x)
    close(np.asarray(g), 2 * np.asarray(total), 1e-5, "grad of all_sum")
    # all_gather's cotangent is this rank's slice.
    w = kc.arange(4 * N, dtype=kc.float32)
    g = kc.grad(lambda a: (D.all_gather(a) * w).sum())(x)
    close(np.asarray(g), np.asarray(w)[4 * R:4 * R + 4], 0, "grad of all_gather")
    # jvp of all_sum is all_sum of the tangent.
    _, t = kc.jvp(lambda a: D.all_sum(a), [x], [kc.ones_like(x) * (R + 1)])
    close(np.asarray(t[0]), np.full(4, N * (N + 1) / 2), 0, "jvp of all_sum")
    # all_max: the derivative goes to the process holding the maximum.
    xs = [rank_input(r, (4,), "float32", seed=4) for r in range(N)]
    win = np.argmax(np.stack(xs), axis=0) == R
    g = kc.grad(lambda a: D.all_max(a).sum())(x)
    close(np.asarray(g), win.astype(np.float32), 0, "grad of all_max")
    # sum_scatter's cotangent is every process's cotangent gathered.
    y = kc.array(rank_input(R, (N, 2), "float32", seed=5))
    g = kc.grad(lambda a: (D.sum_scatter(a) * (R + 1)).sum())(y)
    close(np.asarray(g), np.repeat(np.arange(1, N + 1, dtype=np.float32)[:, None], 2, 1), 0, "grad of sum_scatter")
    # vmap over a batch axis 0 keeps axis 0 the gathered one.
    b = kc.array(np.stack([rank_input(R, (2,), "float32", seed=6 + k) for k in range(3)]))
    got = kc.vmap(D.all_gather)(b)
    want = np.stack([np.concatenate([rank_input(r, (2,), "float32", seed=6 + k) for r in range(N)]) for k in range(3)])
    close(np.asarray(got), want, 0, "vmap of all_gather")
    got = kc.vmap(D.all_sum, in_axes=1)(b.T)
    close(np.asarray(got), np.asarray(D.all_sum(b)), 1e-6, "vmap of all_sum")
    # Inside compile.
    f = kc.compile(lambda a: D.all_sum(a * 2) + 1)
    for _ in range(2):
        close(np.asarray(f(x)), 2 * np.asarray(total) + 1, 1e-5, "compiled all_sum")


def check_send_recv():
    if N < 2:
        return
    x = kc.arange(6, dtype=kc.float32).reshape(2, 3) * (R + 1)
    # Pairs: even ranks send first, odd ones receive first.
    peer = R + 1 if R % 2 == 0 else R - 1
    if peer < N:
        if R % 2 == 0:
            kc.eval(D.send(x, peer))
            got = D.recv_like(x, peer)
        else:
            got = D.recv((2, 3), kc.float32, peer)
            kc.eval(got)
            kc.eval(D.send(x, peer))
        close(np.asarray(got), np.arange(6, dtype=np.float32).reshape(2, 3) * (peer + 1), 0, "send/recv")
    # Sub-groups.
    sub = world.split(R % 2)
    assert sub.size() == (N + 1 - R % 2) // 2 and sub.rank() == R // 2, (sub.size(), sub.rank())
    close(np.asarray(D.all_sum(kc.array([R]), group=sub)),
          np.array([sum(r for r in range(N) if r % 2 == R % 2)]), 0, "all_sum over a split group")
    rev = world.split(0, key=N - R)
    assert rev.rank() == N - 1 - R, rev.rank()


def check_bad_input():
    # Shapes that differ between ranks raise on every rank.
    try:
        kc.eval(D.all_sum(kc.ones((R + 1,))))
    except ValueError as e:
        assert "all_sum" in str(e) and "rank 0 (1,) float32" in str(e), e
    else:
        raise AssertionError("all_sum of different shapes did not raise")
    try:
        kc.eval(D.all_gather(kc.ones((2,), kc.float32 if R == 0 else kc.int32)))
    except ValueError as e:
        assert "all_gather" in str(e) and "int32" in str(e), e
    else:
        raise AssertionError("all_gather of different dtypes did not raise")
    for bad in (-1, N):
        for f in (lambda: D.send(kc.ones(2), bad), lambda: D.recv((2,), kc.float32, bad)):
            try:
                f()
            except ValueError as e:
                assert "Invalid" in str(e), e
            else:
                raise AssertionError(f"rank {bad} did not raise")
    try:
        D.sum_scatter(kc.ones((N + 1,)) if N > 1 else kc.ones(()))
    except ValueError as e:
        assert "sum_scatter" in str(e), e
    else:
        raise AssertionError("sum_scatter of a bad shape did not raise")
    # The group still works afterwards.
    close(np.asarray(D.all_sum(kc.array([1.0]))), np.array([float(N)]), 0, "all_sum after errors")


def check_average_gradients():
    grads = {"w": kc.ones((3, 4)) * (R + 1), "b": [kc.array([R], kc.float32), kc.ones((2,), kc.float16) * R]}
    mean = sum(range(1, N + 1)) / N
    for size in (32 * 1024**2, 8, 0):
        out = nn.average_gradients(grads, all_reduce_size=size)
        close(np.asarray(out["w"]), np.full((3, 4), mean), 1e-6, "average_gradients w")
        close(np.asarray(out["b"][0]), np.array([(N - 1) / 2]), 1e-6, "average_gradients b0")
        assert out["b"][1].dtype == kc.float16
        close(np.asarray(out["b"][1].astype(kc.float32)), np.full(2, (N - 1) / 2), 1e-3, "average_gradients b1")


def check_timeout():
    # Rank 0 waits for a peer that is late: an error naming the op after
    # KILN_DISTRIBUTED_TIMEOUT seconds, then the job ends with it.
    if R == 1:
        time.sleep(30)
    kc.eval(D.all_sum(kc.ones((2,))))


def check_recv_timeout():
    if R == 1:
        time.sleep(30)
        kc.eval(D.send(kc.ones((2,)), 0))
    else:
        kc.eval(D.recv((2,), kc.float32, 1))


def check_peer_dies():
    if R == 1:
        os._exit(7)
    kc.eval(D.all_sum(kc.ones((2,))))


if __name__ == "__main__":
    for name in sys.argv[1:]:
        globals()["check_" + name]()
        print(f"ok {name}", flush=True)
