"""One table of kiln's elementwise ops (and the common reductions), each
checked against an independent NumPy reference: forward on contiguous and
non-contiguous inputs in every dtype the row names, vjp and jvp against
central finite differences, vmap against a Python loop, and the dtype
families an op must refuse. Every check runs on each device (the GPU one
skips, saying why, where kiln has no GPU).

A new op joins every check by adding ONE row to TABLE.
"""
import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pytest

import kiln.core as kc
from conftest import check

# ---- dtype families ---------------------------------------------------------
F = ("float32", "float16", "bfloat16")  # bfloat16: float32 NumPy values, loose tolerance
I = ("int8", "int32", "uint8", "int64")
B = ("bool",)
C = ("complex64",)
ANY = F + I + B + C


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfinv(x):
    """Bisection on math.erf: independent of how kiln computes erfinv."""
    lo, hi = np.full(np.shape(x), -6.0), np.full(np.shape(x), 6.0)
    for _ in range(64):
        mid = (lo + hi) / 2
        below = _erf(mid) < x
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


@dataclass
class Op:
    name: str  # the function kc.<name>
    ref: object  # NumPy reference: float64 / complex128 / native integer inputs
    domain: tuple  # one input domain per argument (see sample); its length is the arity
    dtypes: tuple  # dtypes checked forward; the first is the one vmap uses
    diff: tuple = ()  # arguments vjp / jvp differentiate (in float64 and float32)
    out: str = "same"  # the result's dtype, a key of OUT
    rejects: tuple = ()  # families ("float", "int", "bool", "complex") kiln must refuse
    kw: dict = field(default_factory=dict)  # keyword arguments (reductions)
    tol: dict = field(default_factory=dict)  # dtype -> (rtol, atol), over TOL
    # (check, dtype) -> the kiln bug that case shows (strict xfail); check is one
    # of forward, vjp, jvp, vmap, rejects
    xfail: dict = field(default_factory=dict)

    @property
    def arity(self):
        return len(self.domain)

    @property
    def id(self):
        kw = ",".join(f"{k}={v}" for k, v in self.kw.items()).replace(" ", "")
        return f"{self.name}({kw})" if kw else self.name


A, A2, POS, UNIT = ("any",), ("any", "any"), ("pos",), ("unit",)
X, XY = (0,), (0, 1)  # differentiable arguments
NC = ("complex",)  # rejects complex64
BITS = ("float", "complex")  # integer and bool only
recip_sqrt = lambda x: 1 / np.sqrt(x)  # noqa: E731
sigmoid = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731

TABLE = [
    # name, reference, domain per argument, dtypes, differentiable args, result (OUT), rejects
    Op("abs", np.abs, A, F + I + C, X, "real"),
    Op("negative", np.negative, A, F + I + C, X, "same", ("bool",)),
    Op("sign", np.sign, A, F + I + C, X),
    Op("square", np.square, A, F + I + C, X),
    Op("exp", np.exp, A, F + C, X, "float"),
    Op("expm1", np.expm1, A, F, X, "float", NC),
    Op("log", np.log, POS, F + C, X, "float"),
    Op("log1p", np.log1p, UNIT, F + C, X, "float"),
    Op("log2", np.log2, POS, F + C, X, "float"),
    Op("log10", np.log10, POS, F + C, X, "float"),
    Op("sin", np.sin, A, F + C, X, "float"),
    Op("cos", np.cos, A, F + C, X, "float"),
    Op("tan", np.tan, UNIT, F + C, X, "float"),
    Op("arcsin", np.arcsin, UNIT, F + C, X, "float"),
    Op("arccos", np.arccos, UNIT, F + C, X, "float"),
    Op("arctan", np.arctan, A, F + C, X, "float"),
    Op("sinh", np.sinh, A, F + C, X, "float"),
    Op("cosh", np.cosh, A, F + C, X, "float"),
    Op("tanh", np.tanh, A, F + C, X, "float"),
    Op("arcsinh", np.arcsinh, A, F + C, X, "float"),
    Op("arccosh", np.arccosh, ("ge1",), F + C, X, "float"),
    Op("arctanh", np.arctanh, UNIT, F + C, X, "float"),
    Op("sqrt", np.sqrt, POS, F + C + ("int32",), X, "float"),
    Op("rsqrt", recip_sqrt, POS, F + C, X, "float"),
    Op("sigmoid", sigmoid, A, F, X, "float", NC),
    Op("erf", _erf, A, F, X, "float", NC),
    Op("erfinv", _erfinv, UNIT, F, X, "float", NC),
    Op("floor", np.floor, A, F + I, X, "same", NC),  # zero gradient
    Op("ceil", np.ceil, A, F + I, X, "same", NC),
    Op("round", np.round, A, F + I + C, X),
    Op("logical_not", np.logical_not, A, ANY, (), "bool"),
    Op("bitwise_invert", np.invert, A, I + B, (), "same", BITS),
    Op("add", np.add, A2, F + I + C, XY),
    Op("subtract", np.subtract, A2, F + I + C, XY, "same", ("bool",)),
    Op("multiply", np.multiply, A2, F + I + C, XY),
    Op("divide", np.divide, ("any", "nonzero"), F + I + C, XY, "float"),
    Op("floor_divide", np.floor_divide, ("any", "divisor"), F + I, XY, "same", NC),
    Op("remainder", np.remainder, ("any", "divisor"), F + I, XY, "same", NC),
    Op("power", np.power, ("pos", "expo"), F + I + C, XY),
    Op("maximum", np.maximum, A2, ANY, XY),
    Op("minimum", np.minimum, A2, ANY, XY),
    Op("arctan2", np.arctan2, A2, F + ("int32",), XY, "float", NC),
    Op("logaddexp", np.logaddexp, A2, F, XY, "float"),
    Op("equal", np.equal, A2, ANY, (), "bool"),
    Op("not_equal", np.not_equal, A2, ANY, (), "bool"),
    Op("less", np.less, A2, ANY, (), "bool"),
    Op("less_equal", np.less_equal, A2, ANY, (), "bool"),
    Op("greater", np.greater, A2, ANY, (), "bool"),
    Op("greater_equal", np.greater_equal, A2, ANY, (), "bool"),
    Op("logical_and", np.logical_and, A2, ANY, (), "bool"),
    Op("logical_or", np.logical_or, A2, ANY, (), "bool"),
    Op("bitwise_and", np.bitwise_and, A2, I + B, (), "same", BITS),
    Op("bitwise_or", np.bitwise_or, A2, I + B, (), "same", BITS),
    Op("bitwise_xor", np.bitwise_xor, A2, I + B, (), "same", BITS),
    Op("left_shift", np.left_shift, ("any", "shift"), I, (), "same", BITS),
    Op("right_shift", np.right_shift, ("any", "shift"), I, (), "same", BITS),
    Op("where", np.where, ("cond", "any", "any"), ANY, (1, 2)),
    # reductions: the keyword arguments belong to the row (and to its reference)
    Op("sum", lambda x: np.sum(x, axis=1), A, F + ("int8", "int32", "uint8"), X, "acc", kw=dict(axis=1)),
    Op("prod", lambda x: np.prod(x, axis=0, keepdims=True), A, F + ("int32",), X, "acc",
       kw=dict(axis=0, keepdims=True)),
    Op("mean", np.mean, A, F + ("int32",), X, "float"),
    Op("max", lambda x: np.max(x, axis=1), A, F + I, X, kw=dict(axis=1)),
    Op("min", lambda x: np.min(x, axis=(0, 1)), A, F + I, X, kw=dict(axis=(0, 1))),
    Op("logsumexp", lambda x: np.log(np.sum(np.exp(x), axis=-1)), A, F, X, "float", kw=dict(axis=-1)),
    Op("var", lambda x: np.var(x, axis=0, ddof=1), A, F, X, "float", kw=dict(axis=0, ddof=1)),
    Op("all", lambda x: np.all(x, axis=1), A, F + I + B, (), "bool", kw=dict(axis=1)),
    Op("any", lambda x: np.any(x, axis=0), A, F + I + B, (), "bool", kw=dict(axis=0)),
    Op("argmax", lambda x: np.argmax(x, axis=1), A, F + I, (), "uint32", kw=dict(axis=1)),
]

# The result's dtype from the input's.
OUT = {
    "same": lambda d: d,
    "bool": lambda d: "bool",
    "float": lambda d: d if d in F + C else "float32",  # integers compute in float32
    "real": lambda d: "float32" if d in C else d,  # |complex| is real
    "acc": lambda d: {"int8": "int32", "bool": "int32", "uint8": "uint32"}.get(d, d),
    "uint32": lambda d: "uint32",
}
# (rtol, atol) by result dtype; integer and bool results must be exact.
TOL = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "complex64": (1e-5, 1e-5)}
GRAD_TOL = {"float64": (1e-6, 1e-7), "float32": (1e-4, 1e-5)}
REPRESENTATIVE = {"float": "float32", "int": "int32", "bool": "bool", "complex": "complex64"}
NP = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": np.float32,
      "complex64": np.complex64, "int8": np.int8, "int32": np.int32, "uint8": np.uint8,
      "int64": np.int64, "bool": np.bool_}

# ---- inputs -----------------------------------------------------------------
FLOAT_DOMAIN = {"any": (-2, 2), "pos": (0.1, 3), "unit": (-0.9, 0.9), "ge1": (1.1, 3),
                "nonzero": (0.5, 2), "divisor": (0.5, 2), "expo": (-2, 2), "shift": (0, 3)}
INT_DOMAIN = {"any": (-5, 5), "pos": (1, 5), "unit": (-1, 1), "ge1": (1, 4),
              "nonzero": (1, 4), "divisor": (1, 4), "expo": (0, 3), "shift": (0, 3)}


def sample(kind, rng, shape, dtype):
    """Random values of a domain: any, pos (> 0), unit ((-1, 1)), ge1 (> 1),
    nonzero and divisor (|x| >= 0.5, either sign), expo (an exponent:
    >= 0 for integers), shift (a shift count), cond (a bool condition)."""
    if kind == "cond" or dtype == "bool":
        return rng.random(shape) > 0.5
    signed = dtype != "uint8"
    if dtype in I:
        lo, hi = INT_DOMAIN[kind]
        x = rng.integers(lo if signed else max(lo, 0), hi + 1, size=shape)
    elif kind == "divisor" and dtype in ("float16", "bfloat16"):
        # Powers of two divide exactly, so floor(a / b) cannot round across an integer.
        x = rng.choice([0.5, 1.0, 2.0, 4.0], size=shape)
    else:
        x = rng.uniform(*FLOAT_DOMAIN[kind], size=shape)
    if kind in ("nonzero", "divisor") and signed:
        x = x * rng.choice([-1, 1], size=shape)
    if dtype in C:
        x = x + 1j * rng.uniform(-0.5, 0.5, size=shape)  # off every branch cut
    return x


def arg_dtype(kind, dtype):
    return "bool" if kind == "cond" else dtype


def kdt(name):
    return kc.bool_ if name == "bool" else getattr(kc, name)


def to_kiln(x, dtype):
    # The dtype is explicit: like MLX, kc.array makes float64 NumPy arrays float32.
    return kc.array(np.asarray(x).astype(NP[dtype]), kdt(dtype))


def to_numpy(a):
    return np.array(a.astype(kc.float32) if a.dtype == kc.bfloat16 else a)


def wide(x):
    """What the references compute in: float64, complex128, or the integer itself."""
    if np.issubdtype(x.dtype, np.complexfloating):
        return x.astype(np.complex128)
    return x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x


def call(op, args):
    return getattr(kc, op.name)(*args, **op.kw)


def tolerance(op, dtype, out_dtype):
    return op.tol.get(dtype, TOL.get(out_dtype, (0, 0)))


def cases(check_name):
    """(row, dtype) parameters of one check; a row's xfail marks its kiln bugs."""
    params = []
    for op in TABLE:
        if check_name == "forward":
            dtypes = op.dtypes
        elif check_name in ("vjp", "jvp"):
            dtypes = ("float64", "float32") if op.diff else ()
        elif check_name == "vmap":
            dtypes = op.dtypes[:1]
        else:
            dtypes = tuple(REPRESENTATIVE[f] for f in op.rejects)
        for dt in dtypes:
            reason = op.xfail.get((check_name, dt))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(pytest.param(op, dt, id=f"{op.id}-{dt}", marks=marks))
    return params


# ---- devices ----------------------------------------------------------------
@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.skipif(
    not kc.is_available(kc.gpu), reason="no GPU: kc.is_available(kc.gpu) is False here"))])
def device(request):
    """Runs the test with this device as the default, restoring the previous one."""
    before = kc.default_device()
    with kc.stream(getattr(kc, request.param)):
        assert kc.default_device() == getattr(kc, request.param)
        yield request.param
    assert kc.default_device() == before


@functools.cache
def has_float64(device):
    try:
        with kc.stream(getattr(kc, device)):
            kc.eval(kc.exp(kc.array([1.0], kc.float64)))
        return True
    except (ValueError, RuntimeError, TypeError):
        return False


# ---- 1. forward, contiguous and not -----------------------------------------
# Base shapes per argument, and the view each becomes: (3, 4), or what
# broadcasts to it (the later arguments of "broadcast" broadcast implicitly),
# but for "long".
LAYOUTS = {
    "contiguous": [(3, 4)] * 3,
    "transposed": [(4, 3)] * 3,
    "reversed": [(5, 8)] * 3,  # [::-2, ::-2]: negative strides, offset
    "broadcast": [(1, 4), (3, 1), (4,)],  # first: broadcast_to (stride 0)
    "long": [(2, 67)] * 3,  # rows longer than a SIMD vector, with a ragged tail
}


def view(layout, i, x):
    if layout == "transposed":
        return x.T
    if layout == "reversed":
        return x[::-2, ::-2]
    if layout == "broadcast" and i == 0:
        return np.broadcast_to(x, (3, 4)) if isinstance(x, np.ndarray) else kc.broadcast_to(x, (3, 4))
    return x


@pytest.mark.parametrize("op,dtype", cases("forward"))
def test_forward(op, dtype, device, rng):
    out_dtype = OUT[op.out](dtype)
    for layout, shapes in LAYOUTS.items():
        dts = [arg_dtype(k, dtype) for k in op.domain]
        base = [to_kiln(sample(k, rng, s, d), d) for k, s, d in zip(op.domain, shapes, dts)]
        want = op.ref(*[view(layout, i, wide(to_numpy(b))) for i, b in enumerate(base)])
        got = call(op, [view(layout, i, b) for i, b in enumerate(base)])
        where = f"{op.id} on {dtype}, {layout} inputs"
        assert got.dtype == kdt(out_dtype), f"{where}: dtype {got.dtype}, want {out_dtype}"
        try:
            check(to_numpy(got), want, *tolerance(op, dtype, out_dtype))
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from None


# ---- 2, 3. vjp and jvp against central differences of the reference -----------
GRAD_SHAPES = [(3, 4), (4,), (3, 1)]  # the later arguments broadcast


def grad_setup(op, dtype, device, rng):
    if dtype == "float64" and not has_float64(device):
        pytest.skip(f"kiln has no float64 on {device}: the float32 case checks its gradients")
    args, xs = [], []
    for k, s in zip(op.domain, GRAD_SHAPES):
        a = to_kiln(sample(k, rng, s, arg_dtype(k, dtype)), arg_dtype(k, dtype))
        args.append(a)
        xs.append(wide(to_numpy(a)))

    def f(*diffed):
        full = list(args)
        for i, a in zip(op.diff, diffed):
            full[i] = a
        return call(op, full)

    return f, [args[i] for i in op.diff], xs


def jacobian(op, xs, i, eps=1e-6):
    """d ref / d xs[i], (output size, xs[i].size), by central differences in float64."""
    cols = []
    for j in range(xs[i].size):
        hi, lo = list(xs), list(xs)
        hi[i], lo[i] = xs[i].copy(), xs[i].copy()
        hi[i].flat[j] += eps
        lo[i].flat[j] -= eps
        cols.append(np.ravel((op.ref(*hi) - op.ref(*lo)) / (2 * eps)))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("op,dtype", cases("vjp"))
def test_vjp(op, dtype, device, rng):
    f, primals, xs = grad_setup(op, dtype, device, rng)
    y = op.ref(*xs)
    ct = rng.uniform(-1, 1, size=np.shape(y))
    outs, vjps = kc.vjp(f, primals, [to_kiln(ct, dtype)])
    check(to_numpy(outs[0]), y, *GRAD_TOL[dtype])
    assert len(vjps) == len(op.diff)
    for g, i in zip(vjps, op.diff):
        want = (np.ravel(ct) @ jacobian(op, xs, i)).reshape(xs[i].shape)
        try:
            check(to_numpy(g), want, *GRAD_TOL[dtype])
        except AssertionError as e:
            raise AssertionError(f"vjp of {op.id} wrt argument {i} ({dtype}): {e}") from None


@pytest.mark.parametrize("op,dtype", cases("jvp"))
def test_jvp(op, dtype, device, rng):
    f, primals, xs = grad_setup(op, dtype, device, rng)
    y = op.ref(*xs)
    ts = [rng.uniform(-1, 1, size=xs[i].shape) for i in op.diff]
    outs, jvps = kc.jvp(f, primals, [to_kiln(t, dtype) for t in ts])
    check(to_numpy(outs[0]), y, *GRAD_TOL[dtype])
    want = sum(jacobian(op, xs, i) @ t.ravel() for i, t in zip(op.diff, ts))
    check(to_numpy(jvps[0]), want.reshape(np.shape(y)), *GRAD_TOL[dtype])


# ---- 4. vmap against a Python loop --------------------------------------------
VMAP_AXES = {"leading": (0, 0, 0), "inner": (1, 2, 1), "unmapped": (2, None, 0)}


@pytest.mark.parametrize("op,dtype", cases("vmap"))
def test_vmap(op, dtype, device, rng):
    for mode, axes in VMAP_AXES.items():
        axes = axes[: op.arity]
        if all(ax is None for ax in axes) or (mode == "unmapped" and op.arity == 1):
            continue
        xs = []
        for k, ax in zip(op.domain, axes):
            shape = [3, 4] if ax is None else [3, 4][:ax] + [2] + [3, 4][ax:]
            xs.append(to_kiln(sample(k, rng, tuple(shape), arg_dtype(k, dtype)), arg_dtype(k, dtype)))
        got = kc.vmap(lambda *a: call(op, a), in_axes=axes)(*xs)
        want = kc.stack([call(op, [x if ax is None else kc.take(x, b, axis=ax) for x, ax in zip(xs, axes)])
                         for b in range(2)])
        rtol, atol = (1e-6, 1e-7) if got.dtype in (kc.float32, kc.complex64) else (0, 0)
        try:
            check(to_numpy(got), to_numpy(want), rtol, atol)
        except AssertionError as e:
            raise AssertionError(f"vmap of {op.id}, in_axes={axes}: {e}") from None


# ---- bad input: the families a row rejects ------------------------------------
@pytest.mark.parametrize("op,dtype", cases("rejects"))
def test_rejects(op, dtype, device, rng):
    args = [to_kiln(sample(k, rng, (3, 4), arg_dtype(k, dtype)), arg_dtype(k, dtype)) for k in op.domain]
    with pytest.raises((ValueError, TypeError), match=op.name):
        kc.eval(call(op, args))
