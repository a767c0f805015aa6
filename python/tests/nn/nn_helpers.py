"""Shared by the kiln.nn tests: dtypes and tolerances, input layouts, and
loading the same weights into a kiln and an MLX module."""

import inspect

import numpy as np
import pytest

import kiln.core as kc
from kiln.utils import tree_flatten

FLOAT_DTYPES = [kc.float32, kc.float16, kc.bfloat16]

# (rtol, atol) against a float64 reference, by the dtype computed in.
TOLERANCE = {
    kc.float32: (1e-5, 1e-6),
    kc.float16: (4e-3, 4e-3),
    kc.bfloat16: (3e-2, 3e-2),
}

LAYOUTS = ["contiguous", "transposed", "sliced", "broadcast"]


def to_numpy(a):
    """A kiln array as a NumPy array (bfloat16 through float32)."""
    if a.dtype == kc.bfloat16:
        a = a.astype(kc.float32)
    return np.array(a)


def random_input(rng, shape, dtype=kc.float32, layout="contiguous", lo=-4.0, hi=4.0):
    """A 2-D kiln array of ``shape`` in ``layout`` (contiguous, a transposed
    view, a strided slice, or a broadcast row) and its values in float64
    (after rounding to ``dtype``)."""
    rows, cols = shape
    if layout == "contiguous":
        x = kc.array(rng.uniform(lo, hi, (rows, cols)).astype(np.float32))
    elif layout == "transposed":
        x = kc.array(rng.uniform(lo, hi, (cols, rows)).astype(np.float32)).T
    elif layout == "sliced":
        x = kc.array(rng.uniform(lo, hi, (2 * rows, cols + 1)).astype(np.float32))[::2, 1:]
    elif layout == "broadcast":
        x = kc.broadcast_to(kc.array(rng.uniform(lo, hi, (1, cols)).astype(np.float32)), shape)
    else:
        raise ValueError(layout)
    x = x.astype(dtype)
    return x, to_numpy(x).astype(np.float64)


def assert_close(got, want, dtype=kc.float32, scale=1.0):
    """``got`` (kiln) against ``want`` (float64 NumPy) within ``dtype``'s
    tolerance times ``scale``."""
    rtol, atol = TOLERANCE[dtype]
    got = to_numpy(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol * scale, atol=atol * scale)


def mlx():
    """``(mlx.core, mlx.nn)``, or skip the test."""
    mx = pytest.importorskip("mlx.core")
    mnn = pytest.importorskip("mlx.nn")
    return mx, mnn


def share_weights(rng, kiln_module, mlx_module, positive=()):
    """Draw random weights in NumPy and load them into both modules
    (``positive`` names parameters that must be positive, such as a
    running variance)."""
    mx, _ = mlx()
    weights = []
    for name, value in tree_flatten(kiln_module.parameters()):
        w = rng.normal(size=value.shape).astype(np.float32)
        if name in positive:
            w = np.abs(w) + 0.1
        weights.append((name, w))
    kiln_module.load_weights([(k, kc.array(w)) for k, w in weights])
    mlx_module.load_weights([(k, mx.array(w)) for k, w in weights])
    return dict(weights)


def param_names(tree):
    return sorted(k for k, _ in tree_flatten(tree))


def assert_same_signature(ours, theirs):
    """Same parameter names and defaults (dtype defaults compared by
    name: kiln.core.float32 and mlx.core.float32 are the same default)."""

    def default(d):
        return str(d).rsplit(".", 1)[-1] if type(d).__name__ == "Dtype" else d

    def params(f):
        return [(p.name, default(p.default)) for p in inspect.signature(f).parameters.values()]

    assert params(ours) == params(theirs), (params(ours), params(theirs))


def numeric_grad(f, x, h=1e-6):
    """Central differences of the scalar NumPy function ``f`` at the float64
    array ``x``."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = h
        g[i] = (f(x + step) - f(x - step)) / (2 * h)
    return g


def kiln_grad64(f, x):
    """``grad(f)`` at ``x`` computed by kiln in float64, as NumPy."""
    return np.array(kc.grad(f)(kc.array(x).astype(kc.float64)))
