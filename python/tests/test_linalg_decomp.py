"""kiln.core.linalg decompositions and the ops built on them, against NumPy
(float64 references) on random, batched and non-contiguous inputs, their
gradients against finite differences, and against mlx where installed."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, needs_mlx, rand

LA = kc.linalg
DTYPES = [(kc.float32, 2e-4), (kc.float64, 1e-9)]


def kin(x, dtype):
    return kc.array(np.asarray(x, np.float64), dtype)


def shifted(rng, shape, shift=3.0):
    return rand(rng, shape, np.float64, -1, 1) + shift * np.eye(shape[-1])


def variants(x, dtype):
    """x as a contiguous array, a transposed view and a sliced view."""
    k = kin(x, dtype)
    t = kin(np.swapaxes(x, -1, -2).copy(), dtype).swapaxes(-1, -2)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],))
    wide[..., ::2] = x
    wide[..., 1::2] = 999.0
    s = kin(wide, dtype)[..., ::2]
    return [k, t, s]


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_tri_inv_cholesky_inv_solve_triangular(rng, dtype, tol):
    a = shifted(rng, (2, 4, 4))
    for upper in (False, True):
        tri = np.triu(a) if upper else np.tril(a)
        for x in variants(a, dtype):
            got = LA.tri_inv(x, upper=upper)
            assert got.dtype == dtype
            check(got, np.linalg.inv(tri), rtol=tol, atol=tol)
        b = rand(rng, (2, 4, 3), np.float64)
        check(
            LA.solve_triangular(kin(a, dtype), kin(b, dtype), upper=upper),
            np.linalg.solve(tri, b),
            rtol=tol,
            atol=tol,
        )
        v = rand(rng, (4,), np.float64)
        check(
            LA.solve_triangular(kin(a, dtype), kin(v, dtype), upper=upper),
            np.linalg.solve(tri, np.broadcast_to(v, (2, 4))[..., None])[..., 0],
            rtol=tol,
            atol=tol,
        )
    low = np.tril(a)
    spd = low @ np.swapaxes(low, -1, -2)
    check(LA.cholesky_inv(kin(low, dtype)), np.linalg.inv(spd), rtol=tol, atol=tol)
    up = np.swapaxes(low, -1, -2).copy()
    check(
        LA.cholesky_inv(kin(up, dtype), upper=True),
        np.linalg.inv(spd),
        rtol=tol,
        atol=tol,
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (5, 3), (3, 5), (2, 4, 4)])
def test_lu(rng, dtype, tol, shape):
    a = rand(rng, shape, np.float64)
    for x in variants(a, dtype):
        p, l, u = LA.lu(x)
        assert p.dtype == kc.uint32
        p, l, u = np.array(p), np.array(l), np.array(u)
        rec = np.take_along_axis(l @ u, p[..., None].astype(np.int64), axis=-2)
        check(rec, a, rtol=tol, atol=tol)
        assert np.all(np.triu(l, 1) == 0) and np.all(np.tril(u, -1) == 0)
        packed, piv = LA.lu_factor(x)
        k = min(shape[-2:])
        assert piv.shape == shape[:-2] + (k,)
        packed = np.array(packed)
        check(np.triu(packed)[..., :k, :], u, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_det_slogdet(rng, dtype, tol):
    a = rand(rng, (3, 4, 4), np.float64)
    for x in variants(a, dtype):
        check(LA.det(x), np.linalg.det(a), rtol=tol * 10, atol=tol * 10)
        sign, logdet = LA.slogdet(x)
        s2, l2 = np.linalg.slogdet(a)
        check(sign, s2)
        check(logdet, l2, rtol=tol * 10, atol=tol * 10)
    sing = kc.array([[1.0, 2.0], [2.0, 4.0]])
    assert LA.det(sing).item() == 0.0
    sign, logdet = LA.slogdet(sing)
    assert sign.item() == 0.0 and logdet.item() == -np.inf
    assert LA.det(kc.array([[2, 1], [1, 3]])).item() == pytest.approx(5.0)


@pytest.mark.parametrize("dtype,tol", DTYPES)
def test_eigh_eigvalsh(rng, dtype, tol):
    r = rand(rng, (2, 5, 5), np.float64)
    for uplo in ("L", "U"):
        for x in variants(r, dtype):
            w, v = LA.eigh(x, UPLO=uplo)
            check(w, np.linalg.eigvalsh(r, UPLO=uplo), rtol=tol * 10, atol=tol * 10)
            check(LA.eigvalsh(x, uplo), np.array(w), rtol=tol, atol=tol)
            w, v = np.array(w), np.array(v)
            tri = np.tril(r) if uplo == "L" else np.triu(r)
            sym = tri + np.swapaxes(tri, -1, -2) - tri * np.eye(5)
            check(
                v @ (w[..., None] * np.swapaxes(v, -1, -2)),
                sym,
                rtol=tol * 10,
                atol=tol * 10,
            )


@pytest.mark.parametrize("dtype", [kc.float32, kc.float64])
def test_eig_eigvals(rng, dtype):
    a = rand(rng, (2, 5, 5), np.float64)
    for x in variants(a, dtype):
        w, v = LA.eig(x)
        assert w.dtype == kc.complex64 and v.dtype == kc.complex64
        w, v = np.array(w), np.array(v)
        check(np.abs(a @ v - v * w[..., None, :]), np.zeros(v.shape), atol=2e-5)
        check(np.linalg.norm(v, axis=-2), np.ones((2, 5)), rtol=1e-5)
        want = np.sort_complex(np.linalg.eigvals(a))
        got = np.sort_complex(np.array(LA.eigvals(x)))
        check(np.abs(got - want), np.zeros(want.shape), atol=2e-5)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_pinv(rng, dtype, tol, shape):
    a = rand(rng, shape, np.float64)
    for x in variants(a, dtype):
        check(LA.pinv(x), np.linalg.pinv(a), rtol=tol * 10, atol=tol * 10)


def test_cross(rng):
    a, b = rand(rng, (4, 3)), rand(rng, (4, 3))
    check(LA.cross(kc.array(a), kc.array(b)), np.cross(a, b), rtol=1e-5)
    check(
        LA.cross(kc.array(a.T.copy()), kc.array(b).T, axis=0),
        np.cross(a.T, b.T, axis=0),
        rtol=1e-5,
    )
    a2 = rand(rng, (4, 2))
    check(
        LA.cross(kc.array(a2), kc.array(b)),
        np.cross(np.concatenate([a2, np.zeros((4, 1), np.float32)], -1), b),
        rtol=1e-5,
    )
    ai = rand(rng, (2, 3), np.int32)
    got = LA.cross(kc.array(ai), kc.array(ai[::-1].copy()))
    assert got.dtype == kc.int32
    check(got, np.cross(ai, ai[::-1]))


def test_gradients(rng):
    """grad against central differences in float64."""

    def numeric_grad(f, x, eps=1e-6):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            d = np.zeros_like(x)
            d[i] = eps
            g[i] = (f(x + d) - f(x - d)) / (2 * eps)
        return g

    a = shifted(rng, (3, 3))
    sym = a + a.T
    cases = [
        (lambda x: LA.det(x), a),
        (lambda x: LA.slogdet(x)[1], a),
        (lambda x: (LA.tri_inv(x) ** 2).sum(), a),
        (lambda x: (LA.solve_triangular(x, kc.ones((3,)), upper=True) ** 2).sum(), a),
        (lambda x: (LA.pinv(x) * kc.arange(9.0).reshape(3, 3)).sum(), a),
        (lambda x: (LA.eigvalsh(x) ** 3).sum(), sym),
        (
            lambda x: (
                LA.eigh(x, UPLO="U")[1] ** 2 * kc.arange(9.0).reshape(3, 3)
            ).sum(),
            sym,
        ),
        (lambda x: (LA.lu_factor(x)[0] ** 2).sum(), a),
        (lambda x: (LA.lu(x[:, :2])[1] ** 2).sum(), a),
        (lambda x: (LA.lu(x[:2])[2] ** 2).sum(), a),
        (lambda x: LA.cross(x[0], x[1]).sum(), a),
    ]
    for f, x in cases:
        g = np.array(kc.grad(f)(kin(x, kc.float64)))
        want = numeric_grad(lambda y: f(kin(y, kc.float64)).item(), x)
        check(g, want, rtol=1e-5, atol=1e-6)


def test_vmap(rng):
    a = rand(rng, (3, 4, 4), np.float64)
    for f in (
        LA.det,
        lambda x: LA.eigvalsh(x),
        LA.pinv,
        LA.tri_inv,
        lambda x: LA.lu(x)[0],
    ):
        got = kc.vmap(f, in_axes=1)(kin(a, kc.float64).swapaxes(0, 1))
        want = f(kin(a, kc.float64))
        check(got, want, rtol=1e-9, atol=1e-9)


def test_bad_inputs():
    m = kc.ones((3, 4))
    with pytest.raises(ValueError, match=r"linalg::det"):
        LA.det(m)
    with pytest.raises(ValueError, match=r"linalg::eigh"):
        LA.eigh(kc.ones((3, 3)), UPLO="X")
    with pytest.raises(ValueError, match=r"linalg::tri_inv"):
        LA.tri_inv(kc.ones((3, 3), dtype=kc.int32))
    with pytest.raises(ValueError, match=r"linalg::cross"):
        LA.cross(kc.ones((4,)), kc.ones((4,)))
    with pytest.raises(ValueError, match=r"linalg::solve_triangular"):
        LA.solve_triangular(kc.ones((3, 3)), kc.ones((4,)))
    with pytest.raises(ValueError, match=r"linalg::eig"):
        kc.grad(lambda x: kc.abs(LA.eigvals(x)).sum())(kc.ones((2, 2)))
    with pytest.raises(RuntimeError, match=r"linalg::tri_inv"):
        kc.eval(LA.tri_inv(kc.array([[1.0, 0.0], [1.0, 0.0]])))


def signature_names(fn):
    """Parameter names from the signature line of a docstring."""
    line = fn.__doc__.strip().split("\n")[0]
    inner = line[line.index("(") + 1 : line.rindex(")")].split(") ->")[0]
    names, depth, cur = [], 0, ""
    for ch in inner + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            name = cur.split(":")[0].split("=")[0].strip()
            if name not in ("*", "/", ""):
                names.append(name)
            cur = ""
        else:
            cur += ch
    return names


NEW_NAMES = {
    "linalg": [
        "cholesky_inv",
        "cross",
        "det",
        "eig",
        "eigh",
        "eigvals",
        "eigvalsh",
        "lu",
        "lu_factor",
        "pinv",
        "slogdet",
        "solve_triangular",
        "tri_inv",
    ],
    "random": ["laplace", "multivariate_normal"],
    "fast": ["cross_entropy", "gated_delta_update"],
    "": [
        "bartlett",
        "blackman",
        "hamming",
        "hanning",
        "convolve",
        "hadamard_transform",
        "matrix_norm",
    ],
}


@needs_mlx
@pytest.mark.parametrize("module", list(NEW_NAMES))
def test_names_and_signatures_match_mlx(module):
    kmod = getattr(kc, module) if module else kc
    mmod = getattr(mx, module) if module else mx
    for name in NEW_NAMES[module]:
        assert hasattr(kmod, name), name
        assert signature_names(getattr(kmod, name)) == signature_names(
            getattr(mmod, name)
        ), name
    # every public name of these mlx submodules exists in kiln, except the
    # custom-kernel entry points of mlx.fast
    if module:
        skip = {"metal_kernel", "cuda_kernel", "precompiled_cuda_kernel"}
        for name in dir(mmod):
            if not name.startswith("_") and name not in skip:
                assert hasattr(kmod, name), f"{module}.{name}"


@needs_mlx
def test_against_mlx(rng):
    a = rand(rng, (2, 4, 4))
    sym = a + np.swapaxes(a, -1, -2)
    ka, ma = kc.array(a), mx.array(a)
    cpu = mx.cpu
    check(LA.det(ka), mx.linalg.det(ma, stream=cpu), rtol=1e-4, atol=1e-5)
    for k, m in zip(LA.slogdet(ka), mx.linalg.slogdet(ma, stream=cpu)):
        check(k, m, rtol=1e-4, atol=1e-5)
    for k, m in zip(LA.lu_factor(ka), mx.linalg.lu_factor(ma, stream=cpu)):
        check(k, m, rtol=1e-4, atol=1e-5)
    for k, m in zip(LA.lu(ka), mx.linalg.lu(ma, stream=cpu)):
        check(k, m, rtol=1e-4, atol=1e-5)
    for up in (False, True):
        check(
            LA.tri_inv(ka, upper=up),
            mx.linalg.tri_inv(ma, upper=up, stream=cpu),
            rtol=1e-3,
            atol=1e-4,
        )
    check(LA.pinv(ka), mx.linalg.pinv(ma, stream=cpu), rtol=1e-3, atol=1e-4)
    check(
        LA.eigvalsh(kc.array(sym)),
        mx.linalg.eigvalsh(mx.array(sym), stream=cpu),
        rtol=1e-4,
        atol=1e-5,
    )
    # eigenvalues in no particular order (LAPACK builds may differ)
    kw = np.sort_complex(np.array(LA.eigvals(ka)))
    mw = np.sort_complex(np.array(mx.linalg.eigvals(ma, stream=cpu)))
    check(np.abs(kw - mw), np.zeros(kw.shape), atol=1e-4)
    # eigenvectors agree up to a sign (real) or phase (complex) per column
    kv, mv = np.array(LA.eigh(kc.array(sym))[1]), np.array(
        mx.linalg.eigh(mx.array(sym), stream=cpu)[1]
    )
    check(np.abs((kv * mv).sum(-2)), np.ones((2, 4)), rtol=1e-4)
    b = rand(rng, (4, 3))
    check(
        LA.cross(kc.array(b), kc.array(b[::-1].copy())),
        mx.linalg.cross(mx.array(b), mx.array(b[::-1].copy())),
        rtol=1e-5,
        atol=1e-6,
    )
    check(
        kc.matrix_norm(ka, ord="fro", axis=(-2, -1)),
        mx.linalg.norm(ma, ord="fro", axis=(-2, -1)),
        rtol=1e-5,
    )


def test_compile_and_empty(rng):
    a = shifted(rng, (2, 3, 3))
    sym = kin(a + np.swapaxes(a, -1, -2), kc.float64)

    def f(x):
        return LA.det(x) + LA.eigvalsh(x).sum(-1) + LA.pinv(x).sum((-2, -1))

    check(kc.compile(f)(sym), f(sym), rtol=1e-12, atol=1e-12)
    # empty stacks and matrices
    assert LA.det(kc.zeros((0, 0))).item() == 1.0
    assert LA.eigh(kc.zeros((2, 0, 0)))[1].shape == (2, 0, 0)
    assert LA.pinv(kc.zeros((3, 0))).shape == (0, 3)
    assert LA.lu(kc.zeros((0, 3, 3)))[0].shape == (0, 3)


def test_complex64_decompositions_against_numpy():
    # svd, eigh and eig of complex64 (LAPACK's c routines), batched and
    # through a transposed view: each factorization rebuilds its input and
    # matches NumPy's invariants; gradients raise naming the op.
    rng = np.random.default_rng(5)

    def crand(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    a = crand(3, 4, 5)
    for x in (kc.array(a), kc.array(np.ascontiguousarray(a.transpose(0, 2, 1))).swapaxes(-1, -2)):
        u, s, vt = kc.linalg.svd(x, stream=kc.cpu)
        assert u.dtype == kc.complex64 and s.dtype == kc.float32 and vt.dtype == kc.complex64
        rebuilt = np.array(u)[..., :, :4] @ (np.array(s)[..., :, None] * np.array(vt)[..., :4, :])
        np.testing.assert_allclose(rebuilt, a, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.array(s), np.linalg.svd(a, compute_uv=False), rtol=1e-4, atol=1e-4)
    b = crand(2, 4, 4)
    h = (b + np.conj(b.transpose(0, 2, 1))) / 2
    w, v = kc.linalg.eigh(kc.array(h), stream=kc.cpu)
    assert w.dtype == kc.float32 and v.dtype == kc.complex64
    np.testing.assert_allclose(np.array(w), np.linalg.eigvalsh(h), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h @ np.array(v), np.array(v) * np.array(w)[:, None, :], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(kc.linalg.eigvalsh(kc.array(h), stream=kc.cpu)), np.array(w), rtol=1e-5, atol=1e-5)
    w, v = kc.linalg.eig(kc.array(b), stream=kc.cpu)
    assert w.dtype == v.dtype == kc.complex64
    np.testing.assert_allclose(b @ np.array(v), np.array(v) * np.array(w)[:, None, :], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.sort_complex(np.array(kc.linalg.eigvals(kc.array(b), stream=kc.cpu))),
                               np.sort_complex(np.linalg.eigvals(b)), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="linalg::svd"):
        kc.grad(lambda x: kc.linalg.svd(x, compute_uv=False).sum())(kc.array(a[0]))
    with pytest.raises(ValueError, match="float32 or float64 or complex64"):
        kc.linalg.svd(kc.array(a.real.astype(np.float16)))
