"""What the tests of the spatial, attention and recurrent layers add to
nn_helpers: inputs of any rank in each memory layout, float64 tolerances,
random weights kept in float64 for the references, and finite-difference
gradients with respect to a module's parameters."""

import numpy as np

import kiln.core as kc
import kiln.nn as nn
from kiln.utils import tree_flatten, tree_map, tree_unflatten
from nn_helpers import (  # noqa: F401  (re-exported to the layer tests)
    FLOAT_DTYPES,
    LAYOUTS,
    TOLERANCE,
    mlx,
    numeric_grad,
    param_names,
    share_weights,
    to_numpy,
)
from nn_helpers import assert_close as _assert_close


def random_input(rng, shape, dtype=kc.float32, layout="contiguous", lo=-2.0, hi=2.0):
    """A kiln array of ``shape`` (rank 3 or more for "sliced") stored in
    ``layout``: contiguous; a transposed view; every other element along
    axis 1 and an offset along the last; broadcast along the first axis.
    Returns it and its values in float64, after rounding to ``dtype``."""
    shape = tuple(shape)
    if layout == "contiguous":
        x = kc.array(rng.uniform(lo, hi, shape).astype(np.float32))
    elif layout == "transposed":
        x = kc.array(rng.uniform(lo, hi, shape[::-1]).astype(np.float32)).transpose()
    elif layout == "sliced":
        wide = (shape[0], 2 * shape[1], *shape[2:-1], shape[-1] + 1)
        middle = (slice(None),) * (len(shape) - 3)
        x = kc.array(rng.uniform(lo, hi, wide).astype(np.float32))
        x = x[(slice(None), slice(None, None, 2), *middle, slice(1, None))]
    elif layout == "broadcast":
        row = rng.uniform(lo, hi, (1, *shape[1:])).astype(np.float32)
        x = kc.broadcast_to(kc.array(row), shape)
    else:
        raise ValueError(layout)
    assert tuple(x.shape) == shape
    x = x.astype(dtype)
    return x, to_numpy(x).astype(np.float64)


def assert_close(got, want, dtype=kc.float32, scale=1.0):
    """nn_helpers.assert_close, with float64 results held to float32's
    tolerance divided by 1e4."""
    if dtype == kc.float64:
        dtype, scale = kc.float32, scale * 1e-4
    _assert_close(got, np.asarray(want, dtype=np.float64), dtype, scale)


def parameter_names(module):
    return param_names(module.parameters())


def random_weights(rng, module, scale=0.5):
    """Random normal values (times ``scale``) for every parameter of
    ``module``, as float64 NumPy arrays by path."""
    return {
        k: scale * rng.standard_normal(v.shape)
        for k, v in tree_flatten(module.parameters())
    }


def set_weights(module, weights, dtype=kc.float32):
    """Load ``{path: numpy array}`` into ``module`` as ``dtype``."""
    module.update(
        tree_unflatten(
            [(k, kc.array(np.asarray(w), dtype=kc.float64).astype(dtype)) for k, w in weights.items()]
        )
    )


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


def check_compiled_training(make, loss, *inputs, steps=3, scale=10.0):
    """Train two copies of ``make()`` (same weights) with plain SGD, one
    step eager and one compiled with the parameters captured as state:
    their losses and final parameters agree, and the loss goes down."""
    kc.random.seed(3)
    eager_model, compiled_model = make(), make()
    compiled_model.update(eager_model.parameters())

    def sgd(model):
        grad_fn = nn.value_and_grad(model, lambda *a: loss(model(*a[:-1]), a[-1]))

        def step(*a):
            value, grads = grad_fn(*a)
            params = model.trainable_parameters()
            model.update(tree_map(lambda p, g: p - 0.1 * g, params, grads))
            return value

        return step

    eager = sgd(eager_model)
    compiled = kc.compile(
        sgd(compiled_model), inputs=compiled_model.state, outputs=compiled_model.state
    )
    losses = []
    for _ in range(steps):
        want, got = eager(*inputs), compiled(*inputs)
        assert_close(got, np.array(want), scale=scale)
        losses.append(want.item())
    assert losses[-1] < losses[0]
    ours = tree_flatten(compiled_model.parameters())
    theirs = dict(tree_flatten(eager_model.parameters()))
    for k, a in ours:
        assert_close(a, np.array(theirs[k]), scale=scale)


def assert_same_signatures(names):
    """The constructors and calls of the layers ``names`` take MLX's
    parameters with MLX's defaults (a function default compared by name)."""
    import inspect

    _, mnn = mlx()

    def params(f):
        out = []
        for p in inspect.signature(f).parameters.values():
            d = p.default
            if callable(d) and hasattr(d, "__name__"):
                d = "function " + d.__name__
            elif type(d).__name__ == "Dtype":
                d = str(d).rsplit(".", 1)[-1]
            out.append((p.name, p.kind, d))
        return out

    for name in names:
        for method in ("__init__", "__call__"):
            ours = getattr(getattr(nn, name), method)
            theirs = getattr(getattr(mnn, name), method)
            assert params(ours) == params(theirs), (name, method)
