"""kiln.core.distributed in one process (test_distributed_mpi.py runs
groups of several): the singleton group, collectives
that return their input, point-to-point calls and strict init that raise,
and average_gradients over it; the same answers as MLX's without a
launcher where it is installed."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from conftest import mx, needs_mlx


def test_singleton_group_and_collectives():
    d = kc.distributed
    # True where OpenMPI loads; a process not started by a launcher still
    # forms the singleton group.
    assert isinstance(d.is_available(), bool)
    g = d.init()
    assert (g.rank(), g.size()) == (0, 1)
    x = kc.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    for f in (d.all_sum, d.all_max, d.all_min, d.all_gather, d.sum_scatter):
        y = f(x, group=g)
        assert y.shape == x.shape and y.dtype == x.dtype
        assert np.array_equal(np.asarray(y), np.asarray(x))
    # Inside transformations too.
    grad = kc.grad(lambda a: d.all_sum(a * a).sum())(x)
    assert np.array_equal(np.asarray(grad), 2 * np.asarray(x))
    import kiln.core.distributed as module  # importable as a module

    assert module is d


def test_what_one_process_cannot_do_raises():
    d = kc.distributed
    x = kc.ones((2,))
    with pytest.raises(ValueError, match=r"\[send\].*singleton"):
        d.send(x, 0)
    with pytest.raises(ValueError, match=r"\[recv\]"):
        d.recv((2,), kc.float32, 0)
    with pytest.raises(ValueError, match=r"\[recv_like\]"):
        d.recv_like(x, 0)
    with pytest.raises(ValueError, match="split"):
        d.init().split(0)
    with pytest.raises(RuntimeError, match="Couldn't initialize"):
        d.init(strict=True)
    with pytest.raises(RuntimeError, match="'nccl'"):
        d.init(strict=True, backend="nccl")
    with pytest.raises(ValueError, match="'foo'"):
        d.init(backend="foo")
    with pytest.raises(TypeError, match="Group"):
        d.all_sum(x, group="everyone")


def test_average_gradients_over_the_singleton_group():
    grads = {"w": kc.array([1.0, 2.0]), "b": [kc.array(3.0)]}
    out = nn.average_gradients(grads, group=kc.distributed.init())
    assert out is grads


@needs_mlx
def test_matches_mlx_without_a_launcher():
    g, mg = kc.distributed.init(), mx.distributed.init()
    assert (g.rank(), g.size()) == (mg.rank(), mg.size())
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for name in ("all_sum", "all_max", "all_min", "all_gather", "sum_scatter"):
        assert np.array_equal(np.asarray(getattr(kc.distributed, name)(kc.array(x))),
                              np.array(getattr(mx.distributed, name)(mx.array(x))))
