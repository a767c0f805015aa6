"""gather_mm, block_masked_mm and segmented_mm against NumPy loops (and
MLX where installed)."""

import numpy as np
import pytest

import kiln.core as kc


def test_gather_mm_matches_a_gather_then_matmul(rng):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 6)).astype(np.float32)
    li = np.array([[0, 2], [1, 1]], np.uint32)
    ri = np.array([1, 0], np.uint32)
    got = np.array(kc.gather_mm(kc.array(a), kc.array(b), kc.array(li), kc.array(ri)))
    L, R = np.broadcast_arrays(li, ri)
    ref = np.stack([a[i].astype(np.float64) @ b[j] for i, j in zip(L.ravel(), R.ravel())])
    np.testing.assert_allclose(got, ref.reshape(2, 2, 4, 6), rtol=1e-5, atol=1e-5)
    # No indices: the batches pair up as in matmul; transposed operands too.
    bt = kc.array(rng.standard_normal((3, 6, 5)).astype(np.float32)).transpose(0, 2, 1)
    got = kc.gather_mm(kc.array(a), bt)
    np.testing.assert_allclose(np.array(got), np.array(a) @ np.array(bt), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="gather_mm"):
        kc.gather_mm(kc.array(a), kc.array(b), kc.array(np.array([0.5], np.float32)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gather_mm_dtypes_and_sorted_picks(rng, dtype):
    """Every floating dtype; sorted picks with the hint give the same
    products as unsorted ones."""
    kdt = getattr(kc, dtype)
    a = kc.array(rng.standard_normal((6, 1, 16)).astype(np.float32)).astype(kdt)
    b = kc.array(rng.standard_normal((4, 16, 8)).astype(np.float32)).astype(kdt)
    ri = np.array([0, 0, 1, 3, 3, 3], np.uint32)
    got = kc.gather_mm(a, b, rhs_indices=kc.array(ri), sorted_indices=True)
    assert got.dtype == kdt and got.shape == (6, 1, 8)
    A = np.array(a.astype(kc.float32)).astype(np.float64)
    B = np.array(b.astype(kc.float32)).astype(np.float64)
    ref = np.stack([A[i] @ B[j] for i, j in enumerate(ri)])
    tol = 1e-5 if dtype == "float32" else 5e-2
    np.testing.assert_allclose(np.array(got.astype(kc.float32)), ref, rtol=tol, atol=tol)


def test_gather_mm_grads_match_mlx_on_switch_glu_calls(rng):
    """mlx-lm's SwitchGLU pattern: x expanded to (T, 1, 1, D), experts
    stored (E, N, D) and read transposed, top-k picks per token: value and
    gradients of both operands against MLX's, and per-token gradients by
    vmap (which MLX's GatherMM lacks) against a loop."""
    mx = pytest.importorskip("mlx.core")
    T, D, N, E, k = 5, 16, 12, 4, 2
    x = rng.standard_normal((T, D)).astype(np.float32)
    w = rng.standard_normal((E, N, D)).astype(np.float32)
    idx = rng.integers(0, E, size=(T, k)).astype(np.uint32)

    def loss_of(m):
        def loss(x, w):
            y = m.gather_mm(m.expand_dims(x, (-2, -3)), m.swapaxes(w, -1, -2),
                            rhs_indices=m.array(idx))
            return (m.tanh(y) ** 2).sum()
        return loss

    def run(m):
        value, grads = m.value_and_grad(loss_of(m), argnums=(0, 1))(m.array(x), m.array(w))
        return [np.array(v) for v in (value, *grads)]

    for got, want in zip(run(kc), run(mx)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    dw = kc.grad(loss_of(kc), argnums=1)
    per_token = kc.vmap(dw, in_axes=(0, None))(kc.array(x)[:, None], kc.array(w))
    loop = np.stack([np.array(dw(kc.array(x[t:t + 1]), kc.array(w))) for t in range(T)])
    np.testing.assert_allclose(np.array(per_token), loop, rtol=1e-5, atol=1e-5)


def test_gather_mm_and_its_gradient_under_shapeless_compile(rng):
    """Traced once, replayed at other numbers of tokens and picks: the op's
    reshapes and its gradient's follow the picks (explicit indices; default
    ones are an arange fixed at trace, as in MLX)."""
    w = kc.array(rng.standard_normal((4, 12, 16)).astype(np.float32))

    def f(x, w, li, ri):
        return kc.gather_mm(kc.expand_dims(x, -2), kc.swapaxes(w, -1, -2), li, ri)

    def loss(x, w, li, ri):
        return (f(x, w, li, ri) ** 2).sum()

    cf = kc.compile(f, shapeless=True)
    cg = kc.compile(kc.grad(loss, argnums=(0, 1)), shapeless=True)
    for T in (8, 5, 11):
        x = kc.array(rng.standard_normal((T, 16)).astype(np.float32))
        ri = kc.array(rng.integers(0, 4, (2 * T,)).astype(np.uint32))
        li = kc.array((np.arange(2 * T) // 2).astype(np.uint32))
        np.testing.assert_allclose(np.array(cf(x, w, li, ri)), np.array(f(x, w, li, ri)), rtol=1e-6)
        for got, want in zip(cg(x, w, li, ri), kc.grad(loss, argnums=(0, 1))(x, w, li, ri)):
            np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("float_masks", [False, True])
def test_block_masked_mm_masks_blocks(rng, float_masks):
    bs = 32
    A = rng.standard_normal((2, 40, 70)).astype(np.float32)
    B = rng.standard_normal((2, 70, 33)).astype(np.float32)
    def mask(shape):
        return rng.standard_normal(shape).astype(np.float32) if float_masks else rng.random(shape) > 0.4
    ml, mr, mo = mask((2, 2, 3)), mask((2, 3, 2)), mask((2, 2, 2))
    got = kc.block_masked_mm(kc.array(A), kc.array(B), bs, kc.array(mo), kc.array(ml), kc.array(mr))

    def expand(m, r, c):
        return np.repeat(np.repeat(m, bs, -2), bs, -1)[..., :r, :c].astype(np.float64)

    ref = ((A * expand(ml, 40, 70)) @ (B * expand(mr, 70, 33))) * expand(mo, 40, 33)
    np.testing.assert_allclose(np.array(got), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="block_size"):
        kc.block_masked_mm(kc.array(A), kc.array(B), 16)
    with pytest.raises(ValueError, match="mask"):
        kc.block_masked_mm(kc.array(A), kc.array(B), bs, None, kc.array(ml[:, :1]))


def test_segmented_mm_multiplies_each_segment(rng):
    a = rng.standard_normal((4, 10)).astype(np.float32)
    b = rng.standard_normal((10, 3)).astype(np.float32)
    seg = np.array([[0, 3], [3, 10], [2, 2]], np.uint32)
    got = np.array(kc.segmented_mm(kc.array(a), kc.array(b), kc.array(seg)))
    ref = np.stack([a[:, s:e].astype(np.float64) @ b[s:e] for s, e in seg])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="segments"):
        kc.segmented_mm(kc.array(a), kc.array(b), kc.array(np.array([1, 2, 3], np.uint32)))


def test_segmented_mm_layouts_bounds_and_mlx(rng):
    """Transposed operands, empty, overlapping and clamped segments, 2-d
    segments, float16; against NumPy and MLX's segmented_mm; gradients of
    both operands against the masked product's."""
    a = rng.standard_normal((6, 20)).astype(np.float32)
    b = rng.standard_normal((20, 5)).astype(np.float32)
    seg = np.array([[[0, 7], [7, 7]], [[3, 15], [-2, 30]]], np.int32)
    ka, kb = kc.array(a.T.copy()).T, kc.array(b)
    got = kc.segmented_mm(ka, kb, kc.array(seg))
    assert got.shape == (2, 2, 6, 5)
    def ref(s, e):
        s, e = np.clip([s, e], 0, 20)
        return a[:, s:e].astype(np.float64) @ b[s:e]
    want = np.stack([ref(*p) for p in seg.reshape(-1, 2)]).reshape(2, 2, 6, 5)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    half = kc.segmented_mm(ka.astype(kc.float16), kb.astype(kc.float16), kc.array(seg))
    assert half.dtype == kc.float16
    np.testing.assert_allclose(np.array(half.astype(kc.float32)), want, rtol=2e-2, atol=5e-2)
    mx = pytest.importorskip("mlx.core")
    part = np.array([[0, 4], [4, 11], [11, 20]], np.uint32)
    np.testing.assert_allclose(
        np.array(kc.segmented_mm(kc.array(a), kc.array(b), kc.array(part))),
        np.array(mx.segmented_mm(mx.array(a), mx.array(b), mx.array(part))), rtol=1e-5, atol=1e-5)
    c = rng.standard_normal((3, 6, 5)).astype(np.float32)
    mask = (np.arange(20)[None] >= part[:, :1]) & (np.arange(20)[None] < part[:, 1:])
    def loss(m, use_segmented):
        def f(x, y):
            p = (m.segmented_mm(x, y, m.array(part)) if use_segmented
                 else m.matmul(x * m.array(mask.astype(np.float32))[:, None, :], y))
            return (p * m.array(c)).sum()
        return m.grad(f, argnums=(0, 1))
    for g, w in zip(loss(kc, True)(kc.array(a), kc.array(b)), loss(kc, False)(kc.array(a), kc.array(b))):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)


def test_matches_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 6)).astype(np.float32)
    li = np.array([2, 0, 0], np.uint32)
    np.testing.assert_allclose(
        np.array(kc.gather_mm(kc.array(a), kc.array(b), kc.array(li))),
        np.array(mx.gather_mm(mx.array(a), mx.array(b), mx.array(li))), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_few_rows_times_a_16_bit_matrix(dt):
    # Decoding's products (1 to 16 rows) read the 16-bit weight in place;
    # both weight layouts (x @ W.T and x @ W), row counts around the blocks
    # of 4, lengths around the 16-lane vectors, strided rows of x, a batch,
    # and AddMM's bias, against float64 over the rounded inputs.
    import numpy as np

    kdt = getattr(kc, dt)
    rng = np.random.default_rng(3)
    for m in (1, 2, 3, 4, 5, 8, 15, 16, 17):
        for k, n in ((64, 48), (37, 5), (1, 9), (130, 1)):
            xs = kc.array(rng.standard_normal((m, 2 * k)).astype(np.float32)).astype(kdt)[:, ::2]
            w = kc.array(rng.standard_normal((n, k)).astype(np.float32)).astype(kdt)
            wt_rows = kc.array(np.ascontiguousarray(np.array(w.astype(kc.float32)).T)).astype(kdt)
            x64 = np.array(xs.astype(kc.float32)).astype(np.float64)
            w64 = np.array(w.astype(kc.float32)).astype(np.float64)
            ref = x64 @ w64.T
            bias = kc.array(rng.standard_normal((n,)).astype(np.float32)).astype(kdt)
            b64 = np.array(bias.astype(kc.float32)).astype(np.float64)
            # The result is rounded to 16 bits: compare in its own precision.
            tol = (2e-3 if dt == "float16" else 1.6e-2) * (np.abs(x64) @ np.abs(w64).T + 1)
            for got, want in ((xs @ w.T, ref), (xs @ wt_rows, ref),
                              (kc.addmm(bias, xs, w.T, alpha=0.5, beta=2.0), 0.5 * ref + 2 * b64)):
                assert got.dtype == kdt
                g = np.array(got.astype(kc.float32)).astype(np.float64)
                assert (np.abs(g - want) <= tol * 1.5 + 1e-6).all(), (m, k, n)
    x3 = kc.array(rng.standard_normal((3, 2, 40)).astype(np.float32)).astype(kdt)
    w = kc.array(rng.standard_normal((24, 40)).astype(np.float32)).astype(kdt)
    ref = np.array(x3.astype(kc.float32)).astype(np.float64) @ np.array(w.astype(kc.float32)).astype(np.float64).T
    g = np.array((x3 @ w.T).astype(kc.float32))
    assert np.allclose(g, ref, rtol=2e-2, atol=2e-2)


def test_16_bit_matvec_keeps_inf_and_nan():
    import numpy as np

    w = np.zeros((3, 20), np.float16)
    w[0, 5], w[1, 5], w[2, 17] = np.inf, -np.inf, np.nan
    x = np.zeros((1, 20), np.float16)
    x[0, 5] = x[0, 17] = 1
    y = np.array((kc.array(x) @ kc.array(w).T).astype(kc.float32))[0]
    assert y[0] == np.inf and y[1] == -np.inf and np.isnan(y[2])
