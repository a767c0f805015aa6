"""The sharded layers (nn/layers/distributed.py): tensor-parallel linear
layers and their quantized forms made from whole layers, shard_linear and
shard_inplace, fully sharded modules and clip_grad_norm_sharded. On kiln's
singleton group a member holds whole weights, so each layer must compute
what its source layer does, gradients included; the slicing for larger
groups is checked through a stand-in group (slicing calls no collective);
and against MLX's layers where it is installed."""

import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from conftest import check, mx, needs_mlx, rand
from kiln.nn.layers import distributed as dist
from kiln.utils import tree_flatten


class StandInGroup:
    """A member of a group of `size` (only rank and size are asked)."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


def linear(rng, din, dout, bias=True):
    layer = nn.Linear(din, dout, bias=bias)
    layer.weight = kc.array(rand(rng, (dout, din)))
    if bias:
        layer.bias = kc.array(rand(rng, (dout,)))
    return layer


@pytest.mark.parametrize("bias", [True, False])
def test_sharded_linear_layers_compute_their_source_layer(rng, bias):
    src = linear(rng, 24, 40, bias)
    x = kc.array(rand(rng, (2, 3, 24)))
    layers = [nn.AllToShardedLinear.from_linear(src), nn.ShardedToAllLinear.from_linear(src),
              dist.shard_linear(src, "all-to-sharded", segments=2), dist.shard_linear(src, "sharded-to-all")]
    assert [type(l).__name__ for l in layers] == ["AllToShardedLinear", "ShardedToAllLinear"] * 2
    for layer in layers:
        check(layer(x), np.asarray(src(x)), rtol=1e-6, atol=1e-6)
        assert ("bias" in layer) == bias

        def loss(params, inp):
            layer.update(params)
            return kc.sum(kc.sin(layer(inp)))

        def src_loss(params, inp):
            src.update(params)
            return kc.sum(kc.sin(src(inp)))

        gp, gx = kc.grad(loss, argnums=[0, 1])(layer.trainable_parameters(), x)
        sp, sx = kc.grad(src_loss, argnums=[0, 1])(src.trainable_parameters(), x)
        check(gx, np.asarray(sx), rtol=1e-5, atol=1e-6)
        for (k, g), (k2, s) in zip(tree_flatten(gp), tree_flatten(sp)):
            assert k == k2
            check(g, np.asarray(s), rtol=1e-5, atol=1e-6)
    # The source layer is left as it was.
    assert src.weight.shape == (40, 24)


@pytest.mark.parametrize("mode,group_size,bits", [("affine", 32, 4), ("affine", 64, 8), ("mxfp4", 32, 4)])
def test_quantized_sharded_layers_compute_their_source_layer(rng, mode, group_size, bits):
    src = nn.QuantizedLinear.from_linear(linear(rng, 128, 48), group_size=group_size, bits=bits, mode=mode)
    x = kc.array(rand(rng, (5, 128)))
    for layer in (nn.QuantizedAllToShardedLinear.from_quantized_linear(src),
                  nn.QuantizedShardedToAllLinear.from_quantized_linear(src),
                  dist.shard_linear(src, "all-to-sharded"), dist.shard_linear(src, "sharded-to-all")):
        assert type(layer).__name__.startswith("Quantized")
        assert (layer.group_size, layer.bits, layer.mode) == (group_size, bits, mode)
        check(layer(x), np.asarray(src(x)), rtol=1e-6, atol=1e-6)
        # Frozen, as QuantizedLinear's, and kept so by unfreeze.
        assert layer.trainable_parameters() == {}
        layer.unfreeze()
        assert layer.trainable_parameters() == {}
        assert f"input_dims=128, output_dims=48, bias=True, group_size={group_size}" in repr(layer)


def test_new_layers_have_the_member_shapes():
    assert nn.AllToShardedLinear(16, 8).weight.shape == (8, 16)
    assert nn.ShardedToAllLinear(16, 8, bias=False).weight.shape == (8, 16)
    q = nn.QuantizedAllToShardedLinear(64, 32)
    assert (q.group_size, q.bits, q.mode) == (64, 4, "affine")
    assert q.weight.shape == (32, 64 * 4 // 32) and q.bias.shape == (32,)
    assert nn.QuantizedShardedToAllLinear(64, 32, bias=False, group_size=32, bits=8).weight.shape == (32, 16)
    assert repr(nn.AllToShardedLinear(16, 8, bias=False)) == "AllToShardedLinear(input_dims=16, output_dims=8, bias=False)"


def test_members_of_larger_groups_take_their_slices(rng):
    # A fused weight of three segments (q, k, v) split over two members:
    # each takes its half of every segment, by rows for all-to-sharded (and
    # the bias), by columns for sharded-to-all (the bias stays whole).
    w = rand(rng, (12, 6))
    b = rand(rng, (12,))
    for rank in (0, 1):
        group = StandInGroup(rank, 2)
        layer = nn.Linear(6, 12)
        layer.weight, layer.bias = kc.array(w), kc.array(b)
        dist.shard_inplace(layer, "all-to-sharded", segments=3, group=group)
        rows = np.concatenate([np.arange(s * 4 + rank * 2, s * 4 + rank * 2 + 2) for s in range(3)])
        check(layer.weight, w[rows], rtol=0, atol=0)
        check(layer.bias, b[rows], rtol=0, atol=0)
        layer = nn.Linear(6, 12)
        layer.weight, layer.bias = kc.array(w), kc.array(b)
        dist.shard_inplace(layer, "sharded-to-all", group=group)
        check(layer.weight, w[:, rank * 3:rank * 3 + 3], rtol=0, atol=0)
        check(layer.bias, b, rtol=0, atol=0)
        # Uneven segments, by fractions and by indices.
        for segments in ([1 / 3, 0.5], [4, 6]):
            layer = nn.Linear(6, 12)
            layer.weight = kc.array(w)
            dist.shard_inplace(layer, "all-to-sharded", segments=segments, group=group)
            pieces = [np.arange(0, 4), np.arange(4, 6), np.arange(6, 12)]
            rows = np.concatenate([p[rank * len(p) // 2:(rank + 1) * len(p) // 2] for p in pieces])
            check(layer.weight, w[rows], rtol=0, atol=0)
        # A sharding function of its own: shard only the bias.
        layer = nn.Linear(6, 12)
        layer.weight, layer.bias = kc.array(w), kc.array(b)
        dist.shard_inplace(layer, lambda path, a: 0 if path.endswith("bias") else None, group=group)
        check(layer.weight, w, rtol=0, atol=0)
        check(layer.bias, b[rank * 6:rank * 6 + 6], rtol=0, atol=0)


def test_bad_sharding_raises_with_the_reason():
    layer = nn.Linear(6, 10)
    with pytest.raises(ValueError, match="'bogus' not supported"):
        dist.shard_linear(layer, "bogus")
    with pytest.raises(ValueError, match="'bogus' not supported"):
        dist.shard_inplace(layer, "bogus")
    with pytest.raises(ValueError, match="size 10 into 3 segments"):
        dist.shard_inplace(layer, "all-to-sharded", segments=3)
    with pytest.raises(ValueError, match="axis of size 5 across 2"):
        dist.shard_inplace(layer, "all-to-sharded", segments=2, group=StandInGroup(0, 2))
    with pytest.raises(ValueError, match="should return None, an axis"):
        dist.shard_inplace(layer, lambda p, a: "rows")
    with pytest.raises(ValueError, match="Cannot shard 10 features across 4"):
        nn.AllToShardedLinear(6, 10, group=StandInGroup(0, 4))


def test_fully_sharded_modules(rng):
    model = nn.Sequential(linear(rng, 5, 8), nn.ReLU(), linear(rng, 8, 3))
    x = kc.array(rand(rng, (4, 5)))
    want = np.asarray(model(x))
    assert nn.fully_shard(model) is model  # one member: nothing to shard
    wrapped = nn.FullyShardedModule(model)
    assert nn.fully_shard(wrapped) is wrapped
    assert repr(wrapped).startswith("FullyShardedModule(num_sharded_params=4")
    check(wrapped(x), want, rtol=1e-6, atol=1e-6)

    def loss(params):
        wrapped.update(params)
        return kc.sum(wrapped(x) ** 2)

    grads = kc.grad(loss)(wrapped.trainable_parameters())
    model_grads = kc.grad(lambda p: (model.update(p), kc.sum(model(x) ** 2))[1])(model.trainable_parameters())
    flat = dict(tree_flatten(grads))
    for k, g in tree_flatten(model_grads):
        check(flat["module." + k], np.asarray(g), rtol=1e-5, atol=1e-6)
    # compute_dtype: the call runs in bfloat16; gradients come back in the
    # parameters' float32.
    half = nn.FullyShardedModule(nn.Sequential(linear(rng, 5, 8)), compute_dtype=kc.bfloat16)
    assert half(x.astype(kc.bfloat16)).dtype == kc.bfloat16
    g = kc.grad(lambda p: (half.update(p), kc.sum(half(x.astype(kc.bfloat16)).astype(kc.float32)))[1])(
        half.trainable_parameters())
    assert all(v.dtype == kc.float32 for _, v in tree_flatten(g))
    with pytest.raises(ValueError, match="'scale'.*scalar"):
        m = nn.Linear(2, 2)
        m.scale = kc.array(1.0)
        nn.FullyShardedModule(m)
    with pytest.raises(ValueError, match="axis 0 must divide by 2"):
        nn.FullyShardedModule(nn.Linear(2, 3), group=StandInGroup(0, 2))


def test_clip_grad_norm_sharded_is_clip_grad_norm_for_one_member(rng):
    import kiln.optimizers as optim

    grads = {"a": kc.array(rand(rng, (3, 4))), "b": [kc.array(rand(rng, (5,)))]}
    for max_norm in (0.5, 100.0):
        got, norm = nn.utils.clip_grad_norm_sharded(grads, max_norm)
        want, want_norm = optim.clip_grad_norm(grads, max_norm)
        check(norm, np.asarray(want_norm), rtol=1e-6)
        for (k, g), (_, w) in zip(tree_flatten(got), tree_flatten(want)):
            check(g, np.asarray(w), rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match=r"\[clip_grad_norm_sharded\] max_norm"):
        nn.utils.clip_grad_norm_sharded(grads, -1.0)


@needs_mlx
def test_match_mlx(rng):
    import mlx.nn as mnn
    from mlx.nn.layers import distributed as mdist

    w, b = rand(rng, (48, 64)), rand(rng, (48,))
    x = rand(rng, (3, 64))
    kl, ml = nn.Linear(64, 48), mnn.Linear(64, 48)
    kl.weight, kl.bias = kc.array(w), kc.array(b)
    ml.weight, ml.bias = mx.array(w), mx.array(b)
    for sharding in ("all-to-sharded", "sharded-to-all"):
        segments = 3 if sharding == "all-to-sharded" else 2
        ks, ms = dist.shard_linear(kl, sharding, segments=segments), mdist.shard_linear(ml, sharding, segments=segments)
        assert repr(ks) == repr(ms)
        check(ks(kc.array(x)), np.array(ms(mx.array(x))), rtol=1e-5, atol=1e-5)
        kq = dist.shard_linear(kl.to_quantized(group_size=32, bits=4), sharding)
        mq = mdist.shard_linear(ml.to_quantized(group_size=32, bits=4), sharding)
        assert repr(kq) == repr(mq)
        check(kq(kc.array(x)), np.array(mq(mx.array(x))), rtol=1e-5, atol=1e-5)
    # New layers draw their weights as MLX's do.
    for name in ("AllToShardedLinear", "ShardedToAllLinear"):
        kc.random.seed(3)
        mx.random.seed(3)
        k, m = getattr(nn, name)(8, 4), getattr(mnn, name)(8, 4)
        check(k.weight, np.array(m.weight), rtol=0, atol=0)
        check(k.bias, np.array(m.bias), rtol=0, atol=0)
    grads = {"a": rand(rng, (3, 4))}
    kg, kn = nn.utils.clip_grad_norm_sharded({"a": kc.array(grads["a"])}, 0.5)
    mg, mn = mnn.utils.clip_grad_norm_sharded({"a": mx.array(grads["a"])}, 0.5)
    check(kn, np.array(mn), rtol=1e-6)
    check(kg["a"], np.array(mg["a"]), rtol=1e-6)
