import numpy as np
import pytest

import kiln.core as kc
from conftest import check, rand


def test_linalg(rng):
    x = rand(rng, (4, 4)) + 4 * np.eye(4, dtype=np.float32)
    a = kc.array(x)
    check(kc.linalg.inv(a), np.linalg.inv(x), rtol=1e-4, atol=1e-5)
    spd = x @ x.T
    check(
        kc.linalg.cholesky(kc.array(spd)), np.linalg.cholesky(spd), rtol=1e-4, atol=1e-4
    )
    q, r = kc.linalg.qr(a)
    check(q @ r, x, rtol=1e-4, atol=1e-5)
    u, s, vt = kc.linalg.svd(a)
    check(s, np.linalg.svd(x)[1], rtol=1e-4)
    check(kc.linalg.svd(a, compute_uv=False), np.linalg.svd(x)[1], rtol=1e-4)
    b = rand(rng, (4,))
    check(kc.linalg.solve(a, kc.array(b)), np.linalg.solve(x, b), rtol=1e-4, atol=1e-5)
    check(kc.linalg.norm(a), np.linalg.norm(x), rtol=1e-5)
    check(kc.linalg.norm(a, ord="fro"), np.linalg.norm(x, "fro"), rtol=1e-5)
    check(kc.linalg.norm(a, ord=1, axis=1), np.linalg.norm(x, 1, axis=1), rtol=1e-5)
    check(kc.linalg.norm(a, 2), np.linalg.norm(x, 2), rtol=1e-4)


def test_fast(rng):
    x = rand(rng, (2, 3, 8))
    w = rand(rng, (8,))
    a = kc.array(x)
    ms = (x**2).mean(-1, keepdims=True)
    check(
        kc.fast.rms_norm(a, kc.array(w), 1e-5),
        x / np.sqrt(ms + 1e-5) * w,
        rtol=1e-4,
        atol=1e-5,
    )
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    check(
        kc.fast.layer_norm(a, None, None, 1e-5),
        (x - mu) / np.sqrt(var + 1e-5),
        rtol=1e-4,
        atol=1e-4,
    )
    r = kc.fast.rope(
        kc.array(rand(rng, (1, 4, 8))),
        8,
        traditional=False,
        base=10000.0,
        scale=1.0,
        offset=0,
    )
    assert r.shape == (1, 4, 8)
    q, k, v = (rand(rng, (1, 2, 3, 4)) for _ in range(3))
    s = q @ k.transpose(0, 1, 3, 2) * 0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    got = kc.fast.scaled_dot_product_attention(
        kc.array(q), kc.array(k), kc.array(v), scale=0.5
    )
    check(got, p @ v, rtol=1e-4, atol=1e-5)
    got_c = kc.fast.scaled_dot_product_attention(
        kc.array(q), kc.array(k), kc.array(v), scale=0.5, mask="causal"
    )
    mask = np.triu(np.full((3, 3), -np.inf), 1)
    sc = s + mask
    pc = np.exp(sc - sc.max(-1, keepdims=True))
    pc /= pc.sum(-1, keepdims=True)
    check(got_c, pc @ v, rtol=1e-4, atol=1e-5)


def test_devices_streams_memory():
    d = kc.default_device()
    assert d == kc.cpu or d == kc.gpu
    s = kc.default_stream(kc.Device(kc.cpu))
    assert s.device == kc.Device(kc.cpu)
    s2 = kc.new_stream(kc.Device(kc.cpu))
    assert kc.add(kc.array(1), kc.array(2), stream=s2).item() == 3
    assert kc.add(kc.array(1), kc.array(2), stream=kc.cpu).item() == 3
    kc.synchronize()
    assert kc.is_available(kc.Device(kc.cpu))
    assert "cpu" in repr(d) or "gpu" in repr(d)
    assert kc.get_active_memory() >= 0
    peak = kc.get_peak_memory()
    kc.reset_peak_memory()
    assert kc.get_peak_memory() <= max(peak, kc.get_active_memory())
    old = kc.set_memory_limit(1 << 40)
    assert kc.get_memory_limit() == 1 << 40
    kc.set_memory_limit(old)
    kc.set_cache_limit(1 << 30)
    kc.clear_cache()
    assert kc.get_cache_memory() >= 0
