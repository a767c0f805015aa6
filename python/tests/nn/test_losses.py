"""kiln.nn.losses: float64 NumPy formulas on random inputs, every option
and reduction, the validation errors, gradients in closed form, and MLX's
results."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from nn_helpers import (
    assert_same_signature,
    kiln_grad64,
    numeric_grad,
    assert_close,
    mlx,
    random_input,
    to_numpy,
)

losses = nn.losses
REDUCTIONS = ["none", "mean", "sum"]


def _reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def _log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _k(a, dtype=kc.float32):
    return kc.array(np.asarray(a, dtype=np.float32)).astype(dtype)


# ---- cross entropy ----------------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_cross_entropy_with_class_indices(layout, reduction, rng):
    logits, l64 = random_input(rng, (6, 5), layout=layout, lo=-6, hi=6)
    t = rng.integers(0, 5, 6)
    want = -_log_softmax(l64)[np.arange(6), t]
    got = losses.cross_entropy(logits, kc.array(t), reduction=reduction)
    assert_close(got, _reduce(want, reduction))


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.45])
def test_cross_entropy_label_smoothing_and_weights(smoothing, rng):
    logits, l64 = random_input(rng, (7, 4))
    t = rng.integers(0, 4, 7)
    w = rng.uniform(0.1, 2.0, 7)
    # Smoothing mixes the one-hot target with the uniform distribution.
    q = (1 - smoothing) * np.eye(4)[t] + smoothing / 4
    want = -(q * _log_softmax(l64)).sum(-1) * w
    got = losses.cross_entropy(logits, kc.array(t), weights=_k(w), label_smoothing=smoothing)
    assert_close(got, want, scale=2)


def test_cross_entropy_with_probabilities(rng):
    logits, l64 = random_input(rng, (5, 6), layout="transposed")
    p = rng.uniform(0, 1, (5, 6))
    p /= p.sum(-1, keepdims=True)
    want = -(p * _log_softmax(l64)).sum(-1)
    assert_close(losses.cross_entropy(logits, _k(p)), want)
    q = 0.8 * p + 0.2 / 6
    got = losses.cross_entropy(logits, _k(p), label_smoothing=0.2, reduction="sum")
    assert_close(got, -(q * _log_softmax(l64)).sum(), scale=2)


def test_cross_entropy_of_huge_logits_and_unnormalized_targets(rng):
    # Logits far past exp's range stay finite. The logits are shifted by
    # their row max m before anything else, as MLX does, so probability
    # targets p that do not sum to 1 give
    # logsumexp(x - m) - sum((x - m) * p).
    l64 = rng.uniform(-1, 1, (4, 7)) * 3e4
    t = rng.integers(0, 7, 4)
    got = losses.cross_entropy(_k(l64), kc.array(t))
    assert_close(got, -_log_softmax(l64)[np.arange(4), t])
    p = rng.uniform(0.1, 1, (4, 7))
    shifted = l64 - l64.max(-1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(-1))
    assert_close(losses.cross_entropy(_k(l64), _k(p)), lse - (shifted * p).sum(-1))


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_ignores_a_shared_offset(smoothing, rng):
    # Only the gaps between logits matter: an offset large enough to round
    # logsumexp(x) - x_t away in float32 must not change the loss. Logits
    # on a grid of 1/8 stay exact in float32 with the offsets added.
    l64 = rng.integers(-24, 25, (4, 6)) / 8.0
    t = rng.integers(0, 6, 4)
    lsm = _log_softmax(l64)
    want = -(1 - smoothing) * lsm[np.arange(4), t] - smoothing * lsm.mean(-1)
    for offset in (1e4, 1e6, -1e6):
        got = losses.cross_entropy(_k(l64 + offset), kc.array(t), label_smoothing=smoothing)
        np.testing.assert_allclose(to_numpy(got), want, rtol=0, atol=1e-5)
    for v in (1.0, 1e4, 1e8, 1e20):  # equal logits: log(n) at any size
        got = losses.cross_entropy(kc.full((2, 6), v), kc.array([0, 5]))
        np.testing.assert_allclose(to_numpy(got), [math.log(6)] * 2, rtol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, -2])
def test_cross_entropy_along_another_axis(axis, rng):
    l64 = rng.uniform(-3, 3, (3, 4, 5))
    t = rng.integers(0, l64.shape[axis], np.delete(l64.shape, axis))
    lsm = np.moveaxis(_log_softmax(l64, axis), axis, -1)
    want = -np.take_along_axis(lsm, t[..., None], -1)[..., 0]
    got = losses.cross_entropy(_k(l64), kc.array(t), axis=axis)
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [kc.float16, kc.bfloat16], ids=str)
def test_cross_entropy_in_half_precision(dtype, rng):
    logits, l64 = random_input(rng, (8, 10), dtype)
    t = rng.integers(0, 10, 8)
    got = losses.cross_entropy(logits, kc.array(t))
    assert got.dtype == dtype
    assert_close(got, -_log_softmax(l64)[np.arange(8), t], dtype, scale=2)


@pytest.mark.parametrize("index_dtype", [kc.uint8, kc.int16, kc.uint32, kc.int64], ids=str)
def test_class_indices_of_any_integer_dtype(index_dtype, rng):
    logits, l64 = random_input(rng, (5, 4))
    t = rng.integers(0, 4, 5)
    ti = kc.array(t).astype(index_dtype)
    want = -_log_softmax(l64)[np.arange(5), t]
    assert_close(losses.cross_entropy(logits, ti), want)
    assert_close(losses.nll_loss(kc.array(_log_softmax(l64).astype(np.float32)), ti), want)


def test_cross_entropy_is_stable_for_large_logits():
    logits = kc.array([[1e4, 0.0, -1e4], [0.0, 3e4, 0.0]])
    got = to_numpy(losses.cross_entropy(logits, kc.array([1, 1])))
    np.testing.assert_allclose(got, [1e4, 0.0], rtol=1e-6)


def test_cross_entropy_gradient_is_softmax_minus_target(rng):
    logits, l64 = random_input(rng, (4, 5))
    t = rng.integers(0, 5, 4)
    g = kc.grad(lambda l: losses.cross_entropy(l, kc.array(t), reduction="mean"))(logits)
    assert_close(g, (np.exp(_log_softmax(l64)) - np.eye(5)[t]) / 4)


def test_cross_entropy_errors():
    logits = kc.zeros((4, 5))
    with pytest.raises(ValueError, match=r"Targets shape \(3,\).*logits shape \(4, 5\)"):
        losses.cross_entropy(logits, kc.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"Targets shape \(4, 4\)"):
        losses.cross_entropy(logits, kc.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"Label smoothing must be in \[0, 1\)"):
        losses.cross_entropy(logits, kc.array([0, 1, 2, 3]), label_smoothing=1.0)
    with pytest.raises(ValueError, match=r"Label smoothing"):
        losses.cross_entropy(logits, kc.array([0, 1, 2, 3]), label_smoothing=-0.1)
    with pytest.raises(ValueError, match=r"Weights with shape \(5,\).*shape \(4,\)"):
        losses.cross_entropy(logits, kc.array([0, 1, 2, 3]), weights=kc.ones((5,)))
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        losses.cross_entropy(logits, kc.array([0, 1, 2, 3]), axis=3)
    with pytest.raises(ValueError, match="Invalid reduction 'avg'"):
        losses.cross_entropy(logits, kc.array([0, 1, 2, 3]), reduction="avg")


# ---- binary cross entropy ---------------------------------------------------


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction, rng):
    x, x64 = random_input(rng, (5, 6), layout="sliced", lo=-8, hi=8)
    t64 = rng.uniform(0, 1, (5, 6))
    w64 = rng.uniform(0.5, 2, (5, 6))
    p = 1 / (1 + np.exp(-x64))
    want = -(t64 * np.log(p) + (1 - t64) * np.log1p(-p)) * w64
    got = losses.binary_cross_entropy(x, _k(t64), weights=_k(w64), reduction=reduction)
    assert_close(got, _reduce(want, reduction), scale=3)


def test_binary_cross_entropy_on_probabilities(rng):
    p64 = rng.uniform(0.01, 0.99, (4, 7))
    t64 = (rng.uniform(size=(4, 7)) > 0.5).astype(np.float64)
    want = -(t64 * np.log(p64) + (1 - t64) * np.log1p(-p64))
    got = losses.binary_cross_entropy(_k(p64), _k(t64), with_logits=False, reduction="none")
    assert_close(got, want, scale=3)
    # Saturated probabilities give log(0), clipped to -100: finite.
    got = losses.binary_cross_entropy(
        kc.array([0.0, 1.0, 1.0]), kc.array([1.0, 0.0, 1.0]), with_logits=False, reduction="none"
    )
    np.testing.assert_allclose(to_numpy(got), [100.0, 100.0, 0.0])


def test_binary_cross_entropy_gradient(rng):
    x, x64 = random_input(rng, (3, 4))
    t64 = rng.uniform(0, 1, (3, 4))
    g = kc.grad(lambda x: losses.binary_cross_entropy(x, _k(t64)))(x)
    assert_close(g, (1 / (1 + np.exp(-x64)) - t64) / 12)


def test_binary_cross_entropy_errors():
    with pytest.raises(
        ValueError, match=r"Inputs shape \(2, 3\) does not match targets shape \(3,\)"
    ):
        losses.binary_cross_entropy(kc.zeros((2, 3)), kc.zeros((3,)))
    with pytest.raises(ValueError, match=r"Weights with shape \(2,\)"):
        losses.binary_cross_entropy(kc.zeros((2, 3)), kc.zeros((2, 3)), weights=kc.ones((2,)))


# ---- regression losses ------------------------------------------------------


def _pair(rng, layout="contiguous", dtype=kc.float32):
    a, a64 = random_input(rng, (6, 5), dtype, layout)
    b, b64 = random_input(rng, (6, 5), dtype, "contiguous")
    return a, a64, b, b64


# name -> (reference from (a, b), extra kwargs, default reduction)
ELEMENTWISE = {
    "l1_loss": (lambda a, b: np.abs(a - b), {}, "mean"),
    "mse_loss": (lambda a, b: (a - b) ** 2, {}, "mean"),
    "smooth_l1_loss": (
        lambda a, b: np.where(np.abs(a - b) < 0.6, 0.5 * (a - b) ** 2 / 0.6, np.abs(a - b) - 0.3),
        {"beta": 0.6},
        "mean",
    ),
    "huber_loss": (
        lambda a, b: np.where(
            np.abs(a - b) <= 0.8, 0.5 * (a - b) ** 2, 0.8 * (np.abs(a - b) - 0.4)
        ),
        {"delta": 0.8},
        "none",
    ),
    "log_cosh_loss": (lambda a, b: np.log(np.cosh(a - b)), {}, "none"),
    "hinge_loss": (lambda a, b: np.maximum(1 - a * np.sign(b), 0), {}, "none"),
}


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_losses_and_their_default_reduction(name, layout, rng):
    ref, kwargs, default = ELEMENTWISE[name]
    a, a64, b, b64 = _pair(rng, layout)
    if name == "hinge_loss":
        b = kc.sign(b)
    want = ref(a64, b64)
    assert_close(getattr(losses, name)(a, b, **kwargs), _reduce(want, default))
    for reduction in REDUCTIONS:
        got = getattr(losses, name)(a, b, reduction=reduction, **kwargs)
        assert_close(got, _reduce(want, reduction))


@pytest.mark.parametrize("dtype", [kc.float16, kc.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_losses_in_half_precision(name, dtype, rng):
    ref, kwargs, _ = ELEMENTWISE[name]
    a, a64, b, b64 = _pair(rng, dtype=dtype)
    if name == "hinge_loss":
        b = kc.sign(b)
    got = getattr(losses, name)(a, b, reduction="none", **kwargs)
    assert got.dtype == dtype
    assert_close(got, ref(a64, b64), dtype, scale=2)


def test_gaussian_nll_loss(rng):
    a, a64, b, b64 = _pair(rng, "transposed")
    v64 = rng.uniform(1e-3, 2, (6, 5))
    v64[0, 0] = 1e-9  # clamped to eps
    v = _k(v64)
    vc = np.maximum(v64.astype(np.float32).astype(np.float64), 1e-6)
    want = 0.5 * (np.log(vc) + (b64 - a64) ** 2 / vc)
    assert_close(losses.gaussian_nll_loss(a, b, v, reduction="none"), want, scale=5)
    full = want + 0.5 * math.log(2 * math.pi)
    assert_close(losses.gaussian_nll_loss(a, b, v, full=True), full.mean(), scale=5)
    want = 0.5 * (np.log(np.maximum(vc, 0.1)) + (b64 - a64) ** 2 / np.maximum(vc, 0.1))
    assert_close(losses.gaussian_nll_loss(a, b, v, eps=0.1, reduction="sum"), want.sum(), scale=5)
    with pytest.raises(ValueError, match=r"vars shape \(5,\)"):
        losses.gaussian_nll_loss(a, b, kc.ones((5,)))
    with pytest.raises(ValueError, match=r"targets shape \(5, 6\)"):
        losses.gaussian_nll_loss(a, b.T, v)


def test_nll_loss(rng):
    lp64 = _log_softmax(rng.uniform(-3, 3, (6, 5)))
    t = rng.integers(0, 5, 6)
    want = -lp64[np.arange(6), t]
    assert_close(losses.nll_loss(_k(lp64), kc.array(t)), want)
    assert_close(losses.nll_loss(_k(lp64), kc.array(t), reduction="mean"), want.mean())
    t0 = rng.integers(0, 6, 5)
    assert_close(losses.nll_loss(_k(lp64), kc.array(t0), axis=0), -lp64[t0, np.arange(5)])


def test_kl_div_loss(rng):
    p64 = _log_softmax(rng.uniform(-3, 3, (4, 6)))
    q64 = _log_softmax(rng.uniform(-3, 3, (4, 6)))
    want = (np.exp(q64) * (q64 - p64)).sum(-1)
    assert_close(losses.kl_div_loss(_k(p64), _k(q64)), want, scale=3)
    want0 = (np.exp(q64) * (q64 - p64)).sum(0)
    assert_close(
        losses.kl_div_loss(_k(p64), _k(q64), axis=0, reduction="sum"), want0.sum(), scale=3
    )


@pytest.mark.parametrize("p", [1, 2, 3])
def test_triplet_loss(p, rng):
    a64, pos64, neg64 = (rng.uniform(-2, 2, (5, 4)) for _ in range(3))

    def dist(x, y, axis=-1):
        return ((np.abs(x - y) ** p).sum(axis) + 1e-6) ** (1 / p)

    want = np.maximum(dist(a64, pos64) - dist(a64, neg64) + 1.0, 0)
    got = losses.triplet_loss(_k(a64), _k(pos64), _k(neg64), p=p)
    assert_close(got, want, scale=5)
    want = np.maximum(dist(a64, pos64, 0) - dist(a64, neg64, 0) + 0.3, 0).mean()
    got = losses.triplet_loss(
        _k(a64), _k(pos64), _k(neg64), axis=0, p=p, margin=0.3, reduction="mean"
    )
    assert_close(got, want, scale=5)


def test_cosine_similarity_loss(rng):
    x64, y64 = rng.normal(size=(2, 4, 6))
    cos = lambda axis: (x64 * y64).sum(axis) / (  # noqa: E731
        np.linalg.norm(x64, axis=axis) * np.linalg.norm(y64, axis=axis)
    )
    assert_close(losses.cosine_similarity_loss(_k(x64), _k(y64)), cos(1), scale=5)
    got = losses.cosine_similarity_loss(_k(x64), _k(y64), axis=0, reduction="mean")
    assert_close(got, cos(0).mean(), scale=5)
    # eps bounds the denominator away from zero.
    got = losses.cosine_similarity_loss(kc.zeros((2, 3)), kc.ones((2, 3)))
    np.testing.assert_array_equal(to_numpy(got), [0.0, 0.0])


def test_margin_ranking_loss(rng):
    a, a64, b, b64 = _pair(rng, "sliced")
    t64 = np.sign(rng.normal(size=(6, 5)))
    want = np.maximum(0, -t64 * (a64 - b64) + 0.2)
    assert_close(losses.margin_ranking_loss(a, b, _k(t64), margin=0.2), want)
    assert_close(
        losses.margin_ranking_loss(a, b, _k(t64), reduction="sum"),
        np.maximum(0, -t64 * (a64 - b64)).sum(),
    )
    with pytest.raises(
        ValueError,
        match=r"inputs1.shape=\(6, 5\), inputs2.shape=\(6, 5\), and targets.shape=\(5,\)",
    ):
        losses.margin_ranking_loss(a, b, kc.ones((5,)))


@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss"])
def test_shape_mismatch_raises(name):
    with pytest.raises(
        ValueError,
        match=rf"\[{name}\] Predictions shape \(2, 3\) does not match targets shape \(3, 2\)",
    ):
        getattr(losses, name)(kc.zeros((2, 3)), kc.zeros((3, 2)))


@pytest.mark.parametrize(
    "call",
    [
        lambda r: losses.mse_loss(kc.ones(3), kc.ones(3), reduction=r),
        lambda r: losses.l1_loss(kc.ones(3), kc.ones(3), reduction=r),
        lambda r: losses.hinge_loss(kc.ones(3), kc.ones(3), reduction=r),
        lambda r: losses.kl_div_loss(kc.ones(3), kc.ones(3), reduction=r),
        lambda r: losses.log_cosh_loss(kc.ones(3), kc.ones(3), reduction=r),
    ],
)
def test_invalid_reduction_raises(call):
    with pytest.raises(
        ValueError, match=r"Invalid reduction 'batchmean'. Must be one of \('none', 'mean', 'sum'\)"
    ):
        call("batchmean")


def test_mse_and_huber_gradients(rng):
    a, a64, b, b64 = _pair(rng)
    assert_close(kc.grad(lambda a: losses.mse_loss(a, b))(a), 2 * (a64 - b64) / 30)
    g = kc.grad(lambda a: losses.huber_loss(a, b, delta=0.5, reduction="sum"))(a)
    assert_close(g, np.clip(a64 - b64, -0.5, 0.5))


# ---- against MLX ------------------------------------------------------------


def _mlx_cases(rng):
    x, y, z = (rng.normal(size=(4, 5)).astype(np.float32) for _ in range(3))
    t = rng.integers(0, 5, 4)
    p = rng.uniform(size=(4, 5)).astype(np.float32)
    s = np.sign(y).astype(np.float32)
    return [
        ("cross_entropy", (x, t), {}),
        (
            "cross_entropy",
            (x, p / p.sum(-1, keepdims=True)),
            {"label_smoothing": 0.2, "reduction": "mean"},
        ),
        ("cross_entropy", (x, t), {"label_smoothing": 0.1, "weights": p[:, 0]}),
        ("cross_entropy", (x.T.copy(), t), {"axis": 0, "reduction": "sum"}),
        ("cross_entropy", (x + 1e4, t), {}),
        ("cross_entropy", (x * 10, p), {"label_smoothing": 0.3}),  # p unnormalized
        ("binary_cross_entropy", (x, p), {}),
        ("binary_cross_entropy", (p, (p > 0.5).astype(np.float32)), {"with_logits": False}),
        ("l1_loss", (x, y), {}),
        ("mse_loss", (x, y), {"reduction": "sum"}),
        ("nll_loss", (x, t), {}),
        ("gaussian_nll_loss", (x, y, p), {"full": True}),
        ("kl_div_loss", (x, y), {}),
        ("smooth_l1_loss", (x, y), {"beta": 0.5}),
        ("triplet_loss", (x, y, z), {"p": 3}),
        ("hinge_loss", (x, s), {}),
        ("huber_loss", (x, y), {"delta": 0.7}),
        ("log_cosh_loss", (x, y), {}),
        ("cosine_similarity_loss", (x, y), {}),
        ("margin_ranking_loss", (x, y, s), {"margin": 0.1}),
    ]


def test_losses_match_mlx(rng):
    mx, mnn = mlx()
    for name, args, kwargs in _mlx_cases(rng):
        ours = getattr(losses, name)(
            *[kc.array(a) for a in args],
            **{k: kc.array(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()},
        )
        theirs = getattr(mnn.losses, name)(
            *[mx.array(a) for a in args],
            **{k: mx.array(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()},
        )
        np.testing.assert_allclose(
            to_numpy(ours), np.array(theirs), rtol=2e-6, atol=2e-6, err_msg=name
        )


def test_signatures_match_mlx():
    _, mnn = mlx()
    for name, _, _ in _mlx_cases(np.random.default_rng(0)):
        assert_same_signature(getattr(losses, name), getattr(mnn.losses, name))


# ---- gradients against finite differences (float64) ------------------------------


def _check_grad(loss, reference, x64):
    got = kiln_grad64(loss, x64)
    want = numeric_grad(reference, x64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_gradients_match_finite_differences(rng):
    x64, y64, z64 = rng.normal(size=(3, 4, 5))
    y, z = kc.array(y64).astype(kc.float64), kc.array(z64).astype(kc.float64)
    t = rng.integers(0, 5, 4)

    def ce_ref(x):
        q = 0.7 * np.eye(5)[t] + 0.3 / 5
        return -(q * _log_softmax(x)).sum()

    _check_grad(
        lambda x: losses.cross_entropy(x, kc.array(t), label_smoothing=0.3, reduction="sum"),
        ce_ref,
        x64,
    )

    def dist(a, b):
        return ((np.abs(a - b) ** 3).sum(-1) + 1e-6) ** (1 / 3)

    _check_grad(
        lambda x: losses.triplet_loss(x, y, z, p=3, margin=2.0, reduction="sum"),
        lambda x: np.maximum(dist(x, y64) - dist(x, z64) + 2.0, 0).sum(),
        x64,
    )
    _check_grad(
        lambda x: losses.cosine_similarity_loss(x, y, reduction="sum"),
        lambda x: (
            (x * y64).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y64, axis=1))
        ).sum(),
        x64,
    )
    v64 = rng.uniform(0.5, 2.0, (4, 5))
    v = kc.array(v64).astype(kc.float64)
    _check_grad(
        lambda x: losses.gaussian_nll_loss(x, y, v),
        lambda x: (0.5 * (np.log(v64) + (y64 - x) ** 2 / v64)).mean(),
        x64,
    )
    _check_grad(
        lambda x: losses.log_cosh_loss(x, y, reduction="mean"),
        lambda x: np.log(np.cosh(x - y64)).mean(),
        x64,
    )
    p64 = rng.uniform(0.05, 0.95, (4, 5))
    tb = (rng.uniform(size=(4, 5)) > 0.5).astype(np.float64)
    _check_grad(
        lambda p: losses.binary_cross_entropy(
            p, kc.array(tb).astype(kc.float64), with_logits=False
        ),
        lambda p: (-(tb * np.log(p) + (1 - tb) * np.log(1 - p))).mean(),
        p64,
    )
