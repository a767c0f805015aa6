"""Upsample and its functions against float64 NumPy references written as
one interpolation matrix per axis (nearest, linear, cubic with Keys' kernel,
antialiased filters), in every layout and dtype; by hand, errors,
gradients and MLX."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from kiln.nn.layers.upsample import upsample_cubic, upsample_linear, upsample_nearest
from layer_checks import (
    assert_same_signatures,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    check_input_grad,
    mlx,
    random_input,
)


def _positions(n, m, scale, align_corners):
    i = np.arange(m, dtype=np.float64)
    if align_corners:
        return i * (n - 1) / max(m - 1, 1)
    # The output grid centred on the input grid, spaced 1 / scale apart.
    return (n - 1) / 2 + (i - (m - 1) / 2) / scale


def _keys(d, a):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def interpolation_matrix(n, scale, mode, align_corners=False, antialias=False):
    """The (m, n) matrix taking an axis of n inputs to its m outputs."""
    m = int(scale * n)
    A = np.zeros((m, n))
    if mode == "nearest":
        for i in range(m):
            if m > n:
                j = round((i + 0.5) * n / m - 0.5)  # half to even
            else:
                j = math.floor(i * n / m)
            A[i, j] = 1
        return A
    src = _positions(n, m, scale, align_corners)
    if antialias:
        stretch = max(1.0, 1 / scale)
        kernel = (lambda d: max(0.0, 1 - d)) if mode == "linear" else (lambda d: _keys(d, -0.5))
        for i in range(m):
            for j in range(n):
                A[i, j] = kernel(abs(src[i] - j) / stretch)
            A[i] /= A[i].sum()
        return A
    for i in range(m):
        if mode == "linear":
            s = min(max(src[i], 0), n - 1)
            lo = math.floor(s)
            A[i, lo] += 1 - (s - lo)
            A[i, min(lo + 1, n - 1)] += s - lo
        else:
            lo = math.floor(src[i])
            for j in range(lo - 1, lo + 3):
                # Beyond the borders the border value repeats.
                A[i, min(max(j, 0), n - 1)] += _keys(src[i] - j, -0.75)
    return A


def resample_reference(x, scales, mode, align_corners=False, antialias=False):
    for axis, s in enumerate(scales, start=1):
        A = interpolation_matrix(x.shape[axis], s, mode, align_corners, antialias)
        x = np.moveaxis(np.tensordot(A, np.moveaxis(x, axis, 0), axes=1), 0, axis)
    return x


CASES = [
    # (mode, align_corners, antialias, scale_factor, spatial shape)
    ("nearest", False, False, 2, (5,)),
    ("nearest", False, False, (3, 2), (3, 4)),
    ("nearest", False, False, 1.5, (5, 7)),
    ("nearest", False, False, (0.5, 1.75), (6, 4)),
    ("nearest", False, False, (2.0, 1.0, 3.0), (2, 3, 2)),
    ("linear", False, False, 2, (5,)),
    ("linear", False, False, (1.5, 2.5), (5, 4)),
    ("linear", True, False, (2, 1.5), (4, 5)),
    ("linear", False, False, 0.5, (8, 6)),
    ("linear", True, False, (1.5, 2.0, 0.5), (3, 2, 4)),
    ("linear", False, True, (0.5, 0.75), (8, 8)),
    ("linear", False, True, 2.0, (4,)),
    ("cubic", False, False, 2, (5,)),
    ("cubic", False, False, (1.5, 2.5), (5, 4)),
    ("cubic", True, False, (2, 3), (4, 3)),
    ("cubic", False, False, 0.5, (8, 6)),
    ("cubic", False, True, (0.5, 0.25), (8, 8)),
    ("cubic", False, True, 1.5, (4, 5)),
]
CASE_IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _layer(case):
    mode, align_corners, antialias, scale, _ = case
    return nn.Upsample(scale, mode=mode, align_corners=align_corners, antialias=antialias)


def _expected(case, x64):
    mode, align_corners, antialias, scale, spatial = case
    scales = scale if isinstance(scale, tuple) else (scale,) * len(spatial)
    return resample_reference(x64, scales, mode, align_corners, antialias)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_upsample_matches_reference_in_every_layout(rng, case, layout):
    x, x64 = random_input(rng, (2, *case[4], 3), layout=layout)
    assert_close(_layer(case)(x), _expected(case, x64))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kc.float64])
def test_upsample_in_each_float_dtype(rng, case, dtype):
    x, x64 = random_input(rng, (2, *case[4], 3), dtype=dtype)
    y = _layer(case)(x)
    # Nearest gathers; the others weigh with float32 weights, as MLX.
    if case[0] == "nearest":
        assert y.dtype == dtype
    else:
        assert y.dtype == (kc.float64 if dtype == kc.float64 else kc.float32)
    assert_close(y, _expected(case, x64), dtype if case[0] == "nearest" else kc.float32)


def test_integer_inputs():
    x = kc.arange(1, 5).reshape(1, 2, 2, 1)
    y = nn.Upsample(2)(x)
    assert y.dtype == kc.int32
    assert nn.Upsample(2, "linear")(x).dtype == kc.float32


def test_upsample_by_hand():
    # The examples of MLX's documentation.
    x = kc.arange(1, 5).reshape(1, 2, 2, 1)
    assert nn.Upsample(scale_factor=2, mode="nearest")(x).squeeze().tolist() == [
        [1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4],
    ]
    np.testing.assert_allclose(
        np.array(nn.Upsample(scale_factor=2, mode="linear")(x).squeeze()),
        [[1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5], [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]],
        rtol=1e-6,
    )
    third = 1 / 3
    np.testing.assert_allclose(
        np.array(nn.Upsample(2, "linear", align_corners=True)(x).squeeze()),
        [
            [1, 1 + third, 1 + 2 * third, 2],
            [1 + 2 * third, 2, 2 + third, 2 + 2 * third],
            [2 + third, 2 + 2 * third, 3, 3 + third],
            [3, 3 + third, 3 + 2 * third, 4],
        ],
        rtol=1e-6,
    )
    # Halving with an antialiased triangle: output 0 sits at 0.5 and the
    # triangle, widened to a radius of 2, weighs inputs 0, 1, 2 by 0.75,
    # 0.75, 0.25 (renormalized by 1.75); output 1 at 2.5 weighs 1, 2, 3.
    y = nn.Upsample(0.5, "linear", antialias=True)(kc.array([[[1.0], [3.0], [5.0], [9.0]]]))
    np.testing.assert_allclose(np.array(y).reshape(-1), [17 / 7, 45 / 7], rtol=1e-6)


def test_functions_take_one_scale_per_spatial_axis(rng):
    x = kc.array(rng.standard_normal((1, 4, 3, 2)).astype(np.float32))
    assert upsample_nearest(x, (2, 1)).shape == (1, 8, 3, 2)
    assert upsample_linear(x, (1.5, 2.0), align_corners=True).shape == (1, 6, 6, 2)
    assert upsample_cubic(x, (0.5, 1.0)).shape == (1, 2, 3, 2)
    for fn in (upsample_nearest, upsample_linear, upsample_cubic):
        with pytest.raises(ValueError, match="each spatial dimension"):
            fn(x, (2.0,))


def test_upsample_attributes_and_repr():
    u = nn.Upsample(2)
    assert (u.scale_factor, u.mode, u.align_corners, u.antialias) == (2.0, "nearest", False, False)
    assert repr(u) == "Upsample(scale_factor=2.0, mode='nearest', align_corners=False)"
    u = nn.Upsample((2, 3), "cubic", antialias=True)
    assert u.scale_factor == (2.0, 3.0)
    assert repr(u) == (
        "Upsample(scale_factor=(2.0, 3.0), mode='cubic', align_corners=False, antialias=True)"
    )


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.Upsample(2, mode="area"), "unsupported"),
        (lambda: nn.Upsample(2, antialias=True), "nearest"),
        (lambda: nn.Upsample(2, "linear", align_corners=True, antialias=True), "align_corners"),
        (lambda: nn.Upsample(0), "scale_factor"),
        (lambda: nn.Upsample((2, -1)), "scale_factor"),
        (lambda: nn.Upsample("2"), "scale_factor"),
    ],
)
def test_upsample_bad_arguments_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_upsample_bad_inputs_raise():
    with pytest.raises(ValueError, match="at least 3D"):
        nn.Upsample(2)(kc.ones((4, 3)))
    with pytest.raises(ValueError, match="One scale per spatial dimension"):
        nn.Upsample((2, 2))(kc.ones((1, 4, 3)))
    with pytest.raises(ValueError, match="align_corners"):
        upsample_linear(kc.ones((1, 4, 3)), (2,), align_corners=True, antialias=True)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c[0] != "nearest" or isinstance(c[3], float)][::2],
)
def test_upsample_gradients_match_finite_differences(rng, case):
    layer = _layer(case)
    x = rng.standard_normal((1, *case[4], 2))
    check_input_grad(lambda v: (layer(v) ** 2).sum(), x)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_upsample_matches_mlx(rng, case):
    mx, mnn = mlx()
    mode, align_corners, antialias, scale, spatial = case
    theirs = mnn.Upsample(scale, mode=mode, align_corners=align_corners, antialias=antialias)
    ours = _layer(case)
    assert repr(ours) == repr(theirs)
    x = rng.standard_normal((2, *spatial, 3)).astype(np.float32)
    y, want = ours(kc.array(x)), theirs(mx.array(x))
    assert str(y.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert_close(y, np.array(want))


def test_signatures_match_mlx():
    assert_same_signatures(
        ["Upsample"]
    )


def test_functions_signatures_match_mlx():
    mlx()
    import inspect

    from mlx.nn.layers import upsample as theirs

    for fn in (upsample_nearest, upsample_linear, upsample_cubic):
        mine = [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
        want = [(p.name, p.default) for p in inspect.signature(getattr(theirs, fn.__name__)).parameters.values()]
        assert mine == want, fn.__name__
