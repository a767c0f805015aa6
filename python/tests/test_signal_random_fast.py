"""Windows, convolve, hadamard_transform, random.laplace and
multivariate_normal, fast.cross_entropy and gated_delta_update: against
NumPy and float64 loops on random inputs, and against mlx (the same draws
for the same key) where installed."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, needs_mlx, rand

WINDOWS = ["bartlett", "blackman", "hamming", "hanning"]


@pytest.mark.parametrize("name", WINDOWS)
def test_windows(name):
    for m in (0, 1, 2, 7, 16):
        w = getattr(kc, name)(m)
        assert w.dtype == kc.float32
        check(w, getattr(np, name)(m), atol=1e-6)


@pytest.mark.parametrize("n,k", [(7, 3), (8, 4), (3, 7), (5, 1), (6, 6)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve(rng, n, k, mode):
    a, v = rand(rng, (n,)), rand(rng, (k,))
    check(
        kc.convolve(kc.array(a), kc.array(v), mode),
        np.convolve(a, v, mode),
        rtol=1e-5,
        atol=1e-5,
    )
    big = rand(rng, (2 * n,))
    check(
        kc.convolve(kc.array(big)[::2], kc.array(v), mode=mode),
        np.convolve(big[::2], v, mode),
        rtol=1e-5,
        atol=1e-5,
    )


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


@pytest.mark.parametrize("n", [1, 4, 32, 256])
def test_hadamard_transform(rng, n):
    x = rand(rng, (3, n))
    want = x.astype(np.float64) @ hadamard(n).T / np.sqrt(n)
    check(kc.hadamard_transform(kc.array(x)), want, rtol=1e-5, atol=1e-5)
    xt = rand(rng, (n, 3)).T
    check(
        kc.hadamard_transform(kc.array(xt.T).T, scale=0.25),
        xt.astype(np.float64) @ hadamard(n).T * 0.25,
        rtol=1e-5,
        atol=1e-5,
    )
    h = kc.hadamard_transform(kc.array(x).astype(kc.float16))
    assert h.dtype == kc.float16
    with pytest.raises(ValueError, match="hadamard_transform"):
        kc.hadamard_transform(kc.ones((3, 6)))
    # linear and symmetric: the gradient of <c, H x> is H c
    c = rand(rng, (3, n))
    g = kc.grad(lambda y: (kc.hadamard_transform(y) * kc.array(c)).sum())(kc.array(x))
    check(g, c.astype(np.float64) @ hadamard(n) / np.sqrt(n), rtol=1e-4, atol=1e-5)


def test_convolve_errors():
    with pytest.raises(ValueError, match="convolve"):
        kc.convolve(kc.ones((2, 2)), kc.ones((2,)))
    with pytest.raises(ValueError, match="convolve"):
        kc.convolve(kc.ones((3,)), kc.ones((2,)), mode="middle")


def test_laplace_and_multivariate_normal_statistics():
    x = np.array(kc.random.laplace((100000,), loc=1.0, scale=2.0, key=kc.random.key(4)))
    assert abs(x.mean() - 1.0) < 0.05
    assert abs(x.var() - 8.0) < 0.3
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    mean = np.array([1.0, -1.0], np.float32)
    s = np.array(
        kc.random.multivariate_normal(
            kc.array(mean), kc.array(cov), shape=(50000,), key=kc.random.key(2)
        )
    )
    assert s.shape == (50000, 2)
    check(s.mean(0), mean, atol=0.03)
    check(np.cov(s.T), cov, atol=0.05)
    with pytest.raises(ValueError, match="multivariate_normal"):
        kc.random.multivariate_normal(kc.zeros((2,)), kc.eye(3))
    with pytest.raises(ValueError, match="laplace"):
        kc.random.laplace((2,), dtype=kc.int32)


@needs_mlx
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_laplace_matches_mlx(dtype):
    for seed in (0, 7):
        k = kc.random.laplace(
            (6, 5), getattr(kc, dtype), 0.5, 2.0, key=kc.random.key(seed)
        )
        m = mx.random.laplace(
            (6, 5), getattr(mx, dtype), 0.5, 2.0, key=mx.random.key(seed)
        )
        check(k.astype(kc.float32), m.astype(mx.float32), rtol=1e-5, atol=1e-5)


@needs_mlx
def test_multivariate_normal_matches_mlx(rng):
    a = rand(rng, (2, 3, 3))
    cov = a @ np.swapaxes(a, -1, -2) + np.eye(3, dtype=np.float32)
    mean = rand(rng, (3,))
    for shape in [(), (4, 2)]:
        k = kc.random.multivariate_normal(
            kc.array(mean), kc.array(cov), shape, key=kc.random.key(9)
        )
        m = mx.random.multivariate_normal(
            mx.array(mean), mx.array(cov), shape, key=mx.random.key(9), stream=mx.cpu
        )
        check(k, m, rtol=1e-4, atol=1e-4)


def test_cross_entropy(rng):
    logits = rand(rng, (3, 4, 7), lo=-3, hi=3)
    targets = rng.integers(0, 7, size=(3, 4))
    x = logits.astype(np.float64)
    lse = np.log(np.exp(x).sum(-1))
    want = lse - np.take_along_axis(x, targets[..., None], -1)[..., 0]
    got = kc.fast.cross_entropy(kc.array(logits), kc.array(targets))
    assert got.dtype == kc.float32
    check(got, want, rtol=1e-5, atol=1e-5)
    got_t = kc.fast.cross_entropy(
        kc.array(logits.transpose(2, 0, 1).copy()).transpose(1, 2, 0), kc.array(targets)
    )
    check(got_t, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="cross_entropy"):
        kc.fast.cross_entropy(kc.array(logits), kc.array(targets[:2]))
    with pytest.raises(ValueError, match="cross_entropy"):
        kc.fast.cross_entropy(kc.array(logits), kc.array(targets, kc.float32))
    if mx is not None:
        check(
            got,
            mx.fast.cross_entropy(mx.array(logits), mx.array(targets)),
            rtol=1e-5,
            atol=1e-5,
        )


def delta_reference(q, k, v, g, b, s0, mask):
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    r = Hv // Hk
    s = s0.astype(np.float64).copy()
    out = np.zeros((B, T, Hv, Dv))
    for t in range(T):
        for bb in range(B):
            if not mask[bb, t]:
                continue
            for h in range(Hv):
                kt, qt = k[bb, t, h // r], q[bb, t, h // r]
                st = s[bb, h] * g[bb, t, h]
                d = (v[bb, t, h] - st @ kt) * b[bb, t, h]
                st = st + np.outer(d, kt)
                s[bb, h] = st
                out[bb, t, h] = st @ qt
    return out, s


def test_gated_delta_update(rng):
    B, T, Hk, Hv, Dk, Dv = 2, 5, 2, 4, 8, 6
    q, k = rand(rng, (B, T, Hk, Dk), lo=-1, hi=1), rand(
        rng, (B, T, Hk, Dk), lo=-1, hi=1
    )
    v = rand(rng, (B, T, Hv, Dv))
    g, b = rand(rng, (B, T, Hv), lo=0.5, hi=1), rand(rng, (B, T, Hv), lo=0, hi=1)
    s0 = rand(rng, (B, Hv, Dv, Dk))
    mask = np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], bool)
    for state, m in [(None, None), (s0, mask)]:
        args = [kc.array(x) for x in (q, k, v, g, b)]
        out, st = kc.fast.gated_delta_update(
            *args,
            initial_state=None if state is None else kc.array(state),
            mask=None if m is None else kc.array(m),
        )
        want_o, want_s = delta_reference(
            q,
            k,
            v,
            g,
            b,
            np.zeros((B, Hv, Dv, Dk)) if state is None else state,
            np.ones((B, T), bool) if m is None else m,
        )
        check(out, want_o, rtol=1e-4, atol=1e-4)
        check(st, want_s, rtol=1e-4, atol=1e-4)
        if mx is not None:
            mo, ms = mx.fast.gated_delta_update(
                *[mx.array(x) for x in (q, k, v, g, b)],
                None if state is None else mx.array(state),
                None if m is None else mx.array(m),
            )
            check(out, mo, rtol=1e-4, atol=1e-4)
            check(st, ms, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="gated_delta_update"):
        kc.fast.gated_delta_update(*[kc.array(x) for x in (q, k, v[:, :, :3], g, b)])


@needs_mlx
@pytest.mark.parametrize("n,k", [(9, 4), (4, 9), (6, 6)])
def test_convolve_and_windows_match_mlx(rng, n, k):
    a, v = rand(rng, (n,)), rand(rng, (k,))
    for mode in ("full", "same", "valid"):
        check(
            kc.convolve(kc.array(a), kc.array(v), mode),
            mx.convolve(mx.array(a), mx.array(v), mode),
            rtol=1e-5,
            atol=1e-5,
        )
    for name in WINDOWS:
        check(getattr(kc, name)(n), getattr(mx, name)(n), atol=1e-6)
    for size in (64, 12, 48, 12 * 64, 20, 40, 28, 112):
        x = rand(rng, (2, size))
        check(
            kc.hadamard_transform(kc.array(x)),
            mx.hadamard_transform(mx.array(x)),
            rtol=1e-5,
            atol=1e-5,
        )
