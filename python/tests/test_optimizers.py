"""kiln.optimizers: every optimizer against float64 NumPy steps written from
the published update rules, schedules against their formulas, the state
layout, MultiOptimizer's routing, clip_grad_norm, a compiled training step,
and (where mlx is installed) the same trajectories as mlx.optimizers."""

import inspect
import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.optimizers as optim
from kiln.utils import tree_flatten, tree_map, tree_unflatten
from conftest import check, mx, needs_mlx, rand

# ---- The model stand-in and helpers ----------------------------------------


class TinyModel(dict):
    """Enough of nn.Module for an optimizer: a dict of parameters (nested
    dicts and lists) with trainable_parameters() and update()."""

    def trainable_parameters(self):
        return tree_map(lambda x: x, dict(self))

    def update(self, params):
        _assign(self, params)


def _assign(dst, src):
    keys = src.keys() if isinstance(src, dict) else range(len(src))
    for k in keys:
        if isinstance(src[k], (dict, list)):
            _assign(dst[k], src[k])
        else:
            dst[k] = src[k]


def to_np(x):
    """A kiln or mlx array as float64 NumPy."""
    if x.dtype in (kc.float16, kc.bfloat16):
        x = x.astype(kc.float32)
    elif mx is not None and x.dtype in (mx.float16, mx.bfloat16):
        x = x.astype(mx.float32)
    return np.array(x).astype(np.float64)


# A tree with nested dicts and lists: a matrix, a vector and a 3-D tensor.
SHAPES = {"w": (4, 3), "layers": [{"b": (5,)}, {"k": (2, 3, 4)}]}
STEPS = 4


def random_tree(rng):
    """Random values of either sign with magnitudes in [0.25, 2]: away from
    zero, where half precision would underflow the eps terms (in MLX too)."""

    def leaf(shape):
        return (rng.choice([-1.0, 1.0], shape) * rng.uniform(0.25, 2.0, shape)).astype(
            np.float32
        )

    return tree_map(leaf, SHAPES, is_leaf=lambda s: isinstance(s, tuple))


def as_kiln(tree, dtype):
    return tree_map(lambda a: kc.array(a).astype(dtype), tree)


def rounded(tree, dtype):
    """The float64 values of ``tree`` after a round trip through ``dtype``,
    so that the reference starts where the optimizer starts."""
    return tree_map(lambda a: to_np(kc.array(a).astype(dtype)), tree)


# ---- Float64 references, one per optimizer ---------------------------------
# Each is (init(p) -> state dict, apply(g, p, state, t) -> new p) on NumPy
# arrays, with t the step count after the increment (1 on the first step).


def ref_sgd(
    learning_rate, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False
):
    lr = learning_rate

    def apply(g, p, s, t):
        g = g + weight_decay * p
        if momentum <= 0:
            return p - lr * g
        s["v"] = momentum * s["v"] + (1 - dampening) * g
        return p - lr * (g + momentum * s["v"] if nesterov else s["v"])

    return lambda p: {"v": np.zeros_like(p)}, apply


def ref_rmsprop(learning_rate, alpha=0.99, eps=1e-8):
    lr = learning_rate

    def apply(g, p, s, t):
        s["v"] = alpha * s["v"] + (1 - alpha) * g**2
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return lambda p: {"v": np.zeros_like(p)}, apply


def ref_adagrad(learning_rate, eps=1e-8):
    lr = learning_rate

    def apply(g, p, s, t):
        s["v"] = s["v"] + g**2
        return p - lr * g / (np.sqrt(s["v"]) + eps)

    return lambda p: {"v": np.zeros_like(p)}, apply


def ref_adadelta(learning_rate, rho=0.9, eps=1e-6):
    lr = learning_rate

    def apply(g, p, s, t):
        s["v"] = rho * s["v"] + (1 - rho) * g**2
        d = np.sqrt(s["u"] + eps) / np.sqrt(s["v"] + eps) * g
        s["u"] = rho * s["u"] + (1 - rho) * d**2
        return p - lr * d

    return lambda p: {"v": np.zeros_like(p), "u": np.zeros_like(p)}, apply


def ref_adam(
    learning_rate, betas=(0.9, 0.999), eps=1e-8, bias_correction=False, wd=0.0
):
    lr = learning_rate
    b1, b2 = betas

    def apply(g, p, s, t):
        p = p * (1 - lr * wd)
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g**2
        m, v = s["m"], s["v"]
        if bias_correction:
            m, v = m / (1 - b1**t), v / (1 - b2**t)
        return p - lr * m / (np.sqrt(v) + eps)

    return lambda p: {"m": np.zeros_like(p), "v": np.zeros_like(p)}, apply


def ref_adamw(learning_rate, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **kw):
    return ref_adam(learning_rate, betas, eps, wd=weight_decay, **kw)


def ref_adamax(learning_rate, betas=(0.9, 0.999), eps=1e-8):
    lr = learning_rate
    b1, b2 = betas

    def apply(g, p, s, t):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = np.maximum(b2 * s["v"], np.abs(g))
        return p - lr * s["m"] / (s["v"] + eps)

    return lambda p: {"m": np.zeros_like(p), "v": np.zeros_like(p)}, apply


def ref_lion(learning_rate, betas=(0.9, 0.99), weight_decay=0.0):
    lr = learning_rate
    b1, b2 = betas

    def apply(g, p, s, t):
        c = b1 * s["m"] + (1 - b1) * g
        s["m"] = b2 * s["m"] + (1 - b2) * g
        return p * (1 - lr * weight_decay) - lr * np.sign(c)

    return lambda p: {"m": np.zeros_like(p)}, apply


def ref_adafactor(
    learning_rate=None,
    eps=(1e-30, 1e-3),
    clip_threshold=1.0,
    decay_rate=-0.8,
    beta_1=None,
    weight_decay=0.0,
    scale_parameter=True,
    relative_step=True,
    warmup_init=False,
):
    rms = lambda x: np.sqrt(np.mean(x**2))

    def init(p):
        s = {"exp_avg": np.zeros_like(p)} if beta_1 is not None else {}
        if p.ndim >= 2:
            s["row"] = np.zeros(p.shape[:-1])
            s["col"] = np.zeros(p.shape[:-2] + p.shape[-1:])
        else:
            s["sq"] = np.zeros_like(p)
        return s

    def apply(g, p, s, t):
        if relative_step:
            size = min(1e-6 * t if warmup_init else 1e-2, 1 / math.sqrt(t))
        else:
            size = learning_rate
        if scale_parameter:
            size *= max(eps[1], rms(p))
        beta2 = 1 - t**decay_rate
        g2 = g**2 + eps[0]
        if p.ndim >= 2:
            s["row"] = beta2 * s["row"] + (1 - beta2) * g2.mean(-1)
            s["col"] = beta2 * s["col"] + (1 - beta2) * g2.mean(-2)
            # v ~ row col^T / mean(row): the rank-one estimate.
            r = s["row"] / s["row"].mean(-1, keepdims=True)
            u = g / np.sqrt(r[..., :, None] * s["col"][..., None, :])
        else:
            s["sq"] = beta2 * s["sq"] + (1 - beta2) * g2
            u = g / np.sqrt(s["sq"])
        u = size * u / max(1.0, rms(u) / clip_threshold)
        if beta_1 is not None:
            s["exp_avg"] = beta_1 * s["exp_avg"] + (1 - beta_1) * u
            u = s["exp_avg"]
        return p * (1 - weight_decay * size) - u

    return init, apply


def newton_schulz(x, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = x / (np.linalg.norm(x) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


def ref_muon(
    learning_rate, momentum=0.95, weight_decay=0.01, nesterov=True, ns_steps=5
):
    lr = learning_rate

    def apply(g, p, s, t):
        g = g + weight_decay * p
        s["v"] = momentum * s["v"] + (1 - momentum) * g
        u = (1 - momentum) * g + momentum * s["v"] if nesterov else s["v"]
        scale = lr
        if u.ndim >= 2:
            u = newton_schulz(u.reshape(u.shape[0], -1), ns_steps).reshape(u.shape)
            scale = lr * math.sqrt(max(1.0, u.shape[-2] / u.shape[-1]))
        return p - scale * u

    return lambda p: {"v": np.zeros_like(p)}, apply


# (optimizer name, keyword arguments, reference): every option of each.
CASES = [
    ("SGD", dict(learning_rate=0.1), ref_sgd),
    ("SGD", dict(learning_rate=0.1, momentum=0.9), ref_sgd),
    ("SGD", dict(learning_rate=0.1, momentum=0.9, weight_decay=0.05), ref_sgd),
    ("SGD", dict(learning_rate=0.1, momentum=0.8, dampening=0.3), ref_sgd),
    ("SGD", dict(learning_rate=0.1, momentum=0.9, nesterov=True), ref_sgd),
    ("SGD", dict(learning_rate=0.1, weight_decay=0.1), ref_sgd),
    ("RMSprop", dict(learning_rate=0.01), ref_rmsprop),
    ("RMSprop", dict(learning_rate=0.01, alpha=0.9, eps=1e-3), ref_rmsprop),
    ("Adagrad", dict(learning_rate=0.1), ref_adagrad),
    ("Adagrad", dict(learning_rate=0.1, eps=1e-2), ref_adagrad),
    ("AdaDelta", dict(learning_rate=0.5), ref_adadelta),
    ("AdaDelta", dict(learning_rate=0.5, rho=0.8, eps=1e-4), ref_adadelta),
    ("Adam", dict(learning_rate=0.05), ref_adam),
    ("Adam", dict(learning_rate=0.05, betas=[0.8, 0.99], eps=1e-4), ref_adam),
    ("Adam", dict(learning_rate=0.05, bias_correction=True), ref_adam),
    ("AdamW", dict(learning_rate=0.05), ref_adamw),
    (
        "AdamW",
        dict(learning_rate=0.05, weight_decay=0.2, bias_correction=True),
        ref_adamw,
    ),
    ("Adamax", dict(learning_rate=0.05), ref_adamax),
    ("Adamax", dict(learning_rate=0.05, betas=[0.7, 0.9], eps=1e-3), ref_adamax),
    ("Lion", dict(learning_rate=0.05), ref_lion),
    ("Lion", dict(learning_rate=0.05, betas=[0.8, 0.9], weight_decay=0.3), ref_lion),
    ("Adafactor", dict(), ref_adafactor),
    ("Adafactor", dict(warmup_init=True), ref_adafactor),
    (
        "Adafactor",
        dict(beta_1=0.9, weight_decay=0.1, clip_threshold=0.5),
        ref_adafactor,
    ),
    (
        "Adafactor",
        dict(learning_rate=0.05, relative_step=False, scale_parameter=False),
        ref_adafactor,
    ),
    ("Adafactor", dict(decay_rate=-0.5, eps=(1e-3, 1e-2)), ref_adafactor),
    ("Muon", dict(learning_rate=0.05), ref_muon),
    ("Muon", dict(learning_rate=0.05, nesterov=False, weight_decay=0.0), ref_muon),
    ("Muon", dict(learning_rate=0.05, momentum=0.5, ns_steps=3), ref_muon),
]
CASE_IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)]

# Per dtype: tolerance of a few steps against float64. Half precision keeps
# its state in half precision too (as MLX), so it drifts by a few ulps.
DTYPES = {
    "float32": (kc.float32, dict(rtol=1e-4, atol=2e-5)),
    "float16": (kc.float16, dict(rtol=1e-2, atol=1e-2)),
    "bfloat16": (kc.bfloat16, dict(rtol=4e-2, atol=5e-2)),
}


def reference_run(ref, kw, params, grads_seq):
    init, apply = ref(**kw)
    flat = tree_flatten(params)
    states = {k: init(p) for k, p in flat}
    values = dict(flat)
    for t, grads in enumerate(grads_seq, start=1):
        for k, g in tree_flatten(grads):
            values[k] = apply(g, values[k], states[k], t)
    return tree_unflatten(list(values.items()))


def kiln_run(name, kw, params, grads_seq, dtype):
    opt = getattr(optim, name)(**kw)
    p = as_kiln(params, dtype)
    for grads in grads_seq:
        p = opt.apply_gradients(as_kiln(grads, dtype), p)
        kc.eval(p, opt.state)
    return opt, p


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,kw,ref", CASES, ids=CASE_IDS)
def test_optimizer_matches_reference(rng, name, kw, ref, dtype):
    kdt, tol = DTYPES[dtype]
    params = random_tree(rng)
    grads_seq = [random_tree(rng) for _ in range(STEPS)]
    opt, got = kiln_run(name, kw, params, grads_seq, kdt)
    want = reference_run(
        ref, kw, rounded(params, kdt), [rounded(g, kdt) for g in grads_seq]
    )
    assert int(opt.step.item()) == STEPS
    for (path, g), (_, w) in zip(tree_flatten(got), tree_flatten(want)):
        assert g.dtype == kdt, (path, g.dtype)
        check(to_np(g), w, **tol)


@needs_mlx
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name,kw,ref", CASES, ids=CASE_IDS)
def test_optimizer_trajectory_matches_mlx(rng, name, kw, ref, dtype):
    import mlx.optimizers as mlx_optim

    kdt, _ = DTYPES[dtype]
    mdt = getattr(mx, dtype)
    params = random_tree(rng)
    grads_seq = [random_tree(rng) for _ in range(STEPS)]
    opt, got = kiln_run(name, kw, params, grads_seq, kdt)
    mopt = getattr(mlx_optim, name)(**kw)
    mp = tree_map(lambda a: mx.array(a).astype(mdt), params)
    for grads in grads_seq:
        mp = mopt.apply_gradients(
            tree_map(lambda a: mx.array(a).astype(mdt), grads), mp
        )
        mx.eval(mp)
    # Same operations in the same dtype: only summation order may differ
    # (a last-place rounding in half precision).
    tol = (
        dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-2, atol=2e-2)
    )
    for (path, g), (_, m) in zip(tree_flatten(got), tree_flatten(mp)):
        check(to_np(g), to_np(m), **tol)
    # And the state holds the same values under the same keys.
    ks, ms = tree_flatten(opt.state), tree_flatten(mopt.state)
    assert [k for k, _ in ks] == [k for k, _ in ms]
    for (path, a), (_, b) in zip(ks, ms):
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1], path
        check(to_np(a), to_np(b), **tol)


# ---- State layout ------------------------------------------------------------

PER_PARAMETER_KEYS = {
    "SGD": {"v"},
    "RMSprop": {"v"},
    "Adagrad": {"v"},
    "AdaDelta": {"v", "u"},
    "Adam": {"m", "v"},
    "AdamW": {"m", "v"},
    "Adamax": {"m", "v"},
    "Lion": {"m"},
    "Muon": {"v"},
}


@pytest.mark.parametrize("name", sorted(PER_PARAMETER_KEYS))
def test_state_layout(rng, name):
    opt = getattr(optim, name)(learning_rate=0.1)
    # Before init: the step (uint64) and the learning rate (float32).
    assert set(opt.state) == {"step", "learning_rate"}
    assert opt.step.dtype == kc.uint64 and opt.step.item() == 0
    assert opt.learning_rate.dtype == kc.float32
    params = as_kiln(random_tree(rng), kc.float16)
    opt.init(params)
    s = opt.state
    assert set(s) == {"step", "learning_rate", "w", "layers"}
    assert isinstance(s["layers"], list) and len(s["layers"]) == 2
    for leaf_state, p in [
        (s["w"], params["w"]),
        (s["layers"][0]["b"], params["layers"][0]["b"]),
        (s["layers"][1]["k"], params["layers"][1]["k"]),
    ]:
        assert set(leaf_state) == PER_PARAMETER_KEYS[name]
        for a in leaf_state.values():
            assert a.shape == p.shape and a.dtype == p.dtype
            assert not np.any(to_np(a))


def test_adafactor_state_layout(rng):
    params = as_kiln(random_tree(rng), kc.bfloat16)
    opt = optim.Adafactor()
    assert set(opt.state) == {"step"}  # no learning rate with relative steps
    opt.init(params)
    w, b, k = opt.state["w"], opt.state["layers"][0]["b"], opt.state["layers"][1]["k"]
    assert set(w) == {"exp_avg_sq_row", "exp_avg_sq_col"}
    assert w["exp_avg_sq_row"].shape == (4,) and w["exp_avg_sq_col"].shape == (3,)
    assert k["exp_avg_sq_row"].shape == (2, 3) and k["exp_avg_sq_col"].shape == (2, 4)
    assert w["exp_avg_sq_row"].dtype == kc.bfloat16
    assert set(b) == {"exp_avg_sq"} and b["exp_avg_sq"].shape == (5,)
    opt = optim.Adafactor(beta_1=0.9, learning_rate=0.1)
    opt.init(params)
    assert set(opt.state["w"]) == {"exp_avg_sq_row", "exp_avg_sq_col", "exp_avg"}
    assert set(opt.state["layers"][0]["b"]) == {"exp_avg_sq", "exp_avg"}


def test_adafactor_factored_estimate_is_a_batched_outer_product(rng):
    # Rows normalized by their mean, times the columns: 1/sqrt of each.
    row = rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32)
    col = rng.uniform(0.5, 2.0, (2, 4)).astype(np.float32)
    got = optim.Adafactor()._approximate_exp_moving_avg(kc.array(row), kc.array(col))
    r = 1.0 / np.sqrt(row / row.mean(axis=-1, keepdims=True))
    c = 1.0 / np.sqrt(col)
    check(got, r[:, :, None] * c[:, None, :], rtol=1e-6)


@needs_mlx
@pytest.mark.parametrize("name,kw,ref", CASES, ids=CASE_IDS)
def test_state_layout_matches_mlx(rng, name, kw, ref):
    import mlx.optimizers as mlx_optim

    params = random_tree(rng)
    opt = getattr(optim, name)(**kw)
    mopt = getattr(mlx_optim, name)(**kw)
    opt.init(as_kiln(params, kc.float16))
    mopt.init(tree_map(lambda a: mx.array(a).astype(mx.float16), params))

    def layout(state):
        return [
            (k, v.shape, str(v.dtype).split(".")[-1]) for k, v in tree_flatten(state)
        ]

    assert layout(opt.state) == layout(mopt.state)


def test_init_keeps_existing_state_and_fills_new_parameters(rng):
    opt = optim.Adam(0.1)
    params = as_kiln(random_tree(rng), kc.float32)
    grads = as_kiln(random_tree(rng), kc.float32)
    opt.apply_gradients(grads, params)
    m_before = to_np(opt.state["w"]["m"])
    assert np.any(m_before)
    params["extra"] = kc.array(rand(rng, (2,)))
    params["layers"].append({"c": kc.array(rand(rng, (3,)))})
    opt.init(params)
    check(to_np(opt.state["w"]["m"]), m_before)
    assert set(opt.state["extra"]) == {"m", "v"}
    assert opt.state["layers"][2]["c"]["v"].shape == (3,)


def test_state_can_be_saved_and_restored(rng):
    params = as_kiln(random_tree(rng), kc.float32)
    grads_seq = [as_kiln(random_tree(rng), kc.float32) for _ in range(4)]
    straight = optim.AdamW(0.05, bias_correction=True)
    p1 = params
    for g in grads_seq:
        p1 = straight.apply_gradients(g, p1)
    first = optim.AdamW(0.05, bias_correction=True)
    p2 = params
    for g in grads_seq[:2]:
        p2 = first.apply_gradients(g, p2)
    resumed = optim.AdamW(0.05, bias_correction=True)
    resumed.state = tree_map(lambda x: x, first.state)
    assert resumed.step.item() == 2
    for g in grads_seq[2:]:
        p2 = resumed.apply_gradients(g, p2)
    for (_, a), (_, b) in zip(tree_flatten(p1), tree_flatten(p2)):
        check(to_np(a), to_np(b))


# ---- The Optimizer API ---------------------------------------------------------


def test_update_writes_into_the_model(rng):
    w, b = rand(rng, (3, 2)), rand(rng, (2,))
    gw, gb = rand(rng, (3, 2)), rand(rng, (2,))
    model = TinyModel(w=kc.array(w), layers=[{"b": kc.array(b)}])
    opt = optim.SGD(learning_rate=0.5)
    opt.update(model, {"w": kc.array(gw), "layers": [{"b": kc.array(gb)}]})
    check(model["w"], w - 0.5 * gw)
    check(model["layers"][0]["b"], b - 0.5 * gb)
    assert opt.step.item() == 1


class AttributeModel:
    """A model that is not a dict: only the two methods an optimizer uses."""

    def __init__(self, **params):
        self.params = params

    def trainable_parameters(self):
        return self.params

    def update(self, params):
        _assign(self.params, params)


def test_update_of_a_model_that_is_not_a_dict(rng):
    w, gw = rand(rng, (2, 3)), rand(rng, (2, 3))
    model = AttributeModel(w=kc.array(w))
    optim.SGD(0.5, momentum=0.9).update(model, {"w": kc.array(gw)})
    check(model.params["w"], w - 0.5 * gw)


def test_apply_gradients_to_a_subset_of_the_parameters(rng):
    params = as_kiln(random_tree(rng), kc.float32)
    g = rand(rng, (5,))
    out = optim.SGD(0.1).apply_gradients({"layers": [{}, {}]}, params)
    assert out == {"layers": [{}, {}]}
    opt = optim.SGD(0.1)
    out = opt.apply_gradients({"layers": [{"b": kc.array(g)}]}, params)
    assert list(out) == ["layers"] and list(out["layers"][0]) == ["b"]
    check(out["layers"][0]["b"], to_np(params["layers"][0]["b"]) - 0.1 * g)
    assert list(opt.state) == ["step", "learning_rate", "layers"]


def test_non_contiguous_parameters_and_gradients(rng):
    p, g = rand(rng, (6, 4)), rand(rng, (4, 6))
    b = rand(rng, (3,))
    grads = {
        "w": kc.array(g).T,
        "s": kc.array(b)[::2],
        "c": kc.broadcast_to(kc.array(b[:1]), (4,)),
    }
    params = {
        "w": kc.array(p),
        "s": kc.array(rand(rng, (4,)))[1:3],
        "c": kc.array(p)[:4, 1],
    }
    want_opt = optim.Adam(0.1, bias_correction=True)
    contiguous = tree_map(lambda a: kc.array(np.array(a)), (grads, params))
    want = want_opt.apply_gradients(*contiguous)
    got = optim.Adam(0.1, bias_correction=True).apply_gradients(grads, params)
    for k in want:
        check(got[k], want[k])
    # And against the formula: the first bias-corrected Adam step has
    # m_hat = g and v_hat = g^2, so it is -lr * g / (|g| + eps).
    gw = g.T.astype(np.float64)
    check(got["w"], p - 0.1 * gw / (np.abs(gw) + 1e-8), rtol=1e-5)
    check(got["c"], p[:4, 1] - 0.1 * np.sign(b[0]), rtol=1e-5)


def test_learning_rate_property_and_schedules(rng):
    opt = optim.SGD(learning_rate=0.1)
    assert opt.learning_rate.dtype == kc.float32
    check(opt.learning_rate, 0.1)
    opt.learning_rate = 0.25
    check(opt.learning_rate, 0.25)

    # A schedule set on the property runs from the current step.
    p, g = rand(rng, (3,)), rand(rng, (3,))
    params = {"p": kc.array(p)}
    opt.learning_rate = optim.exponential_decay(0.5, 0.5)
    want = p.astype(np.float64)
    check(opt.learning_rate, 0.5)
    for t in range(4):
        params = opt.apply_gradients({"p": kc.array(g)}, params)
        # Update t (counted from 0) used schedule(t), which the property
        # shows until the next update.
        check(opt.learning_rate, 0.5 * 0.5**t)
        want = want - 0.5 * 0.5**t * g
        check(params["p"], want, rtol=1e-5)
    # A number set afterwards replaces the schedule.
    opt.learning_rate = 0.125
    params = opt.apply_gradients({"p": kc.array(g)}, params)
    check(opt.learning_rate, 0.125)
    check(params["p"], want - 0.125 * g, rtol=1e-5)


@pytest.mark.parametrize("name", ["SGD", "Adam", "Lion", "Muon", "Adafactor"])
def test_schedule_given_to_the_constructor(rng, name):
    # The same steps as an optimizer whose fixed rate is reset by hand to
    # the schedule's value before each step.
    kw = dict(relative_step=False) if name == "Adafactor" else {}
    scheduled = getattr(optim, name)(optim.step_decay(0.08, 0.5, 2), **kw)
    by_hand = getattr(optim, name)(0.08, **kw)
    p1 = p2 = as_kiln(random_tree(rng), kc.float32)
    for t in range(5):
        by_hand.learning_rate = 0.08 * 0.5 ** (t // 2)
        g = as_kiln(random_tree(rng), kc.float32)
        p1 = scheduled.apply_gradients(g, p1)
        p2 = by_hand.apply_gradients(g, p2)
        check(scheduled.learning_rate, 0.08 * 0.5 ** (t // 2))
        for (_, a), (_, b) in zip(tree_flatten(p1), tree_flatten(p2)):
            check(a, b)
    assert scheduled.step.item() == 5


def test_schedules_match_their_formulas():
    steps = [kc.array(t, kc.uint64) for t in range(30)]
    cases = [
        (optim.exponential_decay(0.1, 0.9), lambda t: 0.1 * 0.9**t),
        (optim.step_decay(0.2, 0.5, 4), lambda t: 0.2 * 0.5 ** (t // 4)),
        (
            optim.cosine_decay(0.1, 20),
            lambda t: 0.05 * (1 + math.cos(math.pi * min(t, 20) / 20)),
        ),
        (
            optim.cosine_decay(0.3, 10, end=0.05),
            lambda t: 0.05 + 0.125 * (1 + math.cos(math.pi * min(t, 10) / 10)),
        ),
        (optim.linear_schedule(0.0, 0.1, 10), lambda t: 0.01 * min(t, 10)),
        (optim.linear_schedule(1.0, 0.5, 5), lambda t: 1.0 - 0.1 * min(t, 5)),
    ]
    for schedule, formula in cases:
        for t, s in enumerate(steps):
            check(schedule(s), formula(t), rtol=1e-5, atol=1e-7)


def test_join_schedules():
    warmup = optim.linear_schedule(0.0, 0.1, 5)
    cosine = optim.cosine_decay(0.1, 10)
    constant = lambda step: kc.full(step.shape, 0.01)
    joined = optim.join_schedules([warmup, cosine, constant], [5, 15])
    for t in range(25):
        if t < 5:
            want = 0.02 * t
        elif t < 15:
            want = 0.05 * (1 + math.cos(math.pi * (t - 5) / 10))
        else:
            want = 0.01
        check(joined(kc.array(t, kc.uint64)), want, rtol=1e-5, atol=1e-7)
    single = optim.join_schedules([cosine], [])
    check(single(kc.array(3, kc.uint64)), cosine(kc.array(3, kc.uint64)))


@needs_mlx
def test_schedules_match_mlx():
    import mlx.optimizers as mlx_optim

    for make in [
        lambda o: o.exponential_decay(0.1, 0.97),
        lambda o: o.step_decay(0.1, 0.7, 3),
        lambda o: o.cosine_decay(0.1, 12, 0.002),
        lambda o: o.linear_schedule(0.001, 0.1, 7),
        lambda o: o.join_schedules(
            [o.linear_schedule(0, 0.1, 4), o.cosine_decay(0.1, 9)], [4]
        ),
    ]:
        ours, theirs = make(optim), make(mlx_optim)
        for t in range(20):
            a = ours(kc.array(t, kc.uint64))
            b = theirs(mx.array(t, mx.uint64))
            assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
            check(to_np(a), to_np(b), rtol=1e-6, atol=1e-8)


# ---- clip_grad_norm ---------------------------------------------------------


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm(rng, max_norm):
    grads = random_tree(rng)
    total = math.sqrt(
        sum(np.sum(g.astype(np.float64) ** 2) for _, g in tree_flatten(grads))
    )
    clipped, norm = optim.clip_grad_norm(as_kiln(grads, kc.float32), max_norm)
    check(norm, total, rtol=1e-5)
    scale = min(max_norm / (total + 1e-6), 1.0)
    assert (scale < 1.0) == (max_norm == 0.5)
    for (_, c), (_, g) in zip(tree_flatten(clipped), tree_flatten(grads)):
        check(c, g * scale, rtol=1e-5)
    flat = np.concatenate([to_np(c).ravel() for _, c in tree_flatten(clipped)])
    assert np.linalg.norm(flat) <= max_norm * (1 + 1e-5)
    assert isinstance(clipped["layers"], list)


def test_clip_grad_norm_of_half_precision_and_empty(rng):
    g = rand(rng, (7,))
    clipped, norm = optim.clip_grad_norm({"g": kc.array(g).astype(kc.bfloat16)}, 1.0)
    assert clipped["g"].dtype == kc.bfloat16
    check(to_np(norm), np.linalg.norm(g), rtol=2e-2)
    clipped, norm = optim.clip_grad_norm({}, 1.0)
    assert clipped == {} and norm.item() == 0.0


@needs_mlx
def test_clip_grad_norm_matches_mlx(rng):
    import mlx.optimizers as mlx_optim

    grads = random_tree(rng)
    ours = optim.clip_grad_norm(as_kiln(grads, kc.float32), 1.5)
    theirs = mlx_optim.clip_grad_norm(tree_map(mx.array, grads), 1.5)
    check(to_np(ours[1]), to_np(theirs[1]), rtol=1e-6)
    for (_, a), (_, b) in zip(tree_flatten(ours[0]), tree_flatten(theirs[0])):
        check(to_np(a), to_np(b), rtol=1e-6)


# ---- MultiOptimizer ---------------------------------------------------------


def _is_vector(path, x):
    return x.ndim == 1


def test_multi_optimizer_routes_by_filter(rng):
    params = random_tree(rng)
    grads_seq = [random_tree(rng) for _ in range(3)]
    multi = optim.MultiOptimizer(
        [optim.SGD(0.1, momentum=0.9), optim.Adam(0.05)],
        [lambda path, x: path.startswith("w") or _is_vector(path, x)],
    )
    p = as_kiln(params, kc.float32)
    for g in grads_seq:
        p = multi.apply_gradients(as_kiln(g, kc.float32), p)
    # SGD took w and layers.0.b, Adam the 3-D layers.1.k.
    sgd = reference_run(
        ref_sgd, dict(learning_rate=0.1, momentum=0.9), params, grads_seq
    )
    adam = reference_run(ref_adam, dict(learning_rate=0.05), params, grads_seq)
    check(p["w"], sgd["w"], rtol=1e-5)
    check(p["layers"][0]["b"], sgd["layers"][0]["b"], rtol=1e-5)
    check(p["layers"][1]["k"], adam["layers"][1]["k"], rtol=1e-5)

    states = multi.state["states"]
    assert len(states) == 2
    assert set(states[0]) == {"step", "learning_rate", "w", "layers"}
    # Each keeps the positions of its parameters in the list.
    assert len(states[0]["layers"]) == 1 and set(states[0]["layers"][0]["b"]) == {"v"}
    assert states[1]["layers"][0] == {} and set(states[1]["layers"][1]["k"]) == {
        "m",
        "v",
    }
    assert "w" not in states[1]
    assert states[0]["step"].item() == 3 and states[1]["step"].item() == 3
    assert multi.step.item() == 3


def test_multi_optimizer_learning_rate_and_state(rng):
    multi = optim.MultiOptimizer([optim.SGD(0.1), optim.Adam(0.2)], [_is_vector])
    check(multi.learning_rate, 0.1)
    multi.learning_rate = 0.3
    check(multi.optimizers[0].learning_rate, 0.3)
    check(multi.optimizers[1].learning_rate, 0.3)
    with pytest.raises(ValueError, match="MultiOptimizer"):
        multi.state = {"states": [{}]}
    with pytest.raises(ValueError, match="MultiOptimizer"):
        optim.MultiOptimizer([optim.SGD(0.1), optim.Adam(0.2)])
    # One optimizer and no filter: everything goes to it.
    params = as_kiln(random_tree(rng), kc.float32)
    g = as_kiln(random_tree(rng), kc.float32)
    only = optim.MultiOptimizer([optim.SGD(0.1)])
    got = only.apply_gradients(g, params)
    want = optim.SGD(0.1).apply_gradients(g, params)
    for (_, a), (_, b) in zip(tree_flatten(got), tree_flatten(want)):
        check(a, b)


@needs_mlx
def test_multi_optimizer_matches_mlx(rng):
    import mlx.optimizers as mlx_optim

    params, grads_seq = random_tree(rng), [random_tree(rng) for _ in range(3)]

    def make(o):
        return o.MultiOptimizer(
            [o.Muon(0.05), o.AdamW(0.01), o.Lion(0.01)],
            [lambda path, x: x.ndim >= 2 and "k" in path, lambda path, x: path == "w"],
        )

    ours, theirs = make(optim), make(mlx_optim)
    p = as_kiln(params, kc.float32)
    mp = tree_map(mx.array, params)
    for g in grads_seq:
        p = ours.apply_gradients(as_kiln(g, kc.float32), p)
        mp = theirs.apply_gradients(tree_map(mx.array, g), mp)
    # Compared by path: the order of dict keys is not part of the result
    # (it can vary with string hashing from run to run).
    ours_flat, theirs_flat = dict(tree_flatten(p)), dict(tree_flatten(mp))
    assert sorted(ours_flat) == sorted(theirs_flat)
    for k, a in ours_flat.items():
        check(to_np(a), to_np(theirs_flat[k]), rtol=1e-5, atol=1e-5)
    assert sorted(k for k, _ in tree_flatten(ours.state)) == sorted(
        k for k, _ in tree_flatten(theirs.state)
    )


# ---- compile ------------------------------------------------------------------


def _training_setup(rng_seed, make_optimizer, init):
    rng = np.random.default_rng(rng_seed)
    model = TinyModel(
        w=kc.array(rand(rng, (4, 3))),
        layers=[{"b": kc.array(rand(rng, (3,)))}, {"scale": kc.array(rand(rng, (3,)))}],
    )
    opt = make_optimizer()
    if init:
        opt.init(model.trainable_parameters())

    def loss_fn(params, x, y):
        h = x @ params["w"] + params["layers"][0]["b"]
        return kc.mean(kc.square(h * params["layers"][1]["scale"] - y))

    def step(x, y):
        loss, grads = kc.value_and_grad(loss_fn)(model.trainable_parameters(), x, y)
        opt.update(model, grads)
        return loss

    return model, opt, step


@pytest.mark.parametrize("init", [True, False])
@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda: optim.Adam(optim.cosine_decay(0.1, 10), bias_correction=True),
        lambda: optim.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
        lambda: optim.Adafactor(beta_1=0.9),
        lambda: optim.Muon(0.05),
        lambda: optim.MultiOptimizer(
            [optim.AdamW(0.01), optim.Lion(optim.exponential_decay(0.01, 0.9))],
            [lambda path, x: x.ndim == 2],
        ),
    ],
    ids=["adam-schedule", "sgd-nesterov", "adafactor", "muon", "multi"],
)
def test_compiled_training_step_matches_eager(rng, make_optimizer, init):
    eager_model, eager_opt, eager_step = _training_setup(1, make_optimizer, init)
    model, opt, step = _training_setup(1, make_optimizer, init)
    state = [model, opt.state]
    compiled = kc.compile(step, inputs=state, outputs=state)
    for _ in range(5):
        x, y = kc.array(rand(rng, (8, 4))), kc.array(rand(rng, (8, 3)))
        want = eager_step(x, y)
        got = compiled(x, y)
        check(got, want, rtol=1e-5)
        for (_, a), (_, b) in zip(tree_flatten(model), tree_flatten(eager_model)):
            check(a, b, rtol=1e-5, atol=1e-6)
    assert opt.step.item() == 5
    ours, eager = tree_flatten(opt.state), tree_flatten(eager_opt.state)
    assert [k for k, _ in ours] == [k for k, _ in eager]
    for (_, a), (_, b) in zip(ours, eager):
        check(to_np(a), to_np(b), rtol=1e-5, atol=1e-6)


# ---- Names, signatures and bad arguments ------------------------------------


@needs_mlx
def test_public_names_and_signatures_match_mlx():
    import mlx.optimizers as mlx_optim

    theirs = {
        n
        for n, v in vars(mlx_optim).items()
        if not n.startswith("_")
        and getattr(v, "__module__", "").startswith("mlx.optimizers")
    }
    assert theirs <= set(dir(optim)), theirs - set(dir(optim))
    assert set(optim.__all__) == theirs
    for name in sorted(theirs):
        ours, other = getattr(optim, name), getattr(mlx_optim, name)
        a, b = inspect.signature(ours), inspect.signature(other)
        assert list(a.parameters) == list(b.parameters), name
        for p in a.parameters:
            assert a.parameters[p].default == b.parameters[p].default, (name, p)


def test_defaults_without_mlx():
    adam = optim.Adam(0.1)
    assert adam.betas == [0.9, 0.999] and adam.eps == 1e-8 and not adam.bias_correction
    assert optim.AdamW(0.1).weight_decay == 0.01
    assert optim.Lion(0.1).betas == [0.9, 0.99]
    muon = optim.Muon(0.1)
    assert (muon.momentum, muon.weight_decay, muon.nesterov, muon.ns_steps) == (
        0.95,
        0.01,
        True,
        5,
    )
    ada = optim.Adafactor()
    assert ada.eps == (1e-30, 1e-3) and ada.decay_rate == -0.8 and ada.relative_step
    assert optim.RMSprop(0.1).alpha == 0.99 and optim.AdaDelta(0.1).rho == 0.9


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match=r"\[SGD\].*Nesterov"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"\[SGD\].*dampening"):
        optim.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"\[RMSprop\] alpha"):
        optim.RMSprop(0.1, alpha=-0.5)
    # Accumulators that start at zero need eps > 0 (0 / 0 otherwise).
    for name in ("RMSprop", "Adagrad", "AdaDelta"):
        for eps in (-1.0, 0.0):
            with pytest.raises(ValueError, match=rf"\[{name}\] eps must be >0"):
                getattr(optim, name)(0.1, eps=eps)
    for name in ("Adam", "AdamW"):
        with pytest.raises(ValueError, match=rf"\[{name}\] eps must be >= 0"):
            getattr(optim, name)(0.1, eps=-1.0)
        with pytest.raises(ValueError, match=rf"\[{name}\] betas\[0\]"):
            getattr(optim, name)(0.1, betas=[1.0, 0.999])
    optim.Adam(0.1, eps=0.0)  # Adam's denominator has the gradient in it
    with pytest.raises(ValueError, match=r"\[Lion\] betas\[1\]"):
        optim.Lion(0.1, betas=[0.9, -0.1])
    with pytest.raises(ValueError, match=r"\[clip_grad_norm\] max_norm"):
        optim.clip_grad_norm({"g": kc.array([1.0])}, -1.0)
    with pytest.raises(ValueError, match=r"\[AdaDelta\] rho"):
        optim.AdaDelta(0.1, rho=-0.1)
    with pytest.raises(ValueError, match=r"\[Adamax\] betas\[1\]"):
        optim.Adamax(0.1, betas=[0.9, 1.0])
    with pytest.raises(ValueError, match=r"\[Adafactor\] a learning_rate"):
        optim.Adafactor(relative_step=False)
    with pytest.raises(ValueError, match=r"\[linear_schedule\] steps"):
        optim.linear_schedule(0.0, 1.0, 0)
    with pytest.raises(ValueError, match=r"\[join_schedules\] 2 schedules need 1"):
        optim.join_schedules([optim.linear_schedule(0, 1, 2)] * 2, [1, 2])
    with pytest.raises(ValueError, match=r"\[join_schedules\] at least one"):
        optim.join_schedules([], [])
    with pytest.raises(TypeError, match=r"\[Adam.init\].*dict.*list"):
        optim.Adam(0.1).init([kc.array([1.0])])
    with pytest.raises(TypeError, match=r"\[SGD.init\].*list"):
        optim.SGD(0.1).apply_gradients([kc.array([1.0])], [kc.array([2.0])])


# ---- With kiln.nn.Module -------------------------------------------------------


def _module_training(nn, core, optimizers, seed):
    """MLX's usual training step over an nn.Module with a frozen parameter,
    written once for kiln and for mlx."""
    rng = np.random.default_rng(seed)

    class TwoLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = core.array(rand(rng, (4, 8)))
            self.layers = [{"w": core.array(rand(rng, (8, 3)))}]
            self.b = core.array(rand(rng, (3,)))

        def __call__(self, x):
            return core.tanh(x @ self.w1) @ self.layers[0]["w"] + self.b

    model = TwoLayer()
    model.freeze(keys=["b"])
    opt = optimizers.AdamW(optimizers.linear_schedule(0.0, 0.05, 3))
    loss_and_grad = nn.value_and_grad(
        model, lambda x, y: core.mean(core.square(model(x) - y))
    )

    def step(x, y):
        loss, grads = loss_and_grad(x, y)
        opt.update(model, grads)
        return loss

    return model, opt, step


def test_with_nn_module_compiled_and_eager(rng):
    nn = pytest.importorskip("kiln.nn")
    eager_model, eager_opt, eager_step = _module_training(nn, kc, optim, 3)
    model, opt, step = _module_training(nn, kc, optim, 3)
    frozen = to_np(model.b)
    state = [model.state, opt.state]
    compiled = kc.compile(step, inputs=state, outputs=state)
    for _ in range(4):
        x, y = kc.array(rand(rng, (5, 4))), kc.array(rand(rng, (5, 3)))
        check(compiled(x, y), eager_step(x, y), rtol=1e-5)
    for (_, a), (_, b) in zip(tree_flatten(model), tree_flatten(eager_model)):
        check(a, b, rtol=1e-5, atol=1e-6)
    check(to_np(model.b), frozen)  # frozen: neither updated nor in the state
    assert sorted(opt.state) == ["layers", "learning_rate", "step", "w1"]


@needs_mlx
def test_with_nn_module_matches_mlx(rng):
    nn = pytest.importorskip("kiln.nn")
    import mlx.nn as mlx_nn
    import mlx.optimizers as mlx_optim

    model, opt, step = _module_training(nn, kc, optim, 4)
    mmodel, mopt, mstep = _module_training(mlx_nn, mx, mlx_optim, 4)
    for _ in range(4):
        x, y = rand(rng, (5, 4)), rand(rng, (5, 3))
        check(
            to_np(step(kc.array(x), kc.array(y))),
            to_np(mstep(mx.array(x), mx.array(y))),
            rtol=1e-5,
        )
    for (ka, a), (kb, b) in zip(tree_flatten(model), tree_flatten(mmodel)):
        assert ka == kb
        check(to_np(a), to_np(b), rtol=1e-5, atol=1e-6)
