import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, needs_mlx


def test_key_and_split():
    k = kc.random.key(7)
    assert k.dtype == kc.uint32 and k.tolist() == [0, 7]
    s = kc.random.split(k)
    assert s.shape == (2, 2)
    assert kc.random.split(k, num=5).shape == (5, 2)


def test_state_container():
    st = kc.random.state
    assert len(st) == 1
    kc.random.seed(5)
    k0 = st[0]
    assert k0.tolist() == [0, 5]
    kc.random.uniform()
    assert st[0].tolist() != [0, 5]
    st[0] = kc.random.key(9)
    assert st[0].tolist() == [0, 9]
    assert len(list(st)) == 1
    with pytest.raises(IndexError):
        st[1]
    with pytest.raises(ValueError):
        st[0] = kc.array([1.0, 2.0])


def test_samplers_shapes_and_ranges():
    k = kc.random.key(0)
    u = kc.random.uniform(-1, 3, (1000,), key=k)
    x = np.array(u)
    assert x.min() >= -1 and x.max() < 3 and abs(x.mean() - 1) < 0.2
    n = np.array(kc.random.normal((2000,), key=k))
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    n2 = np.array(kc.random.normal((2000,), loc=3.0, scale=2.0, key=k))
    assert abs(n2.mean() - 3) < 0.2
    r = kc.random.randint(2, 9, (500,), key=k)
    assert r.dtype == kc.int32
    r = np.array(r)
    assert r.min() >= 2 and r.max() < 9
    b = kc.random.bernoulli(0.3, (1000,), key=k)
    assert b.dtype == kc.bool_ and 0.2 < np.array(b).mean() < 0.4
    t = np.array(kc.random.truncated_normal(-1.0, 1.0, (500,), key=k))
    assert t.min() >= -1 and t.max() <= 1
    assert kc.random.gumbel((3, 2), key=k).shape == (3, 2)
    c = kc.random.categorical(kc.log(kc.array([0.0, 1.0, 0.0]) + 1e-9), key=k)
    assert c.item() == 1
    assert kc.random.categorical(kc.zeros((4, 3)), num_samples=5, key=k).shape == (4, 5)
    p = kc.random.permutation(10, key=k)
    assert sorted(p.tolist()) == list(range(10))
    q = kc.random.permutation(kc.arange(6), key=k)
    assert sorted(q.tolist()) == list(range(6))


def test_global_state_draws_differ_and_reseed_repeats():
    kc.random.seed(1)
    a = kc.random.uniform(shape=(4,)).tolist()
    b = kc.random.uniform(shape=(4,)).tolist()
    assert a != b
    kc.random.seed(1)
    assert kc.random.uniform(shape=(4,)).tolist() == a


@needs_mlx
def test_same_numbers_as_mlx():
    for seed in [0, 7, 12345]:
        kk, mk = kc.random.key(seed), mx.random.key(seed)
        np.testing.assert_array_equal(
            np.array(kc.random.split(kk, 3)), np.array(mx.random.split(mk, 3))
        )
        np.testing.assert_allclose(
            np.array(kc.random.uniform(shape=(3, 5), key=kk)),
            np.array(mx.random.uniform(shape=(3, 5), key=mk)),
            rtol=1e-6,
        )
        np.testing.assert_allclose(
            np.array(kc.random.normal((7,), key=kk)),
            np.array(mx.random.normal((7,), key=mk)),
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_array_equal(
            np.array(kc.random.randint(0, 100, (9,), key=kk)),
            np.array(mx.random.randint(0, 100, (9,), key=mk)),
        )


def test_categorical_frequencies_follow_the_probabilities():
    # Both paths: one distribution drawn many times (inverse CDF) and a
    # batch of distributions (Gumbel-max), against the softmax of the
    # logits; float16 and integer logits promote to float32.
    rng = np.random.default_rng(7)
    p = rng.dirichlet(np.ones(6))
    logits = np.log(p)
    n = 40000
    for dt in (kc.float32, kc.float16):
        x = kc.array(logits).astype(dt)
        one = np.array(kc.random.categorical(x, shape=(n,), key=kc.random.key(1)))
        many = np.array(kc.random.categorical(kc.broadcast_to(x, (n, 6)), key=kc.random.key(2)))
        for draws in (one, many):
            assert draws.min() >= 0 and draws.max() < 6
            freq = np.bincount(draws, minlength=6) / n
            assert np.abs(freq - p).max() < 0.015, (freq, p)
    ints = np.array(kc.random.categorical(kc.array([0, 0, 0]), shape=(3000,), key=kc.random.key(3)))
    assert set(np.unique(ints)) == {0, 1, 2}


def test_categorical_with_infinite_logits():
    # +inf entries share all the mass; -inf entries are never drawn.
    logits = kc.array([0.0, float("inf"), -float("inf"), float("inf")])
    d = np.array(kc.random.categorical(logits, shape=(2000,), key=kc.random.key(4)))
    assert set(np.unique(d)) == {1, 3}
    assert 0.4 < (d == 1).mean() < 0.6
    d = np.array(kc.random.categorical(kc.array([0.0, -float("inf"), 1.0]), shape=(2000,),
                                       key=kc.random.key(5)))
    assert 1 not in set(d.tolist())
    # A transposed (non-contiguous) single distribution.
    t = kc.transpose(kc.array([[0.0], [-float("inf")], [5.0]]))
    assert set(np.array(kc.random.categorical(t[0], shape=(50,), key=kc.random.key(6))).tolist()) <= {0, 2}


def test_complex_normal_has_unit_variance():
    z = np.array(kc.random.normal((200000,), dtype=kc.complex64, key=kc.random.key(4)))
    assert z.dtype == np.complex64
    # Each part has variance 1/2, the value variance 1.
    assert abs(z.real.var() - 0.5) < 0.01 and abs(z.imag.var() - 0.5) < 0.01
    assert abs(np.mean(np.abs(z) ** 2) - 1) < 0.01
    assert abs(z.mean()) < 0.01
    w = np.array(kc.random.normal((4,), dtype=kc.complex64, loc=1.0, scale=2.0,
                                  key=kc.random.key(4)))
    z4 = np.array(kc.random.normal((4,), dtype=kc.complex64, key=kc.random.key(4)))
    check(w, 1 + 2 * z4, rtol=1e-5)
    with pytest.raises(ValueError, match="normal"):
        kc.random.normal((2,), dtype=kc.int32)


@needs_mlx
def test_complex_normal_same_numbers_as_mlx():
    for seed in [0, 3]:
        kk, mk = kc.random.key(seed), mx.random.key(seed)
        np.testing.assert_allclose(
            np.array(kc.random.normal((3, 5), dtype=kc.complex64, key=kk)),
            np.array(mx.random.normal((3, 5), dtype=mx.complex64, key=mk)),
            rtol=1e-5, atol=1e-6,
        )


def test_bernoulli_refuses_integer_probabilities():
    # As MLX: p must be floating, a Python int or bool included.
    for p in (0, 1, True, kc.array(0)):
        with pytest.raises(ValueError, match="bernoulli"):
            kc.random.bernoulli(p, [2])
    assert kc.random.bernoulli(0.0, [3]).tolist() == [False] * 3
    assert kc.random.bernoulli(kc.array([2.0, -2.0])).tolist() == [True, False]
