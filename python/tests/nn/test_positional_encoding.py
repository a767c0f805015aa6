"""RoPE, SinusoidalPositionalEncoding and ALiBi against float64 NumPy
formulas (rotations of feature pairs by position times geometric
frequencies; sines and cosines; slopes times distances), in every layout
and dtype; errors, gradients and MLX."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from layer_checks import (
    assert_same_signatures,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    check_input_grad,
    mlx,
    random_input,
)


def rope_reference(x, dims, traditional, base, scale, offset):
    L = x.shape[-2]
    positions = (offset + np.arange(L)) * scale
    theta = base ** (-np.arange(0, dims, 2) / dims)
    angle = positions[:, None] * theta[None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    if traditional:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2] = a * cos - b * sin
        out[..., 1:dims:2] = a * sin + b * cos
    else:
        a, b = x[..., : dims // 2], x[..., dims // 2 : dims]
        out[..., : dims // 2] = a * cos - b * sin
        out[..., dims // 2 : dims] = a * sin + b * cos
    return out


ROPE_CASES = [
    dict(dims=8),
    dict(dims=6, traditional=True),
    dict(dims=4, base=500.0, scale=0.5),
    dict(dims=8, traditional=True, base=100.0, scale=2.0),
]


@pytest.mark.parametrize("args", ROPE_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset", [0, 5])
def test_rope_matches_reference(rng, args, layout, offset):
    rope = nn.RoPE(**args)
    x, x64 = random_input(rng, (2, 3, 7, 8), layout=layout)
    want = rope_reference(
        x64, args["dims"], args.get("traditional", False), args.get("base", 10000),
        args.get("scale", 1.0), offset,
    )
    assert_close(rope(x, offset=offset), want)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_rope_in_each_float_dtype(rng, dtype):
    x, x64 = random_input(rng, (2, 5, 8), dtype=dtype)
    y = nn.RoPE(8)(x, offset=3)
    assert y.dtype == dtype
    assert_close(y, rope_reference(x64, 8, False, 10000, 1.0, 3), dtype)


def test_rope_attributes_repr_and_errors():
    rope = nn.RoPE(8)
    assert (rope.dims, rope.traditional, rope.base, rope.scale) == (8, False, 10000, 1.0)
    assert repr(nn.RoPE(4, traditional=True)) == "RoPE(4, traditional=True)"
    assert rope.parameters() == {}
    with pytest.raises(ValueError, match="rope"):
        nn.RoPE(10)(kc.ones((2, 5, 8)))
    with pytest.raises(ValueError, match="rope"):
        nn.RoPE(8)(kc.ones((5, 8)))  # (batch, ..., length, features), as MLX


def test_rope_offset_may_be_an_array(rng):
    x, x64 = random_input(rng, (2, 5, 8))
    y = nn.RoPE(8, traditional=True)(x, offset=kc.array(4))
    assert_close(y, rope_reference(x64, 8, True, 10000, 1.0, 4))


def test_rope_gradient_matches_finite_differences(rng):
    x = rng.standard_normal((2, 4, 6))
    rope = nn.RoPE(6, traditional=True, base=50.0)
    check_input_grad(lambda v: (rope(v, offset=2) * kc.arange(6)).sum(), x)


def sinusoidal_reference(x, dims, min_freq, max_freq, scale, cos_first, full_turns):
    half = dims // 2
    fraction = np.ones(1) if half == 1 else 1 - np.arange(half) / (half - 1)
    freqs = np.exp(np.log(min_freq) + fraction * (np.log(max_freq) - np.log(min_freq)))
    if full_turns:
        freqs = freqs * 2 * np.pi
    angles = x[..., None] * freqs
    parts = [np.cos(angles), np.sin(angles)] if cos_first else [np.sin(angles), np.cos(angles)]
    scale = math.sqrt(2 / dims) if scale is None else scale
    return np.concatenate(parts, axis=-1) * scale


SINUSOIDAL_CASES = [
    dict(dims=8),
    dict(dims=2),
    dict(dims=6, min_freq=0.01, max_freq=3.0, scale=1.0, cos_first=True),
    dict(dims=10, full_turns=True, scale=0.3),
]


@pytest.mark.parametrize("args", SINUSOIDAL_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sinusoidal_matches_reference(rng, args, layout):
    pe = nn.SinusoidalPositionalEncoding(**args)
    x, x64 = random_input(rng, (2, 5, 3), layout=layout, lo=0, hi=20)
    full = dict(min_freq=0.0001, max_freq=1, scale=None, cos_first=False, full_turns=False)
    full.update(args)
    y = pe(x)
    assert y.shape == (2, 5, 3, args["dims"])
    # Angles up to 20 * 2 pi in float32.
    assert_close(y, sinusoidal_reference(x64, **full), scale=10.0)


def test_sinusoidal_by_hand_and_dtypes():
    # Position 0: every sine is 0 and every cosine 1.
    y = nn.SinusoidalPositionalEncoding(4, scale=1.0)(kc.array([0.0]))
    assert y.tolist() == [[0, 0, 1, 1]]
    pe = nn.SinusoidalPositionalEncoding(8)
    assert pe.parameters() == {} and pe.scale == 0.5 and pe.cos_first is False
    for dtype in FLOAT_DTYPES:
        x = kc.arange(4).astype(dtype)
        assert pe(x).shape == (4, 8)
    with pytest.raises(ValueError, match="even"):
        nn.SinusoidalPositionalEncoding(7)
    with pytest.raises(ValueError, match="positive"):
        nn.SinusoidalPositionalEncoding(0)


def test_sinusoidal_gradient_matches_finite_differences(rng):
    pe = nn.SinusoidalPositionalEncoding(6, max_freq=2.0)
    check_input_grad(lambda v: (pe(v) ** 2 * kc.arange(6)).sum(), rng.uniform(0, 3, (3, 2)))


def test_alibi_slopes_by_hand():
    def slopes(h):
        return np.array(nn.ALiBi.create_alibi_slope(h)).reshape(-1).tolist()

    assert slopes(8) == [2.0**-k for k in range(1, 9)]
    assert slopes(4) == [2.0**-k for k in (2, 4, 6, 8)]
    # Not a power of two: those of 4 heads, then every other one of 8.
    assert slopes(6) == [2.0**-k for k in (2, 4, 6, 8, 1, 3)]
    assert nn.ALiBi.create_alibi_slope(4, dtype=kc.float16).shape == (4, 1, 1)
    with pytest.raises(ValueError, match="num_heads"):
        nn.ALiBi.create_alibi_slope(0)


def alibi_reference(scores, offset, mask):
    _, H, Lq, Lk = scores.shape
    slope = np.array(nn.ALiBi.create_alibi_slope(H)).astype(np.float64).reshape(H, 1, 1)
    q = offset + np.arange(Lq)
    distance = np.abs(q[:, None] - np.arange(Lk)[None, :])
    out = scores - slope * distance
    return out if mask is None else out + mask


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.parametrize("with_mask", [False, True])
def test_alibi_matches_reference(rng, layout, offset, with_mask):
    scores, s64 = random_input(rng, (2, 6, 4, 7), layout=layout)
    mask = rng.standard_normal((4, 7)).astype(np.float32) if with_mask else None
    y = nn.ALiBi()(scores, offset=offset, mask=None if mask is None else kc.array(mask))
    assert_close(y, alibi_reference(s64, offset, mask))


def test_alibi_matrix_and_dtypes(rng):
    m = nn.ALiBi.create_alibi_matrix(5, 4, 2, offset=2)
    assert m.shape == (1, 2, 3, 4) and m.dtype == kc.float32
    # Head 0 of 2 has slope 2^-4; query 2 against key 0 is 2 apart.
    assert m[0, 0, 0, 0].item() == -2 * 2.0**-4
    for dtype in FLOAT_DTYPES:
        scores = kc.array(rng.standard_normal((1, 4, 3, 3)).astype(np.float32)).astype(dtype)
        assert nn.ALiBi()(scores).dtype == dtype
    with pytest.raises(ValueError, match=r"ALiBi.*\(3, 3\)"):
        nn.ALiBi()(kc.ones((3, 3)))


def test_positional_encodings_match_mlx(rng):
    mx, mnn = mlx()
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    for args in ROPE_CASES:
        ours, theirs = nn.RoPE(**args), mnn.RoPE(**args)
        assert repr(ours) == repr(theirs)
        assert_close(ours(kc.array(x), offset=4), np.array(theirs(mx.array(x), offset=4)))
    p = rng.uniform(0, 10, (3, 5)).astype(np.float32)
    for args in SINUSOIDAL_CASES:
        ours, theirs = nn.SinusoidalPositionalEncoding(**args), mnn.SinusoidalPositionalEncoding(**args)
        assert_close(ours(kc.array(p)), np.array(theirs(mx.array(p))), scale=10.0)
    mask = rng.standard_normal((7, 8)).astype(np.float32)
    for offset in (0, 2):
        assert_close(
            nn.ALiBi()(kc.array(x), offset=offset, mask=kc.array(mask)),
            np.array(mnn.ALiBi()(mx.array(x), offset=offset, mask=mx.array(mask))),
        )
    for h in (1, 3, 8, 12):
        assert_close(
            nn.ALiBi.create_alibi_matrix(6, 5, h, offset=1),
            np.array(mnn.ALiBi.create_alibi_matrix(6, 5, h, offset=1)),
        )


def test_signatures_match_mlx():
    assert_same_signatures(
        ["RoPE", "SinusoidalPositionalEncoding", "ALiBi"]
    )
