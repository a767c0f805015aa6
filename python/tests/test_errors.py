"""Bad input from Python raises ValueError, TypeError or IndexError with a
message naming the op; never a crash."""

import numpy as np
import pytest

import kiln.core as kc

ALLOWED = (ValueError, TypeError, IndexError)


def test_constructor_junk():
    for junk in [
        object(),
        "abc",
        {"a": 1},
        None,
        [1, "a"],
        [[1, 2], [3]],
        [[1], 2],
        np.array(["a", "b"]),
        np.array([object()]),
        2**70,
        [2**70],
        lambda: 0,
    ]:
        with pytest.raises(ALLOWED):
            kc.array(junk)
    with pytest.raises(TypeError):
        kc.array([1, 2], dtype="float32")


def test_messages_name_the_op():
    with pytest.raises(ValueError, match="add"):
        kc.add(kc.ones((2, 3)), kc.ones((4,)))
    with pytest.raises(ValueError, match="reshape"):
        kc.reshape(kc.ones((2, 3)), (4, 2))
    with pytest.raises(ValueError, match="sum"):
        kc.sum(kc.ones((2, 3)), axis=5)
    with pytest.raises(ValueError, match="transpose"):
        kc.transpose(kc.ones((2, 3)), (0, 0))
    with pytest.raises(ValueError, match="matmul"):
        kc.matmul(kc.ones((2, 3)), kc.ones((2, 3)))
    with pytest.raises(ValueError, match="bitwise"):
        kc.ones((2,)) & kc.ones((2,))
    with pytest.raises(ValueError, match="concatenate"):
        kc.concatenate([kc.ones((2, 3)), kc.ones((2, 4))], axis=0)
    with pytest.raises(ValueError, match="broadcast"):
        kc.broadcast_to(kc.ones((3,)), (2, 2))


def test_wrong_types():
    with pytest.raises(TypeError):
        kc.sum(kc.ones((2,)), axis="x")
    with pytest.raises(TypeError):
        kc.reshape(kc.ones((2,)), "ab")
    with pytest.raises(ValueError, match="addition"):  # as MLX
        kc.ones((2,)) + object()
    with pytest.raises(TypeError):
        kc.zeros((2,), dtype=3)
    with pytest.raises(TypeError):
        kc.grad(lambda x: kc.sum(x))(kc.ones((2,)), 1, 2, 3)


def test_out_of_range_axes_and_bad_shapes():
    a = kc.ones((2, 3))
    for f in [
        lambda: kc.squeeze(a, 0),
        lambda: kc.expand_dims(a, 5),
        lambda: kc.swapaxes(a, 0, 3),
        lambda: kc.argmax(a, axis=2),
        lambda: kc.cumsum(a, axis=-3),
        lambda: kc.sort(a, axis=2),
        lambda: kc.split(a, 4, axis=1),
        lambda: kc.zeros((-1, 2)),
        lambda: kc.take(a, 7, axis=0),
        lambda: kc.stack([a, kc.ones((3,))]),
        lambda: kc.tile(a, (-1,)),
        lambda: kc.pad(a, -1),
        lambda: kc.linalg.inv(kc.ones((2, 3))),
    ]:
        with pytest.raises(ALLOWED):
            f()


def test_fuzz_never_crashes():
    rng = np.random.default_rng(1)
    values = [
        0,
        1,
        -1,
        2.5,
        None,
        "s",
        (),
        [],
        [1, 2],
        (0, 5),
        slice(None, None, 0),
        kc.ones((2,)),
        kc.zeros((0,)),
        kc.array(1),
        np.ones(2),
        Ellipsis,
        kc.array([1.5]),
        [[0]],
        -100,
        10**12,
        kc.ones((2, 3), kc.bfloat16),
        kc.array([True]),
    ]
    funcs = [
        kc.add,
        kc.matmul,
        kc.reshape,
        kc.sum,
        kc.take,
        kc.transpose,
        kc.concatenate,
        kc.broadcast_to,
        kc.expand_dims,
        kc.split,
        kc.where,
        kc.clip,
        kc.softmax,
        kc.arange,
        kc.full,
        kc.pad,
        kc.repeat,
        kc.argsort,
        kc.cumsum,
        kc.linalg.norm,
    ]
    arrays = [kc.ones((2, 3)), kc.arange(6), kc.array(3.0), kc.zeros((0, 2))]
    for _ in range(600):
        f = funcs[rng.integers(len(funcs))]
        nargs = int(rng.integers(0, 4))
        args = [values[rng.integers(len(values))] for _ in range(nargs)]
        try:
            r = f(*args)
            kc.eval(r)
        except (ValueError, TypeError, IndexError, RuntimeError, OverflowError):
            pass
        a = arrays[rng.integers(len(arrays))]
        idx = values[rng.integers(len(values))]
        try:
            kc.eval(a[idx])
        except (ValueError, TypeError, IndexError):
            pass
        try:
            b = kc.array(a)
            b[idx] = values[rng.integers(len(values))]
            kc.eval(b)
        except (ValueError, TypeError, IndexError):
            pass


def test_wrong_argument_types_name_the_op():
    with pytest.raises(TypeError, match="arange"):
        kc.arange("a")
    with pytest.raises(TypeError, match="broadcast_shapes"):
        kc.broadcast_shapes("x")
    with pytest.raises(TypeError, match="tensordot"):
        kc.tensordot(kc.ones((2, 2)), kc.ones((2, 2)), axes="x")
    with pytest.raises(TypeError, match="pad"):
        kc.pad(kc.ones((2,)), 1.5)
    with pytest.raises(TypeError, match="norm"):
        kc.linalg.norm(kc.ones((2,)), ord=[1])


FUZZ_VALUES = [
    0,
    1,
    -1,
    3,
    2.5,
    None,
    "s",
    "causal",
    (),
    [],
    [1, 2],
    (0, 5),
    (2, 3),
    [-1],
    slice(1, None, -1),
    kc.ones((2,)),
    kc.zeros((0,)),
    kc.array(1),
    np.ones(2),
    Ellipsis,
    kc.array([1.5]),
    [[0]],
    10**12,
    kc.ones((2, 3), kc.bfloat16),
    kc.array([True]),
    kc.arange(6).reshape(2, 3),
    kc.ones((2, 2, 2, 2)),
    kc.float16,
    kc.random.key(0),
    kc.ones((3, 3)),
    {"a": 1},
    object(),
    float("nan"),
    kc.cpu,
    1j,
]


def test_fuzz_every_function():
    """Random arguments to every public function: only ValueError,
    TypeError or IndexError, OverflowError for a dimension past int32 (as
    MLX), and the documented RuntimeError of a singular matrix at
    evaluation."""
    rng = np.random.default_rng(2)
    skip = {
        "set_memory_limit",
        "set_cache_limit",
        "set_default_device",
        "set_default_stream",
        "disable_compile",
        "synchronize",
        "clear_cache",
        "set_printoptions",
    }
    funcs = [
        getattr(kc, n)
        for n in dir(kc)
        if not n.startswith("_") and n not in skip and callable(getattr(kc, n))
    ]
    funcs += [
        getattr(m, n)
        for m in (kc.random, kc.linalg, kc.fast)
        for n in dir(m)
        if not n.startswith("_") and n not in ("seed", "state")
    ]
    keys = ["axis", "keepdims", "dtype", "shape", "k", "stream", "key"]
    for _ in range(3000):
        f = funcs[rng.integers(len(funcs))]
        args = [
            FUZZ_VALUES[rng.integers(len(FUZZ_VALUES))]
            for _ in range(rng.integers(0, 5))
        ]
        kw = {}
        if rng.random() < 0.3:
            kw[keys[rng.integers(len(keys))]] = FUZZ_VALUES[
                rng.integers(len(FUZZ_VALUES))
            ]
        try:
            r = f(*args, **kw)
            kc.eval(r)
        except ALLOWED:
            pass
        except OverflowError as e:
            assert "does not fit in int32" in str(e), (f, e)
        except RuntimeError as e:
            assert "singular" in str(e) or "positive definite" in str(e), (f, e)


def test_operators_take_what_mlx_takes():
    a = kc.array([1, 2, 3])
    # Equality with a list, tuple or string is a Python bool, as in MLX.
    assert (a == [1, 2, 3]) is False and (a != [1, 2, 3]) is True
    assert (a == (1, 2, 3)) is False and (a == "x") is False
    # Arithmetic and ordering with them raise ValueError naming the op.
    for op, name in [
        (lambda: a + [1, 2, 3], "addition"),
        (lambda: [1, 2, 3] * a, "multiplication"),
        (lambda: a < (1, 2, 3), "less than"),
        (lambda: a >= "x", "greater than or equal"),
        (lambda: a // [1, 1, 1], "floor division"),
        (lambda: a | "x", "bitwise or"),
    ]:
        with pytest.raises(ValueError, match=name):
            op()
    b = a
    with pytest.raises(ValueError):
        b *= "x"
    assert b.tolist() == [1, 2, 3]
    # Scalars, NumPy scalars and arrays and kiln arrays still work.
    assert (a + np.array([1, 1, 1])).tolist() == [2, 3, 4]
    assert (np.int32(2) * a).tolist() == [2, 4, 6]
    assert (a == kc.array([1, 0, 3])).tolist() == [True, False, True]
