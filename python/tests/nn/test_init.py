"""kiln.nn.init: shapes and dtypes, the distributions' ranges and moments
on large draws, fan computations, the validation errors, and MLX's draws
for the same seed (kiln's Threefry keys match MLX's)."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from nn_helpers import assert_same_signature, mlx, to_numpy

init = nn.init


def _draw(initializer, shape, *args, **kwargs):
    out = initializer(kc.zeros(shape), *args, **kwargs)
    assert tuple(out.shape) == tuple(shape)
    return out


def test_constant():
    out = _draw(init.constant(0.37), (3, 4))
    assert out.dtype == kc.float32
    np.testing.assert_array_equal(to_numpy(out), np.full((3, 4), 0.37, np.float32))
    out = _draw(init.constant(-2, dtype=kc.float16), (5,))
    assert out.dtype == kc.float16
    np.testing.assert_array_equal(to_numpy(out), np.full(5, -2, np.float16))


@pytest.mark.parametrize("dtype", [kc.float32, kc.float16, kc.bfloat16], ids=str)
def test_normal_moments(dtype):
    kc.random.seed(11)
    out = _draw(init.normal(mean=1.5, std=0.4, dtype=dtype), (400, 250))
    assert out.dtype == dtype
    v = to_numpy(out).astype(np.float64)
    assert abs(v.mean() - 1.5) < 0.01
    assert abs(v.std() - 0.4) < 0.01
    # A normal sample, not a uniform one: about 68% within one std.
    assert abs(np.mean(np.abs(v - 1.5) < 0.4) - 0.6827) < 0.01


@pytest.mark.parametrize("dtype", [kc.float32, kc.float16], ids=str)
def test_uniform_range_and_moments(dtype):
    kc.random.seed(12)
    v = to_numpy(_draw(init.uniform(low=-3.0, high=5.0, dtype=dtype), (300, 300))).astype(
        np.float64
    )
    assert v.min() >= -3.0 and v.max() <= 5.0
    assert abs(v.mean() - 1.0) < 0.05
    assert abs(v.std() - 8 / math.sqrt(12)) < 0.03
    v = to_numpy(_draw(init.uniform(), (100, 100)))
    assert 0 <= v.min() and v.max() < 1 and abs(v.mean() - 0.5) < 0.02


def test_identity():
    out = _draw(init.identity(), (5, 5))
    np.testing.assert_array_equal(to_numpy(out), np.eye(5))
    assert init.identity(dtype=kc.float16)(kc.zeros((3, 3))).dtype == kc.float16
    for shape in [(3, 4), (3,), (2, 2, 2)]:
        with pytest.raises(ValueError, match="must be a square matrix"):
            init.identity()(kc.zeros(shape))


# shape -> (fan_in, fan_out): (out, *receptive, in) layouts.
FANS = {(64, 32): (32, 64), (16, 3, 8): (24, 48), (8, 3, 3, 4): (36, 72)}


@pytest.mark.parametrize("shape", list(FANS))
@pytest.mark.parametrize("gain", [1.0, 0.5])
def test_glorot(shape, gain):
    fan_in, fan_out = FANS[shape]
    big = (shape[0] * 40,) + shape[1:]  # more samples, same receptive field
    fan_out_big = fan_out * 40
    kc.random.seed(13)
    limit = gain * math.sqrt(6 / (fan_in + fan_out_big))
    v = to_numpy(_draw(init.glorot_uniform(), big, gain=gain)).astype(np.float64)
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.98 * limit
    assert abs(v.std() - limit / math.sqrt(3)) < 0.03 * limit
    std = gain * math.sqrt(2 / (fan_in + fan_out_big))
    v = to_numpy(_draw(init.glorot_normal(), big, gain)).astype(np.float64)
    assert abs(v.std() - std) < 0.03 * std
    assert abs(v.mean()) < 0.03 * std


@pytest.mark.parametrize("shape", list(FANS))
@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
def test_he(shape, mode):
    big = (shape[0] * 40,) + shape[1:]
    fan_in, fan_out = FANS[shape]
    fan = fan_in if mode == "fan_in" else fan_out * 40
    kc.random.seed(14)
    limit = 2.0 * math.sqrt(3 / fan)
    v = to_numpy(_draw(init.he_uniform(), big, mode=mode, gain=2.0)).astype(np.float64)
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.98 * limit
    std = 1 / math.sqrt(fan)
    v = to_numpy(_draw(init.he_normal(dtype=kc.float16), big, mode)).astype(np.float64)
    assert abs(v.std() - std) < 0.03 * std


def test_fan_based_initializers_reject_bad_arguments():
    for make in (init.glorot_normal, init.glorot_uniform, init.he_normal, init.he_uniform):
        with pytest.raises(
            ValueError, match="at least 2 dimensional input but input with 1 dimensions"
        ):
            make()(kc.zeros((4,)))
    for make in (init.he_normal, init.he_uniform):
        with pytest.raises(
            ValueError, match="Invalid mode: fan_avg. Valid modes are: fan_in, fan_out"
        ):
            make()(kc.zeros((4, 4)), mode="fan_avg")


@pytest.mark.parametrize("shape", [(6, 6), (8, 3), (3, 8)])
def test_orthogonal(shape):
    kc.random.seed(15)
    q = to_numpy(_draw(init.orthogonal(gain=2.0), shape)).astype(np.float64)
    rows, cols = shape
    gram = q.T @ q if rows >= cols else q @ q.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(shape)), atol=1e-5)
    assert init.orthogonal(dtype=kc.bfloat16)(kc.zeros(shape)).dtype == kc.bfloat16
    with pytest.raises(ValueError, match="requires a 2D array but got a 3D array"):
        init.orthogonal()(kc.zeros((2, 2, 2)))


def test_orthogonal_draws_differ():
    a = to_numpy(init.orthogonal()(kc.zeros((4, 4))))
    b = to_numpy(init.orthogonal()(kc.zeros((4, 4))))
    assert not np.allclose(a, b)


@pytest.mark.parametrize("sparsity", [0.0, 0.25, 0.5, 0.9])
def test_sparse(sparsity):
    kc.random.seed(16)
    rows, cols = 200, 10
    v = to_numpy(_draw(init.sparse(sparsity, mean=0.5, std=0.2), (rows, cols)))
    zeros = (v == 0).sum(axis=1)
    np.testing.assert_array_equal(zeros, math.ceil(sparsity * cols))
    kept = v[v != 0].astype(np.float64)
    assert abs(kept.mean() - 0.5) < 0.03 and abs(kept.std() - 0.2) < 0.03
    if 0 < sparsity < 1:
        # Each row picks its own columns: zeros land in every column.
        assert ((v == 0).sum(axis=0) > 0).all()
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.sparse(0.5)(kc.zeros((3, 3, 3)))


def test_initializers_ignore_the_input_values_and_dtype():
    x = kc.array(np.arange(12, dtype=np.int32).reshape(3, 4))
    out = init.constant(1.0)(x)
    assert out.dtype == kc.float32
    np.testing.assert_array_equal(to_numpy(out), np.ones((3, 4)))


CASES = [
    ("constant", (0.3,), ()),
    ("normal", (0.5, 2.0), ()),
    ("uniform", (-1.0, 3.0), ()),
    ("identity", (), ()),
    ("glorot_normal", (), ()),
    ("glorot_uniform", (), (0.5,)),
    ("he_normal", (), ("fan_out",)),
    ("he_uniform", (), ("fan_in", 1.5)),
    ("sparse", (0.4,), ()),
    ("orthogonal", (1.5,), ()),
]


@pytest.mark.parametrize("name,args,call_args", CASES)
def test_same_draws_as_mlx_for_the_same_seed(name, args, call_args):
    mx, mnn = mlx()
    shape = (6, 6) if name == "identity" else (5, 7)
    kc.random.seed(3)
    mx.random.seed(3)
    ours = getattr(init, name)(*args)(kc.zeros(shape), *call_args)
    theirs = getattr(mnn.init, name)(*args)(mx.zeros(shape), *call_args)
    np.testing.assert_allclose(to_numpy(ours), np.array(theirs), rtol=1e-5, atol=1e-6)


def test_signatures_match_mlx():
    _, mnn = mlx()
    for name, _, _ in CASES:
        assert_same_signature(getattr(init, name), getattr(mnn.init, name))
        # The initializers they return take the same arguments too.
        args = (0.5,) if name in ("constant", "sparse") else ()
        assert_same_signature(getattr(init, name)(*args), getattr(mnn.init, name)(*args))
