"""Identity, Linear and Bilinear: forward against NumPy in float64, the
initial ranges, gradients in closed form, compiled steps, and MLX with the
same weights."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from kiln.utils import tree_map
from nn_helpers import (
    assert_same_signature,
    assert_close,
    mlx,
    param_names,
    random_input,
    share_weights,
    to_numpy,
)


def test_identity_passes_input_through_and_takes_any_arguments(rng):
    layer = nn.Identity(3, 4, bias=False)
    x, x64 = random_input(rng, (3, 5), layout="transposed")
    assert layer(x) is x
    assert layer.parameters() == {}
    assert repr(layer) == "Identity()"


def test_linear_parameters_and_initial_range():
    kc.random.seed(21)
    layer = nn.Linear(50, 40)
    assert param_names(layer.parameters()) == ["bias", "weight"]
    assert layer.weight.shape == (40, 50) and layer.bias.shape == (40,)
    assert layer.weight.dtype == kc.float32
    bound = 1 / math.sqrt(50)
    for p in (layer.weight, layer.bias):
        v = to_numpy(p)
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.9 * bound
    w = to_numpy(layer.weight)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert "bias" not in nn.Linear(3, 2, bias=False)
    assert repr(nn.Linear(3, 2)) == "Linear(input_dims=3, output_dims=2, bias=True)"
    assert repr(nn.Linear(3, 2, bias=False)) == "Linear(input_dims=3, output_dims=2, bias=False)"


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "broadcast"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward(layout, bias, rng):
    layer = nn.Linear(7, 5, bias=bias)
    x, x64 = random_input(rng, (6, 7), layout=layout)
    w64 = to_numpy(layer.weight).astype(np.float64)
    want = x64 @ w64.T
    if bias:
        want = want + to_numpy(layer.bias)
    assert_close(layer(x), want, scale=5)


def test_linear_over_leading_batch_axes_and_in_half_precision(rng):
    layer = nn.Linear(8, 3)
    x64 = rng.uniform(-2, 2, (2, 4, 8))
    w64, b64 = to_numpy(layer.weight).astype(np.float64), to_numpy(layer.bias)
    assert_close(layer(kc.array(x64.astype(np.float32))), x64 @ w64.T + b64, scale=5)
    for dtype in (kc.float16, kc.bfloat16):
        layer.set_dtype(dtype)
        x = kc.array(x64.astype(np.float32)).astype(dtype)
        y = layer(x)
        assert y.dtype == dtype
        xq = to_numpy(x).astype(np.float64)
        wq = to_numpy(layer.weight).astype(np.float64)
        bq = to_numpy(layer.bias).astype(np.float64)
        assert_close(y, xq @ wq.T + bq, dtype, scale=3)


def test_linear_rejects_wrong_input_size():
    with pytest.raises(ValueError, match=r"\(4, 5\).*\(3, 2\)"):
        nn.Linear(3, 2)(kc.ones((4, 5)))


def test_linear_gradients(rng):
    layer = nn.Linear(4, 3)
    x, x64 = random_input(rng, (5, 4))
    c64 = rng.normal(size=(5, 3))
    c = kc.array(c64.astype(np.float32))

    def loss(x):
        return (layer(x) * c).sum()

    value, grads = nn.value_and_grad(layer, loss)(x)
    w64 = to_numpy(layer.weight).astype(np.float64)
    assert_close(value, ((x64 @ w64.T + to_numpy(layer.bias)) * c64).sum(), scale=10)
    assert_close(grads["weight"], c64.T @ x64, scale=10)
    assert_close(grads["bias"], c64.sum(0), scale=10)
    gx = kc.grad(loss)(x)
    assert_close(gx, c64 @ w64, scale=10)


def test_linear_in_a_compiled_training_step(rng):
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    x = kc.array(rng.normal(size=(16, 3)).astype(np.float32))
    y = kc.array(rng.normal(size=(16, 1)).astype(np.float32))

    def loss(x, y):
        return nn.losses.mse_loss(model(x), y)

    grad_fn = nn.value_and_grad(model, loss)

    def step(x, y):
        value, grads = grad_fn(x, y)
        params = model.trainable_parameters()
        model.update(tree_map(lambda p, g: p - 0.1 * g, params, grads))
        return value

    eager = [step(x, y).item() for _ in range(3)]
    assert eager[2] < eager[0]
    compiled = kc.compile(step, inputs=model.state, outputs=model.state)
    values = [compiled(x, y).item() for _ in range(3)]
    assert values[0] < eager[2] and values[2] < values[0]


def test_bilinear_forward(rng):
    kc.random.seed(22)
    layer = nn.Bilinear(3, 4, 5)
    assert layer.weight.shape == (5, 4, 3) and layer.bias.shape == (5,)
    bound = 1 / math.sqrt(3)
    assert np.abs(to_numpy(layer.weight)).max() <= bound
    x1_64 = rng.uniform(-2, 2, (2, 6, 3))
    x2_64 = rng.uniform(-2, 2, (2, 6, 4))
    w64 = to_numpy(layer.weight).astype(np.float64)
    want = np.einsum("...i,oji,...j->...o", x1_64, w64, x2_64) + to_numpy(layer.bias)
    got = layer(kc.array(x1_64.astype(np.float32)), kc.array(x2_64.astype(np.float32)))
    assert_close(got, want, scale=10)
    # Non-contiguous inputs and no bias.
    layer = nn.Bilinear(3, 4, 2, bias=False)
    assert "bias" not in layer
    x1, x1_64 = random_input(rng, (5, 3), layout="transposed")
    x2, x2_64 = random_input(rng, (5, 4), layout="sliced")
    w64 = to_numpy(layer.weight).astype(np.float64)
    assert_close(layer(x1, x2), np.einsum("bi,oji,bj->bo", x1_64, w64, x2_64), scale=10)
    assert repr(layer) == "Bilinear(input1_dims=3, input2_dims=4, output_dims=2, bias=False)"


def test_bilinear_gradient(rng):
    layer = nn.Bilinear(2, 3, 4)
    x1_64, x2_64 = rng.normal(size=(5, 2)), rng.normal(size=(5, 3))
    x1, x2 = kc.array(x1_64.astype(np.float32)), kc.array(x2_64.astype(np.float32))
    _, grads = nn.value_and_grad(layer, lambda: layer(x1, x2).sum())()
    # d/dW[o, j, i] sum = sum_b x2[b, j] x1[b, i], for every o.
    want = np.broadcast_to(x2_64.T @ x1_64, (4, 3, 2))
    assert_close(grads["weight"], want, scale=10)
    assert_close(grads["bias"], np.full(4, 5.0))


def test_linear_and_bilinear_match_mlx(rng):
    mx, mnn = mlx()
    for bias in (True, False):
        ours, theirs = nn.Linear(6, 4, bias=bias), mnn.Linear(6, 4, bias=bias)
        share_weights(rng, ours, theirs)
        x = rng.normal(size=(3, 2, 6)).astype(np.float32)
        np.testing.assert_allclose(
            to_numpy(ours(kc.array(x))), np.array(theirs(mx.array(x))), rtol=1e-5, atol=1e-6
        )
        assert repr(ours) == repr(theirs)
        ours, theirs = nn.Bilinear(3, 5, 4, bias=bias), mnn.Bilinear(3, 5, 4, bias=bias)
        share_weights(rng, ours, theirs)
        x1 = rng.normal(size=(7, 3)).astype(np.float32)
        x2 = rng.normal(size=(7, 5)).astype(np.float32)
        got = to_numpy(ours(kc.array(x1), kc.array(x2)))
        np.testing.assert_allclose(
            got, np.array(theirs(mx.array(x1), mx.array(x2))), rtol=1e-5, atol=1e-5
        )
        assert repr(ours) == repr(theirs)


def test_constructor_signatures_match_mlx():
    _, mnn = mlx()
    for name in "Identity,Linear,Bilinear".split(","):
        assert_same_signature(getattr(nn, name).__init__, getattr(mnn, name).__init__)
