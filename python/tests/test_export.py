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
    fun = lambda a: kx.linalg.inv(a)
    with pytest.raises(ValueError, match="serialize primitive"):
        kx.export_function(str(tmp_path / "f.mlxfn"), fun, kx.array(np.eye(3, dtype=np.float32)))


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
