import numpy as np
import pytest

import kiln.core as kc
import kiln.nn as nn
from conftest import check, rand


def test_grad_simple(rng):
    x = rand(rng, (5,))
    g = kc.grad(lambda a: kc.sum(kc.sin(a)))(kc.array(x))
    check(g, np.cos(x), rtol=1e-5)


def test_value_and_grad_argnums_and_pytrees(rng):
    x, y = rand(rng, (3,)), rand(rng, (3,))

    def f(params, scale):
        return kc.sum(params["w"] * params["b"][0]) * scale

    p = {"w": kc.array(x), "b": [kc.array(y)]}
    v, g = kc.value_and_grad(f)(p, 2.0)
    check(v, 2 * (x * y).sum(), rtol=1e-5)
    assert set(g) == {"w", "b"} and isinstance(g["b"], list)
    check(g["w"], 2 * y, rtol=1e-5)
    check(g["b"][0], 2 * x, rtol=1e-5)

    f2 = lambda a, b: kc.sum(a * b)
    ga, gb = kc.grad(f2, argnums=[0, 1])(kc.array(x), kc.array(y))
    check(ga, y)
    check(gb, x)
    gb_only = kc.grad(f2, argnums=1)(kc.array(x), kc.array(y))
    check(gb_only, x)


def test_argnames(rng):
    x, y = rand(rng, (2,)), rand(rng, (2,))
    f = lambda a, b=None: kc.sum(a * b)
    v, (gpos, gkw) = kc.value_and_grad(f, argnames=["b"])(kc.array(x), b=kc.array(y))
    assert gpos is None
    check(gkw["b"], x)
    g0, gkw = kc.grad(f, argnums=0, argnames="b")(kc.array(x), b=kc.array(y))
    check(g0, y)
    check(gkw["b"], x)
    with pytest.raises(ValueError):
        kc.grad(f, argnames=["b"])(kc.array(x))


def test_aux_outputs(rng):
    x = rand(rng, (3,))
    (loss, aux), g = kc.value_and_grad(lambda a: (kc.sum(a * a), a + 1))(kc.array(x))
    check(aux, x + 1)
    check(g, 2 * x)


def test_grad_errors():
    with pytest.raises(ValueError):
        kc.grad(lambda a: a * 2)(1.0)
    with pytest.raises(ValueError):
        kc.grad(lambda a: a * 2)(kc.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        kc.grad(lambda a: kc.sum(a), argnums=3)(kc.array([1.0]))
    with pytest.raises(ValueError):
        kc.grad(lambda a: "x")(kc.array([1.0]))


def test_vjp_jvp(rng):
    x = rand(rng, (4,))
    t = rand(rng, (4,))
    outs, vjps = kc.vjp(lambda a: kc.exp(a), [kc.array(x)], [kc.array(t)])
    check(outs[0], np.exp(x), rtol=1e-5)
    check(vjps[0], t * np.exp(x), rtol=1e-5)
    outs, jvps = kc.jvp(
        lambda a, b: a * b, [kc.array(x), kc.array(t)], [kc.ones(4), kc.zeros(4)]
    )
    check(jvps[0], t)


def test_vmap(rng):
    x = rand(rng, (3, 4))
    y = rand(rng, (4,))
    f = kc.vmap(lambda a, b: a * b + kc.sum(a))
    check(
        f(kc.array(x), kc.broadcast_to(kc.array(y), (3, 4))),
        x * y + x.sum(1, keepdims=True),
        rtol=1e-5,
    )
    g = kc.vmap(lambda a, b: a * b, in_axes=(1, None), out_axes=1)
    check(g(kc.array(x), kc.array(x[:, 0])), x * x[:, :1], rtol=1e-5)
    h = kc.vmap(lambda d: {"s": kc.sum(d["a"])}, in_axes=({"a": -1},))
    check(h({"a": kc.array(x)})["s"], x.sum(0), rtol=1e-5)
    with pytest.raises(ValueError):
        kc.vmap(lambda a: a, in_axes=(0, 0))(kc.array(x))


def test_vmap_axes_as_trees(rng):
    a, b, c = rand(rng, (2, 4)), rand(rng, (4, 2)), rand(rng, (4, 2))

    def f(t):
        return (t["a"] + t["b"][0]) * t["b"][1]

    want = (a + b.T) * c.T
    # A lone argument's axes match the argument itself (here a dict),
    # to any depth: an int covers the subtree under it.
    tree = {"a": kc.array(a), "b": (kc.array(b), kc.array(c))}
    check(kc.vmap(f, in_axes={"a": 0, "b": (1, 1)})(tree), want, rtol=1e-6)
    check(kc.vmap(f, in_axes={"a": 0, "b": 1})(tree), want, rtol=1e-6)
    check(kc.vmap(f, in_axes={"a": -2, "b": -1})(tree), want, rtol=1e-6)
    # Several arguments: the axes match the tuple of them.
    g = kc.vmap(lambda x, t: x * t[0], in_axes=(None, [1]))
    check(g(kc.array(c[:, 0]), [kc.array(b)]), c[:, 0] * b.T, rtol=1e-6)

    def h(x, y):
        return {"s": x + y, "p": x * y}

    out = kc.vmap(h, in_axes=(0, 1), out_axes={"s": 1, "p": -2})(kc.array(a), kc.array(b))
    check(out["s"], (a + b.T).T, rtol=1e-6)
    check(out["p"], a * b.T, rtol=1e-6)


def test_vmap_one_entry_axes_for_one_argument_or_output(rng):
    # (1,) around the axis of a lone array output (or argument), as MLX
    # takes it; a lone dict argument's axes may be wrapped the same way.
    a, b = rand(rng, (2, 3, 4)), rand(rng, (4, 5))
    mm = kc.vmap(kc.matmul, in_axes=(1, None), out_axes=(1,))
    check(mm(kc.array(a), kc.array(b)), np.moveaxis(np.moveaxis(a, 1, 0) @ b, 0, 1), rtol=1e-5)
    check(kc.vmap(lambda x: 2 * x, in_axes=(1,))(kc.array(a)), 2 * np.moveaxis(a, 1, 0))
    d = kc.vmap(lambda t: t["x"].sum(), in_axes=({"x": 2},))({"x": kc.array(a)})
    check(d, a.sum((0, 1)), rtol=1e-5)


def test_vmap_bad_axes_raise(rng):
    x = kc.array(rand(rng, (3, 2)))

    def pair(u, v):
        return {"s": u + v, "p": u * v}

    def tree_fn(t):
        return t["a"] + t["b"][0]

    tree = {"a": x, "b": (x, x)}
    bad = [
        (lambda: kc.vmap(tree_fn, in_axes={"a": 0, "b": ((0, 0), 0)})(tree), "an axis must be an int or None"),
        (lambda: kc.vmap(tree_fn, in_axes={"a": 0})(tree), "no entry for key 'b'"),
        (lambda: kc.vmap(tree_fn, in_axes={"a": 0, "b": (0, 0, 0)})(tree), "3 entries for 2"),
        (lambda: kc.vmap(pair, out_axes=(0, 1))(x, x), "tree matching the dict"),
        (lambda: kc.vmap(pair, out_axes={"s": 0, "c": 1})(x, x), "no entry for key 'p'"),
        (lambda: kc.vmap(lambda u: u, in_axes=2)(x), r"axis 2 is out of range.*\(3, 2\)"),
        (lambda: kc.vmap(lambda u: u, in_axes=-3)(x), "axis -3 is out of range"),
        (lambda: kc.vmap(lambda u: u, out_axes=-4)(x), r"axis -4 .*\(2,\) per example"),
        (lambda: kc.vmap(lambda u: u, in_axes=1.5)(x), "an axis must be an int or None"),
    ]
    for call, message in bad:
        with pytest.raises(ValueError, match=r"\[vmap\] (in|out)_axes.*" + message):
            call()
    # The last valid axes on either side.
    check(kc.vmap(lambda u: u, in_axes=-2, out_axes=-2)(x), np.array(x))
    check(kc.vmap(lambda u: u, in_axes=1, out_axes=1)(x), np.array(x))


def test_compile(rng):
    calls = []

    def f(a, b, scale=1.0):
        calls.append(1)
        return {"out": kc.exp(a) * b * scale}

    cf = kc.compile(f)
    x, y = rand(rng, (3,)), rand(rng, (3,))
    r = cf(kc.array(x), kc.array(y), scale=2.0)
    check(r["out"], np.exp(x) * y * 2, rtol=1e-5)
    n = len(calls)
    r = cf(kc.array(y), kc.array(x), scale=2.0)
    check(r["out"], np.exp(y) * x * 2, rtol=1e-5)
    assert len(calls) == n  # cached
    cf(kc.array(x), kc.array(y), scale=3.0)
    assert len(calls) > n  # new constant: new trace
    with pytest.raises(ValueError, match="compile"):
        cf(kc.array(x), kc.array(y), scale=object())


def test_compile_shapeless(rng):
    calls = []

    def f(a):
        calls.append(1)
        return kc.sin(a) * 2

    cf = kc.compile(f, shapeless=True)
    cf(kc.array(rand(rng, (3,))))
    n = len(calls)
    x = rand(rng, (7,))
    check(cf(kc.array(x)), np.sin(x) * 2, rtol=1e-5)
    assert len(calls) == n


def test_compile_arrays_only_calls_share_traces_with_other_calls(rng):
    # Array-only calls take a shortcut to their trace; calls with constants
    # or keywords must still get their own traces and results.
    calls = []

    def f(a, b=1.0):
        calls.append(1)
        return {"y": a * b}

    cf = kc.compile(f)
    x, y = rand(rng, (3,)), rand(rng, (3,))
    check(cf(kc.array(x), kc.array(y))["y"], x * y, rtol=1e-6)
    check(cf(kc.array(x), 2.0)["y"], x * 2, rtol=1e-6)
    check(cf(kc.array(x), b=kc.array(y))["y"], x * y, rtol=1e-6)
    check(cf(kc.array(x))["y"], x, rtol=1e-6)
    n = len(calls)
    check(cf(kc.array(y), kc.array(x))["y"], x * y, rtol=1e-6)
    check(cf(kc.array(y), 2.0)["y"], y * 2, rtol=1e-6)
    check(cf(kc.array(y))["y"], y, rtol=1e-6)
    assert len(calls) == n
    one = kc.compile(lambda a: a + 1)
    out = one(kc.array(x))
    assert isinstance(out, kc.array)
    check(out, x + 1, rtol=1e-6)
    check(kc.compile(lambda a: (a,))(kc.array(x))[0], x)


def test_compile_shapeless_reductions_without_keepdims(rng):
    calls = []

    def f(a):
        calls.append(1)
        return kc.sum(a, axis=1), a - kc.expand_dims(kc.mean(a, axis=-1), -1)

    cf = kc.compile(f, shapeless=True)
    cf(kc.array(rand(rng, (2, 3))))
    x = rand(rng, (5, 4))
    s, c = cf(kc.array(x))
    assert len(calls) == 1
    check(s, x.sum(axis=1), rtol=1e-5)
    check(c, x - x.mean(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)


_scale_by_two = kc.compile(lambda x: x * 2, shapeless=True)

# Functions whose gradients build zeros, broadcasts and index clamps from
# the traced shapes: a shapeless trace has to follow new shapes in all of
# them (checked against the uncompiled gradient at a second shape).
SHAPELESS_GRADS = {
    "sum": lambda x, i: kc.sum(x * x),
    "mean_exp": lambda x, i: kc.mean(kc.exp(x)),
    "max": lambda x, i: kc.max(x),
    "row_sums": lambda x, i: kc.sum(kc.sum(x, axis=1) ** 2),
    "softmax_column": lambda x, i: kc.sum(kc.softmax(x, axis=-1)[:, 0]),
    "logsumexp": lambda x, i: kc.sum(kc.logsumexp(x, axis=1)),
    "take_along_axis": lambda x, i: kc.sum(kc.exp(kc.take_along_axis(x, i, 1))),
    "negative_index": lambda x, i: kc.sum(kc.sin(x[:, -1])),
    "tail_slice": lambda x, i: kc.sum(kc.sin(x[:, 2:]) * x[:, :-2]),
    "reversed": lambda x, i: kc.sum(x[:, ::-1] * kc.arange(x.shape[1])[None]),
    "zeros_like": lambda x, i: kc.sum(kc.maximum(x, kc.zeros_like(x) + 0.5)),
    "constants": lambda x, i: kc.sum(x ** 2 / 3 - 2 ** x + kc.maximum(x, 0.5) * 4),
    "reshape": lambda x, i: kc.sum(kc.sin(x.reshape(-1)) ** 3),
    "concatenate": lambda x, i: kc.sum(kc.concatenate([x, x * x], axis=0) ** 3),
    "stack": lambda x, i: kc.sum(kc.stack([x, kc.sin(x)], axis=0) ** 2),
    "split_unused_piece": lambda x, i: kc.sum(kc.exp(kc.split(x, [2], axis=1)[1])),
    "topk": lambda x, i: kc.sum(kc.topk(x, 2, axis=1) ** 2),
    # Shapeless-compiled functions inside: nn.gelu is one, as in MLX.
    "nested_compiled_gelu": lambda x, i: kc.sum(nn.gelu(x) * 3),
    "nested_compiled_scale": lambda x, i: kc.sum(_scale_by_two(x) ** 2),
    "attention": lambda x, i: kc.sum(kc.fast.scaled_dot_product_attention(
        x[None, None], x[None, None], x[None, None], scale=0.5)),
    "std": lambda x, i: kc.sum(kc.std(x, axis=0)),
    # The causal mask follows both lengths: here 2 queries (the last rows)
    # against all n keys.
    "causal_attention": lambda x, i: kc.sum(kc.fast.scaled_dot_product_attention(
        x[None, None, -2:], x[None, None], kc.sin(x)[None, None], scale=0.5,
        mask="causal") ** 2),
}


@pytest.mark.parametrize("name", sorted(SHAPELESS_GRADS))
def test_compile_shapeless_gradients_follow_new_shapes(rng, name):
    f = SHAPELESS_GRADS[name]
    g = kc.grad(f)
    cg = kc.compile(g, shapeless=True)
    for n in (7, 9, 4):
        x = kc.array(rand(rng, (5, n)) + 0.1)
        i = kc.array(rng.integers(-n, n, (5, 3)).astype(np.int32))
        want = np.array(g(x, i))
        if name == "reversed" and n != 7:
            # arange(x.shape[1]) reads the shape in Python: it stays the
            # traced length, so the product cannot broadcast.
            with pytest.raises(ValueError):
                cg(x, i)
            continue
        got = cg(x, i)
        assert got.shape == want.shape
        check(got, want, rtol=1e-5, atol=1e-6)


def test_compile_shapeless_conv_weight_gradient(rng):
    # A grouped, strided convolution's weight gradient (one node on the
    # input and the cotangent) follows new batch, spatial and channel
    # sizes under a shapeless compile.
    def gw(x, w):
        conv = lambda w: kc.conv2d(x, w, stride=2, padding=1, groups=2)
        return kc.grad(lambda w: kc.sum(conv(w) ** 2))(w)

    cgw = kc.compile(gw, shapeless=True)
    for xs, ws in (((2, 9, 9, 4), (4, 3, 3, 2)), ((3, 11, 7, 4), (4, 3, 3, 2)),
                   ((2, 8, 6, 6), (6, 3, 3, 3))):
        x, w = kc.array(rand(rng, xs)), kc.array(rand(rng, ws))
        want = np.array(gw(x, w))
        got = cgw(x, w)
        assert got.shape == ws
        check(got, want, rtol=1e-5, atol=1e-6)


def test_compile_shapeless_vmapped_and_forward_mode_gradients(rng):
    g = lambda x: kc.sum(kc.exp(x) * kc.zeros_like(x) + x * x * x)
    f = lambda x: g(x) + kc.sum(x.reshape(-1, 1) ** 2)
    per_row = kc.vmap(kc.grad(g))
    hvp = lambda x, v: kc.jvp(kc.grad(f), [x], [v])[1][0]
    c_rows = kc.compile(per_row, shapeless=True)
    c_hvp = kc.compile(hvp, shapeless=True)
    for shape in ((3, 5), (4, 8)):
        x, v = kc.array(rand(rng, shape)), kc.array(rand(rng, shape))
        check(c_rows(x), 3 * np.array(x) ** 2, rtol=1e-5)
        check(c_hvp(x, v), hvp(x, v), rtol=1e-5)
        check(c_hvp(x, v), (6 * np.array(x) + 2) * np.array(v), rtol=1e-5)


def test_compile_shapeless_slices_keep_bounds_as_written(rng):
    cf = kc.compile(lambda x: (x[1:-1], x[-3:], x[:2], x[::-2], x[-1]),
                    shapeless=True)
    for n in (6, 9, 11):
        x = rand(rng, (n, 3))
        for got, want in zip(cf(kc.array(x)), (x[1:-1], x[-3:], x[:2],
                                                 x[::-2], x[-1])):
            check(got, want)


def test_compile_shapeless_reshape_infers_its_minus_one(rng):
    calls = []

    def f(x):
        calls.append(1)
        return kc.sum(x.reshape(-1, 4), axis=1), x.reshape(2, -1)

    cf = kc.compile(f, shapeless=True)
    for shape in ((4, 6), (8, 3), (2, 10)):
        x = rand(rng, shape)
        s, r = cf(kc.array(x))
        check(s, x.reshape(-1, 4).sum(axis=1), rtol=1e-5)
        check(r, x.reshape(2, -1))
    assert len(calls) == 1
    # A fixed target shape cannot follow: a clear error, not a wrong shape.
    fixed = kc.compile(lambda x: x.reshape(24), shapeless=True)
    check(fixed(kc.array(rand(rng, (4, 6)))).shape, (24,))
    with pytest.raises(ValueError, match="reshape"):
        fixed(kc.array(rand(rng, (6, 4))))
    # The gradient's reshape back takes the input's new shape, even one of
    # the same size.
    g = kc.compile(kc.grad(lambda x: kc.sum(x.reshape(-1) ** 2)), shapeless=True)
    for shape in ((4, 6), (6, 4), (5, 3)):
        x = rand(rng, shape)
        check(g(kc.array(x)), 2 * x, rtol=1e-6)


def test_compile_shapeless_concatenate_gradient_along_a_changing_axis(rng):
    # The gradient splits the cotangent like the primals, so the pieces
    # follow new extents along the axis (MLX raises here).
    def loss(x, y):
        return kc.sum(kc.concatenate([x, y], axis=1) ** 2 * 3)

    g = kc.compile(kc.grad(loss, argnums=(0, 1)), shapeless=True)
    for (r, n, m) in ((3, 4, 2), (3, 4, 2), (5, 4, 2), (3, 6, 2), (2, 1, 7)):
        x, y = rand(rng, (r, n)), rand(rng, (r, m))
        gx, gy = g(kc.array(x), kc.array(y))
        assert gx.shape == (r, n) and gy.shape == (r, m)
        check(gx, 6 * x, rtol=1e-6)
        check(gy, 6 * y, rtol=1e-6)


def test_compile_shapeless_vmap_with_an_unmapped_argument(rng):
    # The unmapped weight (in_axes None) and the constant line up with the
    # mapped operand as the op broadcasts them, so they follow its new
    # shape; so does the gradient of a power under vmap.
    f = kc.compile(kc.vmap(lambda a, w: a * w + 2.0, in_axes=(0, None)), shapeless=True)
    w = rand(rng, (3,))
    for b in (4, 6, 1):
        a = rand(rng, (b, 3))
        check(f(kc.array(a), kc.array(w)), a * w + 2.0, rtol=1e-6)
    g = kc.compile(kc.vmap(kc.grad(lambda a: kc.sum(a ** 3))), shapeless=True)
    for shape in ((4, 2, 3), (4, 5, 3), (2, 1, 3)):
        a = rand(rng, shape)
        check(g(kc.array(a)), 3 * a ** 2, rtol=1e-5)


def test_compile_shapeless_topk_keeps_the_top_of_a_new_size(rng):
    cf = kc.compile(lambda x: kc.topk(x, 3, axis=-1), shapeless=True)
    for n in (5, 9, 4):
        x = rand(rng, (2, n))
        check(np.sort(np.array(cf(kc.array(x))), axis=-1), np.sort(x, axis=-1)[:, -3:])


def test_compile_shapeless_slice_update_that_no_longer_fits(rng):
    # The window follows x; the update keeps its traced shape.
    def f(x, u):
        x[1:] = u
        return x

    cf = kc.compile(f, shapeless=True)
    x, u = rand(rng, (4, 2)), rand(rng, (3, 2))
    check(cf(kc.array(x), kc.array(u)), np.concatenate([x[:1], u]))
    with pytest.raises(ValueError, match="slice_update"):
        cf(kc.array(rand(rng, (6, 2))), kc.array(u))


def test_compile_random_state():
    def step():
        return kc.random.uniform(shape=(4,))

    cs = kc.compile(step, inputs=[kc.random.state], outputs=[kc.random.state])
    kc.random.seed(3)
    a = cs()
    b = cs()
    assert not np.allclose(np.array(a), np.array(b))
    kc.random.seed(3)
    check(cs(), a)


def test_compile_state_containers():
    state = {"w": kc.array([1.0, 2.0])}

    def step(x):
        state["w"] = state["w"] + x
        return kc.sum(state["w"])

    cs = kc.compile(step, inputs=[state], outputs=[state])
    assert cs(kc.array(1.0)).item() == 5.0
    assert cs(kc.array(1.0)).item() == 7.0
    assert state["w"].tolist() == [3.0, 4.0]


def test_compile_state_nested_trees():
    # Arrays in dicts inside lists inside dicts, in flatten order, updated in
    # place; an array in a tuple cannot be.
    state = {"layers": [{"w": kc.array([1.0]), "b": kc.array([2.0])}, {"w": kc.array([3.0])}],
             "meta": ("name", 3), "step": kc.array(0.0)}

    def step(x):
        for layer in state["layers"]:
            for k in layer:
                layer[k] = layer[k] * x
        state["step"] = state["step"] + 1
        return state["layers"][1]["w"]

    cs = kc.compile(step, inputs=[state], outputs=[state])
    cs(kc.array(2.0))
    cs(kc.array(3.0))
    assert [l[k].item() for l in state["layers"] for k in l] == [6.0, 12.0, 18.0]
    assert state["step"].item() == 2.0 and state["meta"] == ("name", 3)
    frozen = [(kc.array(1.0),)]
    bad = kc.compile(lambda x: x + frozen[0][0], inputs=[frozen], outputs=[frozen])
    with pytest.raises(ValueError, match="arrays in a tuple cannot be updated"):
        bad(kc.array(1.0))


def test_disable_compile():
    calls = []

    def f(a):
        calls.append(1)
        return a + 1

    cf = kc.compile(f)
    kc.disable_compile()
    try:
        cf(kc.array(1.0))
        cf(kc.array(1.0))
        assert len(calls) == 2
    finally:
        kc.enable_compile()


def test_grad_of_compile(rng):
    x = rand(rng, (5,))
    f = lambda a: kc.sum(kc.exp(a) * a)
    check(kc.grad(kc.compile(f))(kc.array(x)), kc.grad(f)(kc.array(x)), rtol=1e-5)


def test_custom_function(rng):
    @kc.custom_function
    def f(a, b):
        return a * b

    @f.vjp
    def f_vjp(primals, cotangent, output):
        a, b = primals
        return 10 * cotangent * b, 10 * cotangent * a

    x, y = rand(rng, (3,)), rand(rng, (3,))
    check(f(kc.array(x), kc.array(y)), x * y)
    ga, gb = kc.grad(lambda a, b: kc.sum(f(a, b)), argnums=[0, 1])(
        kc.array(x), kc.array(y)
    )
    check(ga, 10 * y, rtol=1e-5)
    check(gb, 10 * x, rtol=1e-5)

    @kc.custom_function
    def g(a):
        return kc.sin(a)

    @g.jvp
    def g_jvp(primals, tangents):
        # One argument: its tangent itself, as in MLX.
        return 3 * tangents

    _, t = kc.jvp(g, [kc.array(x)], [kc.ones(3)])
    check(t[0], 3 * np.ones(3))


def test_custom_function_rules_see_mlx_argument_forms():
    # One argument arrives as itself (an array, a list of arrays, an int
    # axis); several as a tuple; a single output's cotangent as itself.
    seen = {}

    @kc.custom_function
    def one(x):
        return x * 2

    @one.vjp
    def one(primals, cotangent, output):
        seen["vjp"] = (type(primals), type(cotangent), type(output))
        return cotangent * 5

    @one.jvp
    def one(primals, tangents):
        seen["jvp"] = (type(primals), type(tangents))
        return tangents * 7

    @one.vmap
    def one(inputs, axes):
        seen["vmap"] = (type(inputs), axes)
        return inputs * 2, axes

    x = kc.array([1.0, 2.0])
    check(kc.grad(lambda a: kc.sum(one(a)))(x), [5.0, 5.0])
    check(kc.jvp(one, [x], [kc.ones(2)])[1][0], [7.0, 7.0])
    check(kc.vmap(one)(kc.ones((3, 2))), np.full((3, 2), 2.0))
    assert seen == {"vjp": (kc.array, kc.array, kc.array), "jvp": (kc.array, kc.array), "vmap": (kc.array, 0)}

    @kc.custom_function
    def pair(xs):
        return [xs[0] * xs[1], xs[1]]

    @pair.vjp
    def pair(primals, cotangents, outputs):
        a, b = primals
        seen["list"] = (type(primals), type(cotangents))
        return [cotangents[0] * b, cotangents[0] * a + cotangents[1]]

    g = kc.grad(lambda a, b: kc.sum(pair([a, b])[0]) + kc.sum(pair([a, b])[1]), argnums=[0, 1])
    ga, gb = g(kc.array([2.0]), kc.array([3.0]))
    check(ga, [3.0])
    check(gb, [3.0])
    assert seen["list"] == (list, list)

    @kc.custom_function
    def two(a, b):
        return a * b

    @two.vmap
    def two(inputs, axes):
        seen["two"] = (type(inputs), axes)
        return inputs[0] * inputs[1], 0

    kc.vmap(two)(kc.ones((2, 3)), kc.ones((2, 3)))
    assert seen["two"] == (tuple, (0, 0))


def test_checkpoint(rng):
    x = rand(rng, (4,))
    f = lambda a: kc.sum(kc.sin(a) ** 2)
    check(kc.grad(kc.checkpoint(f))(kc.array(x)), 2 * np.sin(x) * np.cos(x), rtol=1e-5)


def test_checkpoint_keyword_arguments(rng):
    # As MLX's: arrays among keyword arguments are inputs (gradients flow
    # through them), other leaves pass through (mlx-lm's grad_checkpoint
    # calls layers with mask=..., cache=None).
    x, z = rand(rng, (3,)), rand(rng, (3,))

    def f(a, y=None, mode="a", *, z):
        assert mode == "b"
        return kc.sum(a * z) + (0 if y is None else kc.sum(y * y))

    g = kc.grad(lambda a, z: kc.checkpoint(f)(a, y=None, mode="b", z=z), argnums=(0, 1))
    ga, gz = g(kc.array(x), kc.array(z))
    check(ga, z)
    check(gz, x)
    g = kc.grad(lambda a: kc.checkpoint(f)(a, y=2 * a, mode="b", z=a))
    check(g(kc.array(x)), 10 * x, rtol=1e-5)


def test_eval_pytrees():
    a = kc.array([1.0]) + 1
    tree = {"x": [a, (a * 2, 3)], "y": None}
    kc.eval(tree)
    kc.eval(a, [a])
    kc.async_eval(a * 3)
    assert a.item() == 2.0


def test_exceptions_in_traced_functions_propagate_and_recover():
    def bad(a):
        raise RuntimeError("boom")

    x = kc.array([0.5, 1.0])
    for t in [kc.grad, kc.vmap, kc.compile, kc.checkpoint]:
        with pytest.raises(RuntimeError, match="boom"):
            t(bad)(x)
    check(kc.grad(lambda a: kc.sum(a * a))(x), [1.0, 2.0])


def test_nested_transforms(rng):
    x = rand(rng, (3,))
    a = kc.array(x)
    g2 = kc.grad(lambda v: kc.sum(kc.grad(lambda b: kc.sum(b**3))(v)))
    check(g2(a), 6 * x, rtol=1e-5)
    y = rand(rng, (2, 3))
    check(kc.vmap(kc.grad(lambda v: kc.sum(v**2)))(kc.array(y)), 2 * y, rtol=1e-5)
    _, t = kc.jvp(kc.vmap(lambda v: v * v), [a], [kc.ones(3)])
    check(t[0], 2 * x, rtol=1e-5)
    check(kc.compile(kc.grad(lambda v: kc.sum(kc.sin(v))))(a), np.cos(x), rtol=1e-5)
    check(kc.vmap(kc.compile(lambda v: kc.sum(v)))(kc.array(y)), y.sum(1), rtol=1e-5)


def test_custom_vmap_rule():
    @kc.custom_function
    def f(a):
        return a + 1

    @f.vmap
    def f_vmap(inputs, axes):
        return inputs * 100, axes

    check(kc.vmap(f)(kc.ones((2, 2))), np.full((2, 2), 100.0))
    check(f(kc.ones((2,))), [2.0, 2.0])


def test_compile_does_not_keep_arguments_alive():
    # The first call traces on a small input (which the C++ trace may keep);
    # later calls must not leave their arrays behind in the Python layer.
    cf = kc.compile(lambda a, s: {"y": a * s}, shapeless=True)
    cf(kc.ones((3,)), 2.0)
    base = kc.get_active_memory()
    x = kc.random.uniform(shape=(1 << 18,))
    y = cf(x, 2.0)["y"]
    kc.eval(y)
    assert kc.get_active_memory() > base + (1 << 20)
    del x, y
    assert kc.get_active_memory() < base + (1 << 16)
    check(cf(kc.ones((3,)), 2.0)["y"], [2.0, 2.0, 2.0])


def test_eval_does_not_keep_arrays_alive():
    base = kc.get_active_memory()
    x = kc.random.uniform(shape=(1 << 18,))
    kc.eval({"x": [x]})
    assert kc.get_active_memory() > base + (1 << 19)
    del x
    assert kc.get_active_memory() < base + (1 << 16)


def test_grad_fills_the_callers_containers(rng):
    # The traced arrays go into the caller's lists and dicts while the
    # function runs; the originals come back unless the function replaced
    # them, and what it stores stays (MLX's behaviour).
    x, y = kc.array(rand(rng, (3,))), kc.array(rand(rng, (3,)))
    seen = []

    def f(params):
        seen.append(params["a"] is x)
        params["b"] = kc.array(2.0)
        return kc.sum(params["a"] * params["a"])

    params = {"a": x, "b": y}
    g = kc.grad(f)(params)
    assert seen == [False]
    assert params["a"] is x
    assert params["b"].item() == 2.0
    check(g["a"], 2 * np.array(x))

    def h(xs):
        xs[1] = xs[0] * xs[2]
        return kc.sum(xs[1])

    xs = [kc.array(rand(rng, (2, 3))), x, kc.array(rand(rng, (2, 3)))[:, ::-1]]
    a0, a2 = xs[0], xs[2]
    g = kc.grad(h)(xs)
    assert xs[0] is a0 and xs[2] is a2 and xs[1] is not x
    check(xs[1], np.array(a0) * np.array(a2))
    check(g[0], np.array(a2))
    check(g[2], np.array(a0))


def test_grad_argnums_of_one_gives_the_gradient_alone(rng):
    x, y = rand(rng, (3,)), rand(rng, (3,))
    f = lambda a, b: kc.sum(a * b)
    for argnums in ([1], (1,)):
        g = kc.grad(f, argnums=argnums)(kc.array(x), kc.array(y))
        assert isinstance(g, kc.array)
        check(g, x)
    gpos, gkw = kc.grad(f, argnums=[0], argnames=["b"])(kc.array(x), b=kc.array(y))
    check(gpos, y)
    check(gkw["b"], x)


def test_grad_needs_an_array_output_value_and_grad_takes_a_tuple(rng):
    x = kc.array(rand(rng, (2, 2)))
    f = lambda a: (kc.sum(a), {"aux": a})
    with pytest.raises(ValueError, match="grad"):
        kc.grad(f)(x)
    (v, aux), g = kc.value_and_grad(f)(x)
    check(g, np.ones((2, 2)))
    assert aux["aux"] is not None


@pytest.mark.parametrize("op", ["greater", "less", "equal", "not_equal",
                                "greater_equal", "less_equal"])
@pytest.mark.parametrize("dtype", [kc.float32, kc.float16, kc.int32])
def test_comparison_jvp_keeps_the_tangent_dtype(rng, op, dtype):
    x = kc.array(rand(rng, (5,))).astype(dtype)
    t = kc.ones_like(x)
    fn = getattr(kc, op)
    _, (tan,) = kc.jvp(lambda a: fn(a, 0), [x], [t])
    assert tan.dtype == dtype
    check(tan, np.zeros(5))
    # Downstream ops take the zero tangent as they would any other.
    _, (tan,) = kc.jvp(lambda a: fn(a, 0).astype(a.dtype) * 2 + a, [x], [t])
    check(tan, np.ones(5))


def _cum_extreme_grad_reference(x, c, is_max, reverse, inclusive):
    # Ties go to the latest position in scan order; an exclusive output is
    # the inclusive one of the position before it.
    n = len(x)
    order = list(range(n))[::-1] if reverse else list(range(n))
    g = np.zeros(n)
    best = None
    owner = []
    for j in order:
        if best is None or (x[j] >= best if is_max else x[j] <= best):
            best, who = x[j], j
        owner.append(who)
    for k, i in enumerate(order):
        src = owner[k] if inclusive else (owner[k - 1] if k > 0 else None)
        if src is not None:
            g[src] += c[i]
    return g


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("inclusive", [True, False])
def test_cummax_cummin_vjp_all_modes(rng, is_max, reverse, inclusive):
    # Ties included (values drawn from a few integers), along a
    # non-trailing axis of a transposed input.
    x = rng.integers(0, 4, size=(6, 3)).astype(np.float32)
    c = rand(rng, (3, 6))
    fn = kc.cummax if is_max else kc.cummin
    xt = kc.array(x).T
    _, (g,) = kc.vjp(
        lambda a: fn(a, axis=1, reverse=reverse, inclusive=inclusive),
        [xt], [kc.array(c)],
    )
    want = np.stack(
        [_cum_extreme_grad_reference(x[:, r], c[r], is_max, reverse, inclusive)
         for r in range(3)]
    )
    check(g, want)


def test_divmod_derivatives_are_those_of_its_parts(rng):
    # docs/mlx_compatibility.md, deliberate deviations: MLX's divmod has zero derivatives.
    x = kc.array(rand(rng, (4,)) + 5)
    y = kc.array(np.full(4, 3.0, dtype=np.float32))
    _, (dq, dr) = kc.jvp(lambda a: tuple(kc.divmod(a, y)), [x], [kc.ones(4)])
    check(dq, np.zeros(4))
    check(dr, np.ones(4))
    g = kc.grad(lambda a: kc.sum(kc.divmod(a, y)[1]))(x)
    check(g, np.ones(4))


def test_integer_indices_get_zero_gradients(rng):
    # docs/mlx_compatibility.md, deliberate deviations: MLX raises without stop_gradient.
    x = kc.array(rand(rng, (4,)))
    idx = kc.array([1, 3])
    _, (gx, gi) = kc.vjp(lambda a, i: kc.take(a, i), [x, idx], [kc.ones((2,))])
    check(gx, np.array([0.0, 1.0, 0.0, 1.0]))
    check(gi, np.zeros(2))
    g = kc.grad(lambda w: kc.take(w, kc.argsort(w)[:2]).sum())(kc.array([4.0, 3.0, 2.0, 1.0]))
    check(g, np.array([0.0, 0.0, 1.0, 1.0]))


def test_compile_state_inputs_only_stay_unchanged_and_lists_of_arrays(rng):
    x = rand(rng, (3,))
    state = {"y": kc.array(2.0)}
    f = kc.compile(lambda a: a + state["y"], inputs=state)
    check(f(kc.array(x)), x + 2)
    assert state["y"].item() == 2.0  # holds its own array again, not a tracer
    state["y"] = kc.array(3.0)
    check(f(kc.array(x)), x + 3)

    # A list of arrays is the container: its elements are read each call
    # and, as outputs, written back.
    lst = [kc.array(1.0)]

    def g(y):
        lst[0] = lst[0] * 2 + y
        return lst[0]

    cg = kc.compile(g, inputs=lst, outputs=lst)
    for _ in range(3):
        cg(kc.array(1.0))
    assert lst[0].item() == 15.0
    lst[0] = kc.array(0.0)
    check(cg(kc.array(2.0)), np.array(2.0))
    assert lst[0].item() == 2.0

    # A failing trace leaves the state as it was.
    bad = kc.compile(lambda a: a + state["y"] + kc.ones((7,)), inputs=state)
    with pytest.raises(ValueError):
        bad(kc.array(x))
    assert state["y"].item() == 3.0


def test_shapeless_compile_of_products_follows_every_new_shape():
    # Batch axes that broadcast, vector operands, and vmap over a matmul:
    # each call at a new shape gives the product of that shape, never the
    # traced one (a folded batch once came back in the traced batch size).
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    for pairs in ([(r(2, 1, 4, 2), r(3, 2, 5)), (r(3, 1, 7, 2), r(2, 2, 3))],
                  [(r(2, 4, 5), r(5)), (r(3, 6, 5), r(5))],
                  [(r(5), r(2, 5, 4)), (r(5), r(3, 5, 7))]):
        mm = kc.compile(lambda a, b: a @ b, shapeless=True)
        for a, b in pairs:
            got = np.array(mm(kc.array(a), kc.array(b)))
            np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    vm = kc.compile(kc.vmap(lambda x, y: x @ y, in_axes=(0, None)), shapeless=True)
    y = r(5, 6)
    for b in (2, 3):
        x = r(b, 4, 5)
        np.testing.assert_allclose(np.array(vm(kc.array(x), kc.array(y))), x @ y, rtol=1e-5, atol=1e-5)
    g = kc.compile(kc.grad(lambda args: (args[0] @ args[1]).sum()), shapeless=True)
    for a, b in [(r(2, 1, 4, 2), r(3, 2, 5)), (r(3, 1, 4, 2), r(2, 2, 5))]:
        ga, gb = g((kc.array(a), kc.array(b)))
        ea, eb = kc.grad(lambda args: (args[0] @ args[1]).sum())((kc.array(a), kc.array(b)))
        assert ga.shape == a.shape and gb.shape == b.shape
        np.testing.assert_allclose(np.array(ga), np.array(ea), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.array(gb), np.array(eb), rtol=1e-5, atol=1e-5)


def test_shapeless_compile_of_take_keeps_other_axes_whole():
    # take along one axis keeps every other axis entire at a new shape (a
    # traced extent once cut the rows of a gathered quantized product).
    rng = np.random.default_rng(1)
    t = kc.compile(lambda x, i: kc.take(x, i, axis=0), shapeless=True)
    for shape, idx in (((3, 4), [0, 2]), ((5, 7), [4, 0, 2])):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(np.array(t(kc.array(x), kc.array(idx))), x[idx])
    w = kc.array(rng.standard_normal((4, 32, 64)).astype(np.float32))
    qw, s, b = kc.quantize(w)
    idx = kc.array([0, 1, 2, 3])

    def fn(x):
        return kc.gather_qmm(x, qw, s, b, lhs_indices=idx, rhs_indices=idx, transpose=True)

    cfn = kc.compile(fn, shapeless=True)
    for rows in (4, 8):
        x = kc.array(rng.standard_normal((4, rows, 64)).astype(np.float32))
        got, want = cfn(x), fn(x)
        assert got.shape == want.shape == (4, rows, 32)
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-4, atol=1e-4)


def test_compile_refuses_inputs_reached_through_a_capture():
    # As MLX: the traced graph must reach an input through its argument; a
    # closure over the same array (or a lazy array built from it) would not
    # follow new inputs at the next call.
    x = kc.array([1, 2, 3]) + 2

    def reads_the_closure(a):
        return a + (x + 1)

    with pytest.raises(ValueError, match="captured"):
        kc.compile(reads_the_closure)(x)
    y = kc.array([1.0, 2.0]) + kc.array([1.0, 2.0])
    held = [kc.array([1.0, 2.0])]

    def grows(v):
        held[0] = held[0] + v
        return held[0]

    grows(y)  # held now depends lazily on y
    with pytest.raises(ValueError, match="captured"):
        kc.compile(grows)(y)
    # The same closure over an array that is not an input is a constant.
    c = kc.array([5.0, 6.0])
    assert kc.compile(lambda a: a + c)(y).tolist() == [7.0, 10.0]
