"""kiln.nn activations: float64 NumPy formulas on random inputs in every
float dtype and layout, the layer classes and their options, gradients in
closed form, and MLX's results."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from nn_helpers import (
    assert_same_signature,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    mlx,
    param_names,
    random_input,
    to_numpy,
)

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0)


def _log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(x))


# The textbook SELU constants; MLX (and kiln, to match it) truncate them,
# which stays well inside float32's tolerance below.
_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805

# name -> float64 reference (the function's defaults).
REFERENCES = {
    "celu": lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)),
    "elu": _elu,
    "gelu": lambda x: x * 0.5 * (1 + _erf(x / math.sqrt(2))),
    "gelu_approx": lambda x: 0.5
    * x
    * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_fast_approx": lambda x: x * _sigmoid(1.702 * x),
    "glu": lambda x: x[:, : x.shape[1] // 2] * _sigmoid(x[:, x.shape[1] // 2 :]),
    "hard_shrink": lambda x: np.where(np.abs(x) > 0.5, x, 0),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "leaky_relu": lambda x: np.where(x > 0, x, 0.01 * x),
    "log_sigmoid": lambda x: -np.logaddexp(0, -x),
    "log_softmax": _log_softmax,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "relu": lambda x: np.maximum(x, 0),
    "relu2": lambda x: np.maximum(x, 0) ** 2,
    "relu6": lambda x: np.clip(x, 0, 6),
    "selu": lambda x: _SELU_SCALE * _elu(x, _SELU_ALPHA),
    "sigmoid": _sigmoid,
    "silu": lambda x: x * _sigmoid(x),
    "softmax": lambda x: np.exp(_log_softmax(x)),
    "softmin": lambda x: np.exp(_log_softmax(-x)),
    "softplus": _softplus,
    "softshrink": lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)),
    "softsign": lambda x: x / (1 + np.abs(x)),
    "step": lambda x: (x >= 0).astype(np.int32),
    "tanh": np.tanh,
}

# Functions whose result in a half type goes through an exp/log/erf of
# values several units large: a looser tolerance.
_LOOSE_IN_HALF = {"gelu", "gelu_approx", "mish", "log_softmax", "selu", "celu", "elu", "softplus"}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_function_matches_formula(name, dtype, layout, rng):
    x, x64 = random_input(rng, (6, 10), dtype, layout)
    y = getattr(nn, name)(x)
    want = REFERENCES[name](x64)
    if name == "step":
        assert y.dtype == kc.int32
        np.testing.assert_array_equal(to_numpy(y), want)
        return
    assert y.dtype == dtype
    scale = 2.0 if dtype != kc.float32 and name in _LOOSE_IN_HALF else 1.0
    assert_close(y, want, dtype, scale)


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_compiled_function_retraces_for_new_shapes_and_ranks(name, rng):
    # The shapeless traces are keyed on rank: a second shape of the same
    # rank must not reuse the first shape's sizes.
    fn = getattr(nn, name)
    ref = REFERENCES[name]
    for shape in [(3, 4), (5, 8), (2, 3, 6), (7, 2)]:
        x64 = rng.uniform(-4, 4, shape)
        x = kc.array(x64.astype(np.float32))
        if name == "glu":
            want = np.split(x64.astype(np.float32).astype(np.float64), 2, axis=-1)
            want = want[0] * _sigmoid(want[1])
        elif x64.ndim == 2:
            want = ref(x64.astype(np.float32).astype(np.float64))
        else:
            flat = x64.astype(np.float32).astype(np.float64).reshape(-1, shape[-1])
            want = ref(flat).reshape(shape)
        got = fn(x)
        assert tuple(got.shape) == shape or name == "glu"
        assert_close(got, want, kc.float32)


def _eager(f, *args):
    kc.disable_compile()
    try:
        return f(*args)
    finally:
        kc.enable_compile()


@pytest.mark.parametrize("name", sorted(set(REFERENCES) - {"step"}))
def test_transformations_after_a_call_at_another_shape(name, rng):
    # grad, jvp and vmap replay the compiled trace at the new shape: nothing
    # of the first call's shape may leak into them.
    fn = getattr(nn, name)
    fn(kc.array(rng.uniform(-4, 4, (6, 10)).astype(np.float32)))
    x, _ = random_input(rng, (5, 8))
    t, _ = random_input(rng, (5, 8))
    grad = kc.grad(lambda x: fn(x).sum())
    assert_close(grad(x), to_numpy(_eager(grad, x)).astype(np.float64), scale=2)
    jvp = lambda x, t: kc.jvp(fn, [x], [t])[1][0]  # noqa: E731
    assert_close(jvp(x, t), to_numpy(_eager(jvp, x, t)).astype(np.float64), scale=2)
    x3, _ = random_input(rng, (12, 8))
    x3 = x3.reshape(3, 4, 8)
    vmapped = kc.vmap(fn)
    assert_close(vmapped(x3), to_numpy(_eager(vmapped, x3)).astype(np.float64))


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_same_result_with_compilation_off(name, rng):
    x, _ = random_input(rng, (4, 6))
    compiled = to_numpy(getattr(nn, name)(x))
    kc.disable_compile()
    try:
        eager = to_numpy(getattr(nn, name)(x))
    finally:
        kc.enable_compile()
    # Fused and unfused loops may call libmvec at different vector widths
    # (AVX2 and AVX-512 forms of erf differ by an ulp), which gelu's
    # 1 + erf(x) turns into a few 1e-7 near its zeros.
    np.testing.assert_allclose(compiled, eager, rtol=1e-6, atol=1e-6)


def test_options_of_the_functions(rng):
    x, x64 = random_input(rng, (5, 8))
    assert_close(nn.leaky_relu(x, 0.2), np.where(x64 > 0, x64, 0.2 * x64))
    assert_close(nn.leaky_relu(x, negative_slope=0.3), np.where(x64 > 0, x64, 0.3 * x64))
    assert_close(nn.elu(x, 0.7), _elu(x64, 0.7))
    celu = np.maximum(x64, 0) + np.minimum(0, 1.5 * np.expm1(x64 / 1.5))
    assert_close(nn.celu(x, alpha=1.5), celu)
    assert_close(nn.hard_tanh(x, -0.5, 2.0), np.clip(x64, -0.5, 2.0))
    assert_close(nn.hard_shrink(x, 1.2), np.where(np.abs(x64) > 1.2, x64, 0))
    soft = np.where(x64 > 1.1, x64 - 1.1, np.where(x64 < -1.1, x64 + 1.1, 0))
    assert_close(nn.softshrink(x, lambd=1.1), soft)
    np.testing.assert_array_equal(to_numpy(nn.step(x, 1.0)), (x64 >= 1.0).astype(np.int32))
    for axis in (0, 1, -2):
        assert_close(nn.softmax(x, axis=axis), np.exp(_log_softmax(x64, axis)))
        assert_close(nn.log_softmax(x, axis=axis), _log_softmax(x64, axis))
        assert_close(nn.softmin(x, axis=axis), np.exp(_log_softmax(-x64, axis)))
    a, b = x64[:2], x64[2:4]
    assert_close(nn.glu(x[:4], axis=0), a * _sigmoid(b))
    alpha = rng.uniform(0.1, 0.9, (8,)).astype(np.float32)
    assert_close(nn.prelu(x, kc.array(alpha)), np.where(x64 > 0, x64, alpha * x64))


def test_softmax_family_over_several_axes(rng):
    x64 = rng.uniform(-3, 3, (2, 3, 4))
    x = kc.array(x64.astype(np.float32))
    x64 = x64.astype(np.float32).astype(np.float64)
    for axis in [(0, 1), (1, 2), (0, 2), (0, 1, 2)]:
        lsm = x64 - x64.max(axis=axis, keepdims=True)
        lsm = lsm - np.log(np.exp(lsm).sum(axis=axis, keepdims=True))
        assert_close(nn.log_softmax(x, axis=axis), lsm)
        assert_close(nn.softmax(x, axis=axis), np.exp(lsm))
        neg = -x64 - (-x64).max(axis=axis, keepdims=True)
        assert_close(nn.softmin(x, axis), np.exp(neg) / np.exp(neg).sum(axis=axis, keepdims=True))
    # A second shape reuses nothing of the first.
    y64 = rng.uniform(-3, 3, (3, 2, 5))
    y = kc.array(y64.astype(np.float32))
    y64 = y64.astype(np.float32).astype(np.float64)
    e = np.exp(y64 - y64.max(axis=(0, 1), keepdims=True))
    assert_close(nn.softmax(y, axis=(0, 1)), e / e.sum(axis=(0, 1), keepdims=True))


def test_log_softmax_is_stable_for_large_logits():
    x = kc.array([[1000.0, 0.0, -1000.0], [-5e4, -5e4 + 1.0, -5e4 + 2.0]])
    want = _log_softmax(np.array(x, dtype=np.float64))
    got = to_numpy(nn.log_softmax(x))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)


def test_softplus_and_log_sigmoid_do_not_overflow():
    x = kc.array([-200.0, -30.0, 0.0, 30.0, 200.0])
    x64 = np.array(x, dtype=np.float64)
    assert_close(nn.softplus(x), _softplus(x64))
    assert_close(nn.log_sigmoid(x), -np.logaddexp(0, -x64))
    assert_close(nn.mish(x), x64 * np.tanh(_softplus(x64)))


def test_glu_rejects_an_odd_axis():
    with pytest.raises(ValueError, match="split"):
        nn.glu(kc.ones((2, 5)))


# ---- layers -------------------------------------------------------------

# class name -> function it applies with its defaults.
PLAIN_LAYERS = {
    "CELU": "celu",
    "ELU": "elu",
    "GELU": "gelu",
    "GLU": "glu",
    "HardShrink": "hard_shrink",
    "HardTanh": "hard_tanh",
    "Hardswish": "hardswish",
    "LeakyReLU": "leaky_relu",
    "LogSigmoid": "log_sigmoid",
    "LogSoftmax": "log_softmax",
    "Mish": "mish",
    "ReLU": "relu",
    "ReLU2": "relu2",
    "ReLU6": "relu6",
    "SELU": "selu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "Softmax": "softmax",
    "Softmin": "softmin",
    "Softplus": "softplus",
    "Softshrink": "softshrink",
    "Softsign": "softsign",
    "Step": "step",
    "Tanh": "tanh",
}


@pytest.mark.parametrize("cls", sorted(PLAIN_LAYERS))
def test_layer_applies_its_function(cls, rng):
    layer = getattr(nn, cls)()
    assert isinstance(layer, nn.Module)
    assert layer.parameters() == {}
    x, x64 = random_input(rng, (4, 6), layout="transposed")
    got = layer(x)
    want = REFERENCES[PLAIN_LAYERS[cls]](x64)
    if cls == "Step":
        np.testing.assert_array_equal(to_numpy(got), want)
    else:
        assert_close(got, want)


def test_layer_options(rng):
    x, x64 = random_input(rng, (4, 6))
    assert_close(nn.LeakyReLU(0.2)(x), np.where(x64 > 0, x64, 0.2 * x64))
    assert_close(nn.ELU(alpha=0.5)(x), _elu(x64, 0.5))
    assert_close(nn.CELU(2.0)(x), np.maximum(x64, 0) + np.minimum(0, 2 * np.expm1(x64 / 2)))
    assert_close(nn.Softshrink(1.0)(x), np.where(x64 > 1, x64 - 1, np.where(x64 < -1, x64 + 1, 0)))
    assert_close(nn.HardShrink(lambd=1.0)(x), np.where(np.abs(x64) > 1.0, x64, 0))
    np.testing.assert_array_equal(to_numpy(nn.Step(0.5)(x)), (x64 >= 0.5).astype(np.int32))
    assert_close(nn.GLU(axis=0)(x), x64[:2] * _sigmoid(x64[2:]))
    assert_close(nn.GELU(approx="none")(x), REFERENCES["gelu"](x64))
    assert_close(nn.GELU("precise")(x), REFERENCES["gelu_approx"](x64))
    assert_close(nn.GELU("tanh")(x), REFERENCES["gelu_approx"](x64))
    assert_close(nn.GELU("fast")(x), REFERENCES["gelu_fast_approx"](x64))


def test_gelu_rejects_an_unknown_approximation():
    with pytest.raises(ValueError, match="approximation.*'erf'"):
        nn.GELU(approx="erf")


def test_prelu_has_a_learnable_slope(rng):
    layer = nn.PReLU()
    assert param_names(layer.trainable_parameters()) == ["weight"]
    np.testing.assert_array_equal(np.array(layer.weight), [0.25])
    layer = nn.PReLU(num_parameters=6, init=0.1)
    np.testing.assert_allclose(np.array(layer.weight), np.full(6, 0.1, np.float32))
    x, x64 = random_input(rng, (4, 6), layout="sliced")
    slope = rng.uniform(0.05, 0.5, 6).astype(np.float32)
    layer.weight = kc.array(slope)
    assert_close(layer(x), np.where(x64 > 0, x64, slope * x64))

    # d/dw sum(prelu(x, w)) = sum of the negative parts, per channel.
    def loss(x):
        return layer(x).sum()

    _, grads = nn.value_and_grad(layer, loss)(x)
    assert_close(grads["weight"], np.minimum(x64, 0).sum(axis=0), scale=10)


# ---- gradients ------------------------------------------------------------

GRADIENTS = {
    "relu": lambda x: (x > 0).astype(np.float64),
    "sigmoid": lambda x: _sigmoid(x) * (1 - _sigmoid(x)),
    "silu": lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))),
    "softplus": _sigmoid,
    "gelu": lambda x: 0.5 * (1 + _erf(x / math.sqrt(2)))
    + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "elu": lambda x: np.where(x > 0, 1.0, np.exp(x)),
    "log_sigmoid": lambda x: 1 - _sigmoid(x),
    "softsign": lambda x: 1 / (1 + np.abs(x)) ** 2,
    "tanh": lambda x: 1 - np.tanh(x) ** 2,
    "hard_tanh": lambda x: (np.abs(x) < 1).astype(np.float64),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradient_in_closed_form(name, rng):
    x, x64 = random_input(rng, (5, 7), layout="transposed")
    g = kc.grad(lambda x: getattr(nn, name)(x).sum())(x)
    assert_close(g, GRADIENTS[name](x64), scale=5)


def test_gradient_of_log_softmax_and_softmax(rng):
    x, x64 = random_input(rng, (3, 5))
    w64 = rng.normal(size=(3, 5))
    w = kc.array(w64.astype(np.float32))
    p = np.exp(_log_softmax(x64))
    # d/dx sum(w * log_softmax(x)) = w - p * sum(w)
    g = kc.grad(lambda x: (w * nn.log_softmax(x)).sum())(x)
    assert_close(g, w64 - p * w64.sum(axis=-1, keepdims=True), scale=10)
    # d/dx sum(w * softmax(x)) = p * (w - sum(p * w))
    g = kc.grad(lambda x: (w * nn.softmax(x)).sum())(x)
    assert_close(g, p * (w64 - (p * w64).sum(axis=-1, keepdims=True)), scale=10)


# ---- against MLX ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_function_matches_mlx(name, rng):
    mx, mnn = mlx()
    x64 = rng.uniform(-5, 5, (3, 4, 8)).astype(np.float32)
    got = to_numpy(getattr(nn, name)(kc.array(x64)))
    want = np.array(getattr(mnn, name)(mx.array(x64)))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_layers_match_mlx(rng):
    mx, mnn = mlx()
    x64 = rng.uniform(-5, 5, (4, 8)).astype(np.float32)
    cases = [(c, ()) for c in PLAIN_LAYERS] + [
        ("GELU", ("precise",)),
        ("GELU", ("fast",)),
        ("LeakyReLU", (0.3,)),
        ("ELU", (0.4,)),
        ("CELU", (0.6,)),
        ("Step", (0.5,)),
        ("GLU", (0,)),
        ("Softshrink", (0.9,)),
        ("HardShrink", (0.9,)),
        ("PReLU", (8, 0.3)),
    ]
    for cls, args in cases:
        got = to_numpy(getattr(nn, cls)(*args)(kc.array(x64)))
        want = np.array(getattr(mnn, cls)(*args)(mx.array(x64)))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6, err_msg=cls)
        assert repr(getattr(nn, cls)(*args)) == repr(getattr(mnn, cls)(*args))


def test_signatures_match_mlx():
    _, mnn = mlx()
    for name in list(REFERENCES) + ["prelu"]:
        assert_same_signature(getattr(nn, name), getattr(mnn, name))
    for cls in list(PLAIN_LAYERS) + ["PReLU"]:
        assert_same_signature(getattr(nn, cls).__init__, getattr(mnn, cls).__init__)


@pytest.mark.parametrize("name", sorted(set(REFERENCES) - {"glu"}))
def test_float64_inputs_stay_float64(name, rng):
    x64 = rng.uniform(-4, 4, (4, 6))
    y = getattr(nn, name)(kc.array(x64).astype(kc.float64))
    if name == "step":
        np.testing.assert_array_equal(to_numpy(y), REFERENCES[name](x64))
        return
    assert y.dtype == kc.float64
    np.testing.assert_allclose(to_numpy(y), REFERENCES[name](x64), rtol=1e-5, atol=1e-6)


def test_integer_inputs_promote_as_mlx(rng):
    mx, mnn = mlx()
    xi = rng.integers(-5, 6, (3, 4)).astype(np.int32)
    for name in sorted(set(REFERENCES) - {"glu"}):
        ours = getattr(nn, name)(kc.array(xi))
        theirs = getattr(mnn, name)(mx.array(xi))
        assert str(ours.dtype).rsplit(".", 1)[-1] == str(theirs.dtype).rsplit(".", 1)[-1], name
        np.testing.assert_allclose(
            to_numpy(ours), np.array(theirs), rtol=2e-6, atol=2e-6, err_msg=name
        )
