"""Dropout, Dropout2d and Dropout3d: identity in evaluation and for p=0;
in training, zeros or x / (1 - p), the drop rate, whole channels for the
2-D/3-D forms, gradients through the same mask, and the errors."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from nn_helpers import assert_same_signature, mlx, to_numpy


def _positive(rng, shape, dtype=kc.float32):
    # Away from zero, so a zero in the output can only be a dropped entry.
    return kc.array(rng.uniform(0.5, 2.0, shape).astype(np.float32)).astype(dtype)


@pytest.mark.parametrize("cls", [nn.Dropout, nn.Dropout2d, nn.Dropout3d])
def test_identity_in_eval_and_for_zero_probability(cls, rng):
    x = _positive(rng, (2, 3, 4, 5, 6)[: 4 if cls is nn.Dropout2d else 5])
    layer = cls(0.5)
    assert layer.training
    layer.eval()
    assert layer(x) is x
    layer = cls(0.0)
    assert layer(x) is x
    assert layer.parameters() == {}


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("dtype", [kc.float32, kc.float16, kc.bfloat16], ids=str)
def test_dropout_zeroes_and_rescales(p, dtype, rng):
    kc.random.seed(41)
    x = _positive(rng, (200, 300), dtype)
    y = nn.Dropout(p)(x)
    assert y.dtype == dtype and y.shape == x.shape
    xv, yv = to_numpy(x).astype(np.float64), to_numpy(y).astype(np.float64)
    kept = yv != 0
    rtol = {kc.float32: 1e-6, kc.float16: 2e-3, kc.bfloat16: 1e-2}[dtype]
    np.testing.assert_allclose(yv[kept], xv[kept] / (1 - p), rtol=rtol)
    assert abs((~kept).mean() - p) < 0.01


def test_dropout_on_non_contiguous_input(rng):
    x = _positive(rng, (40, 60)).T
    y = to_numpy(nn.Dropout(0.3)(x))
    xv = to_numpy(x)
    kept = y != 0
    np.testing.assert_allclose(y[kept], xv[kept] / 0.7, rtol=1e-6)
    assert 0 < kept.sum() < kept.size


def test_a_new_mask_each_call_and_the_seed_repeats_it(rng):
    x = _positive(rng, (30, 30))
    layer = nn.Dropout(0.5)
    kc.random.seed(7)
    a, b = to_numpy(layer(x)), to_numpy(layer(x))
    assert not np.array_equal(a == 0, b == 0)
    kc.random.seed(7)
    np.testing.assert_array_equal(to_numpy(layer(x)), a)


@pytest.mark.parametrize(
    "cls,shape,spatial",
    [
        (nn.Dropout2d, (8, 5, 6, 40), (1, 2)),
        (nn.Dropout2d, (5, 6, 40), (0, 1)),
        (nn.Dropout3d, (8, 3, 4, 5, 40), (1, 2, 3)),
        (nn.Dropout3d, (3, 4, 5, 40), (0, 1, 2)),
    ],
)
def test_channel_dropout_drops_whole_channels(cls, shape, spatial, rng):
    kc.random.seed(42)
    x = _positive(rng, shape)
    y = to_numpy(cls(0.4)(x))
    xv = to_numpy(x)
    dropped = y == 0
    # Constant over the spatial axes: each (sample, channel) is all or none.
    assert (dropped.all(axis=spatial) == dropped.any(axis=spatial)).all()
    np.testing.assert_allclose(y[~dropped], xv[~dropped] / 0.6, rtol=1e-6)
    rate = dropped.all(axis=spatial).mean()
    assert 0.2 < rate < 0.6


def test_gradient_goes_through_the_same_mask(rng):
    kc.random.seed(43)
    x = _positive(rng, (20, 20))
    layer = nn.Dropout(0.25)

    def f(x):
        y = layer(x)
        return y.sum(), y

    (_, y), g = kc.value_and_grad(f)(x)
    yv = to_numpy(y)
    np.testing.assert_allclose(to_numpy(g), np.where(yv != 0, 1 / 0.75, 0.0), rtol=1e-6)


@pytest.mark.parametrize("cls", [nn.Dropout, nn.Dropout2d, nn.Dropout3d])
@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_probability_out_of_range_raises(cls, p):
    with pytest.raises(ValueError, match=rf"The dropout probability {p} is not in \[0, 1\)"):
        cls(p)


def test_channel_dropout_rejects_other_ranks():
    with pytest.raises(
        ValueError, match="Received input with 2 dimensions. Expected 3 or 4 dimensions."
    ):
        nn.Dropout2d()(kc.ones((3, 4)))
    with pytest.raises(
        ValueError, match="Received input with 6 dimensions. Expected 4 or 5 dimensions."
    ):
        nn.Dropout3d().eval()(kc.ones((1, 2, 3, 4, 5, 6)))


def test_repr_matches_mlx():
    _, mnn = mlx()
    for name in ("Dropout", "Dropout2d", "Dropout3d"):
        for p in (0.5, 0.2):
            assert repr(getattr(nn, name)(p)) == repr(getattr(mnn, name)(p))


@pytest.mark.parametrize(
    "name,shape", [("Dropout", (6, 7)), ("Dropout2d", (2, 3, 4, 5)), ("Dropout3d", (2, 3, 2, 4, 5))]
)
def test_same_masks_as_mlx_for_the_same_seed(name, shape, rng):
    # kiln's Threefry keys draw MLX's Bernoulli bits for the same seed.
    mx, mnn = mlx()
    x = rng.uniform(0.5, 2.0, shape).astype(np.float32)
    kc.random.seed(5)
    mx.random.seed(5)
    ours = to_numpy(getattr(nn, name)(0.3)(kc.array(x)))
    theirs = np.array(getattr(mnn, name)(0.3)(mx.array(x)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_constructor_signatures_match_mlx():
    _, mnn = mlx()
    for name in "Dropout,Dropout2d,Dropout3d".split(","):
        assert_same_signature(getattr(nn, name).__init__, getattr(mnn, name).__init__)


def test_train_and_eval_reach_dropout_inside_a_model(rng):
    model = nn.Sequential(nn.Linear(4, 64), nn.Dropout(0.5), nn.Linear(64, 2))
    x = kc.array(rng.normal(size=(8, 4)).astype(np.float32))
    kc.random.seed(8)
    assert not np.allclose(to_numpy(model(x)), to_numpy(model(x)))
    model.eval()
    assert not model.layers[1].training
    a, b = to_numpy(model(x)), to_numpy(model(x))
    np.testing.assert_array_equal(a, b)
    h = to_numpy(model.layers[0](x)).astype(np.float64)
    w, bias = to_numpy(model.layers[2].weight), to_numpy(model.layers[2].bias)
    np.testing.assert_allclose(a, h @ w.T + bias, rtol=1e-4, atol=1e-5)
    model.train()
    assert model.layers[1].training
