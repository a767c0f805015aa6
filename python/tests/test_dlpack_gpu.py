"""DLPack on the GPU with PyTorch and JAX: kiln's GPU arrays go out and
their GPU tensors come in without a copy (checked by pointer through a
round trip, and by values), ordered on the streams they were made on.
Skips without a GPU or without the framework."""

import os

import numpy as np
import pytest

# JAX would otherwise take most of the GPU's memory for itself.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import kiln.core as kc

pytestmark = pytest.mark.skipif(not kc.is_available(kc.gpu), reason="needs a GPU")


def gpu_array(shape, dtype=kc.float32):
    x = kc.random.normal(shape, stream=kc.gpu).astype(dtype)
    kc.eval(x)
    return x


def test_torch_round_trip_shares_memory():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    for dt, tdt in ((kc.float32, torch.float32), (kc.bfloat16, torch.bfloat16),
                    (kc.int32, torch.int32)):
        a = gpu_array((64, 33), dt)
        assert a.__dlpack_device__()[0] == 2
        t = torch.from_dlpack(a)
        assert t.is_cuda and t.dtype == tdt and tuple(t.shape) == (64, 33)
        # Two exports view one buffer; a round trip comes back to it.
        assert torch.from_dlpack(a).data_ptr() == t.data_ptr()
        back = kc.from_dlpack(t)
        assert torch.from_dlpack(back).data_ptr() == t.data_ptr()
        np.testing.assert_array_equal(np.array(a.astype(kc.float32)),
                                      t.float().cpu().numpy())
    # A transposed view keeps its strides.
    a = gpu_array((8, 5))
    t = torch.from_dlpack(a.T)
    assert t.stride() == (1, 5)
    np.testing.assert_array_equal(np.array(a).T, t.cpu().numpy())


def test_torch_tensors_come_in_without_a_copy_and_in_order():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        # Work queued on a side stream that kiln must wait for.
        t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        t = t * 2 + 1
    k = kc.from_dlpack(t)
    assert k.shape == (1 << 20,) and k.dtype == kc.float32
    assert torch.from_dlpack(k).data_ptr() == t.data_ptr()
    got = kc.sum(k * 0.5, stream=kc.gpu).item()
    n = 1 << 20
    assert got == pytest.approx(0.5 * (n * (n - 1) + n), rel=1e-6)
    # The strided view of a transposed tensor.
    m = torch.randn(6, 7, device="cuda")
    km = kc.from_dlpack(m.t())
    np.testing.assert_array_equal(np.array(km), m.t().cpu().numpy())
    # kiln keeps the tensor alive after PyTorch drops it.
    u = torch.full((1000,), 3.0, device="cuda")
    ku = kc.from_dlpack(u)
    del u
    torch.cuda.empty_cache()
    assert kc.sum(ku, stream=kc.gpu).item() == 3000.0


def test_jax_round_trip():
    jax = pytest.importorskip("jax")
    try:
        dev = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX without a GPU")
    a = gpu_array((16, 4))
    j = jax.dlpack.from_dlpack(a)
    np.testing.assert_array_equal(np.asarray(j), np.array(a))
    x = jax.device_put(np.arange(24, dtype=np.float32).reshape(4, 6), dev)
    k = kc.from_dlpack(x)
    np.testing.assert_array_equal(np.array(k), np.arange(24, dtype=np.float32).reshape(4, 6))
    assert x.unsafe_buffer_pointer() == jax.dlpack.from_dlpack(k).unsafe_buffer_pointer()


def test_bad_requests_raise():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    t = torch.ones(4, device="cuda")
    with pytest.raises(ValueError, match="copy=True"):
        kc.from_dlpack(t, copy=True)
