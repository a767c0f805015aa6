"""kiln.core against mlx.core (an optional peer) on the same random inputs:
values, dtypes and shapes."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import mx, rand

pytestmark = pytest.mark.skipif(mx is None, reason="mlx is not installed")

DTYPES = ["int8", "uint8", "int32", "float16", "bfloat16", "float32", "bool_"]


def both(x, dtype):
    return kc.array(x).astype(getattr(kc, dtype)), mx.array(x).astype(
        getattr(mx, dtype)
    )


def same(k, m, rtol=1e-5, atol=1e-6):
    assert str(k.dtype).split(".")[-1] == str(m.dtype).split(".")[-1], (k.dtype, m.dtype)
    assert k.shape == m.shape
    kf = np.array(k.astype(kc.float32)) if k.dtype == kc.bfloat16 else np.array(k)
    mf = np.array(m.astype(mx.float32)) if m.dtype == mx.bfloat16 else np.array(m)
    np.testing.assert_allclose(
        kf.astype(np.float64), mf.astype(np.float64), rtol=rtol, atol=atol
    )


def tol(d):
    return {"float16": 2e-3, "bfloat16": 2e-2}.get(d, 1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "op", ["add", "multiply", "maximum", "equal", "greater", "minimum"]
)
def test_binary(rng, dtype, op):
    (ka, ma), (kb, mb) = both(rand(rng, (3, 4), lo=1), dtype), both(
        rand(rng, (4,), lo=1), dtype
    )
    same(getattr(kc, op)(ka, kb), getattr(mx, op)(ma, mb), rtol=tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", [2, 1.5, True])
def test_scalar_ops(rng, dtype, scalar):
    ka, ma = both(rand(rng, (5,), lo=1), dtype)
    for f in [lambda a: a + scalar, lambda a: scalar * a, lambda a: a < scalar]:
        same(f(ka), f(ma), rtol=tol(dtype))


@pytest.mark.parametrize("dtype", ["int8", "int32", "float16", "float32", "bool_"])
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "max", "min", "argmax", "var"])
def test_reductions(rng, dtype, op):
    ka, ma = both(rand(rng, (3, 4), lo=0.5, hi=1.5), dtype)
    if dtype == "bool_" and op in ("var",):
        return
    same(getattr(kc, op)(ka, axis=1), getattr(mx, op)(ma, axis=1), rtol=tol(dtype) * 10)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(
    "op", ["exp", "log1p", "sin", "sigmoid", "sqrt", "erf", "abs", "round"]
)
def test_unary(rng, dtype, op):
    ka, ma = both(rand(rng, (6,), lo=0.1, hi=2), dtype)
    same(getattr(kc, op)(ka), getattr(mx, op)(ma), rtol=tol(dtype), atol=1e-3)


@pytest.mark.parametrize(
    "index",
    [
        (slice(None, None, -2), 1),
        (Ellipsis, None, slice(1, 3)),
        ([0, 2, 1],),
        (slice(None), [1, 0]),
        ([1, 0], slice(None), [2, 2]),
    ],
)
def test_indexing(rng, index):
    x = rand(rng, (3, 4, 5))
    ki = tuple(kc.array(i) if isinstance(i, list) else i for i in index)
    mi = tuple(mx.array(i) if isinstance(i, list) else i for i in index)
    same(kc.array(x)[ki], mx.array(x)[mi])


def test_creation_dtypes():
    same(kc.arange(5), mx.arange(5))
    same(kc.arange(0.5, 3), mx.arange(0.5, 3))
    same(kc.full((2,), 3), mx.full((2,), 3))
    same(kc.linspace(0, 1, 7), mx.linspace(0, 1, 7))
    same(kc.array([1, 2.5]), mx.array([1, 2.5]))
    same(kc.array([[True], [False]]), mx.array([[True], [False]]))


def test_grad_matches_mlx(rng):
    x = rand(rng, (4,))
    f_k = lambda a: kc.sum(kc.tanh(a) * kc.exp(a))
    f_m = lambda a: mx.sum(mx.tanh(a) * mx.exp(a))
    same(kc.grad(f_k)(kc.array(x)), mx.grad(f_m)(mx.array(x)), rtol=1e-5)
    vk = kc.vmap(lambda a: kc.sum(a * a))(kc.array(rand(rng, (3, 2))))
    assert vk.shape == (3,)


@pytest.mark.parametrize(
    "cut", [3, [1, 4], [0, 2, 2, 9], [-2], [4, 1]], ids=str
)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_split_values_and_grad_match_mlx(rng, cut, axis):
    # Pieces, and a gradient where one piece is unused and one used twice.
    x = rand(rng, (6, 3, 6))
    pk, pm = kc.split(kc.array(x), cut, axis=axis), mx.split(mx.array(x), cut, axis=axis)
    assert len(pk) == len(pm)
    for a, b in zip(pk, pm):
        same(a, b)

    def loss(lib, v):
        p = lib.split(v, cut, axis=axis)
        return lib.sum(p[0] * p[0]) + lib.sum(lib.exp(p[-1]) * p[0].sum())

    same(
        kc.grad(lambda v: loss(kc, v))(kc.array(x)),
        mx.grad(lambda v: loss(mx, v))(mx.array(x)),
    )
