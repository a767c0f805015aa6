"""RNN, GRU and LSTM against float64 NumPy loops over time written from the
equations (MLX's gate orders: GRU r, z, n; LSTM i, f, g, o), batched and
unbatched, with and without biases and initial states, in every layout and
dtype; init, errors, gradients and MLX."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from layer_checks import (
    assert_same_signatures,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    check_compiled_training,
    check_input_grad,
    check_parameter_grads,
    f64,
    mlx,
    parameter_names,
    random_input,
    random_weights,
    set_weights,
    share_weights,
    to_numpy,
)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def rnn_reference(p, x, h, nonlinearity=np.tanh):
    out = []
    h = np.zeros(x.shape[:-2] + p["Whh"].shape[:1]) if h is None else h
    for t in range(x.shape[-2]):
        pre = x[..., t, :] @ p["Wxh"].T + h @ p["Whh"].T
        h = nonlinearity(pre + p.get("bias", 0))
        out.append(h)
    return np.stack(out, axis=-2)


def gru_reference(p, x, h):
    H = p["Wh"].shape[1]
    h = np.zeros(x.shape[:-2] + (H,)) if h is None else h
    Wr, Wz, Wn = np.split(p["Wx"], 3)
    Ur, Uz, Un = np.split(p["Wh"], 3)
    br, bz, bn = np.split(p["b"], 3) if "b" in p else (0, 0, 0)
    bhn = p.get("bhn", 0)
    out = []
    for t in range(x.shape[-2]):
        xt = x[..., t, :]
        r = sigmoid(xt @ Wr.T + h @ Ur.T + br)
        z = sigmoid(xt @ Wz.T + h @ Uz.T + bz)
        n = np.tanh(xt @ Wn.T + bn + r * (h @ Un.T + bhn))
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out, axis=-2)


def lstm_reference(p, x, h, c):
    H = p["Wh"].shape[1]
    h = np.zeros(x.shape[:-2] + (H,)) if h is None else h
    c = np.zeros(x.shape[:-2] + (H,)) if c is None else c
    W = np.split(p["Wx"], 4)
    U = np.split(p["Wh"], 4)
    b = np.split(p["bias"], 4) if "bias" in p else (0, 0, 0, 0)
    hs, cs = [], []
    for t in range(x.shape[-2]):
        xt = x[..., t, :]
        i, f, g, o = (xt @ W[k].T + h @ U[k].T + b[k] for k in range(4))
        i, f, g, o = sigmoid(i), sigmoid(f), np.tanh(g), sigmoid(o)
        c = f * c + i * g
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs, axis=-2), np.stack(cs, axis=-2)


def _run(layer, x, state):
    """The layer's outputs with the initial state ``state`` (None, or kiln
    arrays), as a tuple."""
    out = layer(x, *state) if state else layer(x)
    return out if isinstance(out, tuple) else (out,)


def _reference(layer, p, x64, state64, nonlinearity=np.tanh):
    if isinstance(layer, nn.LSTM):
        return lstm_reference(p, x64, *(state64 or (None, None)))
    if isinstance(layer, nn.GRU):
        return (gru_reference(p, x64, *(state64 or (None,))),)
    return (rnn_reference(p, x64, *(state64 or (None,)), nonlinearity=nonlinearity),)


CASES = [
    ("RNN", dict(bias=True)),
    ("RNN", dict(bias=False)),
    ("RNN", dict(nonlinearity="relu")),
    ("GRU", dict(bias=True)),
    ("GRU", dict(bias=False)),
    ("LSTM", dict(bias=True)),
    ("LSTM", dict(bias=False)),
]
CASE_IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]


def _make(name, args):
    """The layer (3 inputs, 4 hidden) and its nonlinearity in NumPy."""
    args = dict(args)
    nonlinearity = np.tanh
    if args.get("nonlinearity") == "relu":
        args["nonlinearity"] = nn.relu
        nonlinearity = lambda v: np.maximum(v, 0)
    return getattr(nn, name)(3, 4, **args), nonlinearity


def _initial_state(rng, layer, batch, with_state):
    if not with_state:
        return (), None
    n = 2 if isinstance(layer, nn.LSTM) else 1
    arrays = [random_input(rng, (*batch, 4)) for _ in range(n)]
    return tuple(a for a, _ in arrays), tuple(a64 for _, a64 in arrays)


@pytest.mark.parametrize("name, args", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("with_state", [False, True])
def test_recurrent_matches_reference(rng, name, args, layout, with_state):
    layer, f = _make(name, args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights)
    x, x64 = random_input(rng, (2, 5, 3), layout=layout)
    state, state64 = _initial_state(rng, layer, (2,), with_state)
    got = _run(layer, x, state)
    want = _reference(layer, weights, x64, state64, f)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("name, args", CASES, ids=CASE_IDS)
def test_recurrent_unbatched_sequences(rng, name, args):
    layer, f = _make(name, args)
    weights = random_weights(rng, layer)
    set_weights(layer, weights)
    x, x64 = random_input(rng, (6, 3), layout="transposed")
    state, state64 = _initial_state(rng, layer, (), True)
    for g, w in zip(_run(layer, x, state), _reference(layer, weights, x64, state64, f)):
        assert g.shape == (6, 4)
        assert_close(g, w)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_recurrent_in_each_float_dtype(rng, name, dtype):
    layer, _ = _make(name, {})
    set_weights(layer, random_weights(rng, layer), dtype)
    rounded = {k: to_numpy(v).astype(np.float64) for k, v in _flat(layer)}
    x, x64 = random_input(rng, (2, 4, 3), dtype=dtype)
    got = _run(layer, x, ())
    for g, w in zip(got, _reference(layer, rounded, x64, None)):
        assert g.dtype == dtype
        assert_close(g, w, dtype, scale=3.0)


def _flat(layer):
    from kiln.utils import tree_flatten

    return tree_flatten(layer.parameters())


def test_a_missing_state_is_zero(rng):
    for name in ("RNN", "GRU", "LSTM"):
        layer, _ = _make(name, {})
        x = kc.array(rng.standard_normal((2, 3, 3)).astype(np.float32))
        zeros = (kc.zeros((2, 4)),) * (2 if name == "LSTM" else 1)
        for a, b in zip(_run(layer, x, ()), _run(layer, x, zeros)):
            assert_close(a, np.array(b).astype(np.float64))


def test_state_carries_across_calls(rng):
    # Running a sequence in two halves, passing the last state on, equals
    # running it whole.
    layer = nn.LSTM(3, 4)
    x = kc.array(rng.standard_normal((2, 6, 3)).astype(np.float32))
    h, c = layer(x)
    h1, c1 = layer(x[:, :3])
    h2, c2 = layer(x[:, 3:], h1[:, -1], c1[:, -1])
    assert_close(kc.concatenate([h1, h2], axis=1), np.array(h).astype(np.float64))
    assert_close(kc.concatenate([c1, c2], axis=1), np.array(c).astype(np.float64))


@pytest.mark.parametrize(
    "name, shapes",
    [
        ("RNN", {"Wxh": (4, 3), "Whh": (4, 4), "bias": (4,)}),
        ("GRU", {"Wx": (12, 3), "Wh": (12, 4), "b": (12,), "bhn": (4,)}),
        ("LSTM", {"Wx": (16, 3), "Wh": (16, 4), "bias": (16,)}),
    ],
)
def test_recurrent_parameters_and_init(name, shapes):
    layer = getattr(nn, name)(3, 4)
    got = {k: v.shape for k, v in _flat(layer)}
    assert got == shapes
    bound = 1 / np.sqrt(4)
    for _, v in _flat(layer):
        v = np.array(v)
        assert np.all(np.abs(v) <= bound)
        # Uniform over [-bound, bound]: some value reaches past 0.3 bound,
        # except with probability 0.3^size (checked where that is < 1e-6:
        # a 4-value bias misses one run in 120).
        if v.size >= 12:
            assert np.abs(v).max() > 0.3 * bound
    no_bias = getattr(nn, name)(3, 4, bias=False)
    assert parameter_names(no_bias) == sorted(k for k in shapes if k[0] == "W")


def test_recurrent_repr_and_defaults():
    assert repr(nn.GRU(3, 5)) == "GRU(input_dims=3, hidden_size=5, bias=True)"
    assert repr(nn.LSTM(3, 5, bias=False)) == "LSTM(input_dims=3, hidden_size=5, bias=False)"
    rnn = nn.RNN(3, 5)
    assert rnn.nonlinearity is nn.tanh and rnn.hidden_size == 5
    assert repr(rnn).startswith("RNN(input_dims=3, hidden_size=5, nonlinearity=<function tanh")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: nn.RNN(3, 4, nonlinearity=3), "callable"),
        (lambda: nn.RNN(0, 4), "input_size"),
        (lambda: nn.GRU(3, -2), "hidden_size"),
        (lambda: nn.LSTM(3.5, 4), "input_size"),
    ],
)
def test_recurrent_bad_arguments_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_recurrent_bad_inputs_raise(name):
    layer = getattr(nn, name)(3, 4)
    with pytest.raises(ValueError, match=rf"{name}.*\(2, 5, 2\)"):
        layer(kc.ones((2, 5, 2)))
    with pytest.raises(ValueError, match=rf"{name}.*\(5,\)"):
        layer(kc.ones((5,)))


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_recurrent_gradients_match_finite_differences(rng, name):
    layer = getattr(nn, name)(2, 3)
    x = rng.standard_normal((2, 4, 2))
    h = f64(rng.standard_normal((2, 3)))

    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def __call__(self, v):
            out = self.layer(v, h)
            return out[0] + out[1] if isinstance(out, tuple) else out

    model = WithState()
    check_parameter_grads(model, lambda y: (y * kc.cos(y)).sum(), f64(x))
    check_input_grad(lambda v: (model(v) ** 2).sum(), x)


@pytest.mark.parametrize("name, args", CASES, ids=CASE_IDS)
def test_recurrent_matches_mlx(rng, name, args):
    mx, mnn = mlx()
    args = dict(args)
    if args.get("nonlinearity") == "relu":
        ours = nn.RNN(3, 4, nonlinearity=nn.relu)
        theirs = mnn.RNN(3, 4, nonlinearity=mnn.relu)
    else:
        ours, theirs = getattr(nn, name)(3, 4, **args), getattr(mnn, name)(3, 4, **args)
    if name != "RNN":
        assert repr(ours) == repr(theirs)
    share_weights(rng, ours, theirs)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    h = rng.standard_normal((2, 4)).astype(np.float32)
    for state in ((), (h,), (h, h * 0.5)):
        if len(state) == 2 and name != "LSTM":
            continue
        got = ours(kc.array(x), *map(kc.array, state))
        want = theirs(mx.array(x), *map(mx.array, state))
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert_close(g, np.array(w))


def test_recurrent_init_draws_as_mlx():
    mx, mnn = mlx()
    for name in ("RNN", "GRU", "LSTM"):
        kc.random.seed(8)
        mx.random.seed(8)
        ours, theirs = getattr(nn, name)(3, 4), getattr(mnn, name)(3, 4)
        from mlx.utils import tree_flatten as mlx_flatten

        a, b = dict(_flat(ours)), dict(mlx_flatten(theirs.parameters()))
        assert a.keys() == b.keys()
        for k in a:
            assert np.array_equal(np.array(a[k]), np.array(b[k])), (name, k)


def test_recurrent_model_in_a_compiled_training_step(rng):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(3, 5)
            self.lstm = nn.LSTM(5, 4)
            self.rnn = nn.RNN(4, 2)

        def __call__(self, x):
            h, _ = self.lstm(self.gru(x))
            return self.rnn(h)

    x = kc.array(rng.standard_normal((2, 6, 3)).astype(np.float32))
    y = kc.array(rng.standard_normal((2, 6, 2)).astype(np.float32))
    check_compiled_training(Model, lambda out, y: ((out - y) ** 2).mean(), x, y)


def test_signatures_match_mlx():
    assert_same_signatures(
        ["RNN", "GRU", "LSTM"]
    )
