"""quantize, dequantize and quantized_matmul (affine mode): against a NumPy
reference written here (codes unpacked bit by bit), and bit for bit against
MLX where it is installed; non-contiguous inputs; errors."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import mx, needs_mlx

WIDTHS = [1, 2, 3, 4, 5, 6, 8]


def unpack(words, bits, n):
    """Codes of a little-endian bit stream in uint32 words, bit by bit."""
    words = np.asarray(words, dtype=np.uint64).reshape(-1)
    bits_at = (words[:, None] >> np.arange(32, dtype=np.uint64)) & 1  # (W, 32)
    stream = bits_at.reshape(-1)[: n * bits].reshape(n, bits)
    return (stream << np.arange(bits, dtype=np.uint64)).sum(1)


def reference(w, group_size, bits):
    """MLX's affine quantization in float32 with NumPy: codes, scales, biases."""
    g = w.astype(np.float32).reshape(-1, group_size)
    levels = np.float32(2**bits - 1)
    hi, lo = g.max(1), g.min(1)
    scale = np.maximum((hi - lo) / levels, np.float32(1e-7)).astype(np.float32)
    bias = lo
    if bits > 1:
        low_end = np.abs(lo) > np.abs(hi)
        scale = np.where(low_end, scale, -scale).astype(np.float32)
        edge = np.where(low_end, lo, hi)
        q0 = np.round(edge / scale)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(q0 != 0, edge / q0, scale).astype(np.float32)
        bias = np.where(q0 == 0, 0, edge).astype(np.float32)
    codes = np.clip(np.round((g - bias[:, None]) / scale[:, None]), 0, levels)
    return codes.astype(np.uint64).reshape(-1), scale, bias


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_quantize_matches_the_reference(rng, bits, group_size):
    w = (rng.standard_normal((3, 2, 256)) * rng.uniform(0.1, 3)).astype(np.float32)
    q, s, b = kc.quantize(kc.array(w), group_size=group_size, bits=bits)
    assert q.dtype == kc.uint32 and q.shape == (3, 2, 256 * bits // 32)
    assert s.shape == b.shape == (3, 2, 256 // group_size)
    codes, rs, rb = reference(w, group_size, bits)
    np.testing.assert_array_equal(unpack(np.array(q), bits, w.size), codes)
    np.testing.assert_array_equal(np.array(s).reshape(-1), rs)
    np.testing.assert_array_equal(np.array(b).reshape(-1), rb)
    d = np.array(kc.dequantize(q, s, b, group_size=group_size, bits=bits))
    want = codes.reshape(-1, group_size) * rs[:, None] + rb[:, None]
    np.testing.assert_allclose(d.reshape(-1, group_size), want, rtol=1e-6, atol=1e-6)


def test_non_contiguous_weights(rng):
    base = rng.standard_normal((128, 96)).astype(np.float32)
    for w in (kc.array(base).T, kc.array(base)[::2], kc.broadcast_to(kc.array(base[:1]), (4, 96))):
        q, s, b = kc.quantize(w, group_size=32, bits=4)
        codes, rs, _ = reference(np.array(w), 32, 4)
        np.testing.assert_array_equal(unpack(np.array(q), 4, w.size), codes)
        np.testing.assert_array_equal(np.array(s).reshape(-1), rs)


def test_quantized_matmul_both_layouts(rng):
    w = rng.standard_normal((96, 128)).astype(np.float32)
    x = rng.standard_normal((2, 3, 128)).astype(np.float32)
    q, s, b = kc.quantize(kc.array(w), bits=3, group_size=32)
    wd = np.array(kc.dequantize(q, s, b, bits=3, group_size=32))
    got = kc.quantized_matmul(kc.array(x), q, s, b, transpose=True, bits=3, group_size=32)
    # Float64 references: a float32 one has its own rounding (NumPy's
    # summation order), as large as the tolerance over 128 terms.
    np.testing.assert_allclose(np.array(got), x.astype(np.float64) @ wd.T, rtol=1e-5, atol=1e-5)
    qt, st, bt = kc.quantize(kc.array(w.T.copy()), bits=8, group_size=32)
    wdt = np.array(kc.dequantize(qt, st, bt, bits=8, group_size=32))
    x2 = rng.standard_normal((5, 128)).astype(np.float32)
    got = kc.quantized_matmul(kc.array(x2), qt, st, bt, transpose=False, bits=8, group_size=32)
    np.testing.assert_allclose(np.array(got), x2.astype(np.float64) @ wdt, rtol=1e-5, atol=1e-5)


def test_bad_input_raises():
    w = kc.ones((4, 128))
    with pytest.raises(ValueError, match=r"\[quantize\] group_size 16"):
        kc.quantize(w, group_size=16)
    with pytest.raises(ValueError, match=r"\[quantize\] bits 7"):
        kc.quantize(w, bits=7)
    with pytest.raises(ValueError, match=r"mxfp4 quantization needs group_size 32"):
        kc.quantize(w, group_size=64, mode="mxfp4")
    with pytest.raises(ValueError, match=r"'fp4' is not one of"):
        kc.quantize(w, mode="fp4")
    q4, s4 = kc.quantize(w, mode="mxfp4")
    with pytest.raises(ValueError, match=r"mxfp4 mode has no biases"):
        kc.dequantize(q4, s4, s4, mode="mxfp4")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        kc.quantize(kc.ones((128,)))
    q, s, b = kc.quantize(w)
    with pytest.raises(ValueError, match="needs biases"):
        kc.dequantize(q, s)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\].*does not match"):
        kc.quantized_matmul(kc.ones((2, 100)), q, s, b)


@needs_mlx
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("bits", WIDTHS)
def test_bit_for_bit_with_mlx(rng, dtype, bits):
    for group_size in (32, 64, 128):
        w = (rng.standard_normal((4, 256)) * 2).astype(np.float32)
        kw = kc.array(w).astype(getattr(kc, dtype))
        mw = mx.array(w).astype(getattr(mx, dtype))
        kq, ks, kb = kc.quantize(kw, group_size, bits)
        mq, ms, mb = mx.quantize(mw, group_size, bits)
        np.testing.assert_array_equal(np.array(kq), np.array(mq))
        for k, m in ((ks, ms), (kb, mb)):
            np.testing.assert_array_equal(np.array(k.astype(kc.float32)), np.array(m.astype(mx.float32)))
        # Each implementation dequantizes the other's arrays the same way.
        kd = kc.dequantize(kc.array(np.array(mq)), ks, kb, group_size, bits)
        md = mx.dequantize(mq, ms, mb, group_size, bits)
        assert str(kd.dtype).split(".")[-1] == str(md.dtype).split(".")[-1]
        np.testing.assert_array_equal(np.array(kd.astype(kc.float32)), np.array(md.astype(mx.float32)))


@pytest.mark.parametrize("bits", [3, 4])
def test_graph_and_cpu_kernel_agree(rng, bits):
    # On the CPU quantize runs a kernel; vmap transforms its fallback, the
    # graph of ops the GPU runs. Both give the same bits.
    w = kc.array((rng.standard_normal((3, 4, 128)) * 2).astype(np.float32))
    direct = kc.quantize(w, 32, bits)
    mapped = kc.vmap(lambda a: kc.quantize(a, 32, bits), in_axes=1, out_axes=1)(w)
    for d, m in zip(direct, mapped):
        np.testing.assert_array_equal(np.array(d), np.array(m))


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("picks", ["few", "many", "dense", "lhs"])
def test_gather_qmm_against_dequantized_gather(transpose, picks):
    """gather_qmm equals gather_mm over the dequantized matrices, whether it
    reads each pick's packed codes (few rows per matrix: a batched
    quantized_matmul, the CPU's kernel) or dequantizes all of them once
    (at least 8 rows per matrix)."""
    rng = np.random.default_rng(3)
    E, N, K = 5, 64, 128
    w = rng.standard_normal((E, N, K) if transpose else (E, K, N)).astype(np.float32)
    q = kc.quantize(kc.array(w), group_size=64, bits=4)
    wd = np.asarray(kc.dequantize(*q, group_size=64, bits=4))
    if picks == "lhs":
        x = rng.standard_normal((4, 2, K)).astype(np.float32)
        li, ri = np.array([3, 0, 2], np.uint32), np.array([4, 4, 1], np.uint32)
        got = kc.gather_qmm(kc.array(x), *q, lhs_indices=kc.array(li), rhs_indices=kc.array(ri),
                            transpose=transpose)
        mats = [wd[r].T if transpose else wd[r] for r in ri]
        want = np.stack([x[l] @ m for l, m in zip(li, mats)])
    else:
        count = {"few": 2, "many": 12, "dense": 48}[picks]
        ri = (np.arange(count, dtype=np.uint32) * 3 % E).reshape(2, count // 2)
        x = rng.standard_normal((2, 1, 1, K)).astype(np.float32)
        got = kc.gather_qmm(kc.array(x), *q, rhs_indices=kc.array(ri), transpose=transpose)
        want = np.empty(ri.shape + (1, N), np.float32)
        for idx in np.ndindex(ri.shape):
            m = wd[ri[idx]].T if transpose else wd[ri[idx]]
            want[idx] = x[idx[0], 0] @ m
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@needs_mlx
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_dequantize_kernel_matches_its_graph(dtype):
    """On the CPU dequantize runs a kernel; vmap transforms its fallback,
    the graph of ops: the two agree bit for bit for every width, in the
    scales' dtype and cast to another, also from non-contiguous inputs."""
    rng = np.random.default_rng(7)
    kdt = getattr(kc, dtype)
    for bits in (2, 3, 4, 5, 6, 8):
        w = kc.array(rng.standard_normal((3, 32, 128)).astype(np.float32)).astype(kdt)
        q = kc.quantize(w, 64, bits)
        for out in (None, kc.float32):
            got = kc.dequantize(*q, 64, bits, dtype=out)
            want = kc.vmap(lambda a, b, c: kc.dequantize(a, b, c, 64, bits, dtype=out))(*q)
            assert got.dtype == (out or kdt)
            np.testing.assert_array_equal(np.array(got.astype(kc.float32)), np.array(want.astype(kc.float32)))
        sliced = [x[:, ::2] for x in q]
        np.testing.assert_array_equal(
            np.array(kc.dequantize(*sliced, 64, bits).astype(kc.float32)),
            np.array(kc.dequantize(*q, 64, bits).astype(kc.float32))[:, ::2])


def test_batched_quantized_matmul_reads_each_matrix():
    """quantized_matmul of x (B, M, K) with a batch of quantized matrices
    (B, N, K): the CPU kernel per matrix, against the dequantized product,
    for widths the kernel reads by bytes and code by code."""
    rng = np.random.default_rng(5)
    for bits in (4, 3, 8):
        w = rng.standard_normal((3, 40, 128)).astype(np.float32)
        x = rng.standard_normal((3, 5, 128)).astype(np.float32)
        q = kc.quantize(kc.array(w), group_size=64, bits=bits)
        wd = np.asarray(kc.dequantize(*q, group_size=64, bits=bits)).astype(np.float64)
        got = kc.quantized_matmul(kc.array(x), *q, transpose=True, group_size=64, bits=bits)
        assert got.shape == (3, 5, 40)
        np.testing.assert_allclose(np.array(got), x @ np.swapaxes(wd, -1, -2), rtol=1e-4, atol=1e-4)


@needs_mlx
def test_gather_qmm_matches_mlx():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, 64, 128)).astype(np.float32)
    x = rng.standard_normal((2, 3, 1, 128)).astype(np.float32)
    ri = np.array([[1, 3, 0], [2, 2, 1]], np.uint32)
    got = kc.gather_qmm(kc.array(x), *kc.quantize(kc.array(w)), rhs_indices=kc.array(ri))
    want = mx.gather_qmm(mx.array(x), *mx.quantize(mx.array(w)), rhs_indices=mx.array(ri))
    np.testing.assert_allclose(np.asarray(got), np.array(want), rtol=1e-4, atol=1e-4)


def test_gather_qmm_errors():
    w = kc.quantize(kc.ones((2, 64, 64)))
    with pytest.raises(ValueError, match=r"\[gather_qmm\].*needs biases"):
        kc.gather_qmm(kc.ones((1, 64)), w[0], w[1], None)
    with pytest.raises(ValueError, match=r"\[gather_qmm\].*2 dimensions"):
        kc.gather_qmm(kc.ones((64,)), *w)
    with pytest.raises(ValueError, match=r"\[gather_qmm\].*only supported in the nvfp4 mode"):
        kc.gather_qmm(kc.ones((1, 64)), *w, global_scale=kc.ones((1,)))


def fp8_inputs():
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, 1.0625, 1.1875, 448, 464, 1e6, np.inf, -np.inf, np.nan,
                        2**-6, 2**-9, 2**-10, 3 * 2**-10, -3.3, 0.1], np.float32)
    return np.concatenate([special, rng.standard_normal(3000).astype(np.float32) * 40,
                           rng.standard_normal(1000).astype(np.float32) * 0.01])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fp8_round_trip_of_every_code(dtype):
    codes = kc.array(np.arange(256, dtype=np.uint8))
    values = kc.from_fp8(codes, getattr(kc, dtype))
    assert values.dtype == getattr(kc, dtype)
    back = np.asarray(kc.to_fp8(values))
    finite = (np.arange(256) & 0x7F) != 0x7F
    assert np.array_equal(back[finite], np.arange(256)[finite])
    assert np.isnan(np.asarray(values.astype(kc.float32))[~finite]).all()
    assert kc.from_fp8(codes).dtype == kc.bfloat16


@needs_mlx
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_fp8_matches_mlx_bit_for_bit(dtype):
    x = fp8_inputs()
    got = np.asarray(kc.to_fp8(kc.array(x).astype(getattr(kc, dtype))))
    want = np.array(mx.to_fp8(mx.array(x).astype(getattr(mx, dtype))))
    # NaN's sign: MLX's cast of a NaN to bfloat16 drops it, kiln's keeps it.
    same = (got == want) | np.isnan(x)
    assert same.all(), np.nonzero(~same)[0][:10]
    codes = np.arange(256, dtype=np.uint8)
    g = np.asarray(kc.from_fp8(kc.array(codes), getattr(kc, dtype)).astype(kc.float32))
    w = np.array(mx.from_fp8(mx.array(codes), getattr(mx, dtype)).astype(mx.float32))
    assert np.array_equal(g, w, equal_nan=True)


def test_fp8_errors():
    with pytest.raises(ValueError, match=r"\[to_fp8\].*int32"):
        kc.to_fp8(kc.array([1, 2]))
    with pytest.raises(ValueError, match=r"\[from_fp8\].*float32"):
        kc.from_fp8(kc.array([1.0]))


MODES = [("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)]
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mode_weight():
    rng = np.random.default_rng(6)
    w = (rng.standard_normal((32, 256)) * rng.uniform(0.001, 100, (32, 1))).astype(np.float32)
    w[0, :32] = 0          # a group of zeros
    w[1, :16] = 1e-30      # below nvfp4's scale range
    w[2, :] = np.linspace(-6, 6, 256)  # ties between e2m1 values
    return w


@pytest.mark.parametrize("mode,group,bits", MODES)
def test_microscaling_modes_against_numpy(mode, group, bits):
    """Codes and scales against a NumPy reference written here: the mx
    scale is 2^ceil(log2(max / largest code)), nvfp4's max / 6 in e4m3;
    e2m1 rounds to nearest with ties toward zero (zero is +0); e4m3 is
    to_fp8's."""
    w = mode_weight()
    q, s = kc.quantize(kc.array(w), mode=mode)
    assert q.dtype == kc.uint32 and s.dtype == kc.uint8
    assert q.shape == (32, 256 * bits // 32) and s.shape == (32, 256 // group)
    g = w.reshape(32, -1, group).astype(np.float64)
    amax = np.abs(g).max(-1)
    if mode == "nvfp4":
        sc_code = np.asarray(kc.to_fp8(kc.array((amax / 6).astype(np.float32))))
        scale = np.asarray(kc.from_fp8(kc.array(sc_code), kc.float32)).astype(np.float64)
    else:
        with np.errstate(divide="ignore"):
            e = np.ceil(np.log2(amax / (6 if bits == 4 else 448)))
        e = np.where(amax == 0, 0, np.clip(e, -127, 127))
        sc_code, scale = (e + 127).astype(np.uint8), 2.0 ** e
    assert np.array_equal(np.asarray(s), sc_code)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(scale[..., None] == 0, 0, g / scale[..., None])
    if bits == 4:
        k = (np.abs(v)[..., None] > np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5])).sum(-1)
        codes = np.where(k == 0, 0, k + 8 * (v < 0))
    else:
        codes = np.asarray(kc.to_fp8(kc.array(v.astype(np.float32))))
    assert np.array_equal(unpack(q, bits, w.size).reshape(w.shape), codes.reshape(w.shape).astype(np.uint64))
    # dequantize: code value times scale, bfloat16 unless asked.
    d = kc.dequantize(q, s, mode=mode)
    assert d.dtype == kc.bfloat16
    vals = E2M1[codes] if bits == 4 else np.asarray(kc.from_fp8(kc.array(codes.astype(np.uint8)), kc.float32))
    want = (vals * scale[..., None]).reshape(w.shape)
    assert np.array_equal(np.asarray(kc.dequantize(q, s, mode=mode, dtype=kc.float32)), want.astype(np.float32))
    x = np.random.default_rng(7).standard_normal((3, 256)).astype(np.float32)
    got = kc.quantized_matmul(kc.array(x), q, s, mode=mode)
    np.testing.assert_allclose(np.asarray(got), x @ want.T, rtol=1e-4, atol=1e-3 * np.abs(want).max())
    # transpose=False: w as (in, out), quantized along its out axis.
    got_t = kc.quantized_matmul(kc.array(x[:, :32]), q, s, transpose=False, mode=mode)
    np.testing.assert_allclose(np.asarray(got_t), x[:, :32] @ want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("mode,group,bits", MODES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_microscaling_dequantize_kernel_matches_its_graph(mode, group, bits, dtype):
    """On the CPU the microscaling modes' dequantize runs a kernel; vmap
    transforms its fallback, the graph of ops: the two agree bit for bit
    on random words and scales (every code and scale byte, NaN and
    infinite ones included), with nvfp4's global scale, and from
    non-contiguous inputs."""
    rng = np.random.default_rng(11)
    words = kc.array(rng.integers(0, 2**32, (3, 16, 64 * bits // 32), dtype=np.uint32))
    scales = kc.array(rng.integers(0, 256, (3, 16, 64 // group), dtype=np.uint8))
    out = getattr(kc, dtype)
    cases = [None, kc.array(37.5)] if mode == "nvfp4" else [None]
    for g in cases:
        got = kc.dequantize(words, scales, mode=mode, dtype=out, global_scale=g)
        want = kc.vmap(lambda a, b: kc.dequantize(a, b, mode=mode, dtype=out, global_scale=g))(words, scales)
        assert got.dtype == out and got.shape == (3, 16, 64)
        np.testing.assert_array_equal(np.array(got.astype(kc.float32)), np.array(want.astype(kc.float32)))
    sliced = kc.dequantize(words[:, ::2], scales[:, ::2], mode=mode, dtype=out)
    np.testing.assert_array_equal(np.array(sliced.astype(kc.float32)),
                                  np.array(kc.dequantize(words, scales, mode=mode, dtype=out).astype(kc.float32))[:, ::2])


@pytest.mark.parametrize("mode,group,bits", MODES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_microscaling_matmul_reads_the_codes(mode, group, bits, dtype):
    """1 to 7 rows of x read the codes (QuantizedMatmulFp) on the CPU, up
    to 8 on the GPU; more dequantize for a GEMM: both against float64
    products of the dequantized weight, with x strided and batched, and
    vmap (the kernel's fallback graph) agreeing."""
    rng = np.random.default_rng(12)
    kdt = getattr(kc, dtype)
    w = (rng.standard_normal((40, 128)) * rng.uniform(0.01, 10, (40, 1))).astype(np.float32)
    q, s = kc.quantize(kc.array(w), mode=mode)
    wd = np.asarray(kc.dequantize(q, s, mode=mode, dtype=kc.float32)).astype(np.float64)
    tol = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}[dtype]
    for rows in (1, 3, 7, 8, 12, 16, 17):
        x = kc.array(rng.standard_normal((rows, 256)).astype(np.float32)).astype(kdt)[:, ::2]
        got = kc.quantized_matmul(x, q, s, mode=mode)
        assert got.dtype == kdt and got.shape == (rows, 40)
        want = np.asarray(x.astype(kc.float32)).astype(np.float64) @ wd.T
        np.testing.assert_allclose(np.asarray(got.astype(kc.float32)), want, rtol=tol, atol=tol * np.abs(want).max())
    xb = kc.array(rng.standard_normal((2, 3, 128)).astype(np.float32)).astype(kdt)
    got = kc.quantized_matmul(xb, q, s, mode=mode)
    mapped = kc.vmap(lambda a: kc.quantized_matmul(a, q, s, mode=mode))(xb)
    np.testing.assert_allclose(np.asarray(got.astype(kc.float32)), np.asarray(mapped.astype(kc.float32)),
                               rtol=tol, atol=tol * float(kc.abs(mapped).max().astype(kc.float32)))


@needs_mlx
@pytest.mark.parametrize("mode,group,bits", MODES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_microscaling_modes_match_mlx_bit_for_bit(mode, group, bits, dtype):
    w = mode_weight()
    kq = kc.quantize(kc.array(w).astype(getattr(kc, dtype)), mode=mode)
    mq = mx.quantize(mx.array(w).astype(getattr(mx, dtype)), mode=mode)
    for a, b in zip(kq, mq):
        assert np.array_equal(np.asarray(a), np.array(b))
    kd = np.asarray(kc.dequantize(*kq, mode=mode).astype(kc.float32))
    md = np.array(mx.dequantize(*mq, mode=mode).astype(mx.float32))
    assert np.array_equal(kd, md)
    x = np.random.default_rng(8).standard_normal((2, 256)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kc.quantized_matmul(kc.array(x), *kq, mode=mode)),
                               np.array(mx.quantized_matmul(mx.array(x), *mq, mode=mode)), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mode,group,bits", MODES)
def test_gather_qmm_in_microscaling_modes(mode, group, bits):
    rng = np.random.default_rng(9)
    w = rng.standard_normal((3, 64, 128)).astype(np.float32)
    q, s = kc.quantize(kc.array(w), mode=mode)
    wd = np.asarray(kc.dequantize(q, s, mode=mode, dtype=kc.float32))
    x = rng.standard_normal((2, 1, 128)).astype(np.float32)
    ri = np.array([2, 0], np.uint32)
    got = kc.gather_qmm(kc.array(x), q, s, rhs_indices=kc.array(ri), mode=mode)
    want = np.stack([x[i] @ wd[r].T for i, r in enumerate(ri)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@needs_mlx
def test_nvfp4_global_scale_matches_mlx_bit_for_bit():
    """nvfp4's second-level scale: codes, scales and float32 values as
    MLX's, for the weight's max (MLX's convention), a small one (scales
    saturate at 448) and a large one."""
    rng = np.random.default_rng(10)
    w = (rng.standard_normal((64, 256)) * rng.uniform(0.01, 10, (64, 1))).astype(np.float32)
    for g in (float(np.abs(w).max()), 1e-3, 5e4):
        kq = kc.quantize(kc.array(w), mode="nvfp4", global_scale=kc.array(g))
        mq = mx.quantize(mx.array(w), mode="nvfp4", global_scale=mx.array(g))
        for a, b in zip(kq, mq):
            assert np.array_equal(np.asarray(a), np.array(b))
        kd = kc.dequantize(*kq, mode="nvfp4", global_scale=kc.array(g))
        md = mx.dequantize(*mq, mode="nvfp4", global_scale=mx.array(g))
        assert kd.dtype == kc.float32  # MLX's default with a global scale
        assert np.array_equal(np.asarray(kd), np.array(md))


def test_nvfp4_global_scale_in_gather_qmm_and_errors():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 16, 64)).astype(np.float32)
    g = np.array([4.0, 0.25, 30.0], np.float32)
    q, s = kc.quantize(kc.array(w), mode="nvfp4")
    x = rng.standard_normal((2, 1, 64)).astype(np.float32)
    ri = np.array([1, 2], np.uint32)
    got = kc.gather_qmm(kc.array(x), q, s, rhs_indices=kc.array(ri), mode="nvfp4", global_scale=kc.array(g))
    wd = [np.asarray(kc.dequantize(q[e], s[e], mode="nvfp4", global_scale=kc.array(g[e]))) for e in range(3)]
    want = np.stack([x[i] @ wd[r].T for i, r in enumerate(ri)])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="nvfp4"):
        kc.quantize(kc.array(w[0]), mode="mxfp4", global_scale=kc.array(1.0))
    with pytest.raises(ValueError, match="float32"):
        kc.quantize(kc.array(w[0]), mode="nvfp4", global_scale=kc.array(1.0, dtype=kc.float16))
    with pytest.raises(ValueError, match="scalar"):
        kc.dequantize(q[0], s[0], mode="nvfp4", global_scale=kc.array(g))
    with pytest.raises(ValueError, match="without indices"):
        kc.gather_qmm(kc.array(x), q, s, mode="nvfp4", global_scale=kc.array(g))


def test_microscaling_dequantize_refuses_integer_dtypes():
    w = kc.random.normal((64, 64))
    for mode in ("mxfp4", "mxfp8", "nvfp4"):
        wq, s = kc.quantize(w, mode=mode)
        with pytest.raises(ValueError, match="floating"):
            kc.dequantize(wq, s, mode=mode, dtype=kc.int32)
        assert kc.dequantize(wq, s, mode=mode, dtype=kc.float16).dtype == kc.float16
