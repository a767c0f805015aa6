"""Max and average pooling against a float64 NumPy loop over the output
positions (padding with -inf or 0 first), in every layout and dtype, with
kernel, stride and padding options; integer inputs, errors, gradients and
MLX."""

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
    mlx,
    random_input,
)


def pool_reference(x, kernel, stride, padding, kind):
    """Pool x (N, *S, C) with a loop over the output positions."""
    fill = -np.inf if kind == "max" else 0.0
    x = np.pad(x, [(0, 0)] + [(p, p) for p in padding] + [(0, 0)], constant_values=fill)
    spatial = x.shape[1:-1]
    out_size = [max(0, (s - k) // st + 1) for s, k, st in zip(spatial, kernel, stride)]
    out = np.zeros((x.shape[0], *out_size, x.shape[-1]), dtype=x.dtype)
    axes = tuple(range(1, len(kernel) + 1))
    for pos in np.ndindex(*out_size):
        window = tuple(slice(p * st, p * st + k) for p, st, k in zip(pos, stride, kernel))
        patch = x[(slice(None),) + window]
        out[(slice(None),) + pos] = patch.max(axis=axes) if kind == "max" else patch.mean(axis=axes)
    return out


def _tuple(v, n):
    return (v,) * n if isinstance(v, int) else tuple(v)


KINDS = {
    nn.MaxPool1d: ("max", 1), nn.MaxPool2d: ("max", 2), nn.MaxPool3d: ("max", 3),
    nn.AvgPool1d: ("avg", 1), nn.AvgPool2d: ("avg", 2), nn.AvgPool3d: ("avg", 3),
}

# (kernel_size, stride, padding, input spatial shape) by dimension.
OPTIONS = {
    1: [(2, None, 0, (8,)), (3, 2, 1, (9,)), ((4,), (1,), (2,), (7,)), (3, 1, 0, (3,))],
    2: [(2, None, 0, (6, 5)), ((3, 2), (2, 1), (1, 0), (7, 6)), (3, 3, 1, (5, 8))],
    3: [(2, None, 0, (4, 5, 4)), ((2, 3, 1), (1, 2, 1), (1, 1, 0), (3, 5, 2))],
}
CASES = [
    (cls, *opts) for cls, (_, n) in KINDS.items() for opts in OPTIONS[n]
]
CASE_IDS = [f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]


def _expected(case, x64):
    cls, kernel, stride, padding, _ = case
    kind, n = KINDS[cls]
    kernel = _tuple(kernel, n)
    stride = kernel if stride is None else _tuple(stride, n)
    return pool_reference(x64, kernel, stride, _tuple(padding, n), kind)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pooling_matches_reference_in_every_layout(rng, case, layout):
    cls, kernel, stride, padding, spatial = case
    pool = cls(kernel, stride, padding) if stride is not None else cls(kernel, padding=padding)
    x, x64 = random_input(rng, (2, *spatial, 3), layout=layout)
    assert_close(pool(x), _expected(case, x64))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + [kc.float64])
def test_pooling_keeps_each_float_dtype(rng, case, dtype):
    cls, kernel, stride, padding, spatial = case
    x, x64 = random_input(rng, (2, *spatial, 3), dtype=dtype)
    y = cls(kernel, stride, padding)(x)
    assert y.dtype == dtype
    assert_close(y, _expected(case, x64), dtype)


def test_integer_inputs():
    x = np.arange(2 * 7 * 3, dtype=np.int32).reshape(2, 7, 3) % 11 - 5
    y = nn.MaxPool1d(3, 2, 1)(kc.array(x))
    assert y.dtype == kc.int32
    np.testing.assert_array_equal(np.array(y), pool_reference(x.astype(np.float64), (3,), (2,), (1,), "max"))
    y = nn.AvgPool1d(3, 2, 1)(kc.array(x))
    assert y.dtype == kc.float32
    assert_close(y, pool_reference(x.astype(np.float64), (3,), (2,), (1,), "avg"))


def test_pooling_by_hand():
    x = kc.array([[[1.0], [5.0], [2.0], [-3.0], [4.0]]])
    assert nn.MaxPool1d(2)(x).reshape(-1).tolist() == [5, 2]
    # Padding with -inf never wins a max; zeros do count in an average.
    assert nn.MaxPool1d(2, padding=1)(x).reshape(-1).tolist() == [1, 5, 4]
    assert nn.AvgPool1d(3, 2, padding=1)(x).reshape(-1).tolist() == pytest.approx([2, 4 / 3, 1 / 3])


def test_pooling_defaults_and_repr():
    p = nn.MaxPool2d((2, 3))
    assert repr(p) == "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=(0, 0))"
    assert repr(nn.AvgPool1d(2, 1, 1)) == "AvgPool1d(kernel_size=(2,), stride=(1,), padding=(1,))"
    assert repr(nn.AvgPool3d(2, stride=(1, 2, 1))) == (
        "AvgPool3d(kernel_size=(2, 2, 2), stride=(1, 2, 1), padding=(0, 0, 0))"
    )
    assert nn.MaxPool1d(2).parameters() == {}


def test_window_longer_than_the_input_gives_no_positions():
    assert nn.MaxPool1d(9)(kc.ones((2, 7, 3))).shape == (2, 0, 3)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.MaxPool1d(0), "kernel_size"),
        (lambda: nn.MaxPool1d((2, 2)), "kernel_size"),
        (lambda: nn.AvgPool2d(2, stride=0), "stride"),
        (lambda: nn.AvgPool2d(2, padding=-1), "padding"),
        (lambda: nn.MaxPool3d((2, 2)), "kernel_size"),
    ],
)
def test_pooling_bad_arguments_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_pooling_input_of_the_wrong_rank_raises():
    with pytest.raises(ValueError, match=r"MaxPool2d.*\(2, 7, 3\)"):
        nn.MaxPool2d(2)(kc.ones((2, 7, 3)))
    with pytest.raises(ValueError, match=r"AvgPool1d.*\(7, 3\)"):
        nn.AvgPool1d(2)(kc.ones((7, 3)))


def test_pooling_gradients_match_finite_differences(rng):
    # Random inputs have no ties, so max pooling is differentiable there.
    x = rng.standard_normal((2, 5, 6, 2))
    check_input_grad(lambda v: (nn.MaxPool2d((3, 2), (2, 1), (1, 0))(v) ** 2).sum(), x)
    check_input_grad(lambda v: (nn.AvgPool2d(2, 1, 1)(v) ** 2).sum(), x)
    x = rng.standard_normal((1, 4, 3, 4, 2))
    check_input_grad(lambda v: kc.sin(nn.AvgPool3d(2, 1)(v)).sum(), x)
    # Windows that tile the input (the default stride), with a remainder
    # dropped along one axis: a reshape, not a strided view.
    x = rng.standard_normal((2, 6, 5, 2))
    check_input_grad(lambda v: (nn.MaxPool2d(2)(v) ** 2).sum(), x)
    check_input_grad(lambda v: kc.sin(nn.AvgPool2d((3, 2))(v)).sum(), x)
    x = rng.standard_normal((1, 4, 5, 4, 2))
    check_input_grad(lambda v: (nn.MaxPool3d(2, padding=1)(v) ** 2).sum(), x)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_pooling_matches_mlx(rng, case):
    mx, mnn = mlx()
    cls, kernel, stride, padding, spatial = case
    ours, theirs = cls(kernel, stride, padding), getattr(mnn, cls.__name__)(kernel, stride, padding)
    assert repr(ours) == repr(theirs)
    x = rng.standard_normal((2, *spatial, 3)).astype(np.float32)
    assert_close(ours(kc.array(x)), np.array(theirs(mx.array(x))))


def test_signatures_match_mlx():
    assert_same_signatures(
        ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"]
    )
