"""The array functions completing mlx.core's API (flip, roll, diagonal,
diag, trace, kron, meshgrid, unstack, diff, median, minmax, searchsorted,
unique, degrees, radians, trunc, nan_to_num, count_nonzero, cumulative
sums and products, logcumsumexp, vecdot, complex parts) against NumPy on
random and non-contiguous inputs, with bad arguments and against mlx."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, needs_mlx, rand

DTYPES = [np.bool_, np.int8, np.uint16, np.int64, np.float16, np.float32]


def layouts(rng, dtype, shape=(3, 4, 5)):
    """(numpy, kiln) pairs: contiguous, transposed and strided-sliced."""
    base = rand(rng, shape, dtype, lo=-9, hi=9)
    wide = rand(rng, (shape[0] * 2,) + shape[1:], dtype, lo=-9, hi=9)
    out = [(base, kc.array(base))]
    t = rand(rng, shape[::-1], dtype, lo=-9, hi=9)
    out.append((t.T, kc.array(t).T))
    out.append((wide[::-2], kc.array(wide)[::-2]))
    return out


def np_of(a):
    if a.dtype == kc.bfloat16:
        a = a.astype(kc.float32)
    return np.array(a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_roll_diagonal(rng, dtype):
    for n, k in layouts(rng, dtype):
        check(kc.flip(k), np.flip(n))
        check(kc.flip(k, axis=(0, 2)), np.flip(n, axis=(0, 2)))
        check(kc.flip(k, 1), np.flip(n, 1))
        check(kc.roll(k, 3), np.roll(n, 3))
        check(kc.roll(k, -2, 1), np.roll(n, -2, 1))
        check(kc.roll(k, (1, 7), (0, 2)), np.roll(n, (1, 7), (0, 2)))
        check(kc.roll(k, 2, (0, 1)), np.roll(n, 2, (0, 1)))
        for off in (0, 2, -1, -4, 9):
            for a1, a2 in ((0, 1), (2, 0), (1, -1)):
                check(kc.diagonal(k, off, a1, a2), np.diagonal(n, off, a1, a2))
                if dtype not in (np.bool_, np.float16):
                    want = np.trace(n, off, a1, a2)
                    check(kc.trace(k, off, a1, a2), want, rtol=1e-5, atol=1e-4)
        check(k.diagonal(1), np.diagonal(n, 1))
        check(kc.diag(k[0]), np.diag(n[0]))
        check(kc.diag(k[0], k=-2), np.diag(n[0], k=-2))
        check(kc.diag(k[0, :, 1], k=1), np.diag(n[0, :, 1], k=1))
        check(k[1].diag(-1), np.diag(n[1], -1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unstack_diff_kron_meshgrid(rng, dtype):
    for n, k in layouts(rng, dtype):
        parts = kc.unstack(k, axis=1)
        assert isinstance(parts, tuple) and len(parts) == n.shape[1]
        for j, p in enumerate(parts):
            check(p, n[:, j])
        if dtype != np.uint16:  # numpy widens nothing either; skip wrap-around
            for order in (0, 1, 2, 7):
                want = np.diff(n, order, axis=0)
                if dtype == np.float16:
                    want = n.astype(np.float16)
                    for _ in range(order):
                        want = np.diff(want, axis=0)
                check(kc.diff(k, order, axis=0), want)
            check(kc.diff(k), np.diff(n))
    a = rand(rng, (2, 3), dtype)
    b = rand(rng, (3, 1, 2), dtype)
    if dtype != np.bool_:
        check(kc.kron(kc.array(a).T, kc.array(b)), np.kron(a.T, b), rtol=1e-3)
    x, y, z = (rand(rng, (m,), dtype) for m in (3, 4, 2))
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            got = kc.meshgrid(
                kc.array(x), kc.array(y), kc.array(z), sparse=sparse, indexing=indexing
            )
            want = np.meshgrid(x, y, z, sparse=sparse, indexing=indexing)
            for g, w in zip(got, want):
                check(g, w)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float16, np.float32])
def test_median_minmax_count_nonzero(rng, dtype):
    tol = 2e-3 if dtype == np.float16 else 1e-6
    for n, k in layouts(rng, dtype):
        for axis in (None, 0, -1, (0, 2)):
            check(
                kc.median(k, axis=axis),
                np.median(n.astype(np.float64), axis=axis),
                tol,
                tol,
            )
            lo, hi = kc.minmax(k, axis=axis, keepdims=True)
            check(lo, np.min(n, axis=axis, keepdims=True))
            check(hi, np.max(n, axis=axis, keepdims=True))
            c = kc.count_nonzero(k, axis=axis)
            assert c.dtype == kc.int32
            check(c, np.count_nonzero(n, axis=axis))
        assert kc.median(k, axis=1, keepdims=True).shape == (n.shape[0], 1, n.shape[2])
    x = np.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0]], np.float32)
    check(kc.median(kc.array(x), axis=1), np.median(x, axis=1))


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int32, np.float16, np.float32, np.float64]
)
def test_searchsorted(rng, dtype):
    seq = np.sort(rand(rng, (30,), dtype, lo=-9, hi=9))
    vals = rand(rng, (4, 6), dtype, lo=-12, hi=12)
    for v_np, v_k in (
        (vals, kc.array(vals)),
        (vals.T, kc.array(vals).T),
        (vals[::2, 1::3], kc.array(vals)[::2, 1::3]),
    ):
        for side in ("left", "right"):
            got = kc.searchsorted(kc.array(seq), v_k, side=side)
            assert got.dtype == kc.uint32
            check(got, np.searchsorted(seq, v_np, side=side))
    check(
        kc.searchsorted(kc.array(seq)[::-1][::-1], kc.array(vals)),
        np.searchsorted(seq, vals),
    )


@pytest.mark.parametrize("dtype", [np.bool_, np.int16, np.uint8, np.float32])
def test_unique(rng, dtype):
    a = rand(rng, (5, 6), dtype, lo=0, hi=4)
    k = kc.array(a).T
    a = a.T
    vals, index, inverse, counts = np.unique(
        a, return_index=True, return_inverse=True, return_counts=True
    )
    m = vals.size
    for size in (m, m + 3, max(m - 1, 0)):
        v, i, inv, c = kc.unique(k, size, True, True, True)
        keep = min(size, m)
        check(v[:keep], vals[:keep])
        check(i[:keep], index[:keep])
        check(c[:keep], counts[:keep])
        check(c[keep:], np.zeros(size - keep))
        check(v[keep:], np.full(size - keep, vals[0]))
        check(inv, np.minimum(inverse.reshape(a.shape), max(size - 1, 0)))
        assert (i.dtype, inv.dtype, c.dtype) == (kc.uint32, kc.uint32, kc.int32)
    assert isinstance(kc.unique(k, m), kc.array)
    v, i, inv, c = kc.unique(k, 0, True, True, True)
    assert v.shape == i.shape == c.shape == (0,)
    check(inv, np.zeros(a.shape))
    check(kc.unique(kc.array([3, 1]), 4, fill_value=7), [1, 3, 7, 7])


def complex_ties(rng, n):
    """complex64 values with ties in both parts, -0.0, and a NaN in one part
    of every 7th value."""
    re = np.floor(rng.uniform(-3, 3, n)) / 2
    im = np.floor(rng.uniform(-3, 3, n)) / 2
    im[1::5] = -0.0
    re[3::14] = np.nan
    im[10::14] = np.nan
    z = np.empty(n, np.complex64)
    z.real, z.imag = re, im
    return z


def test_complex_sort_search_unique_against_numpy(rng):
    # Without NaNs NumPy orders complex values as MLX and kiln do.
    z = complex_ties(rng, 40)
    z = z[~np.isnan(z)]
    v = complex_ties(rng, 25)
    v = v[~np.isnan(v)]
    seq = np.sort(z)
    check(kc.sort(kc.array(z)), seq)
    for side in ("left", "right"):
        got = kc.searchsorted(kc.array(seq), kc.array(v), side=side)
        check(got, np.searchsorted(seq, v, side=side))
    # Transposed and sliced values, a reversed-twice sequence.
    grid = v[: (v.size // 4) * 4].reshape(4, -1)
    kg = kc.array(grid)
    kseq = kc.array(seq)[::-1][::-1]
    for n_view, k_view in ((grid.T, kg.T), (grid[::2, 1::2], kg[::2, 1::2])):
        check(kc.searchsorted(kseq, k_view), np.searchsorted(seq, n_view))
    vals, counts = np.unique(z, return_counts=True)
    got, got_counts = kc.unique(kc.array(z), vals.size, return_counts=True)
    check(got, vals)
    check(got_counts, counts)


@needs_mlx
def test_complex_sort_search_unique_against_mlx(rng):
    # With NaN parts: MLX puts such values last, in input order, and a search
    # sees them as equal to one another.
    z = complex_ties(rng, 40)
    v = complex_ties(rng, 25)
    for k, m in ((kc.sort(kc.array(z)), mx.sort(mx.array(z))),
                 (kc.argsort(kc.array(z)), mx.argsort(mx.array(z)))):
        np.testing.assert_array_equal(np.array(k), np.array(m))
    seq = np.array(mx.sort(mx.array(z)))
    for side in ("left", "right"):
        np.testing.assert_array_equal(
            np.array(kc.searchsorted(kc.array(seq), kc.array(v), side=side)),
            np.array(mx.searchsorted(mx.array(seq), mx.array(v), side=side)),
        )
    for k, m in zip(
        kc.unique(kc.array(z), 30, True, True, True),
        mx.unique(mx.array(z), 30, True, True, True),
    ):
        np.testing.assert_array_equal(np.array(k), np.array(m))


def test_elementwise_helpers(rng):
    for dtype in (np.float16, np.float32, np.float64):
        for n, k in layouts(rng, dtype):
            tol = 2e-3 if dtype == np.float16 else 1e-6
            check(kc.trunc(k), np.trunc(n))
            check(kc.degrees(k), np.degrees(n.astype(np.float64)), tol, tol)
            check(kc.radians(k), np.radians(n.astype(np.float64)), tol, tol)
    ints = rand(rng, (6,), np.int8, lo=-9, hi=9)
    check(kc.trunc(kc.array(ints)), ints)
    assert kc.degrees(kc.array(ints)).dtype == kc.float32
    check(kc.degrees(1.0), np.degrees(1.0))
    for dtype in (np.float16, np.float32, np.float64):
        x = np.array([np.nan, np.inf, -np.inf, 1.5], dtype)
        got = kc.nan_to_num(kc.array(x))
        # kiln (as MLX) makes float32 of float64 NumPy input.
        check(got, np.nan_to_num(x.astype(np.array(got).dtype)), rtol=0, atol=0)
        check(
            kc.nan_to_num(kc.array(x), nan=2, posinf=3, neginf=-4),
            np.nan_to_num(x, nan=2, posinf=3, neginf=-4),
        )
    bf = kc.nan_to_num(kc.array([np.inf], kc.bfloat16))
    assert np_of(bf)[0] == pytest.approx(3.38953e38, rel=1e-4)


def test_complex_parts(rng):
    z = (rand(rng, (3, 4)) + 1j * rand(rng, (3, 4))).astype(np.complex64)
    kz = kc.array(z).T
    check(kc.real(kz), z.T.real)
    check(kc.imag(kz), z.T.imag)
    np.testing.assert_array_equal(np.array(kc.conj(kz)), np.conj(z.T))
    np.testing.assert_array_equal(np.array(kz.conj()), np.conj(z.T))
    check(kz.real, z.T.real)
    check(kz.imag, z.T.imag)
    assert kc.real(kz).dtype == kc.float32
    x = rand(rng, (3,))
    check(kc.real(kc.array(x)), x)
    check(kc.imag(kc.array(x)), np.zeros(3))
    # Gradients through real/imag: d/dz of |z|^2 written with the parts.
    g = kc.grad(lambda t: kc.sum(kc.real(t) ** 2 + kc.imag(t) ** 2))(kc.array(z))
    np.testing.assert_allclose(np.array(g), 2 * z, rtol=1e-5)


def test_complex_truth_statistics_and_addmm(rng):
    # As NumPy (and MLX): a complex value is true when either part is
    # nonzero; mean stays complex; var/std are real (|x - mean|^2); addmm
    # takes complex operands.
    z = (rand(rng, (4, 6)) + 1j * rand(rng, (4, 6))).astype(np.complex64)
    z[0, :3] = [0, 2j, 0]
    z[1, :2] = [3, 0]
    for n, k in [(z, kc.array(z)), (z.T.copy().T, kc.array(z.T.copy()).T)]:
        np.testing.assert_array_equal(np.array(k.astype(kc.bool_)), n.astype(bool))
        np.testing.assert_array_equal(np.array(kc.all(k, axis=1)), np.all(n, axis=1))
        np.testing.assert_array_equal(np.array(kc.any(k, axis=0)), np.any(n, axis=0))
        np.testing.assert_allclose(np.array(kc.mean(k, axis=1)), n.mean(axis=1), rtol=1e-5)
        v = kc.var(k, axis=0, ddof=1)
        assert v.dtype == kc.float32
        np.testing.assert_allclose(np.array(v), n.var(axis=0, ddof=1), rtol=1e-5)
        np.testing.assert_allclose(np.array(kc.std(k)), n.std(), rtol=1e-5)
    a = (rand(rng, (3, 5)) + 1j * rand(rng, (3, 5))).astype(np.complex64)
    b = (rand(rng, (5, 2)) + 1j * rand(rng, (5, 2))).astype(np.complex64)
    c = (rand(rng, (2,)) + 1j * rand(rng, (2,))).astype(np.complex64)
    out = kc.addmm(kc.array(c), kc.array(a), kc.array(b), alpha=0.5, beta=2.0)
    np.testing.assert_allclose(np.array(out), 0.5 * (a @ b) + 2.0 * c, rtol=1e-5, atol=1e-6)
    if mx is not None:
        mz = mx.array(z)
        np.testing.assert_array_equal(np.array(kc.all(kc.array(z), axis=1)),
                                      np.array(mx.all(mz, axis=1)))
        np.testing.assert_allclose(np.array(kc.var(kc.array(z))),
                                   np.array(mx.var(mz)), rtol=1e-5)


def test_complex_ordering_and_functions(rng):
    # Complex values order by real part, then imaginary part (NumPy's and
    # MLX's order): sorts, extremes, maximum/minimum, clip, topk, running
    # extremes, softmax's, logaddexp's and logcumsumexp's shifts, median;
    # round, log1p and log2 act on complex values. Real parts drawn from few
    # values, so ties are decided by the imaginary parts.
    re = rng.integers(-2, 3, (5, 7)).astype(np.float32)
    z = (re + 1j * rand(rng, (5, 7))).astype(np.complex64)
    w = (rng.integers(-2, 3, (5, 7)) + 1j * rand(rng, (5, 7))).astype(np.complex64)
    for n, k in [(z, kc.array(z)), (z.T.copy().T, kc.array(z.T.copy()).T)]:
        for axis in (0, 1):
            np.testing.assert_array_equal(np.array(kc.sort(k, axis=axis)), np.sort(n, axis=axis))
            np.testing.assert_array_equal(np.array(kc.argsort(k, axis=axis)),
                                          np.argsort(n, axis=axis, kind="stable"))
            np.testing.assert_array_equal(np.array(kc.argmax(k, axis=axis)), np.argmax(n, axis=axis))
            np.testing.assert_array_equal(np.array(kc.argmin(k, axis=axis)), np.argmin(n, axis=axis))
            np.testing.assert_array_equal(np.array(kc.max(k, axis=axis)), np.max(n, axis=axis))
            np.testing.assert_array_equal(np.array(kc.min(k, axis=axis, keepdims=True)),
                                          np.min(n, axis=axis, keepdims=True))
            top = np.array(kc.topk(k, 2, axis=axis))
            np.testing.assert_array_equal(np.sort(top, axis=axis),
                                          np.take(np.sort(n, axis=axis), [-2, -1], axis=axis))
        np.testing.assert_array_equal(np.array(kc.max(k)), n.max())
        np.testing.assert_array_equal(np.array(kc.argmin(k)), n.argmin())
        kw = kc.array(w)
        for op in ("__lt__", "__le__", "__gt__", "__ge__"):
            np.testing.assert_array_equal(np.array(getattr(k, op)(kw)), getattr(n, op)(w))
        np.testing.assert_array_equal(np.array(kc.maximum(k, kc.array(w))), np.maximum(n, w))
        np.testing.assert_array_equal(np.array(kc.minimum(k, kc.array(w))), np.minimum(n, w))
        np.testing.assert_array_equal(np.array(kc.round(k * 3)), np.round(n * 3))
        np.testing.assert_allclose(np.array(kc.round(k, 1)), np.round(n, 1), atol=1e-6)
        np.testing.assert_allclose(np.array(kc.log1p(k)), np.log1p(n), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.array(kc.log2(k + 5)), np.log2(n + 5), rtol=1e-5)
        # Running extremes, softmax, logaddexp and median in the same order.
        np.testing.assert_array_equal(np.array(kc.cummax(k, axis=1)),
                                      np.maximum.accumulate(n, axis=1))
        np.testing.assert_array_equal(np.array(kc.cummin(k, axis=0, reverse=True)),
                                      np.minimum.accumulate(n[::-1], axis=0)[::-1])
        hi = np.max(n, axis=1, keepdims=True)
        e = np.exp((n - hi).astype(np.complex128))
        np.testing.assert_allclose(np.array(kc.softmax(k, axis=1)),
                                   e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-5)
        big, small = np.maximum(n, w), np.minimum(n, w)
        np.testing.assert_allclose(
            np.array(kc.logaddexp(k, kc.array(w))),
            big + np.log1p(np.exp((small - big).astype(np.complex128))), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.array(kc.median(k, axis=0)), np.median(n, axis=0),
                                   rtol=1e-6)
        # logcumsumexp: running logaddexp (as above) from -inf + 0i.
        run = n.astype(np.complex128).copy()
        for j in range(1, run.shape[1]):
            x, y = run[:, j - 1], run[:, j]
            big, small = np.maximum(x, y), np.minimum(x, y)
            run[:, j] = big + np.log1p(np.exp(small - big))
        np.testing.assert_allclose(np.array(kc.logcumsumexp(k, axis=1)), run,
                                   rtol=1e-4, atol=1e-4)
    # maximum's gradient goes to the winner, ties to the second argument:
    # d|max(z, w)|^2 is 2 z where z wins (MLX's convention dL/dx + i dL/dy).
    wins = (z.real > w.real) | ((z.real == w.real) & (z.imag > w.imag))
    w[0, 0] = z[0, 0]  # a tie
    wins[0, 0] = False
    g = kc.grad(lambda t: kc.sum(kc.abs(kc.maximum(t, kc.array(w))) ** 2))(kc.array(z))
    np.testing.assert_allclose(np.array(g), np.where(wins, 2 * z, 0), rtol=1e-6)
    # A NaN in either part is the extreme, the first one wins (as for reals).
    v = np.array([1 + 1j, complex(0, np.nan), 2 + 0j, complex(np.nan, 0)], np.complex64)
    assert int(np.array(kc.argmax(kc.array(v)))) == 1
    assert int(np.array(kc.argmin(kc.array(v)))) == 1
    if mx is not None:
        mz = mx.array(z)
        np.testing.assert_array_equal(np.array(kc.sort(kc.array(z), axis=1)),
                                      np.array(mx.sort(mz, axis=1)))
        np.testing.assert_array_equal(np.array(kc.clip(kc.array(z), 0, 1)),
                                      np.array(mx.clip(mz, 0, 1)))
        for kw in ({"axis": 1}, {"axis": 0, "reverse": True, "inclusive": False}):
            np.testing.assert_allclose(np.array(kc.logcumsumexp(kc.array(z), **kw)),
                                       np.array(mx.logcumsumexp(mz, **kw)), rtol=1e-5,
                                       atol=1e-5)


def test_scans(rng):
    for n, k in layouts(rng, np.float32):
        for axis in (None, 0, 2):
            for reverse in (False, True):
                for inclusive in (True, False):
                    flat = n.reshape(-1) if axis is None else n
                    ax = 0 if axis is None else axis
                    x = np.flip(flat, ax) if reverse else flat
                    want = np.logaddexp.accumulate(x.astype(np.float64), axis=ax)
                    if not inclusive:
                        pad = [(0, 0)] * x.ndim
                        pad[ax] = (1, 0)
                        want = np.pad(want, pad, constant_values=-np.inf)
                        want = np.take(want, range(x.shape[ax]), axis=ax)
                    if reverse:
                        want = np.flip(want, ax)
                    got = kc.logcumsumexp(k, axis, reverse=reverse, inclusive=inclusive)
                    check(got, want, 1e-5, 1e-5)
        check(k.logcumsumexp(1), np.logaddexp.accumulate(n, axis=1), 1e-5, 1e-5)
    ints = rand(rng, (5,), np.int8)
    got = kc.cumulative_sum(kc.array(ints), dtype=kc.float32)
    assert got.dtype == kc.float32
    assert kc.cumsum(kc.array(ints), dtype=kc.int16).dtype == kc.int16
    check(got, np.cumsum(ints))
    check(
        kc.cumulative_prod(kc.array([1.5, 2.0, -1.0]), reverse=True), [-3.0, -2.0, -1.0]
    )
    assert kc.cumulative_sum is kc.cumsum


def test_vecdot_and_einsum_path(rng):
    a = rand(rng, (3, 5))
    b = rand(rng, (5,))
    check(kc.vecdot(kc.array(a).T, kc.array(b)[:, None], axis=0), a @ b, 1e-5)
    z = np.array([1 + 2j, 3j], np.complex64)
    w = np.array([1 + 1j, 2], np.complex64)
    assert complex(kc.vecdot(kc.array(z), kc.array(w)).item()) == np.vdot(z, w)
    path, text = kc.einsum_path(
        "ij,jk,kl->il", kc.ones((2, 3)), kc.ones((3, 4)), kc.ones((4, 5))
    )
    assert path == [(1, 2), (0, 1)]
    assert "Naive FLOP count:  360" in text and "Optimized scaling:  3" in text


def test_errors():
    x = kc.ones((2, 3))
    cases = [
        (lambda: kc.flip(x, 2), ValueError, "flip"),
        (lambda: kc.roll(x, (1, 2), (0, 1, 0)), ValueError, "roll"),
        (lambda: kc.diagonal(kc.ones((3,))), ValueError, "diagonal"),
        (lambda: kc.diagonal(x, 0, 1, 1), ValueError, "diagonal"),
        (lambda: kc.diag(kc.ones((2, 2, 2))), ValueError, "diag"),
        (lambda: kc.trace(kc.ones((3,))), ValueError, "trace"),
        (lambda: kc.diff(x, -1), ValueError, "diff"),
        (lambda: kc.meshgrid(x, indexing="ab"), ValueError, "meshgrid"),
        (lambda: kc.median(kc.ones((0,))), ValueError, "median"),
        (lambda: kc.searchsorted(x, kc.ones((2,))), ValueError, "searchsorted"),
        (
            lambda: kc.searchsorted(kc.ones((2,)), x, side="up"),
            ValueError,
            "searchsorted",
        ),
        (lambda: kc.unique(x, -1), ValueError, "unique"),
        (lambda: kc.unique(kc.ones((0,)), 2), ValueError, "unique"),
        (lambda: kc.trunc(kc.array([1j])), ValueError, "trunc"),
        (lambda: kc.nan_to_num(kc.array([1j])), ValueError, "nan_to_num"),
        (lambda: kc.vecdot(x, kc.ones((4,))), ValueError, "vecdot"),
        (lambda: kc.isdtype(kc.int8, "integer-ish"), ValueError, "isdtype"),
        (lambda: kc.from_dlpack(3), TypeError, "from_dlpack"),
    ]
    for fn, exc, name in cases:
        with pytest.raises(exc, match=rf"\[{name}\]"):
            fn()
    # Messages name the shapes and dtypes involved.
    with pytest.raises(ValueError, match=r"float32 array of shape \(2, 3\)"):
        kc.searchsorted(x, kc.ones((2,)))


def test_vs_mlx(rng):
    pytest.importorskip("mlx.core")
    a = rand(rng, (4, 5))
    s = np.sort(rand(rng, (10,)))
    ka, ma = kc.array(a), mx.array(a)
    pairs = [
        (kc.flip(ka, 1), mx.flip(ma, 1)),
        (kc.roll(ka, (1, -2), (0, 1)), mx.roll(ma, (1, -2), (0, 1))),
        (kc.roll(ka, (1, 5)), mx.roll(ma, (1, 5))),
        (
            kc.cumulative_prod(ka.astype(kc.int8), dtype=kc.int16),
            mx.cumulative_prod(ma.astype(mx.int8), dtype=mx.int16),
        ),
        (kc.diagonal(ka, -1), mx.diagonal(ma, -1)),
        (kc.diag(ka, 2), mx.diag(ma, 2)),
        (kc.trace(ka, 1), mx.trace(ma, 1)),
        (kc.kron(ka, ka[:2, :2]), mx.kron(ma, ma[:2, :2])),
        (kc.diff(ka, 2), mx.diff(ma, 2)),
        (kc.median(ka, axis=0), mx.median(ma, axis=0)),
        (kc.minmax(ka)[1], mx.minmax(ma)[1]),
        (
            kc.searchsorted(kc.array(s), ka, side="right"),
            mx.searchsorted(mx.array(s), ma, side="right"),
        ),
        (kc.degrees(ka), mx.degrees(ma)),
        (kc.radians(ka), mx.radians(ma)),
        (kc.trunc(ka), mx.trunc(ma)),
        (kc.count_nonzero(ka > 0, axis=1), mx.count_nonzero(ma > 0, axis=1)),
        (kc.logcumsumexp(ka, 1, reverse=True), mx.logcumsumexp(ma, 1, reverse=True)),
        (kc.vecdot(ka, ka), mx.vecdot(ma, ma)),
        (
            kc.cumulative_sum(ka, 0, inclusive=False),
            mx.cumulative_sum(ma, 0, inclusive=False),
        ),
    ]
    for kg, mg in pairs:
        assert str(kg.dtype).split(".")[-1] == str(mg.dtype).split(".")[-1]
        check(kg, np.array(mg), 1e-5, 1e-5)
    ints = rand(rng, (3, 4), np.int32, lo=0, hi=3)
    for kg, mg in zip(
        kc.unique(kc.array(ints), 6, True, True, True, fill_value=0),
        mx.unique(mx.array(ints), 6, True, True, True, fill_value=0),
    ):
        assert str(kg.dtype).split(".")[-1] == str(mg.dtype).split(".")[-1]
        check(kg, np.array(mg))
    for kg, mg in zip(kc.meshgrid(ka[0], ka[1, :3]), mx.meshgrid(ma[0], ma[1, :3])):
        check(kg, np.array(mg))
    for kg, mg in zip(kc.unstack(ka, axis=1), mx.unstack(ma, axis=1)):
        check(kg, np.array(mg))
    ops = [kc.ones((2, 3)), kc.ones((3, 4)), kc.ones((4, 2)), kc.ones((2, 5))]
    mops = [mx.ones(o.shape) for o in ops]
    assert kc.einsum_path("ab,bc,cd,de->ae", *ops) == mx.einsum_path(
        "ab,bc,cd,de->ae", *mops
    )
    assert kc.einsum_path("ab,ab,ab->", *[kc.ones((2, 3))] * 3) == mx.einsum_path(
        "ab,ab,ab->", *[mx.ones((2, 3))] * 3
    )
    for f, t in [
        ("int8", "int16"),
        ("float32", "int32"),
        ("uint8", "int8"),
        ("float16", "bfloat16"),
        ("bool_", "float16"),
    ]:
        assert kc.can_cast(getattr(kc, f), getattr(kc, t)) == mx.can_cast(
            getattr(mx, f), getattr(mx, t)
        )
    for d in ("bool_", "int8", "uint32", "float16", "complex64"):
        for kind in (
            "bool",
            "signed integer",
            "unsigned integer",
            "integral",
            "real floating",
            "complex floating",
            "numeric",
        ):
            assert kc.isdtype(getattr(kc, d), kind) == mx.isdtype(getattr(mx, d), kind)
