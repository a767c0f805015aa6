"""ConvTranspose1d/2d/3d against a float64 NumPy transposed convolution
(each input position scatters its weighted taps to stride * i + dilation *
k, then the padding is cropped), in every layout and dtype, with every
option; shapes, errors, gradients and MLX."""

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


def conv_transpose_reference(x, w, stride, padding, dilation, output_padding):
    """x (N, *S, C_in), w (C_out, *K, C_in)."""
    spatial, kernel = x.shape[1:-1], w.shape[1:-1]
    full = [
        (s - 1) * st + d * (k - 1) + 1 + op
        for s, k, st, d, op in zip(spatial, kernel, stride, dilation, output_padding)
    ]
    out = np.zeros((x.shape[0], *full, w.shape[0]))
    for tap in np.ndindex(*kernel):
        targets = tuple(
            slice(t * d, t * d + st * (s - 1) + 1, st)
            for t, d, st, s in zip(tap, dilation, stride, spatial)
        )
        out[(slice(None),) + targets] += x @ w[(slice(None),) + tap].T
    crop = tuple(
        slice(p, f - p) for p, f in zip(padding, full)
    )
    return out[(slice(None),) + crop]


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


CASES = [
    (nn.ConvTranspose1d, dict(in_channels=4, out_channels=3, kernel_size=3), (6,)),
    (
        nn.ConvTranspose1d,
        dict(in_channels=3, out_channels=5, kernel_size=4, stride=3, padding=2, dilation=2, output_padding=1, bias=False),
        (5,),
    ),
    (nn.ConvTranspose2d, dict(in_channels=3, out_channels=2, kernel_size=(2, 3)), (4, 3)),
    (
        nn.ConvTranspose2d,
        dict(in_channels=2, out_channels=3, kernel_size=3, stride=(2, 3), padding=(1, 0), dilation=(1, 2), output_padding=(1, 2)),
        (4, 5),
    ),
    (nn.ConvTranspose3d, dict(in_channels=2, out_channels=3, kernel_size=2, stride=2), (2, 3, 2)),
    (
        nn.ConvTranspose3d,
        dict(in_channels=3, out_channels=2, kernel_size=(3, 1, 2), padding=(1, 0, 0), output_padding=(0, 0, 1), stride=(1, 1, 2), bias=False),
        (3, 2, 3),
    ),
]
CASE_IDS = [f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]


def _reference(layer, args, weights, x):
    n = layer.weight.ndim - 2
    y = conv_transpose_reference(
        x,
        weights["weight"],
        _tuple(args.get("stride", 1), n),
        _tuple(args.get("padding", 0), n),
        _tuple(args.get("dilation", 1), n),
        _tuple(args.get("output_padding", 0), n),
    )
    return y + weights["bias"] if "bias" in weights else y


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv_transpose_matches_reference_in_every_layout(rng, case, layout):
    cls, args, spatial = case
    layer = cls(**args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights)
    x, x64 = random_input(rng, (2, *spatial, args["in_channels"]), layout=layout)
    assert_close(layer(x), _reference(layer, args, weights, x64))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kc.float64])
def test_conv_transpose_in_each_float_dtype(rng, case, dtype):
    cls, args, spatial = case
    layer = cls(**args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights, dtype)
    rounded = {k: to_numpy(getattr(layer, k)).astype(np.float64) for k in weights}
    x, x64 = random_input(rng, (2, *spatial, args["in_channels"]), dtype=dtype)
    y = layer(x)
    assert y.dtype == dtype
    assert_close(y, _reference(layer, args, rounded, x64), dtype, scale=3.0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_conv_transpose_parameters_and_init(case):
    cls, args, _ = case
    n = int(cls.__name__[-2])
    layer = cls(**args)
    kernel = _tuple(args["kernel_size"], n)
    assert layer.weight.shape == (args["out_channels"], *kernel, args["in_channels"])
    bound = math.sqrt(1 / (args["in_channels"] * math.prod(kernel)))
    w = np.array(layer.weight)
    assert np.all(np.abs(w) <= bound) and np.abs(w).max() > 0.5 * bound
    names = ["bias", "weight"] if args.get("bias", True) else ["weight"]
    assert parameter_names(layer) == names


def test_conv_transpose_output_size_by_hand():
    # L_out = (L - 1) s - 2p + d (k - 1) + output_padding + 1
    y = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, dilation=2, output_padding=1)(
        kc.ones((1, 5, 2))
    )
    assert y.shape == (1, 4 * 2 - 2 + 4 + 1 + 1, 3)
    # Stride 1 and no padding: a ones kernel on a ones input counts the taps
    # that reach each output (1, 2, 2, 1 for L = 3, k = 2).
    layer = nn.ConvTranspose1d(1, 1, 2, bias=False)
    layer.weight = kc.ones((1, 2, 1))
    assert layer(kc.ones((1, 3, 1))).reshape(-1).tolist() == [1, 2, 2, 1]


def test_conv_transpose_defaults_and_repr():
    c = nn.ConvTranspose1d(4, 6, 3)
    assert (c.stride, c.padding, c.dilation, c.output_padding) == (1, 0, 1, 0)
    assert repr(c) == (
        "ConvTranspose1d(4, 6, kernel_size=3, stride=1, padding=0, dilation=1, "
        "output_padding=0, bias=True)"
    )
    c = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=(1, 0), dilation=(2, 1), output_padding=1)
    assert repr(c) == (
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 0), "
        "dilation=(2, 1), output_padding=(1, 1), bias=True)"
    )
    assert repr(nn.ConvTranspose3d(2, 3, 2, bias=False)) == (
        "ConvTranspose3d(2, 3, kernel_size=(2, 2, 2), stride=(1, 1, 1), "
        "padding=(0, 0, 0), dilation=1, output_padding=(0, 0, 0), bias=False)"
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.ConvTranspose1d(4, 6, 0), "kernel_size"),
        (lambda: nn.ConvTranspose1d(4, 6, 3, output_padding=-1), "output_padding"),
        (lambda: nn.ConvTranspose2d(4, 6, 3, stride=(1, 0)), "stride"),
        (lambda: nn.ConvTranspose3d(4, 6, (2, 2)), "kernel_size"),
        (lambda: nn.ConvTranspose3d(4, -1, 2), "out_channels"),
    ],
)
def test_conv_transpose_bad_arguments_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_conv_transpose_bad_input_raises_naming_the_shapes():
    with pytest.raises(ValueError, match=r"conv_transpose1d.*\(2, 5, 3\)"):
        nn.ConvTranspose1d(4, 6, 3)(kc.ones((2, 5, 3)))


def test_conv_transpose2d_gradients_match_finite_differences(rng):
    layer = nn.ConvTranspose2d(2, 2, (2, 3), stride=(2, 1), padding=(1, 0), output_padding=(1, 0))
    x = rng.standard_normal((2, 3, 3, 2))
    check_parameter_grads(layer, lambda y: (y * y).sum(), f64(x))
    check_input_grad(lambda v: (layer(v) ** 2).sum(), x)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_conv_transpose_matches_mlx(rng, case):
    mx, mnn = mlx()
    cls, args, spatial = case
    ours, theirs = cls(**args), getattr(mnn, cls.__name__)(**args)
    assert repr(ours) == repr(theirs)
    share_weights(rng, ours, theirs)
    x = rng.standard_normal((2, *spatial, args["in_channels"])).astype(np.float32)
    assert_close(ours(kc.array(x)), np.array(theirs(mx.array(x))))


def test_conv_transpose_init_draws_as_mlx():
    mx, mnn = mlx()
    kc.random.seed(4)
    mx.random.seed(4)
    ours, theirs = nn.ConvTranspose2d(3, 5, (2, 3)), mnn.ConvTranspose2d(3, 5, (2, 3))
    assert np.array_equal(np.array(ours.weight), np.array(theirs.weight))


def test_signatures_match_mlx():
    assert_same_signatures(
        ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
    )
