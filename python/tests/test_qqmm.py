"""qqmm and gather_qqmm (both operands through nvfp4 or mxfp8) and
nn.QQLinear: against a NumPy reference written here (each operand's groups
scaled and rounded to the mode's codes in float64, then multiplied), their
gradients (whose products quantize too), bit for bit against MLX where it
is installed (MLX's CPU takes one row of x), non-contiguous and batched
inputs, and errors."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as knn
from conftest import mx, needs_mlx

MODES = [("nvfp4", 16), ("mxfp8", 32)]
E2M1_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])


def e4m3(v):
    """Round to fp8 e4m3 (nearest even, saturating at 448), in float64."""
    a = np.minimum(np.abs(v), 448.0)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    step = 2.0 ** (np.maximum(e, -6) - 3)
    return np.sign(v) * np.minimum(np.round(a / step) * step, 448.0)


def fake_quant(a, mode):
    """a (float64) through the mode along its last axis: group scales
    (nvfp4: max/6 in e4m3; mxfp8: 2^ceil(log2(max/448))) and codes (e2m1
    to nearest, ties toward zero; e4m3), multiplied back."""
    group = 16 if mode == "nvfp4" else 32
    g = a.reshape(*a.shape[:-1], -1, group)
    amax = np.abs(g).max(-1, keepdims=True)
    if mode == "nvfp4":
        scale = e4m3(amax / 6)
    else:
        with np.errstate(divide="ignore"):
            e = np.ceil(np.log2(amax / 448))
        scale = 2.0 ** np.where(amax == 0, 0, np.clip(e, -127, 127))
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(scale == 0, 0, g / scale)
    if mode == "nvfp4":
        q = np.sign(v) * E2M1[(np.abs(v)[..., None] > E2M1_MIDPOINTS).sum(-1)]
    else:
        q = e4m3(v)
    return (q * scale).reshape(a.shape)


def as_numpy(a):
    return np.asarray(a.astype(kc.float32)).astype(np.float64)


def tolerance(dtype):
    return {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]


@pytest.mark.parametrize("mode,group", MODES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("w_quantized", [False, True])
def test_qqmm_against_numpy(mode, group, dtype, w_quantized):
    rng = np.random.default_rng(1)
    x = kc.array(rng.standard_normal((5, 96)).astype(np.float32)).astype(getattr(kc, dtype))
    w = kc.array((rng.standard_normal((24, 96)) * rng.uniform(0.01, 10, (24, 1))).astype(np.float32))
    w = w.astype(getattr(kc, dtype))
    want = fake_quant(as_numpy(x), mode) @ fake_quant(as_numpy(w), mode).T
    if w_quantized:
        q, s = kc.quantize(w, mode=mode)
        got = kc.qqmm(x, q, s, mode=mode)
    else:
        got = kc.qqmm(x, w, mode=mode)
    assert got.dtype == x.dtype and got.shape == (5, 24)
    np.testing.assert_allclose(as_numpy(got), want, rtol=tolerance(dtype), atol=tolerance(dtype) * np.abs(want).max())


@pytest.mark.parametrize("mode,group", MODES)
def test_qqmm_layouts_and_batches(mode, group):
    """x transposed, sliced and batched (3-D); w transposed."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((64, 40)).astype(np.float32)
    wt = rng.standard_normal((64, 12)).astype(np.float32)
    x = kc.array(base).T[::2]                     # (20, 64), strided rows
    w = kc.array(wt).T                            # (12, 64), transposed
    want = fake_quant(base.T[::2].astype(np.float64), mode) @ fake_quant(wt.T.astype(np.float64), mode).T
    np.testing.assert_allclose(np.asarray(kc.qqmm(x, w, mode=mode)), want, rtol=1e-5, atol=1e-5)
    xb = rng.standard_normal((3, 4, 64)).astype(np.float32)
    got = kc.qqmm(kc.array(xb), w, mode=mode)
    want = fake_quant(xb.astype(np.float64), mode) @ fake_quant(wt.T.astype(np.float64), mode).T
    assert got.shape == (3, 4, 12)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)


def pad_groups(a, group):
    extra = -a.shape[-1] % group
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, extra)])


@pytest.mark.parametrize("mode,group", MODES)
@pytest.mark.parametrize("rows", [32, 7])
def test_qqmm_gradients_quantize_their_products(mode, group, rows):
    """dx = qqmm(g, w.T) and dw = qqmm(g.T, x.T): the cotangent and w
    through the mode along N, g and x along the rows (padded with zeros to
    whole groups); compiled and uncompiled."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    w = rng.standard_normal((40, 64)).astype(np.float32)
    g = rng.standard_normal((rows, 40)).astype(np.float32)

    def loss(x, w):
        return (kc.qqmm(x, w, mode=mode) * kc.array(g)).sum()

    fq = lambda a: fake_quant(pad_groups(a.astype(np.float64), group), mode)
    want_dx = fq(g) @ fq(w.T).T
    want_dw = fq(g.T) @ fq(x.T).T
    for fn in (kc.grad(loss, argnums=(0, 1)), kc.compile(kc.grad(loss, argnums=(0, 1)))):
        dx, dw = fn(kc.array(x), kc.array(w))
        np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(dw), want_dw, rtol=1e-5, atol=1e-5)
    # The input's gradient alone, against a quantized w: its values (as
    # quantized along K) go through the mode again along N.
    q, s = kc.quantize(kc.array(w), mode=mode)
    dx = kc.grad(lambda x: (kc.qqmm(x, q, s, mode=mode) * kc.array(g)).sum())(kc.array(x))
    want_dx = fq(g) @ fq(fake_quant(w.astype(np.float64), mode).T).T
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=1e-5, atol=1e-5)


def test_qqmm_jvp_and_vmap():
    rng = np.random.default_rng(4)
    x = kc.array(rng.standard_normal((4, 32)).astype(np.float32))
    w = kc.array(rng.standard_normal((8, 32)).astype(np.float32))
    t = kc.array(rng.standard_normal((4, 32)).astype(np.float32))
    _, (tan,) = kc.jvp(lambda x: kc.qqmm(x, w), [x], [t])
    np.testing.assert_allclose(np.asarray(tan), np.asarray(kc.qqmm(t, w)), rtol=1e-6)
    xs = kc.stack([x, 2 * x, -x])
    got = kc.vmap(lambda x: kc.qqmm(x, w))(xs)
    want = kc.stack([kc.qqmm(v, w) for v in (x, 2 * x, -x)])
    assert np.array_equal(np.asarray(got), np.asarray(want))


def test_nvfp4_global_scales():
    rng = np.random.default_rng(5)
    x = kc.array(rng.standard_normal((4, 64)).astype(np.float32) * 30)
    w = kc.array(rng.standard_normal((16, 64)).astype(np.float32))
    gx, gw = kc.array(float(np.abs(np.asarray(x)).max())), kc.array(float(np.abs(np.asarray(w)).max()))
    dq = lambda a, gs: kc.dequantize(*kc.quantize(a, mode="nvfp4", global_scale=gs), mode="nvfp4",
                                     global_scale=gs, dtype=kc.float32)
    want = np.asarray(dq(x, gx)).astype(np.float64) @ np.asarray(dq(w, gw)).astype(np.float64).T
    got = kc.qqmm(x, w, global_scale_x=gx, global_scale_w=gw)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="both global scales"):
        kc.qqmm(x, w, global_scale_x=gx)
    with pytest.raises(ValueError, match="nvfp4"):
        kc.qqmm(x, w, mode="mxfp8", global_scale_x=gx, global_scale_w=gw)


@needs_mlx
@pytest.mark.parametrize("mode,group", MODES)
def test_qqmm_matches_mlx(mode, group):
    """One row of x against a quantized w, float32 (MLX's CPU qqmm takes no
    more; in bfloat16 it rounds x's values on the way, up to 2% off the
    exact product that this qqmm and the NumPy reference compute)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 128)).astype(np.float32)
    w = rng.standard_normal((48, 128)).astype(np.float32)
    got = kc.qqmm(kc.array(x), *kc.quantize(kc.array(w), mode=mode), mode=mode)
    want = mx.qqmm(mx.array(x), *mx.quantize(mx.array(w), mode=mode), mode=mode)
    np.testing.assert_allclose(np.asarray(got), np.array(want), rtol=1e-6, atol=1e-6)


def test_qqmm_errors():
    x = kc.ones((4, 64))
    w = kc.ones((8, 64))
    q, s = kc.quantize(w, mode="nvfp4")
    for call, match in [
        (lambda: kc.qqmm(x, w, mode="mxfp4"), "Only 'nvfp4' and 'mxfp8'"),
        (lambda: kc.qqmm(x, w, mode="affine"), "Only 'nvfp4' and 'mxfp8'"),
        (lambda: kc.qqmm(x, w, group_size=32), "group_size 16"),
        (lambda: kc.qqmm(x, w, mode="mxfp8", bits=4), "bits 8"),
        (lambda: kc.qqmm(x[:, :40], w[:, :40]), "multiple of the group size"),
        (lambda: kc.qqmm(x, w[:, :48]), "must match"),
        (lambda: kc.qqmm(x, q), "scales must be given"),
        (lambda: kc.qqmm(x, w, s), "scales are only for"),
        (lambda: kc.qqmm(x.astype(kc.int32), w), "float32, float16 or bfloat16"),
        (lambda: kc.qqmm(kc.ones((64,)), w), "at least 2 dimensions"),
        (lambda: kc.qqmm(x, kc.ones((2, 8, 64))), "a matrix"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.parametrize("mode,group", MODES)
@pytest.mark.parametrize("w_quantized", [False, True])
def test_gather_qqmm_against_numpy(mode, group, w_quantized):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 2, 64)).astype(np.float32)
    w = rng.standard_normal((4, 24, 64)).astype(np.float32)
    li, ri = np.array([2, 0, 1, 1], np.uint32), np.array([3, 3, 0, 2], np.uint32)
    kw = kc.array(w)
    args = kc.quantize(kw, mode=mode) if w_quantized else (kw, None)
    got = kc.gather_qqmm(kc.array(x), *args, lhs_indices=kc.array(li), rhs_indices=kc.array(ri), mode=mode)
    fx, fw = fake_quant(x.astype(np.float64), mode), fake_quant(w.astype(np.float64), mode)
    want = np.stack([fx[i] @ fw[r].T for i, r in zip(li, ri)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="gradients are not implemented"):
        kc.grad(lambda a: kc.gather_qqmm(a, kw, rhs_indices=kc.array(ri[:3]), mode=mode).sum())(kc.array(x))


def test_qqlinear_train_and_eval():
    """In training the weight stays floating and receives gradients; eval()
    stores it quantized (codes and scales) with the same outputs; train()
    brings the floating weight back (its quantized values)."""
    kc.random.seed(0)
    lin = knn.Linear(64, 32, bias=False)
    layer = knn.QQLinear.from_linear(lin)
    assert layer.training and set(layer.keys()) == {"weight"}
    x = kc.random.normal((16, 64))
    y = layer(x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(kc.qqmm(x, lin.weight)), rtol=1e-6)
    loss, grads = knn.value_and_grad(layer, lambda m, x: (m(x) ** 2).sum())(layer, x)
    assert grads["weight"].shape == (32, 64)
    assert float(kc.abs(grads["weight"]).sum()) > 0
    layer.eval()
    assert layer["weight"].dtype == kc.uint32 and "scales" in layer
    np.testing.assert_allclose(np.asarray(layer(x)), np.asarray(y), rtol=1e-6)
    layer.train()  # the weight back in the float type it had
    assert layer["weight"].dtype == kc.float32 and "scales" not in layer
    np.testing.assert_allclose(np.asarray(layer(x)), np.asarray(y), rtol=1e-6)
    assert "mode=nvfp4" in repr(layer) and "input_dims=64" in repr(layer)


def test_quantize_with_input_quantization():
    model = knn.Sequential(knn.Linear(64, 32, bias=False), knn.ReLU(), knn.Linear(32, 16, bias=False))
    knn.quantize(model, mode="mxfp8", quantize_input=True)
    assert all(isinstance(m, knn.QQLinear) for m in (model.layers[0], model.layers[2]))
    assert model.layers[0].mode == "mxfp8" and model.layers[0].group_size == 32
    assert model(kc.ones((2, 64))).shape == (2, 16)
    with pytest.raises(ValueError, match="'nvfp4' and 'mxfp8'"):
        knn.quantize(knn.Sequential(knn.Linear(64, 32)), mode="affine", quantize_input=True)
    with pytest.raises(NotImplementedError, match="bias"):
        knn.QQLinear.from_linear(knn.Linear(64, 32))
    with pytest.raises(ValueError, match="cannot be quantized"):
        knn.Embedding(10, 32).to_quantized(mode="nvfp4", quantize_input=True)
    with pytest.raises(ValueError, match="'nvfp4' or 'mxfp8'"):
        knn.QQLinear(64, 32, mode="affine")
