"""nn.Module: the dict-backed parameter API, against MLX's behaviour."""

import numpy as np
import pytest

import kiln.core as mx
import kiln.nn as nn
from kiln.utils import tree_flatten


class Affine(nn.Module):
    def __init__(self, n_in, n_out, bias=True):
        super().__init__()
        self.weight = mx.random.normal((n_out, n_in))
        if bias:
            self.bias = mx.random.normal((n_out,))
        self.n_in = n_in

    def __call__(self, x):
        y = x @ self.weight.T
        return y + self.bias if "bias" in self else y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [Affine(4, 8), Affine(8, 8)]
        self.head = {"out": Affine(8, 2, bias=False)}
        self.scale = mx.array(2.0)
        self._hidden = mx.array(1.0)

    def __call__(self, x):
        for b in self.blocks:
            x = mx.tanh(b(x))
        return self.head["out"](x) * self.scale


def names(tree):
    return sorted(k for k, _ in tree_flatten(tree))


def test_attributes_split_between_items_and_plain_attributes():
    m = Affine(3, 2)
    assert set(m.keys()) == {"weight", "bias"}
    assert m.n_in == 3 and "n_in" not in m
    m.n_in = mx.array(3)  # an array attribute becomes an item
    assert "n_in" in m and "n_in" not in m.__dict__
    del m.n_in
    assert "n_in" not in m
    with pytest.raises(AttributeError, match="nope"):
        m.nope


def test_parameters_children_and_module_walks():
    net = Net()
    assert names(net.parameters()) == [
        "blocks.0.bias", "blocks.0.weight", "blocks.1.bias", "blocks.1.weight",
        "head.out.weight", "scale",
    ]
    ch = net.children()
    assert isinstance(ch["blocks"], list) and ch["blocks"][0] is net.blocks[0]
    assert ch["head"]["out"] is net.head["out"]
    paths = [p for p, _ in net.named_modules()]
    assert paths[0] == "" and sorted(paths[1:]) == ["blocks.0", "blocks.1", "head.out"]
    assert len(net.modules()) == 4
    leaves = tree_flatten(net.leaf_modules(), is_leaf=nn.Module.is_module)
    assert sorted(k for k, _ in leaves) == ["blocks.0", "blocks.1", "head.out"]
    assert net.state is net


def test_freeze_unfreeze_and_trainable_parameters():
    net = Net()
    net.freeze()
    assert names(net.trainable_parameters()) == []
    net.unfreeze()
    assert names(net.trainable_parameters()) == names(net.parameters())
    net.blocks[0].freeze(keys="bias")
    assert "blocks.0.bias" not in names(net.trainable_parameters())
    net.freeze(recurse=False)  # only the module's own parameters
    assert "scale" not in names(net.trainable_parameters())
    assert "blocks.1.weight" in names(net.trainable_parameters())
    with pytest.raises(KeyError, match="foo"):
        net.freeze(keys=["foo"], strict=True)
    net.unfreeze(keys=["bias"])
    assert "blocks.0.bias" in names(net.trainable_parameters())


def test_strict_freeze_checks_keys_against_the_whole_model():
    # head.out has no bias, but the blocks do: the key exists in the model.
    net = Net()
    net.freeze(keys="bias", strict=True)
    assert not any(k.endswith("bias") for k in names(net.trainable_parameters()))
    net.unfreeze(keys=["bias"], strict=True)
    assert "blocks.1.bias" in names(net.trainable_parameters())
    for method in (net.freeze, net.unfreeze):
        with pytest.raises(KeyError, match="not_a_member"):
            method(keys="not_a_member", strict=True)
    # Without recursion the module itself must hold the key.
    with pytest.raises(KeyError, match="bias"):
        net.freeze(keys="bias", strict=True, recurse=False)


def test_update_apply_and_strictness(rng):
    net = Net()
    new = np.asarray(rng.standard_normal((8, 4)), np.float32)
    net.update({"blocks": [{"weight": mx.array(new)}]})
    np.testing.assert_array_equal(np.array(net.blocks[0].weight), new)
    with pytest.raises(ValueError, match="foo"):
        net.update({"foo": mx.zeros((1,))})
    net.update({"foo": mx.zeros((1,))}, strict=False)
    assert "foo" not in net
    before = np.array(net.scale)
    net.apply(lambda p: p * 2)
    np.testing.assert_allclose(np.array(net.scale), before * 2)
    net.apply(lambda p: p + 1, filter_fn=lambda m, k, v: k == "bias")
    net.set_dtype(mx.float16)
    assert all(v.dtype == mx.float16 for _, v in tree_flatten(net.parameters()))
    replacement = Affine(8, 2, bias=False)
    net.update_modules({"head": {"out": replacement}})
    assert net.head["out"] is replacement
    seen = []
    net.apply_to_modules(lambda path, m: seen.append(path))
    assert sorted(seen) == ["", "blocks.0", "blocks.1", "head.out"]


def test_train_eval_modes_propagate():
    net = Net()
    assert net.training and net.blocks[1].training
    net.eval()
    assert not net.training and not net.blocks[1].training
    net.train()
    assert net.head["out"].training


def test_load_weights_strict_checks_names_and_shapes():
    net = Net()
    weights = [(k, v + 1) for k, v in tree_flatten(net.parameters())]
    net.load_weights(weights)
    with pytest.raises(ValueError, match="Missing"):
        net.load_weights(weights[1:])
    with pytest.raises(ValueError, match="not in model"):
        net.load_weights(weights + [("extra", mx.zeros((1,)))])
    bad = [(k, mx.zeros((1,)) if k == "scale" else v) for k, v in weights]
    with pytest.raises(ValueError, match="shape"):
        net.load_weights(bad)
    net.load_weights(weights[:1], strict=False)
    with pytest.raises(TypeError):
        net.load_weights(42)


def test_value_and_grad_matches_manual_grad(rng):
    net = Net()
    x = mx.array(rng.standard_normal((5, 4)).astype(np.float32))

    def loss(x):
        return (net(x) ** 2).mean()

    value, grads = nn.value_and_grad(net, loss)(x)
    params = net.trainable_parameters()

    def by_params(p):
        net.update(p)
        return loss(x)

    ref_value, ref_grads = mx.value_and_grad(by_params)(params)
    net.update(params)
    np.testing.assert_allclose(np.array(value), np.array(ref_value), rtol=1e-6)
    for (k, g), (_, r) in zip(tree_flatten(grads), tree_flatten(ref_grads)):
        np.testing.assert_allclose(np.array(g), np.array(r), rtol=1e-5, err_msg=k)
    # The model holds its own parameters again, not the transform's inputs.
    for (_, a), (_, b) in zip(tree_flatten(net.parameters()), tree_flatten(params)):
        assert a is b
    # Frozen parameters get no gradient.
    net.blocks[0].freeze()
    _, grads = nn.value_and_grad(net, loss)(x)
    assert "blocks.0.weight" not in names(grads)


def test_checkpoint_gives_the_same_gradients(rng):
    net = Net()
    x = mx.array(rng.standard_normal((3, 4)).astype(np.float32))
    plain = nn.value_and_grad(net, lambda x: net(x).sum())(x)
    ckpt_fn = nn.utils.checkpoint(net)
    ckpt = nn.value_and_grad(net, lambda x: ckpt_fn(x).sum())(x)
    np.testing.assert_allclose(np.array(plain[0]), np.array(ckpt[0]), rtol=1e-6)
    for (k, a), (_, b) in zip(tree_flatten(plain[1]), tree_flatten(ckpt[1])):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, err_msg=k)


def test_compile_captures_module_state(rng):
    mx.random.seed(3)
    net = Net()
    x = mx.array(rng.standard_normal((2, 4)).astype(np.float32))

    def step(x):
        loss, grads = nn.value_and_grad(net, lambda x: (net(x) ** 2).sum())(x)
        net.update({k: v for k, v in _sgd(net.trainable_parameters(), grads).items()})
        return loss

    state = [net.state]
    compiled = mx.compile(step, inputs=state, outputs=state)
    ref = Net()
    ref.update(net.parameters())
    losses = [compiled(x).item() for _ in range(3)]

    def ref_step(x):
        loss, grads = nn.value_and_grad(ref, lambda x: (ref(x) ** 2).sum())(x)
        ref.update(_sgd(ref.trainable_parameters(), grads))
        return loss

    ref_losses = [ref_step(x).item() for _ in range(3)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    assert losses[2] < losses[0]


def _sgd(params, grads, lr=1e-3):
    from kiln.utils import tree_map

    return tree_map(lambda p, g: p - lr * g, params, grads)


def test_sequential_calls_in_order():
    seq = nn.Sequential(Affine(4, 3), mx.tanh, Affine(3, 2))
    x = mx.random.normal((2, 4))
    ref = seq.layers[2](mx.tanh(seq.layers[0](x)))
    np.testing.assert_allclose(np.array(seq(x)), np.array(ref), rtol=1e-6)
    assert names(seq.parameters()) == [
        "layers.0.bias", "layers.0.weight", "layers.2.bias", "layers.2.weight"
    ]
    assert "Sequential(" in repr(seq) and "(layers.0): Affine(" in repr(seq)


def test_filtered_items_inside_containers_keep_their_place():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.things = [mx.zeros((2,)), 3, mx.ones((1,))]
            self.table = {"a": 1, "b": mx.zeros((1,))}

    h = Holder()
    p = h.parameters()
    assert p["things"][1] == {} and p["table"]["a"] == {}
    assert names(p) == ["table.b", "things.0", "things.2"]
    assert h.children() == {"things": [{}, {}, {}], "table": {"a": {}, "b": {}}}
    h.update(h.parameters())  # placeholders update nothing
    assert h.things[1] == 3 and h.table["a"] == 1
    seq = nn.Sequential(Affine(2, 2), mx.tanh)
    seq.update(seq.parameters())
    assert seq.layers[1] is mx.tanh
