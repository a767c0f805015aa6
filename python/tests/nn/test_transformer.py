"""MultiHeadAttention and the transformer layers against a float64 NumPy
transcription of the equations (projections, per-head softmax attention
with additive or boolean masks, residual blocks with layer norms before or
after), every option; dropout, checkpointing, errors, gradients and MLX."""

import math

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from kiln.utils import tree_flatten, tree_unflatten
from layer_checks import (
    assert_same_signatures,
    FLOAT_DTYPES,
    LAYOUTS,
    assert_close,
    check_compiled_training,
    check_parameter_grads,
    f64,
    mlx,
    random_input,
    random_weights,
    set_weights,
    share_weights,
    to_numpy,
)


def linear_ref(p, x):
    y = x @ p["weight"].T
    return y + p["bias"] if "bias" in p else y


def layer_norm_ref(p, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * p["weight"] + p["bias"]


def relu_ref(x):
    return np.maximum(x, 0)


def attention_ref(p, queries, keys, values, mask, heads):
    def split(x):
        B, L, D = x.shape
        return x.reshape(B, L, heads, D // heads).transpose(0, 2, 1, 3)

    q = split(linear_ref(p["query_proj"], queries))
    k = split(linear_ref(p["key_proj"], keys))
    v = split(linear_ref(p["value_proj"], values))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = np.asarray(mask)
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    out = (scores / scores.sum(-1, keepdims=True)) @ v
    B, _, L, _ = out.shape
    return linear_ref(p["out_proj"], out.transpose(0, 2, 1, 3).reshape(B, L, -1))


def mlp_ref(p, x, activation):
    return linear_ref(p["linear2"], activation(linear_ref(p["linear1"], x)))


def encoder_layer_ref(p, x, mask, norm_first, activation=relu_ref, heads=2):
    attend = lambda y: attention_ref(p["attention"], y, y, y, mask, heads)
    if norm_first:
        x = x + attend(layer_norm_ref(p["ln1"], x))
        return x + mlp_ref(p, layer_norm_ref(p["ln2"], x), activation)
    x = layer_norm_ref(p["ln1"], x + attend(x))
    return layer_norm_ref(p["ln2"], x + mlp_ref(p, x, activation))


def decoder_layer_ref(p, x, memory, x_mask, memory_mask, norm_first, activation=relu_ref, heads=2):
    self_attend = lambda y: attention_ref(p["self_attention"], y, y, y, x_mask, heads)
    cross_attend = lambda y: attention_ref(p["cross_attention"], y, memory, memory, memory_mask, heads)
    if norm_first:
        x = x + self_attend(layer_norm_ref(p["ln1"], x))
        x = x + cross_attend(layer_norm_ref(p["ln2"], x))
        return x + mlp_ref(p, layer_norm_ref(p["ln3"], x), activation)
    x = layer_norm_ref(p["ln1"], x + self_attend(x))
    x = layer_norm_ref(p["ln2"], x + cross_attend(x))
    return layer_norm_ref(p["ln3"], x + mlp_ref(p, x, activation))


def encoder_ref(p, x, mask, norm_first):
    for layer in p["layers"]:
        x = encoder_layer_ref(layer, x, mask, norm_first)
    return layer_norm_ref(p["ln"], x)


def decoder_ref(p, x, memory, x_mask, memory_mask, norm_first):
    for layer in p["layers"]:
        x = decoder_layer_ref(layer, x, memory, x_mask, memory_mask, norm_first)
    return layer_norm_ref(p["ln"], x)


def nested(weights):
    return tree_unflatten(list(weights.items()))


def with_random_weights(rng, module, dtype=kc.float32):
    weights = random_weights(rng, module)
    set_weights(module, weights, dtype)
    return nested(weights)


MHA_CASES = [
    dict(dims=8, num_heads=2),
    dict(dims=8, num_heads=4, bias=True),
    dict(dims=6, num_heads=3, query_input_dims=5, key_input_dims=4, value_input_dims=7,
         value_dims=9, value_output_dims=2),
    dict(dims=4, num_heads=1, key_input_dims=3),
]


def _mha_inputs(rng, args, layout="contiguous"):
    qd = args.get("query_input_dims") or args["dims"]
    kd = args.get("key_input_dims") or args["dims"]
    vd = args.get("value_input_dims") or kd
    q = random_input(rng, (2, 5, qd), layout=layout)
    k = random_input(rng, (2, 6, kd), layout=layout)
    v = random_input(rng, (2, 6, vd), layout=layout)
    return q, k, v


@pytest.mark.parametrize("args", MHA_CASES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("mask_kind", [None, "additive", "boolean", "per-head", "causal"])
def test_multi_head_attention_matches_reference(rng, args, layout, mask_kind):
    mha = nn.MultiHeadAttention(**args)
    p = with_random_weights(rng, mha)
    (q, q64), (k, k64), (v, v64) = _mha_inputs(rng, args, layout)
    mask = None
    if mask_kind == "additive":
        mask = rng.standard_normal((5, 6)).astype(np.float32)
    elif mask_kind == "boolean":
        mask = rng.random((2, 1, 5, 6)) > 0.3
        mask[..., 0] = True  # every query sees some key
    elif mask_kind == "per-head":
        mask = rng.standard_normal((1, args["num_heads"], 5, 6)).astype(np.float32)
    if mask_kind == "causal":
        # The string asks the kernel for the causal mask, aligned so that
        # the last query sees every key.
        y = mha(q, k, v, mask="causal")
        mask = np.arange(6)[None, :] <= np.arange(5)[:, None] + 1
    else:
        y = mha(q, k, v, mask=None if mask is None else kc.array(mask))
    assert_close(y, attention_ref(p, q64, k64, v64, mask, args["num_heads"]))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_multi_head_attention_in_each_float_dtype(rng, dtype):
    mha = nn.MultiHeadAttention(8, 2, bias=True)
    with_random_weights(rng, mha, dtype)
    p = nested({k: to_numpy(v).astype(np.float64) for k, v in tree_flatten(mha.parameters())})
    x, x64 = random_input(rng, (2, 4, 8), dtype=dtype)
    y = mha(x, x, x)
    assert y.dtype == dtype
    assert_close(y, attention_ref(p, x64, x64, x64, None, 2), dtype, scale=4.0)


def test_causal_mask_by_hand():
    m = nn.MultiHeadAttention.create_additive_causal_mask(3)
    low = float(np.finfo(np.float32).min)
    assert m.dtype == kc.float32
    assert m.tolist() == [[0, low, low], [0, 0, low], [0, 0, 0]]
    m = nn.MultiHeadAttention.create_additive_causal_mask(2, kc.float16)
    assert m.dtype == kc.float16 and m.tolist() == [[0, -65504], [0, 0]]


def test_causal_mask_hides_later_keys(rng):
    mha = nn.MultiHeadAttention(8, 2)
    p = with_random_weights(rng, mha)
    x, x64 = random_input(rng, (2, 5, 8))
    y = mha(x, x, x, mask=mha.create_additive_causal_mask(5))
    want = attention_ref(p, x64, x64, x64, np.tril(np.ones((5, 5), bool)), 2)
    assert_close(y, want)
    # The first query sees only the first key: changing the others keeps it.
    x2 = kc.concatenate([x[:, :1], x[:, 1:] * 3], axis=1)
    y2 = mha(x2, x2, x2, mask=mha.create_additive_causal_mask(5))
    assert_close(y2[:, 0], np.array(y[:, 0]).astype(np.float64))


def test_multi_head_attention_parameters_and_errors():
    mha = nn.MultiHeadAttention(6, 3, query_input_dims=5, value_dims=9, value_output_dims=2)
    shapes = {k: v.shape for k, v in tree_flatten(mha.parameters())}
    assert shapes == {
        "query_proj.weight": (6, 5),
        "key_proj.weight": (6, 6),
        "value_proj.weight": (9, 6),
        "out_proj.weight": (2, 9),
    }
    assert mha.num_heads == 3
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(8, 3)
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiHeadAttention(8, 2, value_dims=5)
    with pytest.raises(ValueError, match=r"queries.*\(4, 8\)"):
        mha = nn.MultiHeadAttention(8, 2)
        mha(kc.ones((4, 8)), kc.ones((2, 4, 8)), kc.ones((2, 4, 8)))


def test_multi_head_attention_gradients_match_finite_differences(rng):
    mha = nn.MultiHeadAttention(4, 2, key_input_dims=3, bias=True)
    q = f64(rng.standard_normal((2, 3, 4)))
    kv = f64(rng.standard_normal((2, 4, 3)))
    mask = f64(rng.standard_normal((3, 4)))
    check_parameter_grads(lambda_module(mha, kv, mask), lambda y: (y * y).sum(), q)


class lambda_module(nn.Module):
    """``mha(q, kv, kv, mask)`` as a module of one input."""

    def __init__(self, mha, kv, mask):
        super().__init__()
        self.mha = mha
        self._kv, self._mask = kv, mask

    def __call__(self, q):
        return self.mha(q, self._kv, self._kv, self._mask)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_encoder_layer_matches_reference(rng, norm_first, layout):
    layer = nn.TransformerEncoderLayer(8, 2, mlp_dims=12, norm_first=norm_first)
    p = with_random_weights(rng, layer)
    x, x64 = random_input(rng, (2, 5, 8), layout=layout)
    mask = layer.attention.create_additive_causal_mask(5)
    want = encoder_layer_ref(p, x64, np.tril(np.ones((5, 5), bool)), norm_first)
    assert_close(layer(x, mask), want, scale=2.0)


def test_encoder_layer_defaults_and_activation(rng):
    layer = nn.TransformerEncoderLayer(8, 2)
    assert layer.linear1.weight.shape == (32, 8) and layer.norm_first is True
    assert layer.activation is nn.relu
    assert repr(layer.dropout1) == "Dropout(p=0.0)"
    layer = nn.TransformerEncoderLayer(8, 2, activation=nn.gelu, norm_first=False)
    p = with_random_weights(rng, layer)
    x, x64 = random_input(rng, (1, 4, 8))
    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    assert_close(layer(x, None), encoder_layer_ref(p, x64, None, False, gelu), scale=2.0)


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_layer_matches_reference(rng, norm_first):
    layer = nn.TransformerDecoderLayer(8, 2, mlp_dims=6, norm_first=norm_first)
    p = with_random_weights(rng, layer)
    x, x64 = random_input(rng, (2, 4, 8), layout="transposed")
    memory, m64 = random_input(rng, (2, 6, 8), layout="sliced")
    memory_mask = rng.standard_normal((4, 6)).astype(np.float32)
    y = layer(x, memory, layer.self_attention.create_additive_causal_mask(4), kc.array(memory_mask))
    want = decoder_layer_ref(p, x64, m64, np.tril(np.ones((4, 4), bool)), memory_mask, norm_first)
    assert_close(y, want, scale=2.0)


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("checkpoint", [False, True])
def test_transformer_matches_reference(rng, norm_first, checkpoint):
    model = nn.Transformer(8, 2, 2, 3, mlp_dims=10, norm_first=norm_first, checkpoint=checkpoint)
    assert len(model.encoder.layers) == 2 and len(model.decoder.layers) == 3
    p = with_random_weights(rng, model)
    src, s64 = random_input(rng, (2, 6, 8))
    tgt, t64 = random_input(rng, (2, 4, 8))
    tgt_mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    y = model(src, tgt, None, tgt_mask, None)
    memory = encoder_ref(p["encoder"], s64, None, norm_first)
    want = decoder_ref(p["decoder"], t64, memory, np.tril(np.ones((4, 4), bool)), None, norm_first)
    assert_close(y, want, scale=5.0)


def test_transformer_custom_encoder_and_decoder(rng):
    encoder = nn.TransformerEncoder(1, 8, 2)
    decoder = nn.TransformerDecoder(1, 8, 4)
    model = nn.Transformer(8, 2, custom_encoder=encoder, custom_decoder=decoder)
    assert model.encoder is encoder and model.decoder is decoder

    class Passthrough(nn.Module):
        def __call__(self, x, mask):
            return x

    model = nn.Transformer(8, 2, 1, 1, custom_encoder=Passthrough())
    src = kc.array(rng.standard_normal((1, 3, 8)).astype(np.float32))
    tgt = kc.array(rng.standard_normal((1, 2, 8)).astype(np.float32))
    assert_close(model(src, tgt, None, None, None), np.array(model.decoder(tgt, src, None, None)))


def test_dropout_acts_only_in_training(rng):
    kc.random.seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, dropout=0.5)
    x = kc.array(rng.standard_normal((2, 5, 8)).astype(np.float32))
    plain = nn.TransformerEncoderLayer(8, 2)
    plain.update(layer.parameters())
    assert not np.allclose(np.array(layer(x, None)), np.array(plain(x, None)))
    layer.eval()
    assert_close(layer(x, None), np.array(plain(x, None)))


@pytest.mark.parametrize("cls", [nn.TransformerEncoder, nn.TransformerDecoder])
def test_checkpointing_keeps_values_and_gradients(rng, cls):
    kc.random.seed(1)
    model = cls(2, 8, 2, mlp_dims=8, checkpoint=True)
    plain = cls(2, 8, 2, mlp_dims=8)
    plain.update(model.parameters())
    x = kc.array(rng.standard_normal((2, 3, 8)).astype(np.float32))
    args = (x, None) if cls is nn.TransformerEncoder else (x, x * 0.5, None, None)

    def loss_of(m):
        return nn.value_and_grad(m, lambda *a: (m(*a) ** 2).sum())(*args)

    (v1, g1), (v2, g2) = loss_of(model), loss_of(plain)
    assert_close(v1, np.array(v2))
    for (k1, a), (k2, b) in zip(tree_flatten(g1), tree_flatten(g2)):
        assert k1 == k2
        assert_close(a, np.array(b), scale=10.0)


def test_encoder_layer_gradients_match_finite_differences(rng):
    layer = nn.TransformerEncoderLayer(4, 2, mlp_dims=3, norm_first=False)
    with_random_weights(rng, layer)
    x = f64(rng.standard_normal((1, 3, 4)))
    mask = f64(rng.standard_normal((3, 3)))
    check_parameter_grads(single_input(layer, mask), lambda y: (y * kc.sin(y)).sum(), x, rtol=1e-5, atol=1e-6)


class single_input(nn.Module):
    """``layer(x, mask)`` as a module of one input."""

    def __init__(self, layer, mask):
        super().__init__()
        self.layer = layer
        self._mask = mask

    def __call__(self, x):
        return self.layer(x, self._mask)


def _mlx_pair(cls_name, *args, **kwargs):
    mx, mnn = mlx()
    kc.random.seed(21)
    mx.random.seed(21)
    return getattr(nn, cls_name)(*args, **kwargs), getattr(mnn, cls_name)(*args, **kwargs)


@pytest.mark.parametrize(
    "name, args, kwargs",
    [
        ("MultiHeadAttention", (8, 2), dict(bias=True, value_dims=4, key_input_dims=6)),
        ("TransformerEncoderLayer", (8, 2), dict(mlp_dims=12)),
        ("TransformerDecoderLayer", (8, 4), dict(norm_first=False)),
        ("TransformerEncoder", (2, 8, 2), dict(checkpoint=True)),
        ("TransformerDecoder", (2, 8, 2), dict()),
        ("Transformer", (8, 2, 1, 2), dict(norm_first=False)),
    ],
)
def test_same_parameters_and_init_as_mlx(name, args, kwargs):
    ours, theirs = _mlx_pair(name, *args, **kwargs)
    from mlx.utils import tree_flatten as mlx_flatten

    assert repr(ours) == repr(theirs)
    a, b = dict(tree_flatten(ours.parameters())), dict(mlx_flatten(theirs.parameters()))
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(np.array(a[k]), np.array(b[k])), k


def test_attention_and_transformer_match_mlx(rng):
    mx, mnn = mlx()
    ours, theirs = nn.MultiHeadAttention(8, 2, bias=True), mnn.MultiHeadAttention(8, 2, bias=True)
    share_weights(rng, ours, theirs)
    q, kv = rng.standard_normal((2, 4, 8)).astype(np.float32), rng.standard_normal((2, 5, 8)).astype(np.float32)
    mask = rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(
        ours(kc.array(q), kc.array(kv), kc.array(kv), kc.array(mask)),
        np.array(theirs(mx.array(q), mx.array(kv), mx.array(kv), mx.array(mask))),
    )
    for norm_first in (True, False):
        ours, theirs = nn.Transformer(8, 2, 2, 2, norm_first=norm_first), mnn.Transformer(
            8, 2, 2, 2, norm_first=norm_first
        )
        share_weights(rng, ours, theirs)
        causal = nn.MultiHeadAttention.create_additive_causal_mask(4)
        y = ours(kc.array(kv), kc.array(q), None, causal, None)
        want = theirs(mx.array(kv), mx.array(q), None, mnn.MultiHeadAttention.create_additive_causal_mask(4), None)
        assert_close(y, np.array(want), scale=5.0)


def test_gradients_at_several_sequence_lengths(rng):
    # The activations are compiled shapeless: a trace made at one length
    # serves the next, in the gradient too.
    layer = nn.TransformerEncoderLayer(8, 2, mlp_dims=16)
    step = nn.value_and_grad(layer, lambda v: (layer(v, None) ** 2).sum())
    for length in (5, 3, 7):
        x = kc.array(rng.standard_normal((2, length, 8)).astype(np.float32))
        _, grads = step(x)
        kc.disable_compile()
        try:
            _, eager = step(x)
        finally:
            kc.enable_compile()
        for (k, a), (_, b) in zip(tree_flatten(grads), tree_flatten(eager)):
            assert_close(a, np.array(b), scale=10.0)


def test_transformer_in_a_compiled_training_step(rng):
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rope = nn.RoPE(4)
            self.encoder = nn.TransformerEncoder(2, 8, 2, mlp_dims=16, norm_first=False)
            self.decoder = nn.TransformerDecoder(1, 8, 2, mlp_dims=16, checkpoint=True)

        def __call__(self, src, tgt):
            memory = self.encoder(self.rope(src), None)
            mask = nn.MultiHeadAttention.create_additive_causal_mask(tgt.shape[1])
            return self.decoder(tgt, memory, mask, None)

    src = kc.array(rng.standard_normal((2, 5, 8)).astype(np.float32))
    tgt = kc.array(rng.standard_normal((2, 4, 8)).astype(np.float32))
    y = kc.array(rng.standard_normal((2, 4, 8)).astype(np.float32))
    check_compiled_training(Model, lambda out, y: ((out - y) ** 2).mean(), src, tgt, y)


def test_signatures_match_mlx():
    assert_same_signatures(
        [
            "MultiHeadAttention", "TransformerEncoderLayer", "TransformerEncoder",
            "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
        ]
    )
