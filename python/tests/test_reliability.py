"""What once crashed or gave wrong answers: deep graphs and deeply nested
trees, shapes past the integer range, reductions past 2^31 elements, and
loaders fed streams that claim more data than they hold. Cases that could
crash run in a child process, so a regression fails one test instead of
killing the suite."""

import io
import os
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import kiln.core as mx


def run_child(code, timeout=300):
    """Runs code in a fresh interpreter with kiln importable; returns the
    completed process (a segfault shows as a negative return code)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def expect_clean_exit(code):
    r = run_child(code)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


DEEP = 100_000


@pytest.mark.parametrize(
    "build",
    [
        "x = x + x",
        "x = mx.maximum(x, x)",
        "x = mx.concatenate(mx.split(x, 2))",
        "a, b = mx.split(x, 2); x = mx.concatenate([a * b, b])",
    ],
)
@pytest.mark.parametrize("evaluate", [False, True])
def test_deep_graphs_build_evaluate_and_die(build, evaluate):
    out = expect_clean_exit(
        f"""
        import kiln.core as mx
        x = mx.array([1.0, 0.5, 2.0, 1.0])
        for _ in range({DEEP}):
            {build}
        if {evaluate}:
            mx.eval(x)
            print(x.shape)
        del x
        print("done")
        """
    )
    assert out.strip().endswith("done")


@pytest.mark.parametrize("evaluate", [False, True])
def test_gradient_of_a_deep_graph(evaluate):
    # d/dx of ((x + x) * 0.5) repeated is 1 at any depth.
    out = expect_clean_exit(
        f"""
        import kiln.core as mx
        def f(x):
            for _ in range({DEEP}):
                x = (x + x) * 0.5
            return x.sum()
        g = mx.grad(f)(mx.array([2.0, 3.0]))
        if {evaluate}:
            print(g.tolist())
        del g
        print("done")
        """
    )
    if evaluate:
        assert out.splitlines()[0] == "[1.0, 1.0]"
    assert out.strip().endswith("done")


def test_other_transforms_of_a_deep_graph():
    out = expect_clean_exit(
        f"""
        import kiln.core as mx
        def f(x):
            for _ in range({DEEP}):
                x = (x + x) * 0.5
            return x
        x = mx.array([1.0, 2.0])
        print(mx.jvp(f, [x], [mx.ones(2)])[1][0].tolist())
        print(mx.vmap(f)(mx.ones((3, 2))).shape)
        print(mx.grad(lambda x: mx.vmap(f)(x).sum())(mx.ones((3, 2))).tolist())
        print(mx.compile(mx.grad(lambda x: f(x).sum()))(x).tolist())
        print(mx.checkpoint(f)(x).tolist())
        """
    )
    assert out.splitlines() == [
        "[1.0, 1.0]",
        "(3, 2)",
        "[[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]",
        "[1.0, 1.0]",
        "[1.0, 2.0]",
    ]


def test_compiled_deep_trace():
    out = expect_clean_exit(
        f"""
        import kiln.core as mx
        def f(x):
            for _ in range({DEEP}):
                x = mx.maximum(x, x)
            return x
        g = mx.compile(f)
        print(g(mx.array([4.0])).item())
        del g
        print("done")
        """
    )
    assert out.split() == ["4.0", "done"]


@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_deeply_nested_trees_raise_recursion_error(kind):
    wrap = {
        "list": lambda t: [t],
        "dict": lambda t: {"a": t},
        "tuple": lambda t: (t,),
    }[kind]
    tree = mx.array(1.0)
    for _ in range(DEEP):
        tree = wrap(tree)
    with pytest.raises(RecursionError):
        mx.eval(tree)
    # A nested list turned into an array: the same.
    nested = 1.0
    for _ in range(DEEP):
        nested = [nested]
    with pytest.raises(RecursionError):
        mx.array(nested)
    # Trees of moderate depth still work.
    shallow = mx.array(2.0)
    for _ in range(200):
        shallow = wrap(shallow)
    mx.eval(shallow)


# --- shapes past the integer range ----------------------------------------


HUGE = (2**30, 2**30, 4)  # 2^62 elements: their bytes overflow int64


@pytest.mark.parametrize(
    "make",
    [
        lambda: mx.random.normal(HUGE),
        lambda: mx.random.uniform(shape=HUGE),
        lambda: mx.random.bits(HUGE),
        lambda: mx.contiguous(mx.ones(HUGE)),
        lambda: mx.zeros(HUGE, dtype=mx.float64),
        lambda: mx.sort(mx.ones(HUGE)),
        lambda: mx.cumsum(mx.ones(HUGE)),
        lambda: mx.ones(HUGE) + mx.ones(HUGE[-1:]),
    ],
)
def test_shapes_whose_bytes_overflow_raise_when_built(make):
    with pytest.raises(ValueError, match=r"2\^63 bytes|overflow"):
        make()


def test_reshape_past_a_dimension_raises():
    x = mx.broadcast_to(mx.array(1, mx.uint8), (65536, 65537))
    with pytest.raises(ValueError, match="reshape"):
        x.reshape(-1)
    with pytest.raises(ValueError, match="flatten"):
        mx.flatten(x)
    assert x.reshape(65536, -1, 1).shape == (65536, 65537, 1)


# --- answers past 2^31 elements ---------------------------------------------


def test_reductions_of_a_broadcast_past_2_31_elements():
    # Broadcasts of one element (ones and zeros are dense, as in MLX).
    def filled(v, dtype=mx.float32):
        return mx.broadcast_to(mx.array(v, dtype), (2**16, 2**16))

    n = 2**32
    x = filled(1.0)
    assert x.sum().item() == float(n)
    assert x.mean().item() == 1.0
    assert x.max().item() == 1.0
    assert x.min().item() == 1.0
    assert x.any().item() is True
    assert x.all().item() is True
    assert filled(1, mx.int64).sum().item() == n
    assert mx.logsumexp(filled(0.0)).item() == pytest.approx(
        np.log(float(n)), rel=1e-6
    )
    big = filled(0, mx.uint8)
    assert big.argmax().item() == 0
    assert big.argmin().item() == 0


def test_materialized_uint8_past_2_31_elements():
    rows, cols = 2**15 + 1, 2**16  # 2^31 + 2^16 elements
    n = rows * cols
    x = mx.ones((rows, cols), dtype=mx.uint8)
    mx.eval(x)
    assert x.nbytes == n
    assert x.sum().item() == n
    assert x.astype(mx.uint32).sum(axis=0)[-1].item() == rows
    # The last element, past 2^31, is read and written where it should be.
    y = x.at[rows - 1, cols - 1].add(mx.array(4, mx.uint8))
    assert y[rows - 1, cols - 1].item() == 5
    assert y.max().item() == 5
    assert y.argmax().item() == n - 1
    assert y.argmin().item() == 0
    assert mx.cumsum(y[-1, -4:]).tolist() == [1, 2, 3, 8]
    del x, y


# --- loaders -----------------------------------------------------------------


class Stream(io.RawIOBase):
    """A readable stream that cannot tell its size (as a socket or pipe)."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, b):
        return self._data.readinto(b)


def npy_claiming(shape, dtype="<f4", extra=b""):
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header = header.encode() + b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + extra


def peak_allocation_during(fn):
    """Peak bytes kiln allocated while fn ran, and what fn raised."""
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    try:
        fn()
        err = None
    except Exception as e:  # noqa: BLE001 - the caller checks the type
        err = e
    return mx.get_peak_memory() - base, err


def test_streams_claiming_huge_arrays_fail_before_allocating():
    # A 144-byte .npy stream claiming 2^30 float32 elements (4 GiB).
    data = npy_claiming((2**30,), extra=b"\0" * 16)
    peak, err = peak_allocation_during(lambda: mx.load(Stream(data), format="npy"))
    assert isinstance(err, (RuntimeError, ValueError)), err
    assert "ends early" in str(err)
    assert peak < 64 << 20
    # The same as an npz member.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.npy", data)
    peak, err = peak_allocation_during(lambda: mx.load(io.BytesIO(buf.getvalue()), format="npz"))
    assert isinstance(err, (RuntimeError, ValueError)), err
    assert peak < 64 << 20
    # A safetensors stream whose one tensor claims 8 GiB.
    header = b'{"t":{"dtype":"F32","shape":[2147483648],"data_offsets":[0,8589934592]}}'
    st = len(header).to_bytes(8, "little") + header + b"\0" * 8
    peak, err = peak_allocation_during(
        lambda: mx.load(Stream(st), format="safetensors")
    )
    assert isinstance(err, (RuntimeError, ValueError)), err
    assert peak < 64 << 20


def test_streamed_arrays_past_one_chunk_load_intact():
    # Streams of unknown size are read in chunks before the array is made.
    a = np.arange(5_000_000, dtype=np.float32).reshape(1000, 5000)
    buf = io.BytesIO()
    np.save(buf, a)
    got = mx.load(Stream(buf.getvalue()), format="npy")
    np.testing.assert_array_equal(np.array(got), a)


def test_safetensors_header_with_many_tensors_parses_in_linear_time():
    import time

    n = 150_000
    entries = ",".join(
        f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(n)
    )
    header = ("{" + entries + "}").encode()
    data = len(header).to_bytes(8, "little") + header
    start = time.perf_counter()
    got = mx.load(io.BytesIO(data), format="safetensors")
    elapsed = time.perf_counter() - start
    assert len(got) == n
    assert got["t7"].shape == (0,)
    # Quadratic parsing took over 10 s here; linear takes well under one.
    assert elapsed < 5, elapsed
