import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, needs_mlx, rand

NP_DTYPES = [
    (np.bool_, kc.bool_),
    (np.uint8, kc.uint8),
    (np.uint16, kc.uint16),
    (np.uint32, kc.uint32),
    (np.uint64, kc.uint64),
    (np.int8, kc.int8),
    (np.int16, kc.int16),
    (np.int32, kc.int32),
    (np.int64, kc.int64),
    (np.float16, kc.float16),
    (np.float32, kc.float32),
    (np.complex64, kc.complex64),
]


def test_scalars_default_dtypes():
    assert kc.array(True).dtype == kc.bool_
    assert kc.array(3).dtype == kc.int32
    assert kc.array(2**40).dtype == kc.int64
    assert kc.array(1.5).dtype == kc.float32
    assert kc.array(1 + 2j).dtype == kc.complex64
    assert kc.array(3).item() == 3 and isinstance(kc.array(3).item(), int)
    assert kc.array(2**40).item() == 2**40
    assert kc.array(True).item() is True
    assert kc.array(1.5).item() == 1.5
    assert kc.array(1 + 2j).item() == 1 + 2j
    assert kc.array(7, kc.float16).dtype == kc.float16


def test_nested_lists():
    a = kc.array([[1, 2, 3], [4, 5, 6]])
    assert a.shape == (2, 3) and a.dtype == kc.int32 and a.ndim == 2
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert kc.array([1, 2.5]).dtype == kc.float32
    assert kc.array([True, False]).dtype == kc.bool_
    assert kc.array([True, 2]).dtype == kc.int32
    assert kc.array([1, 1j]).dtype == kc.complex64
    assert kc.array((1, 2)).tolist() == [1, 2]
    assert kc.array([]).shape == (0,)
    assert kc.array([[], []]).shape == (2, 0)
    assert kc.array([[1, 2]], dtype=kc.float64).dtype == kc.float64
    assert kc.array([np.float32(1.5), 2]).tolist() == [1.5, 2.0]


def test_list_of_arrays_stacks():
    a = kc.array([kc.array([1, 2]), kc.array([3, 4])])
    assert a.shape == (2, 2)
    assert a.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("np_dtype,kc_dtype", NP_DTYPES)
def test_numpy_roundtrip_every_dtype(rng, np_dtype, kc_dtype):
    x = rand(rng, (3, 4), np_dtype)
    if np_dtype == np.complex64:
        x = x + 1j * rand(rng, (3, 4), np.float32)
    a = kc.array(x)
    assert a.dtype == kc_dtype
    assert a.shape == (3, 4)
    y = np.array(a)
    assert y.dtype == np_dtype
    np.testing.assert_array_equal(y, x)
    assert a.tolist() == x.tolist()


def test_numpy_float64_defaults_to_float32_as_mlx():
    x = np.array([1.0, 2.0])
    assert kc.array(x).dtype == kc.float32
    b = kc.array(np.array([1e300]), dtype=kc.float64)
    assert b.dtype == kc.float64 and np.array(b)[0] == 1e300
    assert kc.array(np.array([1 + 2j])).dtype == kc.complex64


def test_numpy_other_dtypes():
    a = kc.array(np.array([1.5], np.longdouble))
    assert a.dtype == kc.float32 and a.item() == 1.5
    assert kc.array(np.array([1.5], np.longdouble), kc.float64).dtype == kc.float64
    assert kc.array(np.array([1 + 2j], np.clongdouble)).item() == 1 + 2j
    assert kc.array(np.int64(3)).dtype == kc.int64
    assert kc.array(np.float32(2.5)).item() == 2.5
    # NumPy scalars and 0-d arrays stay 0-d, as in MLX.
    for x in [np.int64(3), np.float32(2.5), np.array(True), np.array(1.5, np.float16)]:
        a = kc.array(x)
        assert a.shape == () and a.item() == x.item()
    for bad in [
        np.array(["a"]),
        np.array([np.datetime64("2020-01-01")]),
        np.array([b"x"]),
        np.array([object()]),
    ]:
        with pytest.raises(TypeError, match="array"):
            kc.array(bad)


def test_numpy_noncontiguous_input(rng):
    x = rand(rng, (4, 6))
    check(kc.array(x.T), x.T)
    check(kc.array(x[::2, ::-3]), x[::2, ::-3])


def test_zero_copy_to_numpy(rng):
    a = kc.array(rand(rng, (3, 5)))
    y = np.asarray(a)
    z = np.asarray(a)
    assert np.shares_memory(y, z)
    mv = memoryview(a)
    assert mv.shape == (3, 5) and mv.format == "f"


def test_numpy_of_views(rng):
    x = rand(rng, (4, 5))
    a = kc.array(x)
    np.testing.assert_array_equal(np.array(a.T), x.T)
    np.testing.assert_array_equal(np.array(a[1:3, ::-2]), x[1:3, ::-2])
    np.testing.assert_array_equal(
        np.array(kc.broadcast_to(kc.array(x[0]), (3, 5))),
        np.broadcast_to(x[0], (3, 5)),
    )


def test_bfloat16_buffers_carry_the_bfloat16_format():
    # As in MLX: a memoryview of raw bfloat16 bits with the format
    # "bfloat16", which NumPy refuses (it has no bfloat16), naming it.
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    a = kc.array(x).astype(kc.bfloat16)
    m = memoryview(a)
    assert (m.format, m.shape, m.strides, m.itemsize) == ("bfloat16", (3, 4), (8, 2), 2)
    bits = np.frombuffer(m.tobytes(), np.uint16).reshape(3, 4)
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(widened, np.array(a.astype(kc.float32)))
    with pytest.raises(ValueError, match="bfloat16"):
        np.array(a)
    assert a.tolist() == np.array(a.astype(kc.float32)).tolist()


def test_nested_lists_may_hold_arrays_at_any_depth():
    # An array stands for the nested list of its shape; dtypes promote with
    # the Python scalars' own (MLX's rule); shapes that disagree raise.
    b, i8 = kc.array([True]), kc.array([3], kc.int8)
    z = kc.array([[b, [2.0]], [[3.0], i8]])
    assert z.shape == (2, 2, 1) and z.dtype == kc.float32
    assert z.tolist() == [[[1.0], [2.0]], [[3.0], [3.0]]]
    assert kc.array([i8, [True]]).dtype == kc.int8
    assert kc.array([i8, [2]]).dtype == kc.int32
    for bad in ([b, 1.0], [1.0, b], [kc.array([1, 2]), [3]]):
        with pytest.raises(ValueError, match="non-uniform length"):
            kc.array(bad)
    with pytest.raises(ValueError, match="extra dimension"):
        kc.array([1, [2]])


def test_from_dlpack_keeps_a_host_views_layout():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (x.T, x[:, ::2], np.broadcast_to(x[0], (2, 4))):
        y = kc.from_dlpack(view)
        assert y.tolist() == view.tolist()
        assert memoryview(y).strides == view.strides
        view_before = view.copy()
        x[0, 0] += 100  # a copy: later writes to the producer do not show
        assert y.tolist() == view_before.tolist()
        x[0, 0] -= 100
    assert kc.from_dlpack(np.ones(3)).dtype == kc.float32
    z = kc.from_dlpack(np.array([1 + 2j, 3 - 4j]))
    assert z.dtype == kc.complex64 and z.tolist() == [1 + 2j, 3 - 4j]
    # A reversed view is copied row by row (docs/mlx_compatibility.md: MLX
    # raises).
    r = kc.from_dlpack(np.arange(5.0)[::-1])
    assert r.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0] and r.dtype == kc.float32


def test_ones_and_zeros_are_dense():
    # A writable NumPy view of ones must not be one element seen n times.
    a = kc.ones((2, 2))
    assert np.array(a, copy=False).strides == (8, 4)
    b = kc.broadcast_to(a, (5, 2, 2))
    assert np.array(b, copy=False).strides == (0, 8, 4)
    assert np.array(kc.zeros_like(a), copy=False).strides == (8, 4)


def test_properties(rng):
    a = kc.array(rand(rng, (2, 3, 4)))
    assert a.size == 24 and a.ndim == 3 and a.itemsize == 4
    assert a.nbytes == 96 and a.T.shape == (4, 3, 2)
    assert len(a) == 2
    assert a.astype(kc.int16).dtype == kc.int16
    assert [x.shape for x in a] == [(3, 4), (3, 4)]
    assert a.mT.shape == (2, 4, 3)
    with pytest.raises(TypeError):
        len(kc.array(1.0))


def test_item_and_conversions():
    assert float(kc.array(2.5)) == 2.5
    assert int(kc.array(7)) == 7
    assert bool(kc.array([True]))
    with pytest.raises(ValueError):
        bool(kc.array([1, 2]))
    with pytest.raises(ValueError):
        kc.array([1, 2]).item()
    assert isinstance(kc.array(1.0, kc.float16).item(), float)


def test_repr():
    assert repr(kc.array([1, 2])) == "array([1, 2], dtype=int32)"
    assert repr(kc.float32) == str(kc.float32) == "kiln.core.float32"
    # Python's spelling of booleans, as MLX's repr.
    assert repr(kc.array([[True, False], [False, True]])) == (
        "array([[True, False],\n       [False, True]], dtype=bool)")
    assert repr(kc.array(False)) == "array(False, dtype=bool)"


@needs_mlx
def test_repr_matches_mlx():
    for v in ([True, False, True], [[1.5, -2.0], [3.25, 4.0]], [[1, 2, 3]], 7, [1 + 2j, -1j]):
        assert repr(kc.array(v)) == repr(mx.array(v)), v
    for d in ("bool_", "int8", "uint32", "float16", "bfloat16", "float32", "complex64"):
        assert str(getattr(kc, d)).replace("kiln", "mlx") == str(getattr(mx, d))


def test_methods(rng):
    x = rand(rng, (3, 4))
    a = kc.array(x)
    check(a.sum(), x.sum(), rtol=1e-5)
    check(a.sum(axis=0), x.sum(0))
    check(a.mean(1, keepdims=True), x.mean(1, keepdims=True))
    check(a.max(), x.max())
    check(a.reshape(2, 6), x.reshape(2, 6))
    check(a.reshape((4, 3)), x.reshape(4, 3))
    check(a.transpose(1, 0), x.T)
    check(a.transpose(), x.T)
    check(a.square(), x**2)
    check(a.abs().sqrt(), np.sqrt(np.abs(x)))
    check(a.swapaxes(0, 1), x.T)
    assert a.argmax().item() == int(x.argmax())
    check(a.cumsum(1), np.cumsum(x, 1), rtol=1e-5)
    assert len(a.split(2, axis=1)) == 2
    check(a.var(), x.var(), rtol=1e-4)
    check(a.flatten(), x.flatten())


@needs_mlx
def test_dtype_rules_match_mlx():
    for d in ["int8", "uint8", "int32", "float16", "bfloat16", "float32", "bool_"]:
        for s in [1, 1.5, True]:
            kd = getattr(kc, d)
            md = getattr(mx, d)
            got = (kc.array([1], kd) + s).dtype
            want = (mx.array([1], md) + s).dtype
            assert str(got).split(".")[-1] == str(want).split(".")[-1], (d, s, got, want)


def test_dtype_objects():
    assert kc.float32.size == 4 and kc.complex64.size == 8
    assert kc.float32 == kc.float32 and kc.float32 != kc.int32
    assert kc.issubdtype(kc.float16, kc.floating)
    assert kc.issubdtype(kc.int8, kc.signedinteger)
    assert not kc.issubdtype(kc.uint8, kc.signedinteger)
    assert kc.issubdtype(kc.floating, kc.inexact)
    f = kc.finfo(kc.float16)
    assert f.max == 65504.0 and f.min == -65504.0 and f.eps == 2.0**-10
    assert kc.finfo(kc.float32).eps == np.finfo(np.float32).eps
    i = kc.iinfo(kc.int8)
    assert (i.min, i.max) == (-128, 127)
    assert kc.iinfo(kc.uint64).max == 2**64 - 1
    # Printed as MLX prints them.
    assert (
        repr(kc.finfo(kc.float32))
        == "finfo(min=-3.40282e+38, max=3.40282e+38, dtype=float32)"
    )
    assert repr(kc.iinfo(kc.uint8)) == "iinfo(min=0, max=255, dtype=uint8)"
    with pytest.raises(ValueError):
        kc.finfo(kc.int32)
    with pytest.raises(ValueError):
        kc.iinfo(kc.float32)


def test_format_finfo_of_complex_and_at_without_index():
    a = kc.arange(3)
    assert f"{a[1]:.2f}" == "1.00"
    assert f"{kc.array(0.35487):.1f}" == "0.4"
    assert f"{a}" == repr(a)
    with pytest.raises(TypeError):
        f"{a:.2f}"  # a spec needs a 0-d array, as in MLX
    f = kc.finfo(kc.complex64)
    assert f.dtype == kc.float32 and f.bits == 32
    assert f.eps == np.finfo(np.float32).eps
    with pytest.raises(ValueError, match="index the array first"):
        a.at.add(1)
    assert a.at[1].add(5).tolist() == [0, 6, 2]


def test_repr_summarizes_long_axes_as_mlx():
    assert repr(kc.array([1] * 6)) == "array([1, 1, 1, 1, 1, 1], dtype=int32)"
    assert repr(kc.array([1] * 7)) == "array([1, 1, 1, ..., 1, 1, 1], dtype=int32)"
    want = (
        "array([[0],\n       [1],\n       [2],\n       ...,\n"
        "       [5],\n       [6],\n       [7]], dtype=int32)"
    )
    assert repr(kc.arange(8).reshape(8, 1)) == want
    want3 = (
        "array([[[0, 1],\n        [2, 3]],\n"
        "       [[4, 5],\n        [6, 7]]], dtype=int32)"
    )
    assert repr(kc.arange(8).reshape(2, 2, 2)) == want3


def test_weak_references_and_asarray_copy_rules():
    import weakref

    a = kc.array([1, 2, 3])
    r = weakref.ref(a)
    assert r() is a
    del a
    assert r() is None
    b = kc.array([1, 2, 3])
    assert kc.asarray(b) is b or kc.asarray(b).tolist() == [1, 2, 3]
    assert kc.asarray(b, copy=True).tolist() == [1, 2, 3]
    assert kc.asarray(b, dtype=kc.float32).dtype == kc.float32
    for src in (b, [1, 2], np.ones(3, np.float32)):
        with pytest.raises(ValueError, match="copy"):
            kc.asarray(src, copy=False)  # as MLX: never promised


def test_in_place_operators_promote_as_mlx():
    a = kc.array([1, 2, 3])
    alias = a
    a += 1.5
    assert a.dtype == kc.float32 and alias is a
    assert a.tolist() == [2.5, 3.5, 4.5]
    b = kc.array([1, 2], kc.int8)
    b *= kc.array([3, 4], kc.int32)
    assert b.dtype == kc.int32 and b.tolist() == [3, 8]
    c = kc.array([4, 6])
    with pytest.raises(ValueError, match="In place division.*int32"):
        c /= 2
    c //= 4
    assert c.dtype == kc.int32 and c.tolist() == [1, 1]
    f = kc.array([1.0, 2.0], kc.float16)
    f /= 4
    assert f.dtype == kc.float16 and f.tolist() == [0.25, 0.5]
    if mx is not None:
        m = mx.array([1, 2, 3])
        m += 1.5
        assert str(m.dtype).endswith("float32")


def test_slice_bounds_are_32_bit():
    a = kc.arange(10)
    assert a[-(2**31):2**31 - 1].tolist() == list(range(10))
    for s in (slice(2**31, None), slice(None, -(2**31) - 1),
              slice(None, None, 2**40)):
        with pytest.raises(ValueError, match="32-bit"):
            a[s]


def test_bytes_and_bad_list_elements():
    assert kc.array(b"\x01\xff").dtype == kc.uint8
    assert kc.array(bytearray(b"ab")).tolist() == [97, 98]
    with pytest.raises(ValueError, match="str"):
        kc.array([1, "x"])
    with pytest.raises(TypeError):
        kc.array("abc")


def test_numpy_dimension_past_int32_is_overflow_error():
    big = np.lib.stride_tricks.as_strided(
        np.zeros(1, np.uint8), shape=(2**31,), strides=(0,))
    with pytest.raises(OverflowError, match="2147483648"):
        kc.array(big)
