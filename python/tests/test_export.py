"""Function export: export_function / exporter / import_function against
the functions themselves on random inputs, MLX's own .mlxfn files both ways
(where MLX is installed), shapeless traces at new shapes, and corrupt files
(every truncation and many byte flips raise, never crash)."""

import os
import random

import numpy as np
import pytest

import kiln.core as kx
import kiln.nn as knn

try:
    import mlx.core as mx
except ImportError:  # the cross checks need real MLX
    mx = None

needs_mlx = pytest.mark.skipif(mx is None, reason="MLX is not installed")

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def roundtrip(tmp_path, fun, *args, shapeless=False, **kwargs):
    path = str(tmp_path / "f.mlxfn")
    kx.export_function(path, fun, *args, shapeless=shapeless, **kwargs)
    return kx.import_function(path)


# (name, function of kiln arrays, the same with MLX, input shapes)
CASES = [
    ("unary", lambda k: lambda a: k.log1p(k.abs(a)) * k.tanh(a) + k.erf(a), [(4, 8)]),
    ("binary", lambda k: lambda a, b: k.maximum(a, b) - k.power(k.abs(a), b), [(4, 8), (8,)]),
    ("log_sqrt", lambda k: lambda a: k.log2(k.abs(a) + 1) + k.rsqrt(k.abs(a) + 1), [(3, 5)]),
    ("compare", lambda k: lambda a, b: k.where(a > b, a, b * 2), [(6, 4), (6, 4)]),
    ("reduce", lambda k: lambda a: a.sum(axis=0) + a.max(axis=0) + a.min(axis=0), [(5, 7)]),
    ("argreduce", lambda k: lambda a: k.argmax(a, axis=1) + k.argmin(a, axis=1), [(5, 7)]),
    ("scan", lambda k: lambda a: k.cumsum(a, axis=1, reverse=True) + k.cummax(a, axis=0), [(4, 6)]),
    ("softmax", lambda k: lambda a: k.softmax(a, axis=-1) + k.logsumexp(a, axis=-1, keepdims=True), [(3, 9)]),
    ("matmul", lambda k: lambda a, b: a @ b, [(4, 8), (8, 3)]),
    ("batched_matmul", lambda k: lambda a, b: a @ b, [(2, 4, 8), (8, 3)]),
    ("shape", lambda k: lambda a: a.T.reshape(2, 16)[:, ::2], [(4, 8)]),
    ("expand_squeeze", lambda k: lambda a: k.squeeze(k.expand_dims(a, 0), 0) * a[None][0], [(3, 3)]),
    ("concat_split", lambda k: lambda a: k.concatenate(k.split(a, 2, axis=1)[::-1], axis=0), [(4, 6)]),
    ("take_along", lambda k: lambda a: k.take_along_axis(a, k.argsort(a, axis=0), axis=0), [(5, 4)]),
    ("sort", lambda k: lambda a: k.sort(a, axis=1) + k.partition(a, 2, axis=1), [(4, 6)]),
    ("astype", lambda k: lambda a: (a * 10).astype(k.int32).astype(k.float32), [(8,)]),
    ("conv2d", lambda k: lambda a, w: k.conv2d(a, w, stride=2, padding=1), [(2, 8, 8, 3), (4, 3, 3, 3)]),
    ("rms_norm", lambda k: lambda a, w: k.fast.rms_norm(a, w, 1e-5), [(4, 8), (8,)]),
    ("layer_norm", lambda k: lambda a, w, b: k.fast.layer_norm(a, w, b, 1e-5), [(4, 8), (8,), (8,)]),
    ("pad", lambda k: lambda a: k.pad(a, [(1, 2), (0, 1)], constant_values=3.0), [(3, 4)]),
]


@pytest.mark.parametrize("name,make,shapes", CASES, ids=[c[0] for c in CASES])
def test_roundtrip_matches_function(tmp_path, name, make, shapes):
    fun = make(kx)
    arrays = [kx.array(randn(*s)) for s in shapes]
    imported = roundtrip(tmp_path, fun, *arrays)
    # Fresh inputs of the same signature: the file holds the graph, not
    # the example's values.
    fresh = [kx.array(randn(*s)) for s in shapes]
    (out,) = imported(*fresh)
    np.testing.assert_allclose(np.array(out), np.array(fun(*fresh)), rtol=1e-5, atol=1e-5)


def test_non_contiguous_inputs_and_integer_dtypes(tmp_path):
    fun = lambda a, b: (a * b + 3) // 2
    a = kx.array(rng.integers(-50, 50, (6, 4)).astype(np.int32))
    b = kx.array(rng.integers(1, 9, (4, 6)).astype(np.int32)).T
    imported = roundtrip(tmp_path, fun, a, b)
    x = kx.array(rng.integers(-50, 50, (4, 6)).astype(np.int32)).T
    (out,) = imported(x, b)
    np.testing.assert_array_equal(np.array(out), (np.array(x) * np.array(b) + 3) // 2)


def test_kwargs_metadata_and_signatures(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    fun = lambda x, y: x - y
    kx.export_function(path, fun, x=kx.array(1.0), y=kx.array(1.0), metadata="{}")
    imported, meta = kx.import_function(path, return_metadata=True)
    assert meta == "{}"
    assert imported(y=kx.array(2.0), x=kx.array(3.0))[0].item() == 1.0
    with pytest.raises(ValueError, match="No imported function"):
        imported(kx.array(1.0), kx.array(2.0))
    with pytest.raises(ValueError, match="No imported function"):
        imported(x=kx.array([1.0]), y=kx.array(2.0))
    with pytest.raises(ValueError):
        kx.export_function(path, fun, kx.array(1.0), "no")


def test_several_traces_store_a_constant_once(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    constant = kx.array(randn(64, 256))
    kx.eval(constant)

    def fun(*args):
        return constant + sum(args)

    with kx.exporter(path, fun) as ex:
        for n in range(4):
            ex(*[kx.array(1.0)] * n)
    with pytest.raises(RuntimeError):
        ex(kx.array(1.0))
    assert os.path.getsize(path) < constant.nbytes + 8192
    imported = kx.import_function(path)
    for n in range(4):
        (out,) = imported(*[kx.array(2.0)] * n)
        np.testing.assert_allclose(np.array(out), np.array(constant) + 2.0 * n)


def test_shapeless_follows_new_shapes(tmp_path):
    w = kx.array(randn(16, 5))
    fun = lambda x, b: kx.matmul(x, w) + b
    imported = roundtrip(
        tmp_path, fun, kx.array(randn(1, 7, 16)), kx.array(randn(5)), shapeless=True
    )
    for rows in (7, 30, 1):
        x, b = kx.array(randn(1, rows, 16)), kx.array(randn(5))
        (out,) = imported(x, b)
        assert out.shape == (1, rows, 5)
        np.testing.assert_allclose(np.array(out), np.array(fun(x, b)), rtol=1e-5, atol=1e-5)


def test_shapeless_compile_of_folded_matmul():
    w = kx.array(randn(16, 5))
    f = kx.compile(lambda x: x @ w, shapeless=True)
    for rows in (3, 11):
        x = kx.array(randn(2, rows, 16))
        np.testing.assert_allclose(np.array(f(x)), np.array(x) @ np.array(w), rtol=1e-5, atol=1e-5)


def test_model_with_quantized_layers(tmp_path):
    model = knn.Sequential(knn.Linear(64, 32), knn.ReLU(), knn.Linear(32, 16))
    knn.quantize(model, group_size=32, bits=4)
    kx.eval(model.parameters())
    x = kx.array(randn(4, 64))
    imported = roundtrip(tmp_path, model, x)
    y = kx.array(randn(4, 64))
    np.testing.assert_allclose(np.array(imported(y)[0]), np.array(model(y)), rtol=1e-5, atol=1e-5)


def test_unexportable_primitive_names_itself(tmp_path):
    fun = lambda a: kx.fft.fft(a, norm="ortho")
    with pytest.raises(ValueError, match="serialize primitive FFT"):
        kx.export_function(str(tmp_path / "f.mlxfn"), fun, kx.array(randn(8).astype(np.complex64)))


def test_corrupt_files_raise(tmp_path):
    path = str(tmp_path / "f.mlxfn")
    fun = lambda a, b: kx.softmax(a @ b, axis=-1).sum(axis=0)
    kx.export_function(path, fun, kx.array(randn(3, 4)), kx.array(randn(4, 5)))
    data = open(path, "rb").read()
    bad = str(tmp_path / "bad.mlxfn")
    x, y = kx.array(randn(3, 4)), kx.array(randn(4, 5))

    def attempt(blob):
        with open(bad, "wb") as f:
            f.write(blob)
        try:
            out = kx.import_function(bad)(x, y)
            kx.eval(out)
        except (ValueError, RuntimeError, IndexError, TypeError, OverflowError):
            pass

    for n in range(len(data)):
        attempt(data[:n])
    r = random.Random(3)
    for _ in range(400):
        blob = bytearray(data)
        for _ in range(r.randint(1, 4)):
            blob[r.randrange(len(blob))] = r.randrange(256)
        attempt(bytes(blob))


# Files of the other library, both ways, through real MLX.
CROSS = [
    ("elementwise", lambda k: lambda a, b: k.log(k.abs(a - b)) * k.sqrt(k.abs(a)), [(4, 8), (8,)]),
    ("reduce", lambda k: lambda a: a.sum(axis=0) + k.argmax(a, axis=0).astype(k.float32), [(4, 8)]),
    ("matmul", lambda k: lambda a, b: a @ b, [(4, 8), (8, 3)]),
    ("views", lambda k: lambda a: a.T.reshape(2, 16)[:, ::2], [(4, 8)]),
    ("scan_concat", lambda k: lambda a: k.concatenate([k.cumsum(a, axis=1), a], axis=0), [(4, 8)]),
    ("take_sort", lambda k: lambda a: k.take_along_axis(a, k.argsort(a, axis=0), axis=0), [(4, 8)]),
    ("conv", lambda k: lambda a, w: k.conv2d(a, w, stride=2, padding=1), [(2, 8, 8, 3), (4, 3, 3, 3)]),
]


@needs_mlx
@pytest.mark.parametrize("name,make,shapes", CROSS, ids=[c[0] for c in CROSS])
def test_files_cross_between_kiln_and_mlx(tmp_path, name, make, shapes):
    arrays = [randn(*s) for s in shapes]
    pk, pm = str(tmp_path / "k.mlxfn"), str(tmp_path / "m.mlxfn")
    kx.export_function(pk, make(kx), *[kx.array(a) for a in arrays])
    mx.export_function(pm, make(mx), *[mx.array(a) for a in arrays])
    fresh = [randn(*s) for s in shapes]
    ref = np.array(make(mx)(*[mx.array(a) for a in fresh]))
    by_mlx = np.array(mx.import_function(pk)(*[mx.array(a) for a in fresh])[0])
    by_kiln = np.array(kx.import_function(pm)(*[kx.array(a) for a in fresh])[0])
    np.testing.assert_allclose(by_mlx, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(by_kiln, ref, rtol=1e-5, atol=1e-5)


@needs_mlx
def test_mlx_shapeless_file_runs_at_new_shapes(tmp_path):
    w = randn(8, 3)
    path = str(tmp_path / "m.mlxfn")
    mx.export_function(path, lambda a: a @ mx.array(w), mx.array(randn(1, 5, 8)), shapeless=True)
    imported = kx.import_function(path)
    for rows in (5, 12):
        x = randn(1, rows, 8)
        np.testing.assert_allclose(np.array(imported(kx.array(x))[0]), x @ w, rtol=1e-5, atol=1e-5)


def test_export_callback_reports_the_graph():
    records = []
    fun = lambda x, y: kx.log(kx.abs(x - y)).astype(kx.int32)
    kx.export_function(records.append, fun, kx.array(1.0), y=kx.array(2.0))
    kinds = [r["type"] for r in records]
    assert kinds[:4] == ["inputs", "keyword_inputs", "outputs", "constants"]
    assert len(records[0]["inputs"]) == 2 and records[1]["keywords"][0][0] == "y"
    prims = [(r["name"], r["arguments"]) for r in records[4:]]
    assert prims == [("Subtract", []), ("Abs", []), ("Log", [2]), ("AsType", [kx.int32])]
    with pytest.raises(ValueError):
        kx.export_function(records.append, fun, kx.array(1.0), kx.array(2.0), metadata="m")


# The further families, both ways: (name, function of the library, input
# makers (numpy), whether MLX's CPU runs kiln's file, tolerance). Functions
# of decompositions return what does not depend on a factor's signs.
def spd(n, dt=np.float32):
    a = rng.standard_normal((n, n))
    return (a @ a.T + n * np.eye(n)).astype(dt)


def well(n, dt=np.float32):
    return (rng.standard_normal((n, n)) + n * np.eye(n)).astype(dt)


def cplx(*shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def idx(*values):
    return lambda: np.array(values, dtype=np.uint32)


def qr_parts(k):
    def f(a):
        q, r = k.linalg.qr(a)
        return q @ r, k.abs(r)
    return f


def svd_parts(k):
    def f(a):
        u, s, vt = k.linalg.svd(a)
        return (u * s) @ vt, s, k.linalg.svd(a, compute_uv=False)
    return f


def eigh_parts(k, uplo):
    def f(a):
        w, v = k.linalg.eigh(a, UPLO=uplo)
        return w, (v * w) @ v.T, k.linalg.eigvalsh(a, UPLO=uplo)
    return f


def eig_parts(k):
    def f(a):
        w, v = k.linalg.eig(a)
        # Unit columns, whatever phase each was given.
        norms = k.real(v * k.conj(v)).sum(axis=0)
        return k.sort(k.real(w)), norms, k.sort(k.real(k.linalg.eigvals(a)))
    return f


FAMILIES = [
    ("qr", qr_parts, [lambda: randn(6, 4)], True, 1e-4),
    ("svd", svd_parts, [lambda: randn(5, 5)], True, 1e-4),
    ("inv", lambda k: lambda a: k.linalg.inv(a), [lambda: well(5)], True, 1e-4),
    ("tri_inv", lambda k: lambda a: k.linalg.tri_inv(a, upper=True), [lambda: well(5)], True, 1e-4),
    ("cholesky", lambda k: lambda a: k.linalg.cholesky(a) + k.linalg.cholesky(a, upper=True), [lambda: spd(5)], True, 1e-4),
    ("eigh", lambda k: eigh_parts(k, "U"), [lambda: spd(5)], True, 1e-4),
    ("eigh_lower", lambda k: eigh_parts(k, "L"), [lambda: spd(4)], True, 1e-4),
    ("eig", eig_parts, [lambda: well(4)], True, 1e-4),
    ("fft", lambda k: lambda a: k.fft.fft(a), [lambda: cplx(4, 8)], True, 1e-4),
    ("fft_real", lambda k: lambda a: k.fft.ifft2(k.fft.rfftn(a), axes=(1, 0)), [lambda: randn(6, 8)], True, 1e-4),
    ("irfft_odd", lambda k: lambda a: k.fft.irfft(a, n=7), [lambda: cplx(3, 5)], True, 1e-4),
    ("hadamard", lambda k: lambda a: k.hadamard_transform(a, scale=0.5), [lambda: randn(3, 16)], True, 1e-4),
    ("divmod", lambda k: lambda a, b: tuple(k.divmod(a, b)), [lambda: randn(4, 5) * 9, lambda: randn(4, 5) + 3], True, 1e-5),
    ("divmod_int", lambda k: lambda a, b: tuple(k.divmod(a, b)), [lambda: rng.integers(-50, 50, (4, 5)).astype(np.int32), lambda: rng.integers(1, 9, (4, 5)).astype(np.int32)], False, 0),
    ("mean_var", lambda k: lambda a: k.mean(a, axis=0) + k.var(a, axis=1, ddof=1).sum(), [lambda: randn(4, 6)], True, 1e-5),
    ("gather_mm", lambda k: lambda a, b, i, j: k.gather_mm(a, b, i, j), [lambda: randn(3, 4, 5), lambda: randn(2, 5, 6), idx(0, 2, 1), idx(1, 0, 1)], True, 1e-4),
    ("gather_mm_sorted", lambda k: lambda a, b, j: k.gather_mm(a, b, None, j, sorted_indices=True), [lambda: randn(3, 2, 5), lambda: randn(2, 5, 6), idx(0, 1, 1)], True, 1e-4),
]


def run_family(tmp_path, make, makers, mlx_runs, tol, shapeless=False):
    arrays = [m() for m in makers]
    pk, pm = str(tmp_path / "k.mlxfn"), str(tmp_path / "m.mlxfn")
    kx.export_function(pk, make(kx), *[kx.array(a) for a in arrays], shapeless=shapeless)
    fresh = [m() for m in makers]
    # The first input non-contiguous: a transposed copy, transposed back.
    views = [np.ascontiguousarray(fresh[0].T)] + fresh[1:]
    k_in = [kx.array(views[0]).T] + [kx.array(a) for a in fresh[1:]]
    want = make(kx)(*[kx.array(a) for a in fresh])
    want = [np.array(w) for w in (want if isinstance(want, tuple) else (want,))]
    got = kx.import_function(pk)(*k_in)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), w, rtol=tol, atol=tol)
    if mx is None:
        return
    mx.export_function(pm, make(mx), *[mx.array(a) for a in arrays], shapeless=shapeless)
    ref = make(mx)(*[mx.array(a) for a in fresh])
    ref = [np.array(r) for r in (ref if isinstance(ref, tuple) else (ref,))]
    for g, r in zip(kx.import_function(pm)(*k_in), ref):
        np.testing.assert_allclose(np.array(g), r, rtol=tol, atol=tol)
    for w, r in zip(want, ref):
        np.testing.assert_allclose(w, r, rtol=tol, atol=tol)
    if mlx_runs:
        for g, r in zip(mx.import_function(pk)(*[mx.array(a) for a in fresh]), ref):
            np.testing.assert_allclose(np.array(g), r, rtol=tol, atol=tol)


@pytest.mark.parametrize("name,make,makers,mlx_runs,tol", FAMILIES, ids=[c[0] for c in FAMILIES])
def test_families_cross_between_kiln_and_mlx(tmp_path, name, make, makers, mlx_runs, tol):
    run_family(tmp_path, make, makers, mlx_runs, tol)


def test_shapeless_counts_follow_new_shapes(tmp_path):
    fun = lambda a: (kx if isinstance(a, kx.array) else mx).mean(a, axis=0) + a.var(axis=0, ddof=1)
    imported = roundtrip(tmp_path, fun, kx.array(randn(4, 3)), shapeless=True)
    for rows in (4, 9):
        x = randn(rows, 3)
        want = x.mean(axis=0) + x.var(axis=0, ddof=1)
        np.testing.assert_allclose(np.array(imported(kx.array(x))[0]), want, rtol=1e-5, atol=1e-5)
    if mx is not None:
        pk, pm = str(tmp_path / "k0.mlxfn"), str(tmp_path / "m0.mlxfn")
        # kiln's mean counts with MLX's NumberOfElements; MLX's var with
        # ddof counts with it too (mean's inverted), which kiln reads.
        mean = lambda k: lambda a: k.mean(a, axis=0)
        kx.export_function(pk, mean(kx), kx.array(randn(4, 3)), shapeless=True)
        mx.export_function(pm, fun, mx.array(randn(4, 3)), shapeless=True)
        for rows in (4, 7):
            x = randn(rows, 3)
            want = x.mean(axis=0) + x.var(axis=0, ddof=1)
            np.testing.assert_allclose(np.array(mx.import_function(pk)(mx.array(x))[0]), x.mean(0), rtol=1e-5)
            np.testing.assert_allclose(np.array(kx.import_function(pm)(kx.array(x))[0]), want, rtol=1e-5)


QUANT_MODES = [("affine", 64, 4), ("affine", 32, 8), ("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)]


def quantized_inputs(mode, gs, bits, w_shape):
    w = randn(*w_shape)
    if mx is not None:
        parts = mx.quantize(mx.array(w), group_size=gs, bits=bits, mode=mode)
        return [np.array(p) for p in parts]
    return [np.array(p) for p in kx.quantize(kx.array(w), group_size=gs, bits=bits, mode=mode)]


@pytest.mark.parametrize("mode,gs,bits", QUANT_MODES, ids=[f"{m}{b}" for m, _, b in QUANT_MODES])
def test_quantized_matmul_and_gather_qmm_cross(tmp_path, mode, gs, bits):
    parts = quantized_inputs(mode, gs, bits, (32, 128))
    q = [lambda p=p: p for p in parts]

    def qmm(k):
        return lambda x, *p: k.quantized_matmul(x, *p, group_size=gs, bits=bits, mode=mode)

    run_family(tmp_path, qmm, [lambda: randn(4, 128)] + q, True, 2e-3)

    def gqmm(k):
        return lambda x, i, *p: k.gather_qmm(x, *p, rhs_indices=i, group_size=gs, bits=bits, mode=mode)

    # Three picks of one row each (read in place by kiln) from two matrices.
    stacked = quantized_inputs(mode, gs, bits, (2, 32, 128))
    q2 = [lambda p=p: p for p in stacked]
    run_family(tmp_path, gqmm, [lambda: randn(3, 1, 128), idx(1, 0, 1)] + q2, True, 2e-3)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_quantize_affine_cross(tmp_path, dt):
    w = randn(16, 128).astype(dt)
    pk = str(tmp_path / "k.mlxfn")
    fun = lambda k: lambda a: k.quantize(a, group_size=32, bits=4)
    kx.export_function(pk, fun(kx), kx.array(w))
    w2 = randn(16, 128).astype(dt)
    got = [np.array(o) for o in kx.import_function(pk)(kx.array(w2))]
    want = [np.array(o) for o in fun(kx)(kx.array(w2))]
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)
    if mx is None:
        return
    pm = str(tmp_path / "m.mlxfn")
    mx.export_function(pm, fun(mx), mx.array(w))
    ref = [np.array(o) for o in fun(mx)(mx.array(w2))]
    by_kiln = [np.array(o) for o in kx.import_function(pm)(kx.array(w2))]
    by_mlx = [np.array(o) for o in mx.import_function(pk)(mx.array(w2))]
    # kiln quantizes as MLX does, bit for bit, through either file.
    for outs in (by_kiln, by_mlx, want):
        for o, r in zip(outs, ref):
            np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("mode,gs,bits", QUANT_MODES, ids=[f"{m}{b}" for m, _, b in QUANT_MODES])
def test_dequantize_round_trip(tmp_path, mode, gs, bits):
    # MLX's CPU writes its dequantize as the graph it stands for, and
    # cannot run the fused one kiln writes (as MLX's GPU does).
    parts = quantized_inputs(mode, gs, bits, (8, 64))
    deq = lambda *p: kx.dequantize(*p, group_size=gs, bits=bits, mode=mode).astype(kx.float32)
    fun = lambda *p: deq(*[kx.array(x) for x in p])
    imported = roundtrip(tmp_path, deq, *[kx.array(p) for p in parts])
    np.testing.assert_array_equal(np.array(imported(*[kx.array(p) for p in parts])[0]), np.array(fun(*parts)))


@needs_mlx
def test_block_masked_mm_from_mlx(tmp_path):
    # kiln has no block_masked_mm of its own: MLX's files are read.
    a, b = randn(70, 40), randn(40, 50)
    out_mask = lambda: rng.random((3, 2)) > 0.4
    lhs_mask = lambda: rng.random((3, 2)) > 0.3
    rhs_mask = lambda: (rng.random((2, 2)) + 0.5).astype(np.float32)
    cases = [{"mask_out": out_mask()}, {"mask_lhs": lhs_mask(), "mask_rhs": rhs_mask()},
             {"mask_out": out_mask(), "mask_lhs": lhs_mask(), "mask_rhs": rhs_mask()}]
    for n, masks in enumerate(cases):
        keys = list(masks)
        f = lambda x, y, *m: mx.block_masked_mm(x, y, 32, **dict(zip(keys, m)))
        pm = str(tmp_path / f"m{n}.mlxfn")
        mx.export_function(pm, f, mx.array(a), mx.array(b), *[mx.array(m) for m in masks.values()])
        a2, b2 = randn(70, 40), randn(40, 50)
        ref = np.array(f(mx.array(a2), mx.array(b2), *[mx.array(m) for m in masks.values()]))
        got = kx.import_function(pm)(kx.array(a2), kx.array(b2), *[kx.array(m) for m in masks.values()])[0]
        np.testing.assert_allclose(np.array(got), ref, rtol=1e-4, atol=1e-4)


def masked_assign(k):
    def f(a, m, v):
        b = a + 0
        b[m] = v
        return b

    return f


@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_masked_scatter_cross(tmp_path, dt):
    # `a[mask] = v` is MLX's MaskedScatter node; the k-th true position
    # takes v's k-th value (v may hold more values than there are).
    a = lambda: randn(6, 5).astype(dt)
    m = lambda: rng.random((5, 6)).T > 0.5
    v = lambda: (randn(30) * 10).astype(dt)
    run_family(tmp_path, masked_assign, [a, m, v], True, 1e-6)
    x, mask, vals = a(), m(), v()
    want = x.copy()
    want[mask] = vals[: mask.sum()]
    got = masked_assign(kx)(kx.array(x), kx.array(mask), kx.array(vals))
    np.testing.assert_array_equal(np.array(got), want)


def test_depends_cross(tmp_path):
    def make(k):
        return lambda x, y: k.depends([x * 2], [y + 1])[0] + 1

    run_family(tmp_path, make, [lambda: randn(3, 4), lambda: randn(4)], True, 1e-6)
