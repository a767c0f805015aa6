"""Conv1d/2d/3d against a float64 NumPy convolution (a sum over the kernel's
taps of strided slices times the tap's weights), in every float dtype and
input layout, with every option; init, errors, gradients and MLX."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from layer_checks import (
    assert_same_signatures,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    check_compiled_training,
    check_input_grad,
    check_parameter_grads,
    f64,
    mlx,
    parameter_names,
    random_input,
    random_weights,
    set_weights,
    share_weights,
    to_numpy,
)


def conv_reference(x, w, stride, padding, dilation, groups=1):
    """Cross-correlation of x (N, *S, C_in) with w (C_out, *K, C_in/groups)."""
    x = np.pad(x, [(0, 0)] + [(p, p) for p in padding] + [(0, 0)])
    spatial, kernel = x.shape[1:-1], w.shape[1:-1]
    out_size = [
        (s - d * (k - 1) - 1) // st + 1
        for s, k, st, d in zip(spatial, kernel, stride, dilation)
    ]
    c_in, c_out = w.shape[-1], w.shape[0] // groups
    out = np.zeros((x.shape[0], *out_size, w.shape[0]))
    for tap in np.ndindex(*kernel):
        window = tuple(
            slice(t * d, t * d + st * (o - 1) + 1, st)
            for t, d, st, o in zip(tap, dilation, stride, out_size)
        )
        patch = x[(slice(None),) + window]
        for g in range(groups):
            w_tap = w[(slice(g * c_out, (g + 1) * c_out),) + tap]
            out[..., g * c_out : (g + 1) * c_out] += patch[..., g * c_in : (g + 1) * c_in] @ w_tap.T
    return out


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


CASES = [
    # (layer, ndim, constructor args, input spatial shape)
    (nn.Conv1d, 1, dict(in_channels=4, out_channels=6, kernel_size=3), (9,)),
    (
        nn.Conv1d,
        1,
        dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=2, dilation=2, groups=2),
        (11,),
    ),
    (nn.Conv1d, 1, dict(in_channels=3, out_channels=2, kernel_size=1, bias=False), (5,)),
    (nn.Conv2d, 2, dict(in_channels=3, out_channels=4, kernel_size=(3, 2)), (6, 7)),
    (
        nn.Conv2d,
        2,
        dict(in_channels=4, out_channels=6, kernel_size=3, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
        (7, 8),
    ),
    (nn.Conv2d, 2, dict(in_channels=4, out_channels=4, kernel_size=2, groups=4, bias=False), (5, 5)),
    (nn.Conv3d, 3, dict(in_channels=2, out_channels=3, kernel_size=2), (4, 5, 3)),
    (
        nn.Conv3d,
        3,
        dict(in_channels=3, out_channels=2, kernel_size=(2, 3, 1), stride=2, padding=(1, 0, 1), dilation=(1, 1, 2), bias=False),
        (5, 6, 4),
    ),
]
CASE_IDS = [f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]


def _reference(layer, args, weights, x):
    n = layer.weight.ndim - 2
    y = conv_reference(
        x,
        weights["weight"],
        _tuple(args.get("stride", 1), n),
        _tuple(args.get("padding", 0), n),
        _tuple(args.get("dilation", 1), n),
        args.get("groups", 1),
    )
    return y + weights["bias"] if "bias" in weights else y


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_matches_reference_in_every_layout(rng, case, layout):
    cls, _, args, spatial = case
    layer = cls(**args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights)
    x, x64 = random_input(rng, (2, *spatial, args["in_channels"]), layout=layout)
    assert_close(layer(x), _reference(layer, args, weights, x64))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kc.float64])
def test_conv_in_each_float_dtype(rng, case, dtype):
    cls, _, args, spatial = case
    layer = cls(**args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights, dtype)
    rounded = {k: to_numpy(getattr(layer, k)).astype(np.float64) for k in weights}
    x, x64 = random_input(rng, (2, *spatial, args["in_channels"]), dtype=dtype)
    y = layer(x)
    assert y.dtype == dtype
    # Low precision accumulates over the kernel's taps.
    assert_close(y, _reference(layer, args, rounded, x64), dtype, scale=3.0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_conv_parameters_and_init(case):
    cls, n, args, _ = case
    layer = cls(**args)
    groups = args.get("groups", 1)
    kernel = _tuple(args["kernel_size"], n)
    assert layer.weight.shape == (args["out_channels"], *kernel, args["in_channels"] // groups)
    assert layer.weight.dtype == kc.float32
    bound = math.sqrt(groups / (args["in_channels"] * math.prod(kernel)))
    w = np.array(layer.weight)
    assert np.all(np.abs(w) <= bound) and np.abs(w).max() > 0.5 * bound
    if args.get("bias", True):
        assert parameter_names(layer) == ["bias", "weight"]
        assert np.array_equal(np.array(layer.bias), np.zeros(args["out_channels"]))
    else:
        assert parameter_names(layer) == ["weight"]


def test_conv_defaults_and_repr():
    c = nn.Conv1d(4, 6, 3)
    assert (c.stride, c.padding, c.dilation, c.groups) == (1, 0, 1, 1)
    assert repr(c) == (
        "Conv1d(4, 6, kernel_size=3, stride=1, padding=0, dilation=1, groups=1, bias=True)"
    )
    c = nn.Conv2d(4, 6, 3, stride=2, padding=(1, 0), dilation=(2, 1), groups=2, bias=False)
    assert c.stride == (2, 2) and c.padding == (1, 0) and c.dilation == (2, 1)
    assert repr(c) == (
        "Conv2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 0), "
        "dilation=(2, 1), groups=2, bias=False)"
    )
    assert repr(nn.Conv3d(2, 3, (1, 2, 3))) == (
        "Conv3d(2, 3, kernel_size=(1, 2, 3), stride=(1, 1, 1), padding=(0, 0, 0), "
        "dilation=1, bias=True)"
    )


def test_conv_output_sizes_by_hand():
    # L_out = (L + 2p - d(k - 1) - 1) // s + 1
    x = kc.ones((1, 10, 2))
    assert nn.Conv1d(2, 3, 3, stride=3, padding=1, dilation=2)(x).shape == (1, 3, 3)
    y = nn.Conv2d(2, 3, (3, 1), stride=(1, 2))(kc.ones((2, 5, 5, 2)))
    assert y.shape == (2, 3, 3, 3)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.Conv1d(5, 6, 3, groups=2), "divisible"),
        (lambda: nn.Conv1d(4, 5, 3, groups=2), "divisible"),
        (lambda: nn.Conv1d(4, 6, 0), "kernel_size"),
        (lambda: nn.Conv1d(4, 6, 3, stride=0), "stride"),
        (lambda: nn.Conv1d(4, 6, 3, padding=-1), "padding"),
        (lambda: nn.Conv2d(4, 6, (3, 3, 3)), "kernel_size"),
        (lambda: nn.Conv2d(4, 6, 3, dilation=(1, 0)), "dilation"),
        (lambda: nn.Conv3d(0, 6, 3), "in_channels"),
        (lambda: nn.Conv3d(2, 6, 2.5), "kernel_size"),
    ],
)
def test_conv_bad_arguments_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_conv_bad_inputs_raise_naming_the_shapes():
    with pytest.raises(ValueError, match=r"conv1d.*\(2, 9, 3\)"):
        nn.Conv1d(4, 6, 3)(kc.ones((2, 9, 3)))
    with pytest.raises(ValueError, match="conv2d"):
        nn.Conv2d(4, 6, 3)(kc.ones((2, 9, 4)))
    # Integer inputs are refused, as MLX refuses them.
    with pytest.raises(ValueError, match=r"conv1d.*int32"):
        nn.Conv1d(3, 2, 2)(kc.arange(30).reshape(2, 5, 3))


def test_conv2d_gradients_match_finite_differences(rng):
    layer = nn.Conv2d(2, 3, (2, 3), stride=(2, 1), padding=1, dilation=(1, 2), groups=1)
    x = rng.standard_normal((2, 4, 5, 2))
    check_parameter_grads(layer, lambda y: (y * y).sum(), f64(x))
    check_input_grad(lambda v: (layer(v) ** 2).sum(), x)


def test_grouped_conv1d_gradients_match_finite_differences(rng):
    layer = nn.Conv1d(4, 2, 3, stride=2, padding=1, groups=2)
    x = rng.standard_normal((2, 7, 4))
    check_parameter_grads(layer, lambda y: (y * kc.sin(y)).sum(), f64(x))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_conv_matches_mlx(rng, case):
    mx, mnn = mlx()
    cls, _, args, spatial = case
    ours, theirs = cls(**args), getattr(mnn, cls.__name__)(**args)
    assert repr(ours) == repr(theirs)
    assert parameter_names(ours) == sorted(k for k, _ in mlx_flatten(theirs.parameters()))
    share_weights(rng, ours, theirs)
    x = rng.standard_normal((2, *spatial, args["in_channels"])).astype(np.float32)
    assert_close(ours(kc.array(x)), np.array(theirs(mx.array(x))))


def test_conv_init_draws_as_mlx():
    # The same key gives the same weights: the same distribution and draws.
    mx, mnn = mlx()
    for make in (
        lambda m: m.Conv1d(4, 6, 3, groups=2),
        lambda m: m.Conv2d(3, 5, (2, 3)),
        lambda m: m.Conv3d(2, 3, 2),
    ):
        kc.random.seed(11)
        mx.random.seed(11)
        ours, theirs = make(nn), make(mnn)
        assert np.array_equal(np.array(ours.weight), np.array(theirs.weight))


def mlx_flatten(tree):
    from mlx.utils import tree_flatten

    return tree_flatten(tree)


def test_conv_model_in_a_compiled_training_step(rng):
    def make():
        return nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.ConvTranspose2d(4, 3, 2, stride=2), nn.AvgPool2d(2, 1),
        )

    x = kc.array(rng.standard_normal((2, 6, 6, 2)).astype(np.float32))
    y = kc.array(rng.standard_normal((2, 5, 5, 3)).astype(np.float32))
    check_compiled_training(make, lambda out, y: ((out - y) ** 2).mean(), x, y)


def test_signatures_match_mlx():
    assert_same_signatures(
        ["Conv1d", "Conv2d", "Conv3d"]
    )
