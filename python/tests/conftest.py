import os

import numpy as np
import pytest

import kiln.core as kc

try:
    import mlx.core as mx  # optional peer, used as a reference when present
except ImportError:  # pragma: no cover
    mx = None

# KILN_TEST_DEVICE=gpu runs the whole suite with the GPU as the default
# device (scripts/gpu-check python); the CPU is the default otherwise.
if os.environ.get("KILN_TEST_DEVICE", "cpu") == "gpu":
    if not kc.is_available(kc.gpu):
        raise RuntimeError("KILN_TEST_DEVICE=gpu, but kiln has no GPU here")
    kc.set_default_device(kc.gpu)


def pytest_collection_modifyitems(config, items):
    """KILN_PYTEST_SHARD=i/n keeps every n-th collected test from the i-th
    (scripts/gpu-check python runs n such processes side by side; taking
    every n-th test spreads each file's slow tests over the shards)."""
    shard = os.environ.get("KILN_PYTEST_SHARD")
    if not shard:
        return
    try:
        index, count = (int(v) for v in shard.split("/"))
    except ValueError:
        raise pytest.UsageError(f"KILN_PYTEST_SHARD={shard!r}: expected i/n")
    if not 0 <= index < count:
        raise pytest.UsageError(f"KILN_PYTEST_SHARD={shard!r}: need 0 <= i < n")
    keep = [t for k, t in enumerate(items) if k % count == index]
    dropped = [t for k, t in enumerate(items) if k % count != index]
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def rand(rng, shape, dtype=np.float32, lo=-2.0, hi=2.0):
    """Random values, never all zero."""
    if np.issubdtype(dtype, np.integer):
        lo_i = max(int(lo), np.iinfo(dtype).min)
        x = rng.integers(lo_i, int(hi) + 5, size=shape).astype(dtype)
        if x.size:
            x.flat[0] = 3
        return x
    if dtype == np.bool_:
        x = rng.random(shape) > 0.5
        if x.size:
            x.flat[0] = True
        return x
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def check(got, want, rtol=1e-5, atol=1e-6):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    # Complex values compare in complex128 (both parts), real ones in float64.
    wide = (
        np.complex128
        if np.iscomplexobj(got) or np.iscomplexobj(want)
        else np.float64
    )
    np.testing.assert_allclose(
        got.astype(wide), want.astype(wide), rtol=rtol, atol=atol
    )


needs_mlx = pytest.mark.skipif(mx is None, reason="mlx is not installed")


def _open_mpi():
    """The MPI backend speaks OpenMPI's ABI: another MPI's mpirun (or none)
    skips the multi-process tests."""
    import shutil
    import subprocess

    mpirun = shutil.which("mpirun")
    if mpirun is None or not kc.distributed.is_available("mpi"):
        return False
    try:
        v = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in v.stdout + v.stderr


needs_open_mpi = pytest.mark.skipif(not _open_mpi(), reason="OpenMPI (mpirun, libmpi) is not installed")
