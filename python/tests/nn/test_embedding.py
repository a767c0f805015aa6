"""Embedding: lookups against NumPy indexing, the initial scale, the
scatter-add gradient for repeated indices, as_linear, and MLX."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from nn_helpers import (
    assert_same_signature,
    assert_close,
    mlx,
    param_names,
    share_weights,
    to_numpy,
)


def test_parameters_and_initial_scale():
    kc.random.seed(31)
    emb = nn.Embedding(400, 64)
    assert param_names(emb.parameters()) == ["weight"]
    assert emb.weight.shape == (400, 64) and emb.weight.dtype == kc.float32
    w = to_numpy(emb.weight).astype(np.float64)
    assert abs(w.std() - 1 / math.sqrt(64)) < 0.01 / math.sqrt(64) * 5
    assert abs(w.mean()) < 0.01
    assert repr(emb) == "Embedding(400, 64)"


@pytest.mark.parametrize("index_dtype", [kc.int32, kc.uint32, kc.int64, kc.uint8])
def test_lookup(index_dtype, rng):
    emb = nn.Embedding(10, 4)
    w = to_numpy(emb.weight)
    idx = rng.integers(0, 10, (3, 5))
    out = emb(kc.array(idx).astype(index_dtype))
    assert out.shape == (3, 5, 4)
    np.testing.assert_array_equal(to_numpy(out), w[idx])
    # A transposed index array and a scalar index.
    idx_t = kc.array(idx).astype(index_dtype).T
    np.testing.assert_array_equal(to_numpy(emb(idx_t)), w[idx.T])
    np.testing.assert_array_equal(to_numpy(emb(kc.array(7))), w[7])


def test_lookup_in_half_precision(rng):
    emb = nn.Embedding(6, 3)
    emb.set_dtype(kc.bfloat16)
    idx = rng.integers(0, 6, 8)
    out = emb(kc.array(idx))
    assert out.dtype == kc.bfloat16
    np.testing.assert_array_equal(to_numpy(out), to_numpy(emb.weight)[idx])


def test_gradient_accumulates_repeated_indices(rng):
    emb = nn.Embedding(5, 3)
    idx = np.array([[0, 2, 2], [4, 2, 0]])
    c64 = rng.normal(size=(2, 3, 3))
    c = kc.array(c64.astype(np.float32))
    _, grads = nn.value_and_grad(emb, lambda i: (emb(i) * c).sum())(kc.array(idx))
    want = np.zeros((5, 3))
    np.add.at(want, idx.reshape(-1), c64.reshape(-1, 3))
    assert_close(grads["weight"], want)


def test_as_linear(rng):
    emb = nn.Embedding(7, 4)
    x64 = rng.normal(size=(2, 3, 4))
    got = emb.as_linear(kc.array(x64.astype(np.float32)))
    assert_close(got, x64 @ to_numpy(emb.weight).astype(np.float64).T, scale=5)
    with pytest.raises(ValueError):
        emb.as_linear(kc.ones((2, 5)))


def test_matches_mlx(rng):
    mx, mnn = mlx()
    ours, theirs = nn.Embedding(9, 5), mnn.Embedding(9, 5)
    share_weights(rng, ours, theirs)
    idx = rng.integers(0, 9, (4, 3)).astype(np.int32)
    np.testing.assert_array_equal(to_numpy(ours(kc.array(idx))), np.array(theirs(mx.array(idx))))
    x = rng.normal(size=(3, 5)).astype(np.float32)
    np.testing.assert_allclose(
        to_numpy(ours.as_linear(kc.array(x))),
        np.array(theirs.as_linear(mx.array(x))),
        rtol=1e-5,
        atol=1e-6,
    )
    assert repr(ours) == repr(theirs)


def test_constructor_signatures_match_mlx():
    _, mnn = mlx()
    for name in "Embedding".split(","):
        assert_same_signature(getattr(nn, name).__init__, getattr(mnn, name).__init__)
