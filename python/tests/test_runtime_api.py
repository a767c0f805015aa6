"""The rest of mlx.core's surface: signatures of the array functions
against mlx, DLPack, pickling, print options, streams, device information,
depends, export_to_dot, get_array_buffer_size and the exposed type names."""

import pickle
import re
import threading
import types

import numpy as np
import pytest

import kiln.core as kc
from conftest import check, mx, rand

NAMES = (
    "flip roll diagonal diag trace kron meshgrid unstack diff median minmax "
    "searchsorted unique degrees radians trunc nan_to_num count_nonzero "
    "cumulative_sum cumulative_prod logcumsumexp vecdot conj conjugate real "
    "imag can_cast isdtype einsum_path get_array_buffer_size device_info "
    "set_wired_limit clear_streams new_thread_local_stream "
    "new_thread_unsafe_stream set_printoptions get_printoptions printoptions "
    "from_dlpack export_to_dot depends"
).split()


def params(doc):
    """(name, default, keyword-only) of each parameter on a docstring's
    signature line; '/' markers are dropped."""
    line = doc.strip().split("\n")[0]
    inner = line[line.index("(") + 1 : line.rindex(")")]
    if ") ->" in line:
        inner = line[line.index("(") + 1 : line.index(") ->")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    out, kw = [], False
    for p in parts:
        if p == "/":
            continue
        if p == "*":
            kw = True
            continue
        name = re.split(r"[:=]", p)[0].strip()
        default = p.split("=")[-1].strip() if "=" in p else None
        out.append((name, default, kw or name.startswith("*")))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_signature_matches_mlx(name):
    pytest.importorskip("mlx.core")
    fn = getattr(kc, name)
    mfn = getattr(mx, name)
    if not getattr(mfn, "__doc__", None) or "(" not in mfn.__doc__.split("\n")[0]:
        return
    if isinstance(fn, types.FunctionType):
        # Python-level functions: inspect them.
        import inspect

        sig = inspect.signature(fn)
        got = [p.name for p in sig.parameters.values()]
        want = [n.lstrip("*") for n, _, _ in params(mfn.__doc__)]
        assert got == want, (got, want)
        return
    got = params(fn.__doc__)
    want = params(mfn.__doc__)
    # Names, order and defaults agree (kiln prints 0.0 where mlx prints 0).
    assert [g[0] for g in got] == [w[0] for w in want], (got, want)
    for g, w in zip(got, want):
        if w[1] is not None:
            assert g[1] is not None and (
                g[1] == w[1] or float(g[1]) == float(w[1])
                if re.fullmatch(r"-?[\d.]+", w[1])
                else g[1] == w[1]
            ), (name, g, w)
        # kiln may accept positionally what MLX takes by keyword only
        # (stream=), never the reverse.
        assert w[2] or not g[2], (name, g, w)


def test_dlpack_both_ways(rng):
    a = rand(rng, (3, 4))
    k = kc.array(a)
    assert k.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(k), a)
    np.testing.assert_array_equal(np.from_dlpack(k.T), a.T)  # strided view
    np.testing.assert_array_equal(np.from_dlpack(k[:, 1::2]), a[:, 1::2])
    for src in (
        a,
        a.T,
        a[::2, ::-1],
        rand(rng, (5,), np.int16),
        np.array([True, False]),
    ):
        got = kc.from_dlpack(src)
        np.testing.assert_array_equal(np.array(got), src)
    # Round trip through kiln's own capsules.
    check(kc.from_dlpack(k.T), a.T)
    with pytest.raises(ValueError, match="copy=False"):
        kc.from_dlpack(a, copy=False)
    if mx is not None:
        np.testing.assert_array_equal(np.array(mx.array(k)), a)


def test_pickle_bytes_index_complex(rng):
    for dtype in (kc.bfloat16, kc.int8, kc.complex64, kc.bool_):
        x = kc.array(rand(rng, (2, 3))).astype(dtype).T
        y = pickle.loads(pickle.dumps(x))
        assert y.dtype == x.dtype and y.shape == x.shape
        assert kc.array_equal(x, y).item()
    u = kc.array([1, 2, 258], kc.uint16)
    assert bytes(u) == np.array([1, 2, 258], np.uint16).tobytes()
    assert bytes(u[::-1]) == np.array([258, 2, 1], np.uint16).tobytes()
    assert [10, 20, 30][kc.array(1)] == 20
    with pytest.raises(TypeError):
        [1, 2][kc.array(1.5)]
    assert complex(kc.array(2.5)) == 2.5 + 0j
    assert kc.array([4.0]).__div__(2).item() == 2.0
    assert kc.array([4.0]).__rdiv__(2).item() == 0.5
    assert kc.array([1]).__array_namespace__() is kc


def test_print_options():
    x = kc.array([1.23456789, 2.0])
    default = repr(x)
    assert kc.get_printoptions().precision == -1
    with kc.printoptions(precision=2) as opts:
        assert opts.precision == 2
        assert repr(x) == "array([1.23, 2.00], dtype=float32)"
    assert repr(x) == default
    kc.set_printoptions(precision=4)
    try:
        assert repr(x) == "array([1.2346, 2.0000], dtype=float32)"
        assert kc.get_printoptions().precision == 4
        assert repr(kc.array([3], kc.int32)) == "array([3], dtype=int32)"
    finally:
        kc.set_printoptions()
    assert repr(x) == default
    if mx is not None:
        with mx.printoptions(precision=3), kc.printoptions(precision=3):
            assert repr(kc.array([1.5, 2.25])) == repr(mx.array([1.5, 2.25]))


def test_streams_and_device():
    t = kc.new_thread_local_stream(kc.cpu)
    assert isinstance(t, kc.ThreadLocalStream) and t.device == kc.cpu
    x = kc.array([1.0, 2.0])
    check(kc.add(x, x, stream=t), [2.0, 4.0])
    results = []

    def work():
        results.append(np.array(kc.multiply(x, 3, stream=t)))

    th = threading.Thread(target=work)
    th.start()
    th.join()
    check(results[0], [3.0, 6.0])
    with kc.stream(t):
        check(kc.add(x, x), [2.0, 4.0])
    kc.clear_streams()
    check(kc.add(x, 1, stream=t), [2.0, 3.0])  # made again on first use
    s = kc.new_thread_unsafe_stream(kc.cpu)
    assert isinstance(s, kc.Stream)
    check(kc.add(x, x, stream=s), [2.0, 4.0])
    info = kc.device_info()
    assert info["architecture"] and info["device_name"]
    assert info["total_memory"] > 0
    assert kc.device_info(kc.default_device()) == info
    cpu = kc.device_info(kc.cpu)
    assert cpu["total_memory"] > 0 and cpu["device_name"]
    if kc.is_available(kc.gpu):
        gpu = kc.device_info(kc.gpu)
        assert gpu["architecture"].startswith("sm_")
        assert gpu["total_memory"] > 0 and gpu["multiprocessor_count"] > 0
    else:
        with pytest.raises(ValueError, match="device_info"):
            kc.device_info(kc.gpu)
    prev = kc.set_wired_limit(1 << 20)
    assert kc.set_wired_limit(prev) == 1 << 20
    with pytest.raises(ValueError, match="set_wired_limit"):
        kc.set_wired_limit(-1)


def test_depends_dot_buffer_size(tmp_path, rng):
    a = kc.array(rand(rng, (4,)))
    b = kc.array(rand(rng, (4,)))
    y = kc.depends(a * 2, b + 1)
    check(y, np.array(a) * 2)
    ys = kc.depends([a, b], [a + b])
    assert isinstance(ys, list) and len(ys) == 2
    check(ys[1], np.array(b))
    # No gradient reaches the dependency.
    ga, gb = kc.grad(lambda p, q: kc.sum(kc.depends(p * q, q) ** 2), argnums=(0, 1))(
        a, b
    )
    na, nb = np.array(a), np.array(b)
    check(ga, 2 * na * nb * nb, 1e-5)
    check(gb, 2 * na * na * nb, 1e-5)
    with pytest.raises(TypeError, match="depends"):
        kc.depends(a, [1])

    x = kc.array([1.0, 2.0])
    z = kc.exp(x) + x
    path = tmp_path / "g.dot"
    kc.export_to_dot(str(path), z, x=x)
    text = path.read_text()
    assert text.startswith("digraph")
    assert "Exp" in text and "Add" in text and '"x\\n' in text
    assert text.count("->") == 3

    c = a[1:]  # a view: same buffer
    kc.eval(a, b, c)
    n = kc.get_array_buffer_size(a, [b, {"c": c}], 3)
    assert n >= 2 * 4 * 4
    assert n == kc.get_array_buffer_size(a, b)
    with pytest.raises(ValueError, match="evaluated"):
        kc.get_array_buffer_size(a + 1)


def test_type_names_and_methods():
    x = kc.array([[1, 2], [3, 4]])
    assert isinstance(x.at, kc.ArrayAt)
    it = iter(x)
    assert isinstance(it, kc.ArrayIterator)
    check(next(it), [1, 2])
    check(next(it), [3, 4])
    with pytest.raises(StopIteration):
        next(it)
    for ok in (x, 1, 2.5, [1, 2], (3,), np.zeros(2), np.float32(1), b"ab"):
        assert isinstance(ok, kc.ArrayLike)
    for bad in ("text", None, object()):
        assert not isinstance(bad, kc.ArrayLike)
    assert kc.matrix_norm is kc.linalg.norm
    if mx is not None:
        missing = [n for n in dir(mx.array) if not hasattr(kc.array, n)]
        assert missing == []


_PROFILED = """
import kiln.core as mx
mx.set_default_device(mx.{device})
x = mx.random.normal((64, 48)).T
mx.eval(mx.exp(x, stream=mx.{device}))
"""


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_profile_tables(device):
    """KILN_HOST_PROFILE times each primitive on the host; KILN_GPU_PROFILE
    times GPU work by primitive and operand layout (f: column-major)."""
    import os
    import subprocess
    import sys

    if device == "gpu" and not kc.is_available(kc.gpu):
        pytest.skip("no GPU")
    env = dict(os.environ, KILN_HOST_PROFILE="1", KILN_GPU_PROFILE="1")
    run = subprocess.run([sys.executable, "-c", _PROFILED.format(device=device)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert re.search(r"^\| Exp \| 1 \|", run.stderr, re.M), run.stderr
    gpu_row = re.search(r"^\| Exp float32\[48,64\]f -> float32\[48,64\]f \| 1 \| ([0-9.]+) \|",
                        run.stderr, re.M)
    if device == "gpu":
        assert gpu_row and float(gpu_row.group(1)) > 0, run.stderr
    else:
        assert "KILN_GPU_PROFILE" not in run.stderr


def test_synchronize_raises_an_async_evals_error_once():
    # As MLX: the error of work started by async_eval surfaces at
    # synchronize (which takes a stream or a device), then at the array.
    bad = kc.linalg.inv(kc.array([[1.0, 2.0], [2.0, 4.0]]), stream=kc.cpu)
    kc.async_eval(bad)
    with pytest.raises(RuntimeError):
        kc.synchronize(kc.cpu)
    kc.synchronize(kc.cpu)  # reported once
    with pytest.raises(RuntimeError):
        kc.eval(bad)


def test_async_eval_is_refused_inside_a_transformation():
    def fun(x):
        y = x + 1.0
        kc.async_eval(y)
        return kc.exp(y)

    with pytest.raises(ValueError, match="async_eval"):
        kc.grad(fun)(kc.array(1.0))
    with pytest.raises(ValueError, match="async_eval"):
        kc.vmap(fun)(kc.ones((2, 2)))
    assert fun(kc.array(1.0)).item() == pytest.approx(np.exp(2.0))


def test_reset_peak_memory_sets_the_peak_to_zero():
    keep = kc.ones((1024,))
    kc.eval(keep)
    kc.reset_peak_memory()
    assert kc.get_peak_memory() == 0
    more = kc.ones((4096,))
    kc.eval(more)
    assert kc.get_peak_memory() >= 4096 * 4


def test_full_reads_a_python_float_in_the_requested_dtype():
    for v in (0.37, 0.1, np.pi):
        assert kc.full((3,), v, dtype=kc.float64).tolist() == [v] * 3
    assert kc.full((2,), 0.1).dtype == kc.float32


def test_eval_runs_whatever_is_not_computed_yet():
    # eval(x) of a lone array skips the tree walk, and eval of arrays all
    # computed returns at once; neither may skip work. A singular inverse
    # raises only when it is evaluated, so each raise shows the eval ran.
    def singular():
        return kc.linalg.inv(kc.array([[1.0, 2.0], [2.0, 4.0]]), stream=kc.cpu)

    done = kc.exp(kc.arange(4.0))
    kc.eval(done)
    kc.eval(done)  # computed: nothing to do
    np.testing.assert_allclose(np.array(done), np.exp(np.arange(4.0)), rtol=1e-6)
    with pytest.raises(RuntimeError):
        kc.eval(singular())  # a lone array
    with pytest.raises(RuntimeError):
        kc.eval(done, singular())  # several, one computed
    with pytest.raises(RuntimeError):
        kc.eval({"done": [done], "todo": (singular(),)}, None, 3)
    # In flight in the background: eval waits for it and raises its error.
    pending = singular()
    kc.async_eval(pending)
    with pytest.raises(RuntimeError):
        kc.eval(pending)
    with pytest.raises(RuntimeError):
        kc.synchronize(kc.cpu)  # the background error, reported once
    kc.synchronize(kc.cpu)
