"""Shared by the tests of the spatial, attention and recurrent layers:
inputs in several memory layouts, dtype tolerances, loading the same
weights into a kiln and an MLX module, and finite-difference gradients."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from kiln.utils import tree_flatten, tree_unflatten

FLOAT_DTYPES = [kc.float32, kc.float16, kc.bfloat16]

# (rtol, atol) against a float64 reference, by the dtype computed in.
TOLERANCE = {
    kc.float64: (1e-10, 1e-10),
    kc.float32: (1e-5, 1e-5),
    kc.float16: (1e-2, 1e-2),
    kc.bfloat16: (5e-2, 5e-2),
}

LAYOUTS = ["contiguous", "transposed", "sliced", "broadcast"]


def to_numpy(a):
    """A kiln array as a float64 NumPy array (bfloat16 through float32)."""
    if a.dtype == kc.bfloat16:
        a = a.astype(kc.float32)
    return np.array(a).astype(np.float64)


def random_input(rng, shape, dtype=kc.float32, layout="contiguous", lo=-2.0, hi=2.0):
    """A kiln array of ``shape`` stored in ``layout`` (contiguous; a
    transposed view; a strided slice; broadcast along the first axis) and
    its values in float64, after rounding to ``dtype``."""
    shape = tuple(shape)
    if layout == "contiguous":
        x = kc.array(rng.uniform(lo, hi, shape).astype(np.float32))
    elif layout == "transposed":
        base = rng.uniform(lo, hi, shape[::-1]).astype(np.float32)
        x = kc.array(base).transpose()
    elif layout == "sliced":
        # Every other element along axis 1 and an offset along the last.
        wide = (shape[0], 2 * shape[1], *shape[2:-1], shape[-1] + 1)
        x = kc.array(rng.uniform(lo, hi, wide).astype(np.float32))
        x = x[(slice(None), slice(None, None, 2)) + (slice(None),) * (len(shape) - 3) + (slice(1, None),)]
    elif layout == "broadcast":
        row = rng.uniform(lo, hi, (1, *shape[1:])).astype(np.float32)
        x = kc.broadcast_to(kc.array(row), shape)
    else:
        raise ValueError(layout)
    assert tuple(x.shape) == shape
    x = x.astype(dtype)
    return x, to_numpy(x)


def assert_close(got, want, dtype=kc.float32, scale=1.0):
    """``got`` (kiln) against ``want`` (float64 NumPy) within ``dtype``'s
    tolerance times ``scale``."""
    rtol, atol = TOLERANCE[dtype]
    got = to_numpy(got)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale)


def mlx():
    """``(mlx.core, mlx.nn)``, or skip the test."""
    mx = pytest.importorskip("mlx.core")
    mnn = pytest.importorskip("mlx.nn")
    return mx, mnn


def set_weights(module, weights, dtype=kc.float32):
    """Load ``{path: numpy array}`` into ``module`` as ``dtype``."""
    module.update(
        tree_unflatten([(k, kc.array(np.asarray(w)).astype(dtype)) for k, w in weights.items()])
    )


def random_weights(rng, module, scale=0.5):
    """Random normal values (times ``scale``) for every parameter of
    ``module``, as float64 NumPy arrays by path."""
    return {
        k: scale * rng.standard_normal(v.shape)
        for k, v in tree_flatten(module.parameters())
    }


def share_weights(rng, kiln_module, mlx_module, scale=0.5):
    """Load the same random weights into a kiln and an MLX module; returns
    them by path (float64)."""
    mx, _ = mlx()
    weights = random_weights(rng, kiln_module, scale)
    set_weights(kiln_module, weights)
    mlx_module.load_weights([(k, mx.array(w.astype(np.float32))) for k, w in weights.items()])
    return weights


def parameter_names(module):
    return sorted(k for k, _ in tree_flatten(module.parameters()))


def numeric_grad(f, x, eps=1e-6):
    """Central differences of the scalar float64 function ``f`` of a NumPy
    array, entry by entry."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


def f64(x):
    """A float64 kiln array of the NumPy ``x`` (kc.array alone would round
    float64 to float32, as MLX does)."""
    return kc.array(np.asarray(x), dtype=kc.float64)


def check_input_grad(fn, x, rtol=1e-6, atol=1e-7):
    """kiln's gradient of the scalar ``fn`` at the float64 NumPy ``x``
    against finite differences."""
    got = kc.grad(fn)(f64(x))
    assert got.dtype == kc.float64
    want = numeric_grad(lambda v: fn(f64(v)).item(), x)
    np.testing.assert_allclose(np.array(got), want, rtol=rtol, atol=atol)


def check_parameter_grads(module, loss, *inputs, rtol=1e-6, atol=1e-7):
    """kiln's gradient of ``loss(module(*inputs))`` with respect to every
    parameter of ``module`` (made float64) against finite differences;
    ``inputs`` are float64 kiln arrays."""
    module.set_dtype(kc.float64)
    params = dict(tree_flatten(module.trainable_parameters()))
    _, grads = nn.value_and_grad(module, lambda *a: loss(module(*a)))(*inputs)
    grads = dict(tree_flatten(grads))
    assert grads.keys() == params.keys()
    for name, value in params.items():
        def f(v, name=name):
            module.update(tree_unflatten([(name, f64(v))]))
            return loss(module(*inputs)).item()

        assert grads[name].dtype == kc.float64
        want = numeric_grad(f, np.array(value))
        module.update(tree_unflatten([(name, value)]))
        np.testing.assert_allclose(
            np.array(grads[name]), want, rtol=rtol, atol=atol, err_msg=name
        )
