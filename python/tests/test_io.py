"""kiln.core save/load: .npy, .npz, .safetensors and .gguf round trips of
every dtype and layout, NumPy interop both ways, MLX interop both ways
(when mlx is installed), metadata and errors."""

import io
import pathlib
import zipfile

import numpy as np
import pytest

import kiln.core as kc
from conftest import mx, needs_mlx, rand

NP_DTYPES = [
    np.bool_,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
]
LAYOUTS = ["dense", "transposed", "sliced", "broadcast"]


def reference(rng, dtype, shape):
    if dtype == np.complex64:
        return (rand(rng, shape) + 1j * rand(rng, shape)).astype(np.complex64)
    return rand(rng, shape, dtype)


def to_kiln(x):
    """x as a kiln array of the same dtype (float64 stays float64)."""
    return kc.array(x, dtype=kc.float64) if x.dtype == np.float64 else kc.array(x)


def with_layout(rng, dtype, layout):
    """A kiln array of shape (4, 3) in the layout, and its NumPy values."""
    if layout == "dense":
        x = reference(rng, dtype, (4, 3))
        return to_kiln(x), x
    if layout == "transposed":
        x = reference(rng, dtype, (3, 4))
        return to_kiln(x).T, x.T
    if layout == "sliced":
        x = reference(rng, dtype, (8, 7))
        return to_kiln(x)[1::2, ::2], x[1::2, ::2]
    x = reference(rng, dtype, (1, 3))
    return kc.broadcast_to(to_kiln(x), (4, 3)), np.broadcast_to(x, (4, 3))


def bf16_bits(a):
    """The raw bits of a kiln bfloat16 array, as uint16."""
    return np.array(kc.view(a, kc.uint16))


def assert_same(got, want):
    """got (kiln) equals want (NumPy, or kiln for bfloat16) exactly."""
    if isinstance(want, kc.array):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(bf16_bits(got), bf16_bits(want))
        return
    assert got.shape == want.shape
    assert np.array(got).dtype == want.dtype
    np.testing.assert_array_equal(np.array(got), want)


# --- .npy --------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_npy_round_trip_and_numpy_reads_it(tmp_path, rng, dtype, layout):
    a, x = with_layout(rng, dtype, layout)
    kc.save(tmp_path / "a.npy", a)
    assert_same(kc.load(tmp_path / "a.npy"), x)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), x)
    # Byte for byte what NumPy writes.
    np.save(tmp_path / "np.npy", np.ascontiguousarray(x))
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "np.npy").read_bytes()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_npy_bfloat16_is_a_two_byte_void_as_mlx_writes_it(tmp_path, rng, layout):
    a, x = with_layout(rng, np.float32, layout)
    b = a.astype(kc.bfloat16)
    kc.save(tmp_path / "b", b)
    assert b"'descr': '<V2'" in (tmp_path / "b.npy").read_bytes()
    assert_same(kc.load(tmp_path / "b.npy"), b)
    raw = np.load(tmp_path / "b.npy")
    assert raw.dtype == np.dtype("V2")
    np.testing.assert_array_equal(raw.view(np.uint16), bf16_bits(b))
    # The bits are float32's upper half, rounded: an independent check.
    np.testing.assert_allclose(
        (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32),
        x,
        rtol=2**-8,
    )


@pytest.mark.parametrize("dtype", ["<i2", ">i2", ">u4", ">f4", ">f8", ">c8", "<c8"])
def test_npy_reads_numpy_byte_orders(tmp_path, rng, dtype):
    x = reference(rng, np.dtype(dtype).newbyteorder("="), (3, 5)).astype(dtype)
    np.save(tmp_path / "x.npy", x)
    got = kc.load(tmp_path / "x.npy")
    np.testing.assert_array_equal(np.array(got), x.astype(x.dtype.newbyteorder("=")))


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4), (5,)])
def test_npy_reads_fortran_order(tmp_path, rng, shape):
    x = np.asfortranarray(rand(rng, shape))
    np.save(tmp_path / "f.npy", x)
    if len(shape) > 1:
        assert b"'fortran_order': True" in (tmp_path / "f.npy").read_bytes()
    np.testing.assert_array_equal(np.array(kc.load(tmp_path / "f.npy")), x)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_reads_format_versions(tmp_path, rng, version):
    x = rand(rng, (3, 4), np.int32, -50, 50)
    with open(tmp_path / "v.npy", "wb") as f:
        np.lib.format.write_array(f, x, version=version)
    np.testing.assert_array_equal(np.array(kc.load(tmp_path / "v.npy")), x)


def test_npy_scalars_and_empty_arrays(tmp_path):
    for x in [np.float32(2.5), np.zeros((0, 3), np.int16), np.array(True)]:
        np.save(tmp_path / "s.npy", x)
        got = kc.load(tmp_path / "s.npy")
        assert got.shape == np.shape(x)
        np.testing.assert_array_equal(np.array(got), x)
        kc.save(tmp_path / "k.npy", got)
        np.testing.assert_array_equal(np.load(tmp_path / "k.npy"), x)


def test_save_appends_npy_like_mlx(tmp_path):
    a = kc.array([1, 2, 3])
    kc.save(str(tmp_path / "a"), a)
    kc.save(tmp_path / "b.npy", a)
    kc.save(tmp_path / "c.NPY", a)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["a.npy", "b.npy", "c.NPY.npy"]


def test_npy_file_objects(tmp_path, rng):
    a, x = with_layout(rng, np.float16, "transposed")
    buf = io.BytesIO()
    kc.save(buf, a)
    buf.seek(0)
    assert_same(kc.load(buf, format="npy"), x)
    with open(tmp_path / "f.npy", "wb") as f:
        kc.save(f, a)
    with open(tmp_path / "f.npy", "rb") as f:
        assert_same(kc.load(f), x)  # the format comes from f.name
    # A compressed stream, whose fileno is the compressed file's.
    import gzip

    with gzip.open(tmp_path / "g.npy.gz", "wb") as f:
        kc.save(f, a)
    with gzip.open(tmp_path / "g.npy.gz", "rb") as f:
        assert_same(kc.load(f, format="npy"), x)
    # Reading starts where the file object is.
    with open(tmp_path / "two.bin", "wb") as f:
        f.write(b"prefix")
        kc.save(f, a)
    with open(tmp_path / "two.bin", "rb") as f:
        f.read(6)
        assert_same(kc.load(f, format="npy"), x)


# --- .npz --------------------------------------------------------------------


@pytest.mark.parametrize("save", ["savez", "savez_compressed"])
def test_npz_round_trip_and_numpy_reads_it(tmp_path, rng, save):
    arrays = {
        name: with_layout(rng, dtype, layout)
        for name, dtype, layout in [
            ("w", np.float32, "transposed"),
            ("b", np.bool_, "broadcast"),
            ("i", np.int64, "sliced"),
            ("c", np.complex64, "dense"),
        ]
    }
    pos = with_layout(rng, np.uint8, "dense")
    getattr(kc, save)(tmp_path / "z", pos[0], **{k: v[0] for k, v in arrays.items()})
    with zipfile.ZipFile(tmp_path / "z.npz") as zf:
        kinds = {i.compress_type for i in zf.infolist()}
        assert sorted(zf.namelist()) == [
            "arr_0.npy",
            "b.npy",
            "c.npy",
            "i.npy",
            "w.npy",
        ]
    assert kinds == {
        zipfile.ZIP_DEFLATED if save == "savez_compressed" else zipfile.ZIP_STORED
    }
    got = kc.load(tmp_path / "z.npz")
    ref = np.load(tmp_path / "z.npz")
    assert sorted(got) == sorted(ref.files)
    assert_same(got["arr_0"], pos[1])
    np.testing.assert_array_equal(ref["arr_0"], pos[1])
    for k, (_, x) in arrays.items():
        assert_same(got[k], x)
        np.testing.assert_array_equal(ref[k], x)


def test_npz_written_by_numpy(tmp_path, rng):
    x, y = rand(rng, (3, 4)), np.asfortranarray(rand(rng, (2, 5), np.int16))
    np.savez(tmp_path / "n.npz", x, y=y)
    np.savez_compressed(tmp_path / "c.npz", x, y=y)
    for f in ["n.npz", "c.npz"]:
        got = kc.load(tmp_path / f)
        assert sorted(got) == ["arr_0", "y"]
        np.testing.assert_array_equal(np.array(got["arr_0"]), x)
        np.testing.assert_array_equal(np.array(got["y"]), y)


def test_npz_file_objects_and_names(tmp_path):
    buf = io.BytesIO()
    kc.savez(buf, kc.array([1.0]), kc.array([2.0]))
    buf.seek(0)
    got = kc.load(buf, format="npz")
    assert {k: v.item() for k, v in got.items()} == {"arr_0": 1.0, "arr_1": 2.0}
    with pytest.raises(ValueError, match="arr_0"):
        kc.savez(tmp_path / "d", kc.array(1), arr_0=kc.array(2))
    with pytest.raises(TypeError, match="'x' must be an array"):
        kc.savez(tmp_path / "d", x=np.arange(3))
    assert not (tmp_path / "d.npz").exists()


# --- .safetensors ------------------------------------------------------------

ST_DTYPES = NP_DTYPES + ["bfloat16"]


def kiln_of(rng, dtype, layout):
    if dtype == "bfloat16":
        a, _ = with_layout(rng, np.float32, layout)
        b = a.astype(kc.bfloat16)
        return b, b
    return with_layout(rng, dtype, layout)


def test_safetensors_round_trip_every_dtype_and_layout(tmp_path, rng):
    arrays, refs = {}, {}
    for dtype in ST_DTYPES:
        for layout in LAYOUTS:
            name = f"{np.dtype(dtype).name if dtype != 'bfloat16' else dtype}.{layout}"
            arrays[name], refs[name] = kiln_of(rng, dtype, layout)
    meta = {"format": "kiln", "note": 'quote " and \\ and é'}
    kc.save_safetensors(tmp_path / "m", arrays, meta)
    got, got_meta = kc.load(tmp_path / "m.safetensors", return_metadata=True)
    assert got_meta == meta
    assert sorted(got) == sorted(arrays)
    for name, want in refs.items():
        assert_same(got[name], want)
    assert kc.load(tmp_path / "m.safetensors").keys() == got.keys()
    _, empty = kc.load(str(tmp_path / "m.safetensors"), "safetensors", True)
    assert empty == meta


def test_safetensors_file_objects(rng):
    a, x = with_layout(rng, np.int32, "sliced")
    buf = io.BytesIO()
    kc.save_safetensors(buf, {"a": a})
    buf.seek(0)
    got, meta = kc.load(buf, format="safetensors", return_metadata=True)
    assert meta == {}
    assert_same(got["a"], x)


def test_safetensors_errors(tmp_path):
    a = kc.array([1.0])
    with pytest.raises(ValueError, match="metadata"):
        kc.save_safetensors(tmp_path / "e", {"a": a}, {"k": 1})
    with pytest.raises(TypeError, match="dict"):
        kc.save_safetensors(tmp_path / "e", [a])
    with pytest.raises(TypeError, match="'a' must be an array"):
        kc.save_safetensors(tmp_path / "e", {"a": np.ones(2)})
    (tmp_path / "j.safetensors").write_bytes(b"\x05" + b"\0" * 7 + b'{"a":')
    with pytest.raises(RuntimeError, match="j.safetensors.*not valid"):
        kc.load(tmp_path / "j.safetensors")


def test_safetensors_float8_e4m3_reads_as_bytes(tmp_path, rng):
    # Every e4m3 byte but the NaNs, decoded by from_fp8 after loading.
    import json
    import struct

    codes = np.array([b for b in range(256) if b & 0x7F != 0x7F], np.uint8)
    codes = codes[rng.permutation(codes.size)]
    header = json.dumps(
        {"t": {"dtype": "F8_E4M3", "shape": [2, codes.size // 2],
               "data_offsets": [0, codes.size]}}
    ).encode()
    path = tmp_path / "f8.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + codes.tobytes())
    out = kc.load(str(path))["t"]
    assert out.dtype == kc.uint8 and out.shape == (2, codes.size // 2)
    np.testing.assert_array_equal(np.array(out).reshape(-1), codes)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 0xF, (codes & 7).astype(np.float64)
    want = sign * np.where(e == 0, m / 8 * 2.0**-6, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))
    got = np.array(kc.from_fp8(out[:, ::-1], dtype=kc.float32))[:, ::-1]
    np.testing.assert_array_equal(got.reshape(-1), want.astype(np.float32))
    # Saving a uint8 array still writes U8.
    kc.save_safetensors(str(tmp_path / "u8"), {"t": out})
    assert b'"U8"' in (tmp_path / "u8.safetensors").read_bytes()[:200]


# --- .gguf -------------------------------------------------------------------

GGUF_DTYPES = [
    np.float32,
    np.float16,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    "bfloat16",
]


def test_gguf_round_trip_and_metadata(tmp_path, rng):
    arrays, refs = {}, {}
    for dtype in GGUF_DTYPES:
        for layout in LAYOUTS:
            name = (
                f"{dtype if isinstance(dtype, str) else np.dtype(dtype).name}.{layout}"
            )
            arrays[name], refs[name] = kiln_of(rng, dtype, layout)
    arrays["scalar"], refs["scalar"] = kc.array(np.float32(1.5)), np.float32(1.5)
    meta = {
        "name": "kiln",
        "tokens": ["a", "", "é"],
        "n": kc.array(7),
        "rate": kc.array(0.25),
        "flags": kc.array([True, False]),
        "ids": kc.array(np.array([3, 1 << 40], np.int64)),
        "u8": kc.array(np.array([1, 2, 255], np.uint8)),
    }
    kc.save_gguf(tmp_path / "g", arrays, meta)
    got, got_meta = kc.load(tmp_path / "g.gguf", return_metadata=True)
    for name, want in refs.items():
        assert_same(got[name], want)
    assert sorted(got_meta) == sorted(meta)
    for k, v in meta.items():
        if isinstance(v, kc.array):
            assert got_meta[k].dtype == v.dtype and got_meta[k].shape == v.shape
            np.testing.assert_array_equal(np.array(got_meta[k]), np.array(v))
        else:
            assert got_meta[k] == v
    kc.save_gguf(tmp_path / "nometa.gguf", {"a": kc.array([1.0])})
    assert kc.load(tmp_path / "nometa.gguf", return_metadata=True)[1] == {}


def test_gguf_errors(tmp_path):
    with pytest.raises(ValueError, match="bool"):
        kc.save_gguf(tmp_path / "e", {"a": kc.array([True])}, {})
    assert not (tmp_path / "e.gguf").exists()  # a failed save leaves no file
    with pytest.raises(ValueError, match="scalars and 1-d"):
        kc.save_gguf(tmp_path / "e", {}, {"m": kc.zeros((2, 2))})
    with pytest.raises(TypeError, match="'m' must be an array, a str"):
        kc.save_gguf(tmp_path / "e", {}, {"m": 3})
    with pytest.raises(ValueError, match="str or a pathlib.Path"):
        kc.save_gguf(io.BytesIO(), {}, {})
    kc.save_gguf(tmp_path / "ok", {"a": kc.array([1.0])}, {})
    with open(tmp_path / "ok.gguf", "rb") as f, pytest.raises(ValueError):
        kc.load(f)
    (tmp_path / "q.gguf").write_bytes(b"GGUF" + b"\x03\0\0\0" + b"\xff" * 16)
    with pytest.raises(RuntimeError, match="q.gguf"):
        kc.load(tmp_path / "q.gguf")


# --- load's dispatch and errors ----------------------------------------------


def test_load_dispatch_errors(tmp_path):
    kc.save(tmp_path / "a.npy", kc.array([1]))
    with pytest.raises(ValueError, match="Unknown file format bar"):
        kc.load(tmp_path / "a.npy.bar")
    with pytest.raises(ValueError, match="Unknown file format xyz"):
        kc.load(tmp_path / "a.npy", format="xyz")
    with pytest.raises(ValueError, match="infer"):
        kc.load(tmp_path / "noext")
    with pytest.raises(ValueError, match="infer"):
        kc.load(io.BytesIO(b""))
    for fmt in ["npy", "npz"]:
        with pytest.raises(
            ValueError, match=f"metadata not supported for format {fmt}"
        ):
            kc.load(tmp_path / "a.npy", format=fmt, return_metadata=True)
    with pytest.raises(ValueError, match="file must be"):
        kc.load(3)
    with pytest.raises(ValueError, match="file must be"):
        kc.save(3, kc.array(1))
    with pytest.raises(TypeError):
        kc.save(tmp_path / "l.npy", [1, 2])
    with pytest.raises(TypeError):
        kc.load(tmp_path / "a.npy", stream="cpu")
    assert kc.load(tmp_path / "a.npy", stream=kc.cpu).item() == 1


def test_missing_and_corrupt_files_name_the_file(tmp_path):
    for name in ["missing.npy", "missing.safetensors", "missing.gguf"]:
        with pytest.raises(RuntimeError, match=f"cannot open .*{name}"):
            kc.load(tmp_path / name)
    with pytest.raises(ValueError, match="missing.npz"):
        kc.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"PK junk")
    with pytest.raises(ValueError, match="junk.npz"):
        kc.load(tmp_path / "junk.npz")
    kc.save(tmp_path / "t.npy", kc.arange(10))
    data = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(data[:-3])
    with pytest.raises(RuntimeError, match="t.npy.*needs 40 bytes"):
        kc.load(tmp_path / "t.npy")
    with open(tmp_path / "t.npy", "rb") as f:
        with pytest.raises(RuntimeError, match="t.npy.*needs 40 bytes"):
            kc.load(f)  # a real file object tells its size
    with pytest.raises(RuntimeError, match="ends early"):
        kc.load(io.BytesIO(data[:-3]), format="npy")  # a stream does not
    (tmp_path / "s.npy").write_bytes(data)
    with open(tmp_path / "s.npy", "r") as f:
        with pytest.raises(TypeError, match="binary mode"):
            kc.load(f)
    with pytest.raises(RuntimeError, match="cannot open"):
        kc.save(tmp_path / "no" / "dir.npy", kc.array(1))


def test_file_object_errors_propagate():
    class Full:
        def write(self, data):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        kc.save(Full(), kc.ones(3))
    closed = io.BytesIO()
    closed.close()
    with pytest.raises(ValueError, match="closed file"):
        kc.load(closed, format="npy")
    with pytest.raises(ValueError, match="closed file"):
        kc.save_safetensors(closed, {"a": kc.ones(3)})


def test_random_damage_never_crashes(tmp_path, rng):
    kc.save_safetensors(tmp_path / "s", {"a": kc.arange(12).reshape(3, 4)}, {"k": "v"})
    kc.save_gguf(tmp_path / "g", {"a": kc.ones((4, 8))}, {"s": "x", "l": ["p"]})
    kc.save(tmp_path / "n", kc.ones((3, 5)))
    for name in ["s.safetensors", "g.gguf", "n.npy"]:
        good = bytearray((tmp_path / name).read_bytes())
        for _ in range(200):
            bad = bytearray(good)
            for i in rng.integers(0, min(len(bad), 128), size=rng.integers(1, 4)):
                bad[i] = int(rng.integers(0, 256))
            (tmp_path / ("x_" + name)).write_bytes(bad)
            try:
                kc.load(tmp_path / ("x_" + name))
            except (RuntimeError, ValueError):
                pass


def test_saving_inside_a_transformation_raises(tmp_path):
    def f(x):
        kc.save(tmp_path / "t.npy", x)
        return x.sum()

    with pytest.raises(ValueError, match="transformation"):
        kc.grad(f)(kc.array([1.0, 2.0]))


# --- MLX interop -------------------------------------------------------------


def mlx_and_kiln(rng, dtype):
    """The same random (3, 4) values as an MLX and a kiln array of dtype."""
    mx = pytest.importorskip("mlx.core")
    if dtype == "complex64":
        x = (rand(rng, (3, 4)) + 1j * rand(rng, (3, 4))).astype(np.complex64)
    elif dtype == "bool_":
        x = rand(rng, (3, 4), np.bool_)
    elif dtype in ("float16", "bfloat16", "float32"):
        x = rand(rng, (3, 4))
    else:
        x = rand(rng, (3, 4), np.int64, 0, 100)
        if dtype.startswith("int"):
            x = x - 50
    m = mx.array(x).astype(getattr(mx, dtype))
    k = kc.array(x).astype(getattr(kc, dtype))
    return mx, m, k


def same_as_mlx(k, m, mx):
    assert k.shape == tuple(m.shape)
    assert str(k.dtype).split(".")[-1] == str(m.dtype).split(".")[-1]
    if k.dtype == kc.bfloat16:
        k, m = k.astype(kc.float32), m.astype(mx.float32)
    np.testing.assert_array_equal(np.array(k), np.array(m))


# What MLX 0.32.4 itself writes (it refuses float64 safetensors and GGUF
# tensors of bfloat16, int64 or unsigned types).
MLX_ST_DTYPES = [
    "bool_",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "complex64",
]


@pytest.mark.parametrize("dtype", MLX_ST_DTYPES)
def test_safetensors_interop_with_mlx(tmp_path, rng, dtype):
    mx, m, k = mlx_and_kiln(rng, dtype)
    mx.save_safetensors(str(tmp_path / "m"), {"w": m, "t": m.T}, {"by": "mlx"})
    got, meta = kc.load(tmp_path / "m.safetensors", return_metadata=True)
    assert meta == {"by": "mlx"}
    same_as_mlx(got["w"], m, mx)
    same_as_mlx(got["t"], m.T, mx)
    kc.save_safetensors(tmp_path / "k", {"w": k, "t": k.T}, {"by": "kiln"})
    back, meta = mx.load(str(tmp_path / "k.safetensors"), return_metadata=True)
    assert meta == {"by": "kiln"}
    same_as_mlx(k, back["w"], mx)
    same_as_mlx(k.T, back["t"], mx)
    # One tensor, no metadata: the very bytes MLX writes.
    mx.save_safetensors(str(tmp_path / "one_m"), {"w": m})
    kc.save_safetensors(tmp_path / "one_k", {"w": k})
    assert (tmp_path / "one_m.safetensors").read_bytes() == (
        tmp_path / "one_k.safetensors"
    ).read_bytes()


@pytest.mark.parametrize("dtype", MLX_ST_DTYPES)
def test_npy_interop_with_mlx(tmp_path, rng, dtype):
    mx, m, k = mlx_and_kiln(rng, dtype)
    mx.save(str(tmp_path / "m.npy"), m.T)
    same_as_mlx(kc.load(tmp_path / "m.npy"), m.T, mx)
    kc.save(tmp_path / "k.npy", k.T)
    same_as_mlx(k.T, mx.load(str(tmp_path / "k.npy")), mx)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int16", "int32"])
def test_gguf_interop_with_mlx(tmp_path, rng, dtype):
    mx, m, k = mlx_and_kiln(rng, dtype)
    mx.save_gguf(
        str(tmp_path / "m"),
        {"w": m, "t": m.T},
        {"s": "x", "l": ["a", "b"], "n": mx.array(3), "v": mx.array([1, 2], mx.uint8)},
    )
    got, meta = kc.load(tmp_path / "m.gguf", return_metadata=True)
    same_as_mlx(got["w"], m, mx)
    same_as_mlx(got["t"], m.T, mx)
    assert meta["s"] == "x" and meta["l"] == ["a", "b"]
    assert meta["n"].item() == 3 and meta["n"].dtype == kc.int32
    assert meta["v"].dtype == kc.uint8 and meta["v"].tolist() == [1, 2]
    kc.save_gguf(
        tmp_path / "k",
        {"w": k, "t": k.T},
        {"s": "y", "l": ["c"], "n": kc.array(4), "f": kc.array([0.5, 1.5])},
    )
    back, meta = mx.load(str(tmp_path / "k.gguf"), return_metadata=True)
    same_as_mlx(k, back["w"], mx)
    same_as_mlx(k.T, back["t"], mx)
    assert meta["s"] == "y" and meta["l"] == ["c"] and meta["n"].item() == 4
    assert meta["f"].tolist() == [0.5, 1.5]


def test_npz_interop_with_mlx(tmp_path, rng):
    mx, m, k = mlx_and_kiln(rng, "float32")
    mx.savez(str(tmp_path / "m"), m, b=m.T)
    got = kc.load(tmp_path / "m.npz")
    same_as_mlx(got["arr_0"], m, mx)
    same_as_mlx(got["b"], m.T, mx)
    kc.savez_compressed(tmp_path / "k", k, b=k.T)
    back = mx.load(str(tmp_path / "k.npz"))
    same_as_mlx(k, back["arr_0"], mx)
    same_as_mlx(k.T, back["b"], mx)


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_module_weights_round_trip(tmp_path, ext):
    import kiln.nn as nn
    from kiln.utils import tree_flatten

    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    net.save_weights(str(tmp_path / f"w.{ext}"))
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_weights(str(tmp_path / f"w.{ext}"))
    want = dict(tree_flatten(net.parameters()))
    got = dict(tree_flatten(other.parameters()))
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(np.array(got[k]), np.array(want[k]))


def _gguf_with(path, tensors):
    """A GGUF v3 file of (name, GGML type, shape, block bytes) tensors."""
    import struct

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 0)
    data = b""
    for name, typ, shape, blob in tensors:
        nb = name.encode()
        head += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(shape))
        for d in reversed(shape):
            head += struct.pack("<Q", d)
        head += struct.pack("<IQ", typ, len(data))
        data += blob + b"\0" * ((-len(blob)) % 32)
    head += b"\0" * ((-len(head)) % 32)
    with open(path, "wb") as f:
        f.write(head + data)


def _ggml_blocks(rng, typ, n):
    out = b""
    for _ in range(n):
        out += np.float16(rng.uniform(-1, 1)).tobytes()
        if typ == 3:  # Q4_1 carries a minimum too
            out += np.float16(rng.uniform(-1, 1)).tobytes()
        out += rng.integers(0, 256, 32 if typ == 8 else 16, dtype=np.uint8).tobytes()
    return out


def _ggml_reference(typ, blob, shape):
    """The GGML block formula in float64: Q4_0 scale * (q - 8), Q4_1
    scale * q + min, Q8_0 scale * int8."""
    step = {2: 18, 3: 20, 8: 34}[typ]
    out = []
    for i in range(0, len(blob), step):
        b = blob[i:i + step]
        scale = float(np.frombuffer(b[:2], np.float16)[0])
        if typ == 8:
            out += list(scale * np.frombuffer(b[2:], np.int8).astype(np.float64))
            continue
        q = np.frombuffer(b[4:] if typ == 3 else b[2:], np.uint8)
        codes = np.concatenate([q & 15, q >> 4]).astype(np.float64)
        bias = float(np.frombuffer(b[2:4], np.float16)[0]) if typ == 3 else -8 * scale
        out += list(scale * codes + bias)
    return np.array(out).reshape(shape)


def test_gguf_quantized_tensors_load_as_affine_quantization(tmp_path, rng):
    blobs = {2: _ggml_blocks(rng, 2, 8), 3: _ggml_blocks(rng, 3, 6), 8: _ggml_blocks(rng, 8, 3)}
    spec = [("a.weight", 2, (4, 64)), ("b.weight", 3, (2, 96)), ("c.weight", 8, (3, 32))]
    path = str(tmp_path / "q.gguf")
    _gguf_with(path, [(n, t, s, blobs[t]) for n, t, s in spec])
    got = kc.load(path)
    assert sorted(got) == sorted(f"{p}.{k}" for p in "abc" for k in ("weight", "scales", "biases"))
    for name, typ, shape in spec:
        p = name[0]
        bits = 8 if typ == 8 else 4
        assert got[name].dtype == kc.uint32 and got[name].shape == (shape[0], shape[1] * bits // 32)
        assert got[p + ".scales"].dtype == kc.float16
        w = kc.dequantize(got[name], got[p + ".scales"], got[p + ".biases"], group_size=32, bits=bits,
                          dtype=kc.float32)
        ref = _ggml_reference(typ, blobs[typ], shape)
        # kiln, as MLX, dequantizes in the scales' float16 before the cast.
        np.testing.assert_allclose(np.array(w), ref, rtol=0, atol=2e-3 * np.abs(ref).max())


@needs_mlx
def test_gguf_quantized_tensors_are_mlx_s_bit_for_bit(tmp_path, rng):
    path = str(tmp_path / "q.gguf")
    _gguf_with(path, [("a.weight", 2, (4, 64), _ggml_blocks(rng, 2, 8)),
                      ("b.weight", 3, (2, 96), _ggml_blocks(rng, 3, 6)),
                      ("c.weight", 8, (3, 32), _ggml_blocks(rng, 8, 3))])
    k, m = kc.load(path), mx.load(path)
    assert sorted(k) == sorted(m)
    for name in m:
        a, b = np.array(k[name]), np.array(m[name])
        assert a.dtype == b.dtype and np.array_equal(a, b), name


def test_load_is_lazy_and_survives_saving_over_the_file(tmp_path, rng):
    x = rng.standard_normal((32, 8)).astype(np.float32)
    path = str(tmp_path / "w.safetensors")
    kc.save_safetensors(path, {"w": kc.array(x)})
    w = kc.load(path)["w"]
    # Saved over its own file before it was read, and the file replaced:
    # the array keeps the bytes it was loaded from.
    kc.save_safetensors(path, {"w": w, "w2": w * 2})
    kc.save_safetensors(path, {"w": kc.zeros((32, 8))})
    np.testing.assert_array_equal(np.array(w), x)
    np.testing.assert_array_equal(np.array(kc.load(path)["w"]), 0)
