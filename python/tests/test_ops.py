import numpy as np
import pytest

import kiln.core as kc
from conftest import check, rand

UNARY = {
    "abs": np.abs,
    "negative": np.negative,
    "square": np.square,
    "exp": np.exp,
    "log": lambda x: np.log(np.abs(x) + 0.5),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sqrt": lambda x: np.sqrt(np.abs(x)),
    "floor": np.floor,
    "ceil": np.ceil,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "arctan": np.arctan,
    "expm1": np.expm1,
    "sign": np.sign,
}

PRE = {"log": lambda a: kc.abs(a) + 0.5, "sqrt": kc.abs}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "broadcast"])
def test_unary(rng, name, layout):
    x = rand(rng, (4, 6))
    a = kc.array(x)
    if layout == "transposed":
        x, a = x.T, a.T
    elif layout == "sliced":
        x, a = x[1:, ::-2], a[1:, ::-2]
    elif layout == "broadcast":
        x, a = np.broadcast_to(x[:1], (3, 6)), kc.broadcast_to(a[:1], (3, 6))
    f = getattr(kc, name)
    got = f(PRE[name](a)) if name in PRE else f(a)
    check(got, UNARY[name](x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.int32, np.uint8])
def test_binary_arith_dtypes(rng, dtype):
    x = rand(rng, (3, 4), dtype, lo=1, hi=5)
    y = rand(rng, (4,), dtype, lo=1, hi=5)
    a, b = kc.array(x), kc.array(y)
    tol = 1e-2 if dtype == np.float16 else 1e-6
    check(a + b, x + y, rtol=tol)
    check(a * b, x * y, rtol=tol)
    check(kc.maximum(a, b), np.maximum(x, y))
    check(a == b, x == y)
    check(a < b, x < y)
    if dtype != np.uint8:
        check(a - b, x - y, rtol=tol)


def test_operators_reflected_and_weak_scalars(rng):
    x = rand(rng, (2, 3))
    a = kc.array(x)
    check(2 + a, 2 + x)
    check(2 - a, 2 - x)
    check(2 * a, 2 * x)
    check(1 / (kc.abs(a) + 1), 1 / (np.abs(x) + 1))
    check(a**2, x**2, rtol=1e-5)
    check(2**a, 2**x, rtol=1e-5)
    check(-a, -x)
    check(abs(a), np.abs(x))
    check(a @ a.T, x @ x.T, rtol=1e-5)
    i = kc.array([5, 7, -3])
    check(i // 2, np.array([5, 7, -3]) // 2)
    check(i % 3, np.array([5, 7, -3]) % 3)
    check(i & 3, np.array([5, 7, -3]) & 3)
    check(i | 8, np.array([5, 7, -3]) | 8)
    check(i ^ 1, np.array([5, 7, -3]) ^ 1)
    check(i << 1, np.array([5, 7, -3]) << 1)
    check(~i, ~np.array([5, 7, -3]))
    check(~kc.array([True, False]), [False, True])


def test_weak_typing_rules():
    i32 = kc.array([1, 2], kc.int32)
    f16 = kc.array([1, 2], kc.float16)
    u8 = kc.array([1, 2], kc.uint8)
    b = kc.array([True, False])
    assert (i32 + 1.5).dtype == kc.float32
    assert (i32 + 1).dtype == kc.int32
    assert (f16 + 1).dtype == kc.float16
    assert (f16 + 1.5).dtype == kc.float16
    assert (u8 + 1).dtype == kc.uint8
    assert (b + 1).dtype == kc.int32
    assert (b + 1.0).dtype == kc.float32
    assert (i32 + True).dtype == kc.int32
    assert (i32 + 1j).dtype == kc.complex64
    assert (1 + u8).dtype == kc.uint8
    assert (i32 / 2).dtype == kc.float32
    with pytest.raises(ValueError, match="overflow"):
        u8 + 300
    with pytest.raises(ValueError, match="overflow"):
        u8 + (-1)
    assert kc.add(1, 2).dtype == kc.int32
    assert kc.add(1, 2.0).dtype == kc.float32


def test_inplace_operators_rebind():
    a = kc.array([1.0, 2.0])
    b = a
    a += 1
    assert a is b
    assert a.tolist() == [2.0, 3.0]
    i = kc.array([1, 2])
    i *= 3
    assert i.tolist() == [3, 6] and i.dtype == kc.int32


def test_where_clip_isclose(rng):
    x = rand(rng, (3, 4))
    a = kc.array(x)
    check(kc.where(a > 0, a, 0.0), np.where(x > 0, x, 0.0))
    check(kc.clip(a, -1, 1), np.clip(x, -1, 1))
    check(kc.clip(a, None, 0.5), np.minimum(x, 0.5))
    assert kc.allclose(a, a + 1e-7).item()
    assert not kc.array_equal(a, a + 1).item()
    check(kc.isclose(a, a), np.ones((3, 4), bool))
    q, r = kc.divmod(kc.array([7, -7]), 3)
    assert isinstance(kc.divmod(kc.array([1]), 1), list)  # as MLX returns
    assert q.tolist() == [2, -3] and r.tolist() == [1, 2]


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), [1, 2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(rng, name, axis, keepdims):
    x = rand(rng, (3, 4, 5), lo=0.5, hi=1.5)
    a = kc.array(x)
    ax = tuple(axis) if isinstance(axis, list) else axis
    want = getattr(np, name)(x, axis=ax, keepdims=keepdims)
    got = getattr(kc, name)(a, axis=axis, keepdims=keepdims)
    check(got, want, rtol=1e-4)
    got_t = getattr(kc, name)(kc.array(x.T).T, axis=axis, keepdims=keepdims)
    check(got_t, want, rtol=1e-4)


def test_other_reductions(rng):
    x = rand(rng, (4, 5))
    a = kc.array(x)
    check(kc.var(a, axis=1, ddof=1), x.var(1, ddof=1), rtol=1e-4)
    check(kc.std(a), x.std(), rtol=1e-4)
    check(kc.logsumexp(a, axis=0), np.log(np.exp(x).sum(0)), rtol=1e-5)
    assert kc.argmax(a, axis=1).tolist() == x.argmax(1).tolist()
    assert kc.argmin(a).item() == x.argmin()
    check(kc.all(a > -3), True)
    check(kc.any(a > 100), False)
    check(kc.cumsum(a, axis=0), np.cumsum(x, 0), rtol=1e-5)
    check(kc.cumsum(a), np.cumsum(x), rtol=1e-5)
    check(
        kc.cumprod(a, axis=1, reverse=True),
        np.cumprod(x[:, ::-1], 1)[:, ::-1],
        rtol=1e-5,
    )
    check(kc.cummax(a, axis=1), np.maximum.accumulate(x, 1))
    e = np.exp(x - x.max(-1, keepdims=True))
    check(kc.softmax(a, axis=-1), e / e.sum(-1, keepdims=True), rtol=1e-5)
    check(kc.sort(a, axis=0), np.sort(x, 0))
    check(kc.sort(a, axis=None), np.sort(x, None))
    assert kc.argsort(a).tolist() == np.argsort(x, kind="stable").tolist()
    t = kc.topk(a, 2, axis=1)
    check(kc.sort(t, axis=1), np.sort(x, 1)[:, -2:])
    p = np.array(kc.partition(a, 2, axis=1))
    check(p[:, 2], np.sort(x, 1)[:, 2])


def test_zero_size_and_0d():
    z = kc.zeros((0, 3))
    assert kc.sum(z, axis=0).tolist() == [0.0, 0.0, 0.0]
    assert (z + 1).shape == (0, 3)
    s = kc.array(2.0)
    assert (s * 3).item() == 6.0 and kc.exp(s).shape == ()


def test_shape_ops(rng):
    x = rand(rng, (2, 3, 4))
    a = kc.array(x)
    check(kc.reshape(a, (4, -1)), x.reshape(4, -1))
    check(kc.flatten(a, 1), x.reshape(2, 12))
    check(kc.unflatten(a, 2, (2, 2)), x.reshape(2, 3, 2, 2))
    check(kc.transpose(a, (2, 0, 1)), x.transpose(2, 0, 1))
    check(kc.swapaxes(a, 0, 2), x.swapaxes(0, 2))
    check(kc.moveaxis(a, 0, -1), np.moveaxis(x, 0, -1))
    check(kc.expand_dims(a, (0, 2)), np.expand_dims(x, (0, 2)))
    check(kc.squeeze(kc.expand_dims(a, 1)), x)
    check(kc.broadcast_to(kc.array(x[0, 0]), (5, 4)), np.broadcast_to(x[0, 0], (5, 4)))
    b1, b2 = kc.broadcast_arrays(kc.array([1, 2]), kc.array([[1], [2]]))
    assert b1.shape == b2.shape == (2, 2)
    assert kc.broadcast_shapes((2, 1), (3,)) == (2, 3)
    check(kc.concatenate([a, a], axis=1), np.concatenate([x, x], 1))
    check(kc.concatenate([a, a], axis=None), np.concatenate([x.ravel(), x.ravel()]))
    check(kc.stack([a, a], axis=-1), np.stack([x, x], -1))
    parts = kc.split(a, [1, 3], axis=2)
    for g, w in zip(parts, np.split(x, [1, 3], axis=2)):
        check(g, w)
    check(kc.repeat(a, 2, axis=1), np.repeat(x, 2, 1))
    check(kc.tile(a, (1, 2, 1)), np.tile(x, (1, 2, 1)))
    check(kc.pad(a, 1), np.pad(x, 1))
    check(
        kc.pad(a, [(0, 1), (1, 0), (2, 2)], constant_values=3.0),
        np.pad(x, [(0, 1), (1, 0), (2, 2)], constant_values=3.0),
    )
    check(kc.pad(a, (1, 2), mode="edge"), np.pad(x, (1, 2), mode="edge"))
    check(kc.atleast_2d(kc.array([1, 2])), np.atleast_2d([1, 2]))
    check(kc.atleast_3d(kc.array([1, 2])), np.atleast_3d([1, 2]))
    v = kc.view(kc.array([1.0], kc.float32), kc.uint32)
    assert v.item() == np.array([1.0], np.float32).view(np.uint32)[0]
    check(
        kc.as_strided(kc.arange(6), (2, 2), (1, 2)),
        np.lib.stride_tricks.as_strided(np.arange(6), (2, 2), (8, 16)),
    )


def test_creation():
    assert kc.zeros((2, 3)).tolist() == [[0.0] * 3] * 2
    assert kc.ones(3, dtype=kc.int32).tolist() == [1, 1, 1]
    assert kc.full((2,), 7).dtype == kc.int32
    assert kc.full((2, 2), 2.5).tolist() == [[2.5, 2.5], [2.5, 2.5]]
    assert kc.arange(5).tolist() == list(range(5))
    assert kc.arange(5).dtype == kc.int32
    assert kc.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert kc.arange(0.0, 1.0, 0.25).dtype == kc.float32
    check(kc.linspace(0, 1, 5), np.linspace(0, 1, 5))
    check(kc.eye(3, 4, k=1), np.eye(3, 4, k=1))
    check(kc.identity(2), np.eye(2))
    check(kc.tri(3, k=-1), np.tri(3, k=-1))
    x = np.arange(9.0).reshape(3, 3)
    check(kc.tril(kc.array(x)), np.tril(x))
    check(kc.triu(kc.array(x), 1), np.triu(x, 1))
    assert kc.zeros_like(kc.array([1, 2])).tolist() == [0, 0]
    assert kc.ones_like(kc.array([1.5])).tolist() == [1.0]
    assert kc.full_like(kc.array([1, 2]), 9).tolist() == [9, 9]
    assert kc.empty((2, 3)).shape == (2, 3)
    assert kc.empty_like(kc.array([1, 2])).dtype == kc.int32


def test_take_ops(rng):
    x = rand(rng, (4, 5))
    a = kc.array(x)
    idx = np.array([[0, 3], [2, 1]])
    check(kc.take(a, kc.array(idx), axis=1), np.take(x, idx, axis=1))
    check(kc.take(a, kc.array(idx)), np.take(x, idx))
    check(kc.take(a, 2, axis=0), x[2])
    ti = np.argsort(x, axis=1)
    check(kc.take_along_axis(a, kc.array(ti), axis=1), np.take_along_axis(x, ti, 1))
    y = x.copy()
    np.put_along_axis(y, ti[:, :1], 0.0, 1)
    check(kc.put_along_axis(a, kc.array(ti[:, :1]), 0.0, axis=1), y)


def test_matmul_family(rng):
    x = rand(rng, (2, 3, 4))
    y = rand(rng, (4, 5))
    a, b = kc.array(x), kc.array(y)
    check(kc.matmul(a, b), x @ y, rtol=1e-5)
    c = rand(rng, (5,))
    check(
        kc.addmm(kc.array(c), a[0], b, alpha=2.0, beta=0.5),
        2 * x[0] @ y + 0.5 * c,
        rtol=1e-5,
    )
    check(kc.inner(a, a), np.inner(x, x), rtol=1e-5)
    check(kc.outer(b[0], b[1]), np.outer(y[0], y[1]), rtol=1e-5)
    check(kc.tensordot(a, b, axes=1), np.tensordot(x, y, axes=1), rtol=1e-5)
    check(
        kc.tensordot(a, a, axes=([1, 2], [1, 2])),
        np.tensordot(x, x, axes=([1, 2], [1, 2])),
        rtol=1e-5,
    )
    check(kc.einsum("bij,jk->bik", a, b), np.einsum("bij,jk->bik", x, y), rtol=1e-5)


def test_conv(rng):
    x = rand(rng, (1, 8, 3))
    w = rand(rng, (2, 3, 3))
    got = kc.conv1d(kc.array(x), kc.array(w), padding=1)
    xp = np.pad(x, ((0, 0), (1, 1), (0, 0)))
    want = np.stack(
        [np.einsum("lkc,okc->lo", np.stack([xp[0, i : i + 3] for i in range(8)]), w)]
    )
    check(got, want, rtol=1e-4, atol=1e-5)
    x2 = rand(rng, (1, 5, 5, 2))
    w2 = rand(rng, (3, 3, 3, 2))
    out = kc.conv2d(kc.array(x2), kc.array(w2), stride=(2, 2), padding=1)
    assert out.shape == (1, 3, 3, 3)
    assert kc.conv_general(
        kc.array(x2), kc.array(w2), padding=([1, 1], [1, 1])
    ).shape == (1, 5, 5, 3)


def test_arange_overloads_dtypes_and_integer_steps():
    # Overloads as MLX's: arange(stop), arange(start, stop[, step]),
    # arange(stop=..., step=...); a start alone by keyword is an error.
    assert kc.arange(-3, step=-1).tolist() == [0, -1, -2]
    assert kc.arange(-3, None, -1).tolist() == [0, -1, -2]
    assert kc.arange(stop=2, step=0.5).tolist() == [0, 0.5, 1.0, 1.5]
    assert kc.arange(stop=3).tolist() == [0, 1, 2]
    with pytest.raises(TypeError):
        kc.arange(start=1, step=2)
    # int64 when a value does not fit in int32, whatever the size.
    big = 2**40
    for args, dt in (((5,), kc.int32), ((big, big + 3), kc.int64),
                     ((-(2**31), -(2**31) + 2), kc.int32),
                     ((-(2**31) - 1, 0, 2**30), kc.int64),
                     ((0, 2, big), kc.int64), ((0.5, big, 2**39), kc.float32)):
        a = kc.arange(*args)
        assert a.dtype == dt, args
        np.testing.assert_array_equal(np.array(a), np.arange(*args).astype(np.array(a).dtype))
    # An integer dtype steps by dtype(start + step) - dtype(start) (NumPy).
    for args in ((0, 3, 0.2), (-1, -4, -0.9), (-1, -20, -1.2), (2.7, 9.1, 1.6)):
        for dt, npdt in ((kc.int32, np.int32), (kc.int64, np.int64), (kc.uint8, np.uint8)):
            if dt == kc.uint8 and args[0] < 0:
                continue
            np.testing.assert_array_equal(
                np.array(kc.arange(*args, dtype=dt)), np.arange(*args, dtype=npdt)
            )
    # An explicit int32 past its range wraps.
    n = 2**31 - 1
    assert kc.arange(n - 1, n + 3, dtype=kc.int32).tolist() == [n - 1, n, -(2**31), -(2**31) + 1]
    # An infinite step gives the start, or nothing.
    assert kc.arange(0, 10, float("inf")).tolist() == [0]
    assert kc.arange(0, -10, float("-inf")).tolist() == [0]
    assert kc.arange(10, 0, float("inf")).tolist() == []
    for bad in ((0, float("inf"), 1), (float("nan"), 1, 1), (0, 2, float("nan")), (0, 5, 0), (0, 2**40)):
        with pytest.raises(ValueError, match="arange"):
            kc.arange(*bad)


def test_infinities_of_complex_values_and_isclose():
    inf = float("inf")
    z = kc.array([complex(0, inf), complex(inf, 0), complex(-inf, 0), 3 + 4j])
    zn = np.array(z)
    np.testing.assert_array_equal(np.array(kc.isinf(z)), np.isinf(zn))
    np.testing.assert_array_equal(np.array(kc.isfinite(z)), np.isfinite(zn))
    assert kc.isposinf(z).tolist() == [False, True, False, False]
    assert kc.isneginf(z).tolist() == [False, False, True, False]
    a = np.array([inf, inf, -inf, 1.0, inf, 1e30], np.float32)
    b = np.array([inf, -inf, -inf, inf, 1.0, 1.1e30], np.float32)
    for dt in (kc.float32, kc.complex64):
        got = kc.isclose(kc.array(a).astype(dt), kc.array(b).astype(dt))
        np.testing.assert_array_equal(np.array(got), np.isclose(a, b))


def test_round_integers_to_negative_decimals(rng):
    x = rng.integers(-10**6, 10**6, size=(4, 5)).astype(np.int32)
    x[0, :3] = [15, 25, -35]  # halves go to even
    for dt, npdt in ((kc.int32, np.int32), (kc.int64, np.int64)):
        xs = kc.array(x.astype(npdt))[:, ::-1]
        for d in (-1, -2, -3, 0, 2):
            got = kc.round(xs, decimals=d)
            assert got.dtype == dt
            np.testing.assert_array_equal(np.array(got), np.round(x.astype(npdt)[:, ::-1], d))


def test_roll_shifts_and_axes_broadcast(rng):
    x = rand(rng, (3, 4))
    for shift in (1, -2, (1, 1), (-1, 2), (33, 33)):
        for axis in (0, 1, (1, 0), (0, 1), (0, 0), (1, 1)):
            check(kc.roll(kc.array(x).T.T, shift, axis), np.roll(x, shift, axis))
    with pytest.raises(ValueError, match="roll"):
        kc.roll(kc.array(x), (1, 2, 3), (0, 1))


def test_kron_vecdot_and_empty_put_along_axis(rng):
    with pytest.raises(ValueError, match="kron"):
        kc.kron(kc.array([]), kc.array([1, 2]))
    a, b = rand(rng, (3, 4)), rand(rng, (4,))
    check(kc.vecdot(kc.array(a), kc.array(b)), np.vecdot(a, b) if hasattr(np, "vecdot") else a @ b, rtol=1e-5)
    for x, y, axis in (((), (1,), -1), ((2,), (2,), 1), ((2,), (1,), -1), ((3, 4), (4,), 0)):
        with pytest.raises(ValueError, match="vecdot"):
            kc.vecdot(kc.zeros(x), kc.zeros(y), axis=axis)
    e = kc.array([], kc.float32)
    assert kc.put_along_axis(e, e, e, axis=None).size == 0
    with pytest.raises(ValueError, match="put_along_axis"):
        kc.put_along_axis(kc.zeros((2,)), kc.zeros((1,)), kc.zeros((1,)), axis=0)


def test_shapes_that_do_not_fit_int32_raise_overflow_error():
    too_big = 2**31
    for call in (lambda: kc.zeros(too_big), lambda: kc.ones([too_big]),
                 lambda: kc.full([2, too_big], 0.0),
                 lambda: kc.reshape(kc.zeros(4), [too_big]),
                 lambda: kc.broadcast_to(kc.zeros(4), [too_big, 1]),
                 lambda: kc.zeros([-(2**31) - 1])):
        with pytest.raises(OverflowError, match="2147483648|2147483649"):
            call()
    big = kc.zeros(2**30)
    with pytest.raises(OverflowError, match=str(3 * 2**30)):
        kc.concatenate([big] * 3)
    with pytest.raises(OverflowError, match=str(2 * 2**30)):
        kc.repeat(big, 2)
    with pytest.raises(OverflowError, match=str(2**32)):
        kc.kron(kc.zeros(2**16), kc.zeros(2**16))
    with pytest.raises(ValueError, match="broadcast_shapes"):
        kc.broadcast_shapes()


def test_integer_power_with_negative_exponents_truncates():
    # docs/mlx_compatibility.md, deliberate deviations: MLX gives 0 for every negative exponent.
    for dt in (kc.int8, kc.int32, kc.int64):
        x = kc.power(kc.array([2, -2, 1, -1, -1], dt), kc.array([-1, -3, -9, -3, -2], dt))
        assert x.tolist() == [0, 0, 1, -1, 1]


def test_searchsorted_maps_over_the_sorted_array(rng):
    # docs/mlx_compatibility.md, deliberate deviations: MLX's vmap raises here.
    s = np.sort(rand(rng, (3, 6)), axis=1)
    v = rand(rng, (2,))
    got = kc.vmap(lambda r: kc.searchsorted(r, kc.array(v)))(kc.array(s))
    np.testing.assert_array_equal(np.array(got), np.stack([np.searchsorted(r, v) for r in s]))


def test_conv1d_takes_inputs_of_more_spatial_axes_as_mlx():
    # MLX's conv1d is conv_general with one value per parameter: a 2-d
    # input and weight of the same rank take each parameter on both axes.
    rng = np.random.default_rng(0)
    x = kc.array(rng.standard_normal((1, 6, 6, 4)).astype(np.float32))
    w = kc.array(rng.standard_normal((2, 3, 3, 2)).astype(np.float32))
    got = kc.conv1d(x, w, stride=2, padding=1, groups=2)
    want = kc.conv2d(x, w, stride=(2, 2), padding=(1, 1), groups=2)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)
    gx, gw = kc.grad(lambda x, w: kc.conv1d(x, w, groups=2).sum(), argnums=(0, 1))(x, w)
    ex, ew = kc.grad(lambda x, w: kc.conv2d(x, w, groups=2).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(np.array(gx), np.array(ex), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(gw), np.array(ew), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="conv1d"):
        kc.conv1d(x, kc.zeros((2, 3, 2)))  # ranks that disagree still raise
