"""Parameters that exist for MLX compatibility do what MLX's do."""

import numpy as np
import pytest

import kiln.core as kc


def test_linspace_endpoint(rng):
    np.testing.assert_allclose(
        np.array(kc.linspace(-1.5, 2.0, 7, endpoint=False)),
        np.linspace(-1.5, 2.0, 7, endpoint=False), rtol=1e-6)
    np.testing.assert_allclose(np.array(kc.linspace(0, 1, 5)), np.linspace(0, 1, 5), rtol=1e-6)
    assert kc.linspace(0, 1, 3, dtype=kc.float16).dtype == kc.float16


def test_creation_dtype_defaults_and_like_dtypes(rng):
    assert kc.zeros((2,)).dtype == kc.float32 and kc.ones((2,), None).dtype == kc.float32
    assert kc.eye(3).dtype == kc.float32 and kc.identity(2).dtype == kc.float32
    x = kc.array(rng.standard_normal((2, 3)).astype(np.float32)).T
    for fn, val in ((kc.zeros_like, 0), (kc.ones_like, 1)):
        y = fn(x, dtype=kc.int16)
        assert y.dtype == kc.int16 and y.shape == (3, 2)
        assert (np.array(y) == val).all()
    y = kc.full_like(x, vals=2.5)
    assert y.dtype == kc.float32 and (np.array(y) == 2.5).all()


def test_asarray_copy_gives_an_independent_array(rng):
    a = kc.array(rng.standard_normal(4).astype(np.float32))
    b = kc.asarray(a, copy=True)
    b[0] = 100.0
    assert float(a[0].item()) != 100.0
    c = kc.asarray(a)
    np.testing.assert_array_equal(np.array(c), np.array(a))


def test_atleast_nd_takes_several_arrays():
    a, b = kc.atleast_2d(kc.array(1.0), kc.array([1.0, 2.0]))
    assert a.shape == (1, 1) and b.shape == (1, 2)
    assert kc.atleast_3d(kc.array([1.0])).shape == (1, 1, 1)


def test_along_axis_defaults(rng):
    a = kc.array(rng.standard_normal((3, 4)).astype(np.float32))
    idx = kc.array(rng.integers(0, 4, (3, 2)).astype(np.int32))
    np.testing.assert_array_equal(
        np.array(kc.take_along_axis(a, idx)),
        np.take_along_axis(np.array(a), np.array(idx), axis=-1))
    flat = kc.array(np.array([0, 5], np.int32))
    out = kc.put_along_axis(a, flat, kc.array([7.0, 8.0]))
    ref = np.array(a).copy().reshape(-1)
    ref[[0, 5]] = [7.0, 8.0]
    np.testing.assert_array_equal(np.array(out), ref.reshape(3, 4))


def test_printoptions_constructor():
    assert kc.PrintOptions(precision=3).precision == 3
    assert kc.PrintOptions().precision == -1
