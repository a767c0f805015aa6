"""Run by test_distributed_nn.py in every process of a group (python -m
kiln.launch -n N nn_checks.py NAME...): kiln.nn's sharded layers and
distributed helpers over a real group. Every process draws the same full
weights and inputs from a fixed seed (NumPy), computes the one-process model
with the full weights, and compares the sharded computation of the group with
it: outputs, and gradients gathered across the ranks. Rank-specific data
(data parallelism) is drawn from a seed of each rank, so every process also
knows the other ranks' data. A check that fails raises, and the launcher ends
the job with the error."""

import sys

import numpy as np

import kiln.core as kc
import kiln.nn as nn
import kiln.optimizers as optim
from kiln.nn.layers.distributed import shard_inplace, shard_linear
from kiln.nn.utils import clip_grad_norm_sharded
from kiln.utils import tree_flatten, tree_map, tree_map_with_path, tree_unflatten

D = kc.distributed
world = D.init(strict=True, backend="mpi")
R, N = world.rank(), world.size()

TOL = 1e-5  # float32


def close(got, want, what, tol=TOL):
    """|got - want| within tol of want's magnitude (elementwise relative,
    with the array's largest entry setting the absolute floor)."""
    got = np.asarray(got.astype(kc.float32) if isinstance(got, kc.array) else got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"{what} on rank {R}: shape {got.shape}, expected {want.shape}")
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
    err = np.abs(got - want)
    if not np.all(err <= tol * (np.abs(want) + scale)):
        raise AssertionError(f"{what} on rank {R} of {N}: max error {err.max():.3g} (scale {scale:.3g}); "
                             f"got {got.ravel()[:4]}, expected {want.ravel()[:4]}")


def expect_error(kind, fragment, fn, what):
    try:
        fn()
    except kind as e:
        if fragment not in str(e):
            raise AssertionError(f"{what}: message {str(e)!r} lacks {fragment!r}")
    else:
        raise AssertionError(f"{what} did not raise {kind.__name__}")


def normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def np_shard(w, axis, rank, n, cuts=()):
    """The NumPy reference of a member's shard: each segment of ``w`` along
    ``axis`` (between the absolute indices ``cuts``) cut into n equal parts,
    part ``rank`` of each joined."""
    bounds = [0, *cuts, w.shape[axis]]
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        k = (b - a) // n
        parts.append(np.take(w, np.arange(a + rank * k, a + (rank + 1) * k), axis=axis))
    return np.concatenate(parts, axis=axis)


def gather_rows(a):
    """The members' arrays joined along axis 0."""
    return np.asarray(D.all_gather(a).astype(kc.float32))


def gather_cols(a):
    return gather_rows(a.T).T


def linear(rng, i, o, bias=True):
    layer = nn.Linear(i, o, bias=bias)
    layer.weight = kc.array(normal(rng, o, i) / np.sqrt(i))
    if bias:
        layer.bias = kc.array(normal(rng, o))
    return layer


def value_and_grads(layer, x, loss):
    """loss(layer(x)), and its gradients with respect to the layer's
    trainable parameters and to x."""

    def f(params, x):
        layer.update(params)
        return loss(layer(x))

    params = layer.trainable_parameters()
    try:
        value, (gp, gx) = kc.value_and_grad(f, argnums=(0, 1))(params, x)
        kc.eval(value, gp, gx)
    finally:
        layer.update(params)
    return value, dict(tree_flatten(gp)), gx


def cols(n_features, rank=R):
    k = n_features // N
    return slice(rank * k, (rank + 1) * k)


def check_linear():
    rng = np.random.default_rng(10)
    IN, OUT, B = 24, 36, 5
    for bias in (True, False):
        full = linear(rng, IN, OUT, bias)
        x = kc.array(normal(rng, B, IN))
        c = normal(rng, B, OUT)  # the output's cotangent
        y = np.asarray(full(x))
        l_full, g_full, dx_full = value_and_grads(full, x, lambda y: (y * kc.array(c)).sum())

        # All-to-sharded: this rank's output features; the input's gradient
        # is summed over the group, so every rank has the whole of it.
        a2s = shard_linear(full, "all-to-sharded")
        assert isinstance(a2s, nn.AllToShardedLinear) and a2s.weight.shape == (OUT // N, IN), a2s
        assert ("bias" in a2s) == bias
        close(a2s(x), y[:, cols(OUT)], f"AllToShardedLinear bias={bias} forward")
        mine = kc.array(c[:, cols(OUT)])
        l_s, g_s, dx_s = value_and_grads(a2s, x, lambda y: (y * mine).sum())
        close(D.all_sum(l_s), l_full, "AllToShardedLinear loss summed over the group")
        close(dx_s, dx_full, "AllToShardedLinear d/dx")
        close(gather_rows(g_s["weight"]), g_full["weight"], "AllToShardedLinear d/dweight gathered")
        close(g_s["weight"], np.asarray(g_full["weight"])[cols(OUT)], "AllToShardedLinear d/dweight")
        if bias:
            close(gather_rows(g_s["bias"]), g_full["bias"], "AllToShardedLinear d/dbias gathered")

        # Sharded-to-all: this rank's input features; the partial products
        # are summed, every rank has the whole output and adds the bias once.
        s2a = shard_linear(full, "sharded-to-all")
        assert isinstance(s2a, nn.ShardedToAllLinear) and s2a.weight.shape == (OUT, IN // N), s2a
        x_r = x[:, cols(IN)]
        close(s2a(x_r), y, f"ShardedToAllLinear bias={bias} forward")
        l_s, g_s, dx_s = value_and_grads(s2a, x_r, lambda y: (y * kc.array(c)).sum())
        close(l_s, l_full, "ShardedToAllLinear loss")
        close(dx_s, np.asarray(dx_full)[:, cols(IN)], "ShardedToAllLinear d/dx")
        close(gather_cols(g_s["weight"]), g_full["weight"], "ShardedToAllLinear d/dweight gathered")
        if bias:
            close(g_s["bias"], g_full["bias"], "ShardedToAllLinear d/dbias")

    # The tensor-parallel MLP: all-to-sharded, a nonlinearity on the shard,
    # sharded-to-all; plain and compiled, with nn.value_and_grad.
    l1, l2 = linear(rng, IN, OUT), linear(rng, OUT, IN)
    mlp = nn.Sequential(l1, nn.ReLU(), l2)
    tp = nn.Sequential(shard_linear(l1, "all-to-sharded"), nn.ReLU(), shard_linear(l2, "sharded-to-all"))
    x = kc.array(normal(rng, B, IN))
    t = kc.array(normal(rng, B, IN))
    close(tp(x), mlp(x), "tensor-parallel MLP forward")
    close(kc.compile(tp)(x), mlp(x), "tensor-parallel MLP forward, compiled")

    def loss(model):
        return lambda x: ((model(x) - t) ** 2).mean()

    def mse(y):
        return ((y - t) ** 2).mean()

    l_full, g_full, dx_full = value_and_grads(mlp, x, mse)
    l_tp, g_tp, dx_tp = value_and_grads(tp, x, mse)
    close(l_tp, l_full, "tensor-parallel MLP loss")
    close(dx_tp, dx_full, "tensor-parallel MLP d/dx")
    close(gather_rows(g_tp["layers.0.weight"]), g_full["layers.0.weight"], "tensor-parallel MLP d/dW1")
    close(gather_rows(g_tp["layers.0.bias"]), g_full["layers.0.bias"], "tensor-parallel MLP d/db1")
    close(gather_cols(g_tp["layers.2.weight"]), g_full["layers.2.weight"], "tensor-parallel MLP d/dW2")
    close(g_tp["layers.2.bias"], g_full["layers.2.bias"], "tensor-parallel MLP d/db2")
    value, grads = nn.value_and_grad(tp, lambda x: mse(tp(x)))(x)
    close(value, l_full, "tensor-parallel MLP loss through nn.value_and_grad")
    close(grads["layers"][0]["weight"], np.asarray(g_full["layers.0.weight"])[cols(OUT)],
          "tensor-parallel MLP d/dW1 through nn.value_and_grad")

    # Layers made directly have the member's shapes; bad sizes name the layer.
    assert nn.AllToShardedLinear(IN, OUT, group=world).weight.shape == (OUT // N, IN)
    assert nn.ShardedToAllLinear(IN, OUT, bias=False, group=world).weight.shape == (OUT, IN // N)
    expect_error(ValueError, "[AllToShardedLinear]", lambda: nn.AllToShardedLinear(IN, N * 4 + 1, group=world),
                 "AllToShardedLinear with output features the group does not divide")
    expect_error(ValueError, "[ShardedToAllLinear]", lambda: nn.ShardedToAllLinear(N * 4 + 1, OUT, group=world),
                 "ShardedToAllLinear with input features the group does not divide")


QUANT_MODES = [("affine", 64, 4), ("affine", 32, 8), ("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)]


def check_quantized():
    rng = np.random.default_rng(11)
    IN, OUT, B = 384, 24, 4  # IN / N is a whole number of quantization groups
    x = kc.array(normal(rng, B, IN))
    c = kc.array(normal(rng, B, OUT))
    for mode, gs, bits in QUANT_MODES:
        what = f"{mode} {bits}-bit"
        q = linear(rng, IN, OUT).to_quantized(group_size=gs, bits=bits, mode=mode)
        y = np.asarray(q(x))
        dx = np.asarray(kc.grad(lambda x: (q(x) * c).sum())(x))

        a2s = shard_linear(q, "all-to-sharded")
        assert isinstance(a2s, nn.QuantizedAllToShardedLinear), type(a2s)
        assert (a2s.mode, a2s.group_size, a2s.bits) == (mode, gs, bits), a2s
        assert ("biases" in a2s) == (mode == "affine") and "bias" in a2s
        assert a2s.weight.shape == (OUT // N, q.weight.shape[1]), a2s.weight.shape
        close(a2s(x), y[:, cols(OUT)], f"QuantizedAllToShardedLinear {what} forward")
        c_r = c[:, cols(OUT)]
        close(kc.grad(lambda x: (a2s(x) * c_r).sum())(x), dx, f"QuantizedAllToShardedLinear {what} d/dx")

        s2a = shard_linear(q, "sharded-to-all")
        assert isinstance(s2a, nn.QuantizedShardedToAllLinear), type(s2a)
        assert (s2a.mode, s2a.group_size, s2a.bits) == (mode, gs, bits), s2a
        assert s2a.scales.shape == (OUT, IN // N // gs), s2a.scales.shape
        x_r = x[:, cols(IN)]
        close(s2a(x_r), y, f"QuantizedShardedToAllLinear {what} forward")
        close(kc.grad(lambda x: (s2a(x) * c).sum())(x_r), dx[:, cols(IN)],
              f"QuantizedShardedToAllLinear {what} d/dx")
        # The quantized parameters stay frozen, as QuantizedLinear's.
        assert not any(k in dict(tree_flatten(s2a.trainable_parameters())) for k in ("weight", "scales"))

    # The two chained, as a quantized tensor-parallel MLP.
    q1 = linear(rng, IN, 48).to_quantized(group_size=32, bits=4)
    q2 = linear(rng, 48 * 8, IN).to_quantized(group_size=32, bits=8)  # 384 inputs for the second layer
    up = linear(rng, 48, 48 * 8)

    def full(x):
        return q2(nn.silu(up(nn.silu(q1(x)))))

    # q1 all-to-sharded gives this rank's 48/N features (gathered for the
    # dense layer between, run whole); q2 takes this rank's slice of its
    # input features and sums over the group.
    s1, s2 = shard_linear(q1, "all-to-sharded"), shard_linear(q2, "sharded-to-all")

    def sharded(x):
        h = D.all_gather(nn.silu(s1(x)).T).T  # (B, 48) on every rank
        return s2(nn.silu(up(h))[:, cols(48 * 8)])

    close(sharded(x), full(x), "quantized layers chained")

    expect_error(ValueError, "[QuantizedAllToShardedLinear]",
                 lambda: nn.QuantizedAllToShardedLinear(IN, N * 8 + 1, group=world),
                 "QuantizedAllToShardedLinear with output features the group does not divide")


def check_segments():
    rng = np.random.default_rng(12)
    IN, D_, B = 24, 12, 3
    x = kc.array(normal(rng, B, IN))

    # A fused QKV projection (segments=3): each rank keeps its slice of each
    # of Q, K and V, so its output is [q_r | k_r | v_r].
    qkv = linear(rng, IN, 3 * D_)
    W, b = np.asarray(qkv.weight), np.asarray(qkv.bias)
    y = np.asarray(qkv(x))
    want = np_shard(y, 1, R, N, [D_, 2 * D_])
    c = normal(rng, B, 3 * D_)
    _, g_full, dx_full = value_and_grads(qkv, x, lambda y: (y * kc.array(c)).sum())
    s = shard_linear(qkv, "all-to-sharded", segments=3)
    close(s.weight, np_shard(W, 0, R, N, [D_, 2 * D_]), "fused qkv weight shard", tol=0)
    close(s.bias, np_shard(b, 0, R, N, [D_, 2 * D_]), "fused qkv bias shard", tol=0)
    close(s(x), want, "fused qkv all-to-sharded, segments=3")
    c_r = kc.array(np_shard(c, 1, R, N, [D_, 2 * D_]))
    _, g_s, dx_s = value_and_grads(s, x, lambda y: (y * c_r).sum())
    close(dx_s, dx_full, "fused qkv d/dx")
    close(g_s["weight"], np_shard(np.asarray(g_full["weight"]), 0, R, N, [D_, 2 * D_]), "fused qkv d/dweight")

    # Grouped-query shapes: Q twice K's and V's size, as indices and as
    # fractions of the axis.
    gqa = linear(rng, IN, 48)  # q: 24, k: 12, v: 12
    y = np.asarray(gqa(x))
    for segments in ([24, 36], [0.5, 0.75]):
        s = shard_linear(gqa, "all-to-sharded", segments=segments)
        close(s(x), np_shard(y, 1, R, N, [24, 36]), f"GQA qkv all-to-sharded, segments={segments}")

    # Sharded-to-all over an input made of two concatenated parts.
    cat = linear(rng, 2 * D_, IN)
    xin = normal(rng, B, 2 * D_)
    s = shard_linear(cat, "sharded-to-all", segments=2)
    close(s(kc.array(np_shard(xin, 1, R, N, [D_]))), cat(kc.array(xin)), "sharded-to-all, segments=2")

    # shard_inplace keeps the module and its computation (no
    # communication): its output is this rank's features.
    m = nn.Linear(IN, 3 * D_)
    m.update(qkv.parameters())
    shard_inplace(m, "all-to-sharded", segments=3)
    assert type(m) is nn.Linear
    close(m.weight, np_shard(W, 0, R, N, [D_, 2 * D_]), "shard_inplace weight", tol=0)
    close(m(x), np_shard(np.asarray(qkv(x)), 1, R, N, [D_, 2 * D_]), "shard_inplace all-to-sharded forward")
    m = nn.Linear(IN, 3 * D_)
    m.update(qkv.parameters())
    shard_inplace(m, "sharded-to-all", group=world)
    close(m.weight, W[:, cols(IN)], "shard_inplace sharded-to-all weight", tol=0)
    close(m.bias, b, "shard_inplace sharded-to-all keeps the bias whole", tol=0)
    close(D.all_sum(m(x[:, cols(IN)])) - (N - 1) * m.bias, qkv(x), "shard_inplace sharded-to-all, summed by hand")

    # A sharding function over a conv stack: even layers keep output
    # channels (axis 0, with their bias), odd ones input channels (the last
    # axis) and sum over the group; their bias (none here) would be added N
    # times.
    class Conv(nn.Module):
        def __init__(self, cin, cout, bias=True, aggregate=False):
            super().__init__()
            self.aggregate = aggregate
            self.conv = nn.Conv2d(cin, cout, kernel_size=3, bias=bias)

        def __call__(self, x):
            x = self.conv(x)
            return D.all_sum(x) if self.aggregate else x

    def stack(aggregate):
        return nn.Sequential(Conv(3, 12), Conv(12, 12, False, aggregate), Conv(12, 12),
                             Conv(12, 3, False, aggregate))

    full, sharded = stack(False), stack(True)
    full.update(_random_like(full.parameters(), rng))
    sharded.update(full.parameters())

    def rule(path, weight):
        layer = int(path.split(".")[1])
        return (0, 1) if layer % 2 == 0 else -1

    shard_inplace(sharded, rule)
    xc = kc.array(normal(rng, 2, 11, 11, 3))
    close(sharded(xc), full(xc), "shard_inplace with a sharding function (conv stack)")

    # Bad input.
    lin = linear(rng, IN, 6 * N)
    expect_error(ValueError, "Sharding type 'all-to-all' not supported", lambda: shard_linear(lin, "all-to-all"),
                 "shard_linear with an unknown sharding")
    expect_error(ValueError, "into 5 segments", lambda: shard_linear(lin, "all-to-sharded", segments=5),
                 "shard_linear with segments that do not divide the axis")
    expect_error(ValueError, f"Cannot shard an axis of size 1 across {N} members",
                 lambda: shard_linear(lin, "all-to-sharded", segments=[1]),
                 "shard_linear with a segment the group does not divide")
    expect_error(ValueError, "should return None, an axis, or (axis, segments)",
                 lambda: shard_inplace(lin, lambda p, w: "rows"), "shard_inplace with a bad sharding function")


def _random_like(tree, rng):
    return tree_map(lambda a: kc.array(normal(rng, *a.shape) * 0.3), tree)


def _counting_all_sum():
    """Replaces kc.distributed.all_sum by a wrapper that counts its calls;
    returns the counter and a function restoring it."""
    calls = [0]
    original = D.all_sum

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    D.all_sum = counted

    def restore():
        D.all_sum = original

    return calls, restore


def rank_tree(rank):
    """Gradients of mixed dtypes, drawn from a seed of ``rank``."""
    rng = np.random.default_rng(100 + rank)
    return {"a": normal(rng, 5, 7), "b": [normal(rng, 3).astype(np.float16), normal(rng, 4, 2),
                                         normal(rng, 2)], "c": normal(rng, 11), "d": normal(rng, 6, 2)}


KILN_DTYPES = {"a": kc.float32, "b.0": kc.float16, "b.1": kc.bfloat16, "b.2": kc.float32, "c": kc.float32,
               "d": kc.bfloat16}


def to_kiln(tree):
    return tree_map_with_path(lambda p, v: kc.array(v).astype(KILN_DTYPES[p]), tree)


def check_average_gradients():
    # The mean over the group of every leaf, dtypes kept, against NumPy over
    # all ranks' values (rounded through each dtype as the ranks hold them).
    mine = to_kiln(rank_tree(R))
    all_flat = [dict((k, np.asarray(v.astype(kc.float32), np.float64)) for k, v in tree_flatten(to_kiln(rank_tree(r))))
                for r in range(N)]
    want = {k: np.mean([f[k] for f in all_flat], axis=0) for k in KILN_DTYPES}
    tol = {kc.float32: TOL, kc.float16: 2e-3, kc.bfloat16: 1e-2}
    n_leaves = len(KILN_DTYPES)
    for size, lo, hi in ((32 * 1024**2, 3, 3), (0, n_leaves, n_leaves), (24, 4, n_leaves - 1)):
        calls, restore = _counting_all_sum()
        try:
            out = nn.average_gradients(mine, all_reduce_size=size)
            kc.eval(out)
        finally:
            restore()
        # One bucket per dtype, one per array, or several buckets of a few
        # small arrays each.
        if not lo <= calls[0] <= hi:
            raise AssertionError(f"average_gradients all_reduce_size={size}: {calls[0]} all_sums, "
                                 f"expected {lo}..{hi}")
        assert isinstance(out, dict) and isinstance(out["b"], list) and len(out["b"]) == 3
        for k, v in tree_flatten(out):
            assert v.dtype == KILN_DTYPES[k], (k, v.dtype)
            close(v, want[k], f"average_gradients size={size} {k}", tol=tol[v.dtype])

    # Data parallelism: each rank's share of a global batch; the averaged
    # gradients are the global batch's.
    rng = np.random.default_rng(13)
    model = nn.Sequential(linear(rng, 10, 16), nn.ReLU(), linear(rng, 16, 4))
    X, Y = normal(rng, 4 * N, 10), rng.integers(0, 4, 4 * N).astype(np.int32)

    def loss(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    vg = nn.value_and_grad(model, loss)
    l_full, g_full = vg(kc.array(X), kc.array(Y))
    l_r, g_r = vg(kc.array(X[4 * R:4 * R + 4]), kc.array(Y[4 * R:4 * R + 4]))
    for size in (32 * 1024**2, 100, 0):
        avg = nn.average_gradients(g_r, all_reduce_size=size)
        for (k, got), (_, w) in zip(tree_flatten(avg), tree_flatten(g_full)):
            close(got, w, f"data-parallel gradient {k} (all_reduce_size={size})")
    close(D.all_sum(l_r) / N, l_full, "data-parallel loss")

    # Over a sub-group: the mean over its members only.
    sub = world.split(R % 2)
    members = [r for r in range(N) if r % 2 == R % 2]
    out = nn.average_gradients(mine, group=sub, all_reduce_size=64)
    for k, v in tree_flatten(out):
        w = np.mean([all_flat[r][k] for r in members], axis=0)
        close(v, w, f"average_gradients over a sub-group of {sub.size()} {k}", tol=tol[v.dtype])


def check_clip_grad_norm_sharded():
    shards = [{"a": normal(np.random.default_rng(200 + r), 4, 3), "b": normal(np.random.default_rng(300 + r), 5)}
              for r in range(N)]
    norm = np.sqrt(sum((s["a"].astype(np.float64) ** 2).sum() + (s["b"].astype(np.float64) ** 2).sum()
                       for s in shards))
    mine = {k: kc.array(v) for k, v in shards[R].items()}
    for max_norm in (1e9, 0.5):
        clipped, got_norm = clip_grad_norm_sharded(mine, max_norm, group=world)
        close(got_norm, norm, f"clip_grad_norm_sharded max_norm={max_norm} global norm")
        scale = min(max_norm / (norm + 1e-6), 1.0)
        for k in mine:
            close(clipped[k], shards[R][k] * scale, f"clip_grad_norm_sharded max_norm={max_norm} {k}")
    # Over a sub-group, the members' shards only.
    sub = world.split(R % 2)
    members = [r for r in range(N) if r % 2 == R % 2]
    sub_norm = np.sqrt(sum((shards[r]["a"].astype(np.float64) ** 2).sum() + (shards[r]["b"].astype(np.float64) ** 2).sum()
                           for r in members))
    _, got_norm = clip_grad_norm_sharded(mine, 1.0, group=sub)
    close(got_norm, sub_norm, "clip_grad_norm_sharded over a sub-group")


def mlp(seed):
    rng = np.random.default_rng(seed)
    return nn.Sequential(linear(rng, 8, 12), nn.Tanh(), linear(rng, 12, 6))


def check_fully_shard():
    full, fs_inner = mlp(14), mlp(14)
    fs = nn.fully_shard(fs_inner, group=world)
    assert isinstance(fs, nn.FullyShardedModule), type(fs)
    assert nn.fully_shard(fs) is fs
    # Parameters: axis 0 shards.
    full_flat = dict(tree_flatten(full.parameters()))
    for k, v in tree_flatten(fs.parameters()):
        assert k.startswith("module."), k
        close(v, np_shard(np.asarray(full_flat[k[len("module."):]]), 0, R, N), f"fully_shard shard {k}", tol=0)
    x = kc.array(normal(np.random.default_rng(15), 5, 8))
    close(fs(x), full(x), "fully_shard forward")

    # FSDP step: each rank's own data; a shard's gradient is the mean over
    # the ranks of the full gradient's rows, its clipped global norm that of
    # the full mean gradient; an SGD step on the shards gives the shards of
    # the full model's step on the global batch.
    data = [(normal(np.random.default_rng(400 + r), 4, 8), normal(np.random.default_rng(500 + r), 4, 6))
            for r in range(N)]

    def loss_of(model):
        return lambda x, t: ((model(x) - t) ** 2).mean()

    full_vg = nn.value_and_grad(full, loss_of(full))
    per_rank = [dict(tree_flatten(full_vg(kc.array(a), kc.array(t))[1])) for a, t in data]
    mean_grad = {k: np.mean([np.asarray(g[k], np.float64) for g in per_rank], axis=0) for k in per_rank[0]}
    loss, g_fs = nn.value_and_grad(fs, loss_of(fs))(kc.array(data[R][0]), kc.array(data[R][1]))
    g_flat = dict(tree_flatten(g_fs))
    assert sorted(g_flat) == sorted("module." + k for k in mean_grad), sorted(g_flat)
    for k, v in g_flat.items():
        close(v, np_shard(mean_grad[k[len("module."):]], 0, R, N), f"fully_shard gradient {k}")

    max_norm = 0.05
    full_norm = np.sqrt(sum((g ** 2).sum() for g in mean_grad.values()))
    assert full_norm > max_norm, full_norm  # the clip does something
    clipped, norm = clip_grad_norm_sharded(g_fs, max_norm, group=world)
    close(norm, full_norm, "fully_shard clipped global norm")
    full_clipped, full_norm_k = optim.clip_grad_norm(
        _unflatten({k: kc.array(v.astype(np.float32)) for k, v in mean_grad.items()}), max_norm)
    close(full_norm_k, full_norm, "clip_grad_norm of the full mean gradient")
    opt_fs, opt_full = optim.SGD(learning_rate=0.5), optim.SGD(learning_rate=0.5)
    opt_fs.update(fs, clipped)
    opt_full.update(full, full_clipped)
    kc.eval(fs.parameters(), full.parameters())
    full_flat = dict(tree_flatten(full.parameters()))
    for k, v in tree_flatten(fs.parameters()):
        close(v, np_shard(np.asarray(full_flat[k[len("module."):]]), 0, R, N), f"fully_shard after a step {k}")
    close(fs(x), full(x), "fully_shard forward after a step")

    # compute_dtype: the gathered parameters are cast for the call; the
    # gradients come back in the shards' dtype.
    half_full = mlp(14)
    half_full.update(kiln_tree_cast(half_full.parameters(), kc.bfloat16))
    fs16 = nn.fully_shard(mlp(14), group=world, compute_dtype=kc.bfloat16)
    close(fs16(x), half_full(x), "fully_shard compute_dtype=bfloat16 forward", tol=1e-2)
    _, g16 = nn.value_and_grad(fs16, lambda x: fs16(x).astype(kc.float32).sum())(x)
    assert all(v.dtype == kc.float32 for _, v in tree_flatten(g16)), [v.dtype for _, v in tree_flatten(g16)]

    # Bad input names the function and the parameter.
    expect_error(ValueError, "[fully_shard] Cannot shard parameter 'weight'",
                 lambda: nn.fully_shard(nn.Linear(4, N * 2 + 1), group=world), "fully_shard of an undividable axis")

    class Scalar(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = kc.array(1.0)

    expect_error(ValueError, "[fully_shard] Cannot shard parameter 's': it is a scalar",
                 lambda: nn.fully_shard(Scalar(), group=world), "fully_shard of a scalar parameter")


def _unflatten(flat):
    return tree_unflatten(list(flat.items()))


def kiln_tree_cast(tree, dtype):
    return tree_map(lambda a: a.astype(dtype), tree)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        globals()["check_" + name]()
        print(f"ok {name}", flush=True)
