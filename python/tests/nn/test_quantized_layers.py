"""The quantized layers (QuantizedLinear, QuantizedEmbedding) and
nn.quantize: against MLX's where it is installed, and the swap of chosen
layers."""

import numpy as np
import pytest

import kiln.core as kc
from conftest import mx, needs_mlx


@needs_mlx
def test_quantized_layers_match_mlx(rng):
    import kiln.nn as knn
    import mlx.nn as mnn

    w = rng.standard_normal((48, 128)).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    x = rng.standard_normal((5, 128)).astype(np.float32)
    kl, ml = knn.Linear(128, 48), mnn.Linear(128, 48)
    kl.weight, kl.bias = kc.array(w), kc.array(bias)
    ml.weight, ml.bias = mx.array(w), mx.array(bias)
    kq, mq = kl.to_quantized(bits=5, group_size=32), ml.to_quantized(bits=5, group_size=32)
    assert repr(kq) == repr(mq)
    np.testing.assert_allclose(np.array(kq(kc.array(x))), np.array(mq(mx.array(x))), rtol=1e-5, atol=1e-5)
    assert sorted(kq.trainable_parameters()) == sorted(mq.trainable_parameters()) == ["bias"]
    assert knn.QuantizedLinear(64, 32).trainable_parameters() == {}

    table = rng.standard_normal((100, 64)).astype(np.float32)
    ke, me = knn.Embedding(100, 64), mnn.Embedding(100, 64)
    ke.weight, me.weight = kc.array(table), mx.array(table)
    kqe, mqe = ke.to_quantized(bits=8), me.to_quantized(bits=8)
    idx = rng.integers(0, 100, (3, 7)).astype(np.int32)
    np.testing.assert_array_equal(np.array(kqe(kc.array(idx))), np.array(mqe(mx.array(idx))))
    xe = rng.standard_normal((4, 64)).astype(np.float32)
    np.testing.assert_allclose(np.array(kqe.as_linear(kc.array(xe))), np.array(mqe.as_linear(mx.array(xe))),
                               rtol=1e-5, atol=1e-5)


def test_nn_quantize_swaps_the_chosen_layers():
    import kiln.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 64)
            self.hidden = nn.Linear(64, 128)
            self.head = nn.Linear(128, 32)
            self.norm = nn.LayerNorm(64)

    m = Model()
    nn.quantize(m, bits=3, group_size=32,
                class_predicate=lambda path, layer: {"bits": 8} if path == "head" else hasattr(layer, "to_quantized"))
    assert isinstance(m.emb, nn.QuantizedEmbedding) and (m.emb.bits, m.emb.group_size) == (3, 32)
    assert isinstance(m.hidden, nn.QuantizedLinear) and m.hidden.bits == 3
    assert isinstance(m.head, nn.QuantizedLinear) and (m.head.bits, m.head.group_size) == (8, 64)
    assert isinstance(m.norm, nn.LayerNorm)
    out = m.head(m.hidden(m.emb(kc.array([[1, 2, 3]]))))
    assert out.shape == (1, 3, 32)
    with pytest.raises(ValueError, match="quantize_input"):
        nn.quantize(Model(), quantize_input=True)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
def test_microscaling_layers_have_no_biases(mode):
    import kiln.nn as nn

    rng = np.random.default_rng(2)
    lin = nn.Linear(128, 64)
    lin.weight = kc.array(rng.standard_normal((64, 128)).astype(np.float32))
    ql = nn.QuantizedLinear.from_linear(lin, mode=mode)
    assert sorted(ql.parameters()) == ["bias", "scales", "weight"]
    assert (ql.group_size, ql.bits) == {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}[mode]
    x = kc.array(rng.standard_normal((3, 128)).astype(np.float32))
    wd = kc.dequantize(ql.weight, ql.scales, mode=mode, dtype=kc.float32)
    np.testing.assert_allclose(np.asarray(ql(x)), np.asarray(x @ wd.T + lin.bias), rtol=1e-5, atol=1e-4)
    emb = nn.QuantizedEmbedding(10, 64, mode=mode)
    assert emb(kc.array([1, 3])).shape == (2, 64)
    if mx is not None:
        import mlx.nn as mlx_nn

        ml = mlx_nn.Linear(128, 64)
        ml.weight, ml.bias = mx.array(np.asarray(lin.weight)), mx.array(np.asarray(lin.bias))
        mq = mlx_nn.QuantizedLinear.from_linear(ml, mode=mode)
        assert np.array_equal(np.asarray(ql.weight), np.array(mq.weight))
        np.testing.assert_allclose(np.asarray(ql(x)), np.array(mq(mx.array(np.asarray(x)))), rtol=1e-5, atol=1e-4)
