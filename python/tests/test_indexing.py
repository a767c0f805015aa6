import numpy as np
import pytest

import kiln.core as kc
from conftest import check, rand

INDICES = [
    0,
    None,
    -1,
    (1, 2),
    slice(1, 3),
    slice(None, None, -1),
    slice(None, None, -2),
    slice(3, 0, -1),
    slice(-2, None),
    (Ellipsis, 1),
    (None, 0),
    (slice(None), None, 2),
    (1, Ellipsis, None),
    (slice(None, None, 2), slice(1, None), 0),
    np.array([0, 2, 1]),
    [3, 0],
    (np.array([[0, 1], [2, 3]]), 1),
    (slice(None), np.array([0, 0, 4])),
    (np.array([0, 1]), slice(None), np.array([1, 2])),
    (np.array([0, 1]), np.array([2, 3])),
    (slice(1, 3), np.array([1, 2]), None),
    (Ellipsis, np.array([-1, 0])),
    (None, np.array([1]), 2, slice(None)),
    (0, slice(None), np.array([1, 0])),
]


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_getitem_matches_numpy(rng, index):
    x = rand(rng, (4, 5, 6))
    a = kc.array(x)
    kidx = (
        tuple(kc.array(i) if isinstance(i, np.ndarray) else i for i in index)
        if isinstance(index, tuple)
        else (kc.array(index) if isinstance(index, np.ndarray) else index)
    )
    check(a[kidx], x[index])
    # and on a transposed view
    x2 = rand(rng, (6, 5, 4))
    xt, at = x2.T, kc.array(x2).T
    check(at[kidx], xt[index])


@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_setitem_matches_numpy(rng, index):
    x = rand(rng, (4, 5, 6))
    a = kc.array(x)
    kidx = (
        tuple(kc.array(i) if isinstance(i, np.ndarray) else i for i in index)
        if isinstance(index, tuple)
        else (kc.array(index) if isinstance(index, np.ndarray) else index)
    )
    shape = x[index].shape
    v = rand(rng, shape)
    x[index] = v
    a[kidx] = kc.array(v)
    check(a, x)
    x[index] = 2.5
    a[kidx] = 2.5
    check(a, x)


def test_setitem_broadcast_and_dtype():
    a = kc.zeros((3, 4), kc.int32)
    a[1] = [1, 2, 3, 4]
    a[:, 0] = 7
    a[2, 1:3] = kc.array([[5, 6]])
    assert a.tolist() == [[7, 0, 0, 0], [7, 2, 3, 4], [7, 5, 6, 0]]
    assert a.dtype == kc.int32


def test_index_errors_are_value_errors_too():
    # MLX raises ValueError for the indices it cannot take, NumPy
    # IndexError: kiln's error is both, as NumPy's AxisError is.
    a = kc.zeros((2, 3))
    for bad in (True, 1.5, "a", (0, 0, 0), 7, kc.array([1.0])):
        with pytest.raises(ValueError) as info:
            a[bad]
        assert isinstance(info.value, IndexError)
        assert isinstance(info.value, kc.IndexError)


def test_out_of_range_int_raises_index_error():
    a = kc.arange(10)
    with pytest.raises(IndexError):
        a[10]
    with pytest.raises(IndexError):
        a[-11]
    with pytest.raises(IndexError):
        a[0, 0]
    with pytest.raises(IndexError):
        a[..., ...]
    b = kc.zeros((2, 3))
    with pytest.raises(IndexError):
        b[:, 3]
    with pytest.raises(IndexError):
        b[kc.array([0]), 5]
    with pytest.raises(IndexError):
        b[2] = 1.0
    assert a[-10].item() == 0 and a[9].item() == 9


def test_bad_index_types():
    a = kc.arange(6)
    with pytest.raises(IndexError):
        a[1.5]
    with pytest.raises(IndexError):
        a["x"]
    with pytest.raises(IndexError):
        a[kc.array([1.0])]
    with pytest.raises(IndexError):
        a[kc.array([True, False, True, False, True, False])]


def test_at_updates_accumulate():
    a = kc.zeros((5,))
    idx = kc.array([0, 1, 1, 3, 3, 3])
    assert a.at[idx].add(1.0).tolist() == [1, 2, 0, 3, 0]
    assert a.tolist() == [0.0] * 5  # functional
    b = kc.ones((5,))
    assert b.at[idx].subtract(1.0).tolist() == [0, -1, 1, -2, 1]
    assert (b * 2).at[idx].multiply(2.0).tolist() == [4, 8, 2, 16, 2]
    assert (b * 8).at[kc.array([2, 2])].divide(2.0).tolist() == [8, 8, 2, 8, 8]
    # None alone indexes a view with a new leading axis (NumPy's a[None] += v).
    assert (b * 3).at[None].add(kc.array([[1.0, 2, 3, 4, 5]])).tolist() == [4, 5, 6, 7, 8]
    c = kc.array([1.0, 5.0, 3.0])
    assert c.at[kc.array([0, 0, 2])].maximum(kc.array([4.0, 2.0, 1.0])).tolist() == [
        4,
        5,
        3,
    ]
    assert c.at[kc.array([1, 1])].minimum(kc.array([4.0, 2.0])).tolist() == [1, 2, 3]
    assert c.at[1:].add(1.0).tolist() == [1, 6, 4]
    m = kc.zeros((3, 4))
    got = m.at[kc.array([0, 0, 2]), 1:3].add(1.0)
    want = np.zeros((3, 4))
    np.add.at(want, (np.array([0, 0, 2]), slice(1, 3)), 1.0)
    check(got, want)


def test_index_zero_size():
    a = kc.zeros((0, 3))
    assert a[:, 1].shape == (0,)
    b = kc.arange(5)
    assert b[3:1].shape == (0,)
    assert b[kc.array([], kc.int32)].shape == (0,)


@pytest.mark.parametrize(
    "shape, mask_ndim", [((7,), 1), ((4, 5), 2), ((4, 5), 1), ((3, 2, 4), 1)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_setitem_boolean_mask_matches_numpy(rng, shape, mask_ndim, dtype):
    a = rand(rng, shape, dtype)
    mask = rng.random(shape[:mask_ndim]) > 0.4
    count = int(mask.sum())
    trailing = shape[mask_ndim:]
    src = rand(rng, (count,) + trailing, dtype)
    want = a.copy()
    want[mask] = src
    x = kc.array(a)
    x[kc.array(mask)] = kc.array(src)
    check(x, want)
    # A scalar and one row broadcast; NumPy bool arrays and lists are masks.
    want = a.copy()
    want[mask] = 3
    x = kc.array(a)
    x[mask] = 3
    check(x, want)
    x = kc.array(a)
    x[mask.tolist()] = kc.array(3, dtype=kc.int32)
    check(x, want)


def test_setitem_boolean_mask_non_contiguous_and_scalar_masks():
    target = kc.arange(10.0)[1::2]
    mask = kc.array([False, True, False, False, True, False, False, True, False, False])[1::2]
    src = kc.arange(-4.0, 0.0)[::2]
    target[mask] = src
    check(target, np.array([-4.0, 3.0, 5.0, -2.0, 9.0]))
    for m in (True, kc.array(True), np.bool_(True)):
        a = kc.zeros((2, 3))
        a[m] = kc.array([1.0, 2.0, 3.0])
        check(a, np.tile([1.0, 2.0, 3.0], (2, 1)))
    a = kc.zeros((0,))
    a[kc.zeros((0,), dtype=kc.bool_)] = kc.zeros((0,))
    assert a.shape == (0,)


def test_setitem_boolean_mask_errors():
    a = kc.zeros((2, 3))
    with pytest.raises(ValueError, match="masked_scatter"):
        a[kc.array([[True, False, True], [False, True, True]])] = kc.zeros((2, 2))
    with pytest.raises(ValueError, match="masked_scatter"):
        a[kc.array([True, False, True])] = 1.0
    with pytest.raises(ValueError, match="masked_scatter"):
        a[np.zeros((1, 2), dtype=bool)] = 1.0


def test_masked_setitem_gradients_and_vmap(rng):
    mask = kc.array([True, False, True, False])
    dst0 = kc.array(rand(rng, (4,)))

    def f(dst, src):
        dst = kc.array(dst)
        dst[mask] = src
        return dst

    src = kc.array(rand(rng, (2,)))
    c = rand(rng, (4,))
    _, (gd, gs) = kc.vjp(f, [dst0, src], [kc.array(c)])
    check(gd, c * np.array([0, 1, 0, 1]))
    check(gs, c[[0, 2]])
    _, (t,) = kc.jvp(lambda s: f(kc.zeros(4), s), [src], [kc.ones(2)])
    check(t, np.array([1.0, 0.0, 1.0, 0.0]))

    # Per-row masks and sources under vmap.
    xs = rand(rng, (3, 5))
    ms = rng.random((3, 5)) > 0.5
    srcs = rand(rng, (3, 5))

    def row(x, m, s):
        x = kc.array(x)
        x[m] = s
        return x

    got = kc.vmap(row)(kc.array(xs), kc.array(ms), kc.array(srcs))
    want = xs.copy()
    for r in range(3):
        want[r][ms[r]] = srcs[r][: ms[r].sum()]
    check(got, want)


def test_masked_setitem_with_too_few_values_repeats_the_last():
    # docs/mlx_compatibility.md, deliberate deviations: MLX raises when it evaluates.
    a = kc.zeros((5,))
    a[kc.array([True, True, False, True, True])] = kc.array([1.0, 2.0])
    check(a, np.array([1.0, 2.0, 0.0, 2.0, 2.0]))
