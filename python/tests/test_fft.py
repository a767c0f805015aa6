"""kiln.core.fft against numpy.fft (float64 references), and against MLX
where it is installed (values, gradients, stft/istft); non-contiguous
inputs, every dtype family, sizes, norms, errors; and the complex gradient
convention of the elementwise ops and matmul."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import mx, needs_mlx

rng = np.random.default_rng(0)


def crand(*shape):
    return (rng.uniform(-1, 1, shape) + 1j * rng.uniform(-1, 1, shape)).astype(np.complex64)


def close(got, want, rtol=2e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1e-30, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= rtol * scale * max(1.0, np.log2(max(want.size, 2))), (err, scale)


ONE_AXIS = ["fft", "ifft", "rfft", "irfft"]
MANY_AXES = ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"]


@pytest.mark.parametrize("name", ONE_AXIS)
@pytest.mark.parametrize("n", [None, 1, 7, 12, 33])
@pytest.mark.parametrize("axis", [-1, 0])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_one_axis_against_numpy(name, n, axis, norm):
    a = crand(6, 10)
    if name == "irfft" and n == 1 and axis == 0:
        n = 2
    got = getattr(kc.fft, name)(kc.array(a), n=n, axis=axis, norm=norm)
    want = getattr(np.fft, name)(a.astype(np.complex128) if name != "rfft" else a.real.astype(np.float64),
                                 n=n, axis=axis, norm=norm)
    assert got.dtype == (kc.float32 if name == "irfft" else kc.complex64)
    close(got, want)


@pytest.mark.parametrize("name", MANY_AXES)
@pytest.mark.parametrize("s_axes", [(None, None), ((4, 6), (0, 2)), ((5, 3, 9), (0, 1, 2)), (None, (2, 0))])
def test_many_axes_against_numpy(name, s_axes):
    s, axes = s_axes
    a = crand(4, 5, 8)
    x = a.real.astype(np.float32) if name.startswith("rfft") else a
    kw = {}
    if axes is not None or not name.endswith("2"):
        kw["axes"] = list(axes) if axes is not None else None
    if name.endswith("2") and axes is not None and len(axes) != 2:
        return  # the 2-d forms name two axes
    if s is not None:
        kw["s"] = s
    got = getattr(kc.fft, name)(kc.array(x), **kw)
    want = getattr(np.fft, name)(x.astype(np.complex128 if x.dtype == np.complex64 else np.float64), **kw)
    close(got, want)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "broadcast"])
def test_non_contiguous_inputs(layout):
    base = crand(8, 12)
    if layout == "transposed":
        k, n = kc.array(base).T, base.T
    elif layout == "sliced":
        k, n = kc.array(base)[::2, 1::3], base[::2, 1::3]
    else:
        k, n = kc.broadcast_to(kc.array(base[:1]), (5, 12)), np.broadcast_to(base[:1], (5, 12))
    close(kc.fft.fft2(k), np.fft.fft2(n.astype(np.complex128)))
    close(kc.fft.rfft(kc.real(k), axis=0), np.fft.rfft(n.real.astype(np.float64), axis=0))
    close(kc.fft.irfftn(k), np.fft.irfftn(n.astype(np.complex128)))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "uint8", "bool_", "float64"])
def test_input_dtypes_are_cast(dtype):
    x = rng.uniform(0, 3, (3, 9))
    k = kc.array(x.astype(np.float32)).astype(getattr(kc, dtype))
    vals = np.asarray(k.astype(kc.float32)).astype(np.float64)
    got = kc.fft.fft(k)
    assert got.dtype == kc.complex64
    close(got, np.fft.fft(vals))
    close(kc.fft.rfft(k), np.fft.rfft(vals))


def test_rfft_of_complex_input_uses_the_real_part():
    a = crand(3, 8)
    close(kc.fft.rfft(kc.array(a)), np.fft.rfft(a.real.astype(np.float64)))


@pytest.mark.parametrize("n", [2, 3, 5, 16, 17, 97, 128, 1000, 1009, 4096, 4099, 65536])
def test_lengths_of_every_factorization(n):
    a = crand(n)
    close(kc.fft.fft(kc.array(a)), np.fft.fft(a.astype(np.complex128)))
    x = a.real.astype(np.float32)
    close(kc.fft.irfft(kc.fft.rfft(kc.array(x)), n=n), x)


def test_frequencies_and_shifts():
    for n in [1, 4, 5, 8]:
        for d in [1.0, 0.1]:
            close(kc.fft.fftfreq(n, d), np.fft.fftfreq(n, d))
            close(kc.fft.rfftfreq(n, d), np.fft.rfftfreq(n, d))
    a = np.arange(35).reshape(5, 7)
    for axes in [None, 0, [1], (0, 1), -1]:
        assert np.array_equal(kc.fft.fftshift(kc.array(a), axes=axes), np.fft.fftshift(a, axes=axes))
        assert np.array_equal(kc.fft.ifftshift(kc.array(a), axes=axes), np.fft.ifftshift(a, axes=axes))


def test_empty_and_compiled():
    assert kc.fft.fft(kc.zeros((0, 4), dtype=kc.complex64)).shape == (0, 4)
    a = crand(5, 6)
    f = kc.compile(lambda x: kc.fft.irfft(kc.fft.fft(x, axis=0), n=6))
    close(f(kc.array(a)), np.fft.irfft(np.fft.fft(a.astype(np.complex128), axis=0), n=6))


def test_errors_name_the_op():
    x = kc.array(rng.uniform(size=(4, 6)).astype(np.float32))
    cases = [
        (lambda: kc.fft.fft(kc.array(1.0)), "[fft]", "scalar"),
        (lambda: kc.fft.fft(x, axis=2), "[fft]", "(4, 6)"),
        (lambda: kc.fft.fft(x, n=0), "[fft]", "size 0"),
        (lambda: kc.fft.fftn(x, axes=[0, 0]), "[fftn]", "duplicated"),
        (lambda: kc.fft.fftn(x, s=[3], axes=[0, 1]), "[fftn]", "different sizes"),
        (lambda: kc.fft.fftn(x, s=[3, 4]), "[fftn]", "`axes`"),
        (lambda: kc.fft.rfft(x, norm="none"), "[rfft]", "norm"),
        (lambda: kc.fft.irfft(kc.ones((3, 1))), "[irfft]", "needs n"),
        (lambda: kc.fft.stft(x, n_fft=16), "[stft]", "(4, 6)"),
    ]
    for fn, op, part in cases:
        with pytest.raises(ValueError) as e:
            fn()
        assert op in str(e.value) and part in str(e.value), str(e.value)


def test_stft_round_trip():
    x = rng.uniform(-1, 1, (2, 200)).astype(np.float32)
    w = kc.array(np.hanning(64).astype(np.float32))
    spec = kc.fft.stft(kc.array(x), n_fft=64, hop_length=16, window=w)
    assert spec.shape == (2, 33, 13)
    back = kc.fft.istft(spec, n_fft=64, hop_length=16, window=w, length=200)
    # Hann's envelope is near 0 at the ends of the padded signal only.
    close(np.asarray(back)[:, 4:-4], x[:, 4:-4], rtol=1e-6)


# ---- against MLX --------------------------------------------------------


@needs_mlx
@pytest.mark.parametrize("name", ONE_AXIS + MANY_AXES)
def test_values_match_mlx(name):
    a = crand(4, 6)
    x = a.real.copy() if name.startswith("rfft") else a
    got = getattr(kc.fft, name)(kc.array(x))
    want = getattr(mx.fft, name)(mx.array(x))
    close(got, np.array(want), rtol=1e-6)


GRAD_CASES = {
    "rfft |.|^2": (lambda m: lambda a: (m.abs(m.fft.rfft(a)) ** 2).sum(), "real"),
    "rfft2 s": (lambda m: lambda a: m.fft.rfft2(a, s=(4, 6)).imag.sum(), "real"),
    "fft weighted": (lambda m: lambda a: (m.fft.fft(a) * m.array(0.5 - 1j)).imag.sum(), "complex"),
    "ifft ortho": (lambda m: lambda a: m.fft.ifft(a, norm="ortho").real.sum(), "complex"),
    "fftn abs": (lambda m: lambda a: m.abs(m.fft.fftn(a)).sum(), "complex"),
    "irfft": (lambda m: lambda a: (m.fft.irfft(a) * m.arange(8)).sum(), "complex"),
    "irfft odd": (lambda m: lambda a: (m.fft.irfft(a, n=9) * m.arange(9)).sum(), "complex"),
    "irfftn": (lambda m: lambda a: (m.fft.irfftn(a) ** 2).sum(), "complex"),
    "multiply": (lambda m: lambda a: (a * m.array(0.3 + 0.7j)).imag.sum(), "complex"),
    "divide": (lambda m: lambda a: (m.array(0.3 + 0.7j) / (a + 2)).real.sum(), "complex"),
    "exp": (lambda m: lambda a: m.exp(a).imag.sum(), "complex"),
    "matmul": (lambda m: lambda a: (a @ m.array(np.ones((5, 2), np.complex64) * (1 - 2j))).real.sum(), "complex"),
}


@needs_mlx
@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients_match_mlx(case):
    make, kind = GRAD_CASES[case]
    a = crand(3, 5) if kind == "complex" else rng.uniform(-1, 1, (3, 8)).astype(np.float32)
    got = kc.grad(make(kc))(kc.array(a))
    want = mx.grad(make(mx))(mx.array(a))
    close(got, np.array(want), rtol=1e-5)


@needs_mlx
@pytest.mark.parametrize("kw", [
    dict(n_fft=16), dict(n_fft=16, hop_length=5, win_length=12, window="hann"),
    dict(n_fft=16, pad_mode="constant", norm="ortho"), dict(n_fft=16, pad_mode="edge", center=False),
    dict(n_fft=8, onesided=False)])
def test_stft_matches_mlx(kw):
    x = rng.uniform(-1, 1, (2, 50)).astype(np.float32)
    kw = dict(kw)
    if kw.get("window") == "hann":
        kw["window"] = np.hanning(kw["win_length"]).astype(np.float32)
    k = kc.fft.stft(kc.array(x), **{k: (kc.array(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()})
    m = mx.fft.stft(mx.array(x), **{k: (mx.array(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()})
    close(k, np.array(m), rtol=1e-6)
    ki = kc.fft.istft(k, n_fft=kw["n_fft"], hop_length=kw.get("hop_length"), center=kw.get("center", True),
                      onesided=kw.get("onesided"), length=50)
    mi = mx.fft.istft(m, n_fft=kw["n_fft"], hop_length=kw.get("hop_length"), center=kw.get("center", True),
                      onesided=kw.get("onesided"), length=50)
    close(ki, np.array(mi), rtol=1e-5)


@needs_mlx
@pytest.mark.parametrize("fn", ["abs", "exp", "real", "square"])
def test_complex_jvp_matches_mlx(fn):
    z, t = crand(6), crand(6)
    got = kc.jvp(getattr(kc, fn), [kc.array(z)], [kc.array(t)])[1][0]
    want = mx.jvp(getattr(mx, fn), [mx.array(z)], [mx.array(t)])[1][0]
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    close(got, np.array(want), rtol=1e-6)


def test_frequencies_refuse_a_zero_spacing():
    for f in (kc.fft.fftfreq, kc.fft.rfftfreq):
        with pytest.raises(ValueError, match="spacing"):
            f(4, d=0.0)
        with pytest.raises(ValueError, match="positive"):
            f(0)
    np.testing.assert_array_equal(kc.fft.fftfreq(8, d=-0.5), np.fft.fftfreq(8, d=-0.5).astype(np.float32))
