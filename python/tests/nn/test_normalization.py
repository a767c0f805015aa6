"""LayerNorm, RMSNorm, GroupNorm, InstanceNorm and BatchNorm against float64
NumPy formulas on random inputs (several dtypes and layouts), their options,
BatchNorm's running statistics in training and evaluation, gradients, the
errors, and MLX with the same weights."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from kiln.utils import tree_map
from nn_helpers import (
    kiln_grad64,
    numeric_grad,
    assert_same_signature,
    FLOAT_DTYPES,
    assert_close,
    mlx,
    param_names,
    random_input,
    share_weights,
    to_numpy,
)


def _normalize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def _randomize(module, rng):
    """Random (non-trivial) affine parameters; returns them in float64."""
    out = {}
    for name in ("weight", "bias"):
        if name in module:
            v = rng.uniform(0.5, 1.5, module[name].shape).astype(np.float32)
            module[name] = kc.array(v).astype(module[name].dtype)
            out[name] = to_numpy(module[name]).astype(np.float64)
    return out


# ---- LayerNorm and RMSNorm ----------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_layer_norm(dtype, layout, rng):
    x, x64 = random_input(rng, (6, 16), dtype, layout)
    layer = nn.LayerNorm(16, eps=1e-4)
    layer.set_dtype(dtype)
    p = _randomize(layer, rng)
    y = layer(x)
    assert y.dtype == dtype
    assert_close(y, _normalize(x64, -1, 1e-4) * p["weight"] + p["bias"], dtype, scale=3)


def test_layer_norm_options(rng):
    x, _ = random_input(rng, (12, 2), layout="transposed")
    x = x.reshape(3, 4, 2)
    x64 = to_numpy(x).astype(np.float64)
    layer = nn.LayerNorm(2, affine=False)
    assert layer.parameters() == {}
    assert_close(layer(x), _normalize(x64, -1, 1e-5), scale=3)
    layer = nn.LayerNorm(2, bias=False)
    assert param_names(layer.parameters()) == ["weight"]
    p = _randomize(layer, rng)
    assert_close(layer(x), _normalize(x64, -1, 1e-5) * p["weight"], scale=3)
    assert repr(nn.LayerNorm(4, eps=1e-3)) == "LayerNorm(4, eps=0.001, affine=True)"


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_rms_norm(dtype, layout, rng):
    x, x64 = random_input(rng, (5, 12), dtype, layout)
    layer = nn.RMSNorm(12, eps=1e-3)
    layer.set_dtype(dtype)
    p = _randomize(layer, rng)
    y = layer(x)
    assert y.dtype == dtype
    want = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-3) * p["weight"]
    assert_close(y, want, dtype, scale=3)
    assert param_names(layer.parameters()) == ["weight"]
    assert repr(layer) == "RMSNorm(12, eps=0.001)"


def test_layer_norm_gradients(rng):
    layer = nn.LayerNorm(6)
    p = _randomize(layer, rng)
    x, x64 = random_input(rng, (4, 6))
    c64 = rng.normal(size=(4, 6))
    c = kc.array(c64.astype(np.float32))
    _, grads = nn.value_and_grad(layer, lambda x: (layer(x) * c).sum())(x)
    xhat = _normalize(x64, -1, 1e-5)
    assert_close(grads["weight"], (c64 * xhat).sum(0), scale=10)
    assert_close(grads["bias"], c64.sum(0), scale=10)
    # d/dx of sum(c * w * xhat): the projection of g = c * w off 1 and xhat.
    g = c64 * p["weight"]
    std = np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    want = (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True)) / std
    assert_close(kc.grad(lambda x: (layer(x) * c).sum())(x), want, scale=20)


# ---- GroupNorm ------------------------------------------------------------------


def _group_norm(x64, groups, eps, blocked):
    b, *rest, c = x64.shape
    if blocked:  # feature f in group f // (c / groups)
        g = x64.reshape(b, -1, groups, c // groups)
        return _normalize(g, (1, 3), eps).reshape(x64.shape)
    # MLX's default: feature f in group f % groups
    g = x64.reshape(b, -1, c // groups, groups)
    return _normalize(g, (1, 2), eps).reshape(x64.shape)


@pytest.mark.parametrize("pytorch_compatible", [False, True])
@pytest.mark.parametrize("shape", [(2, 12), (2, 5, 12), (3, 4, 5, 12)])
def test_group_norm(shape, pytorch_compatible, rng):
    x64 = rng.uniform(-3, 3, shape)
    x = kc.array(x64.astype(np.float32))
    x64 = x64.astype(np.float32).astype(np.float64)
    layer = nn.GroupNorm(3, 12, pytorch_compatible=pytorch_compatible)
    p = _randomize(layer, rng)
    want = _group_norm(x64, 3, 1e-5, pytorch_compatible) * p["weight"] + p["bias"]
    assert_close(layer(x), want, scale=5)
    bare = nn.GroupNorm(4, 12, eps=1e-3, affine=False, pytorch_compatible=pytorch_compatible)
    assert bare.parameters() == {}
    assert_close(bare(x), _group_norm(x64, 4, 1e-3, pytorch_compatible), scale=5)


def test_group_norm_on_non_contiguous_and_half_inputs(rng):
    base = kc.array(rng.uniform(-3, 3, (8, 5, 2)).astype(np.float32))
    x = kc.transpose(base, (2, 1, 0))  # (2, 5, 8)
    x64 = to_numpy(x).astype(np.float64)
    for blocked in (False, True):
        layer = nn.GroupNorm(2, 8, pytorch_compatible=blocked)
        assert_close(layer(x), _group_norm(x64, 2, 1e-5, blocked), scale=5)
        layer.set_dtype(kc.float16)
        xh = x.astype(kc.float16)
        y = layer(xh)
        assert y.dtype == kc.float16
        assert_close(
            y, _group_norm(to_numpy(xh).astype(np.float64), 2, 1e-5, blocked), kc.float16, scale=3
        )


def test_group_norm_errors():
    with pytest.raises(
        ValueError,
        match=r"The number of features \(10\) must be evenly divisible by the number of groups \(4\)",
    ):
        nn.GroupNorm(4, 10)
    with pytest.raises(ValueError, match=r"number of groups \(0\) must be a positive integer"):
        nn.GroupNorm(0, 10)
    with pytest.raises(ValueError, match=r"number of features \(0\) must be a positive integer"):
        nn.GroupNorm(2, 0)
    assert (
        repr(nn.GroupNorm(2, 4))
        == "GroupNorm(2, 4, eps=1e-05, affine=True, pytorch_compatible=False)"
    )


# ---- InstanceNorm -------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 3, 4, 5), (1, 2, 3, 2, 5)])
@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm(shape, affine, rng):
    x64 = rng.uniform(-3, 3, shape)
    x = kc.array(x64.astype(np.float32))
    x64 = x64.astype(np.float32).astype(np.float64)
    layer = nn.InstanceNorm(5, affine=affine)
    want = _normalize(x64, tuple(range(1, len(shape) - 1)), 1e-5)
    if affine:
        assert param_names(layer.parameters()) == ["bias", "weight"]
        p = _randomize(layer, rng)
        want = want * p["weight"] + p["bias"]
    else:
        assert layer.parameters() == {}
    assert_close(layer(x), want, scale=5)
    # A transposed view of the same values gives the same result.
    xt = kc.array(np.ascontiguousarray(np.swapaxes(x64, 0, -1)).astype(np.float32))
    assert_close(layer(kc.swapaxes(xt, 0, -1)), want, scale=5)


def test_instance_norm_rejects_inputs_without_spatial_axes():
    with pytest.raises(
        ValueError, match="at least 3 dimensions .N, ..., C. but the input has 2 dimensions"
    ):
        nn.InstanceNorm(4)(kc.ones((2, 4)))
    assert repr(nn.InstanceNorm(4)) == "InstanceNorm(4, eps=1e-05, affine=False)"


# ---- BatchNorm ------------------------------------------------------------------


def test_batch_norm_parameters():
    bn = nn.BatchNorm(4)
    assert param_names(bn.parameters()) == ["bias", "running_mean", "running_var", "weight"]
    assert param_names(bn.trainable_parameters()) == ["bias", "weight"]
    bn.freeze()
    assert bn.trainable_parameters() == {}
    bn.unfreeze()
    assert param_names(bn.trainable_parameters()) == ["bias", "weight"]
    bare = nn.BatchNorm(4, affine=False, track_running_stats=False)
    assert bare.parameters() == {}
    bare.unfreeze()
    assert bare.trainable_parameters() == {}
    assert param_names(nn.BatchNorm(3, affine=False).parameters()) == [
        "running_mean",
        "running_var",
    ]
    assert (
        repr(bn) == "BatchNorm(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    )


@pytest.mark.parametrize("shape", [(16, 4), (6, 5, 4), (3, 4, 5, 4)])
def test_batch_norm_training_updates_running_stats(shape, rng):
    x64 = rng.uniform(-3, 3, shape) + rng.uniform(-2, 2, shape[-1])
    x = kc.array(x64.astype(np.float32))
    x64 = x64.astype(np.float32).astype(np.float64)
    bn = nn.BatchNorm(4, momentum=0.3)
    p = _randomize(bn, rng)
    axes = tuple(range(len(shape) - 1))
    want = _normalize(x64, axes, 1e-5) * p["weight"] + p["bias"]
    assert_close(bn(x), want, scale=5)
    mean, var = x64.mean(axes), x64.var(axes, ddof=1)
    assert_close(bn.running_mean, 0.3 * mean, scale=5)
    assert_close(bn.running_var, 0.7 + 0.3 * var, scale=5)
    bn(x)
    assert_close(bn.running_mean, 0.3 * mean + 0.7 * 0.3 * mean, scale=5)
    # Evaluation normalizes with the running statistics and leaves them be.
    bn.eval()
    rm, rv = to_numpy(bn.running_mean), to_numpy(bn.running_var)
    want = (x64 - rm) / np.sqrt(rv + 1e-5) * p["weight"] + p["bias"]
    assert_close(bn(x), want, scale=5)
    np.testing.assert_array_equal(to_numpy(bn.running_mean), rm)


def test_batch_norm_without_running_stats_uses_batch_stats_in_eval(rng):
    x, x64 = random_input(rng, (8, 3), layout="transposed")
    bn = nn.BatchNorm(3, affine=False, track_running_stats=False)
    assert_close(bn(x), _normalize(x64, 0, 1e-5), scale=5)
    bn.eval()
    assert_close(bn(x), _normalize(x64, 0, 1e-5), scale=5)


def test_batch_norm_half_precision(rng):
    x, x64 = random_input(rng, (32, 6), kc.float16)
    bn = nn.BatchNorm(6)
    bn.set_dtype(kc.float16)
    y = bn(x)
    assert y.dtype == kc.float16
    assert_close(y, _normalize(x64, 0, 1e-5), kc.float16, scale=3)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="2, 3 or 4 dimensions, but got 5"):
        nn.BatchNorm(2)(kc.ones((1, 2, 2, 2, 2)))
    with pytest.raises(ValueError, match="2, 3 or 4 dimensions, but got 1"):
        nn.BatchNorm(2)(kc.ones((2,)))
    with pytest.raises(ValueError, match="more than one value per channel"):
        nn.BatchNorm(2)(kc.ones((1, 2)))
    nn.BatchNorm(2).eval()(kc.ones((1, 2)))  # fine in evaluation


def test_batch_norm_gradient_excludes_running_stats_and_compiles(rng):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm(4))
    x = kc.array(rng.normal(size=(10, 3)).astype(np.float32))

    def loss(x):
        return (model(x) ** 2).mean()

    _, grads = nn.value_and_grad(model, loss)(x)
    assert param_names(grads) == [
        "layers.0.bias",
        "layers.0.weight",
        "layers.1.bias",
        "layers.1.weight",
    ]

    def step(x):
        value, grads = nn.value_and_grad(model, loss)(x)
        model.update(tree_map(lambda p, g: p - 0.1 * g, model.trainable_parameters(), grads))
        return value

    compiled = kc.compile(step, inputs=model.state, outputs=model.state)
    before = to_numpy(model.layers[1].running_mean)
    compiled(x)
    compiled(x)
    after = to_numpy(model.layers[1].running_mean)
    # Two training steps moved the running mean (written back from the trace).
    assert not np.allclose(before, after)
    assert np.isfinite(after).all()


@pytest.mark.parametrize("eps", [0.0, -1e-5])
@pytest.mark.parametrize(
    "make",
    [
        lambda e: nn.LayerNorm(4, eps=e),
        lambda e: nn.RMSNorm(4, eps=e),
        lambda e: nn.GroupNorm(2, 4, eps=e),
        lambda e: nn.InstanceNorm(4, eps=e),
        lambda e: nn.BatchNorm(4, eps=e),
    ],
)
def test_non_positive_eps_raises(make, eps):
    with pytest.raises(ValueError, match=r"\[\w+\] 'eps' must be positive"):
        make(eps)


# ---- against MLX ------------------------------------------------------------


def test_matches_mlx(rng):
    mx, mnn = mlx()
    cases = [
        ("LayerNorm", (6,), (3, 6)),
        ("LayerNorm", (6, 1e-5, False), (3, 6)),
        ("LayerNorm", (6, 1e-5, True, False), (2, 3, 6)),
        ("RMSNorm", (6,), (3, 6)),
        ("GroupNorm", (2, 6), (2, 3, 6)),
        ("GroupNorm", (3, 6, 1e-5, True, True), (2, 3, 4, 6)),
        ("InstanceNorm", (6, 1e-5, True), (2, 3, 4, 6)),
        ("BatchNorm", (6,), (5, 6)),
        ("BatchNorm", (6, 1e-5, 0.2), (2, 5, 3, 6)),
        ("BatchNorm", (6, 1e-5, 0.1, False, False), (4, 6)),
    ]
    for name, args, shape in cases:
        ours, theirs = getattr(nn, name)(*args), getattr(mnn, name)(*args)
        share_weights(rng, ours, theirs, positive={"running_var"})
        assert repr(ours) == repr(theirs)
        assert param_names(ours.trainable_parameters()) == param_names(
            theirs.trainable_parameters()
        )
        x = rng.normal(size=shape).astype(np.float32)
        np.testing.assert_allclose(
            to_numpy(ours(kc.array(x))),
            np.array(theirs(mx.array(x))),
            rtol=1e-5,
            atol=1e-5,
            err_msg=name,
        )
        if name == "BatchNorm":
            for stat in ("running_mean", "running_var"):
                if stat in theirs:
                    np.testing.assert_allclose(
                        to_numpy(ours[stat]), np.array(theirs[stat]), rtol=1e-5, atol=1e-6
                    )
            ours.eval()
            theirs.eval()
            np.testing.assert_allclose(
                to_numpy(ours(kc.array(x))), np.array(theirs(mx.array(x))), rtol=1e-5, atol=1e-5
            )


def test_constructor_signatures_match_mlx():
    _, mnn = mlx()
    for name in "LayerNorm,RMSNorm,GroupNorm,InstanceNorm,BatchNorm".split(","):
        assert_same_signature(getattr(nn, name).__init__, getattr(mnn, name).__init__)


# ---- gradients against finite differences (float64) ------------------------------


def _cubed_sum_grads(module, reference, x64):
    """kiln's gradient of sum(module(x)^3) against central differences of
    sum(reference(x)^3)."""
    module.set_dtype(kc.float64)
    got = kiln_grad64(lambda x: (module(x) ** 3).sum(), x64)
    want = numeric_grad(lambda x: (reference(x) ** 3).sum(), x64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("blocked", [False, True])
def test_group_norm_gradient_matches_finite_differences(blocked, rng):
    x64 = rng.normal(size=(2, 3, 6))
    layer = nn.GroupNorm(2, 6, pytorch_compatible=blocked)
    _cubed_sum_grads(layer, lambda x: _group_norm(x, 2, 1e-5, blocked), x64)


def test_instance_and_rms_norm_gradients_match_finite_differences(rng):
    x64 = rng.normal(size=(2, 3, 4))
    _cubed_sum_grads(nn.InstanceNorm(4), lambda x: _normalize(x, (1,), 1e-5), x64)
    rms = lambda x: x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-5)  # noqa: E731
    _cubed_sum_grads(nn.RMSNorm(4), rms, x64)


def test_batch_norm_training_gradient_matches_finite_differences(rng):
    x64 = rng.normal(size=(5, 3))
    bn = nn.BatchNorm(3, track_running_stats=False)
    _cubed_sum_grads(bn, lambda x: _normalize(x, (0,), 1e-5), x64)
