"""Function transformations over pytrees: eval, grad, value_and_grad, vjp,
jvp, vmap, compile, custom_function and checkpoint. Arguments are flattened
with kiln.utils and the flat C++ transformations do the work."""

import functools
import itertools

from . import core as _core
from .utils import _flatten, _unflatten

array = _core.array


def _is_array(x):
    return isinstance(x, array)


# The arrays among the leaves of a tree, in _flatten's order, without
# building its description (eval and compile's state call this on whole
# models every step; the walk is in C++).
_arrays_of = _core._tree_arrays


eval = _core.eval


def async_eval(*args):
    """Start evaluating the arrays in the given pytrees in the background."""
    _core._async_eval(_arrays_of(args))


class _Outputs:
    """Records the pytree a traced function returned, to rebuild it from the
    flat arrays the C++ transformation hands back."""

    def __init__(self, what):
        self.what = what
        self.treedef = None
        # Non-array leaves, with None where an array goes: traced arrays are
        # not kept alive by the record.
        self.consts = None
        self.slots = None

    def flatten(self, out):
        leaves, self.treedef = _flatten(out)
        self.slots = [_is_array(x) for x in leaves]
        self.consts = [None if s else x for s, x in zip(self.slots, leaves)]
        return [x for x in leaves if _is_array(x)]

    def rebuild(self, arrays):
        if self.treedef is None and self.slots == [True]:  # one array
            return arrays[0]
        it = iter(arrays)
        leaves = [next(it) if s else c for s, c in zip(self.slots, self.consts)]
        return _unflatten(self.treedef, leaves)


def _check_all_arrays(leaves, what):
    for x in leaves:
        if not _is_array(x):
            raise ValueError(
                f"[{what}] the differentiated arguments must hold only arrays; "
                f"got a leaf of type {type(x).__name__}."
            )


def _normalize_argnums(argnums, argnames, what):
    if isinstance(argnames, str):
        argnames = [argnames]
    argnames = list(argnames)
    if argnums is None:
        argnums = [] if argnames else 0
    nums = [argnums] if isinstance(argnums, int) else list(argnums)
    # One argument gives its gradient alone, even from a list (as MLX).
    single = len(nums) == 1
    for n in nums:
        if not isinstance(n, int):
            raise TypeError(f"[{what}] argnums must be ints, got {n!r}.")
    if len(set(nums)) != len(nums):
        raise ValueError(f"[{what}] argnums has duplicates: {nums}.")
    if not nums and not argnames:
        raise ValueError(f"[{what}] no arguments to differentiate.")
    return nums, argnames, single


def _fill(tree, visit):
    """Replaces the arrays of ``tree`` by ``visit(array)`` as MLX's
    transformations do: lists and dicts are updated in place, so that what
    the function writes into them stays; tuples are rebuilt."""
    if isinstance(tree, list):
        for i, c in enumerate(tree):
            tree[i] = _fill(c, visit)
        return tree
    if isinstance(tree, dict):
        for k in list(tree.keys()):
            tree[k] = _fill(tree[k], visit)
        return tree
    if isinstance(tree, tuple):
        children = [_fill(c, visit) for c in tree]
        if type(tree) is tuple:
            return tuple(children)
        return type(tree)(*children) if hasattr(tree, "_fields") else type(tree)(children)
    return visit(tree) if _is_array(tree) else tree


def _value_and_grad(fun, argnums, argnames, what):
    nums, names, single = _normalize_argnums(argnums, argnames, what)
    scalar_only = what == "grad"

    def wrapper(*args, **kwargs):
        nargs = len(args)
        pos = [n + nargs if n < 0 else n for n in nums]
        for n in pos:
            if n < 0 or n >= nargs:
                raise ValueError(
                    f"[{what}] argnums {nums} asks for argument {n} "
                    f"but the function got {nargs} positional arguments."
                )
        for k in names:
            if k not in kwargs:
                raise ValueError(
                    f"[{what}] argname '{k}' was not passed as a "
                    "keyword argument."
                )
        targets = [args[n] for n in pos] + [kwargs[k] for k in names]
        leaves, treedef = _flatten(targets)
        _check_all_arrays(leaves, what)
        outputs = _Outputs(what)

        def flat(primals):
            # The traced arrays go into the caller's own containers and the
            # originals come back afterwards, except where the function
            # stored something else (as MLX).
            it = iter(primals)
            a, kw = list(args), dict(kwargs)
            for n in pos:
                a[n] = _fill(a[n], lambda x: next(it))
            for k in names:
                kw[k] = _fill(kw[k], lambda x: next(it))
            try:
                out = fun(*a, **kw)
            finally:
                index = itertools.count()

                def restore(x):
                    i = next(index)
                    return leaves[i] if i < len(leaves) and x is primals[i] else x

                for n in pos:
                    _fill(a[n], restore)
                for k in names:
                    _fill(kw[k], restore)
            if scalar_only and not _is_array(out):
                raise ValueError(
                    "[grad] the function must return a scalar array; got "
                    f"{type(out).__name__} (use value_and_grad to return "
                    "auxiliary values)."
                )
            arrays = outputs.flatten(out)
            if not outputs.slots or not outputs.slots[0]:
                raise ValueError(
                    f"[{what}] the function must return a scalar array "
                    "or a tuple whose first element is a scalar array."
                )
            return arrays

        outs, grads = _core._value_and_grad_flat(flat, leaves, list(range(len(leaves))))
        value = outputs.rebuild(outs)
        gtrees = _unflatten(treedef, grads)
        pos_grads = gtrees[: len(pos)]
        if single:
            pos_grads = pos_grads[0]
        else:
            pos_grads = tuple(pos_grads)
        if names:
            kw_grads = {k: gtrees[len(pos) + j] for j, k in enumerate(names)}
            if not nums:
                pos_grads = None
            return value, (pos_grads, kw_grads)
        return value, pos_grads

    return wrapper


def value_and_grad(fun, argnums=None, argnames=[]):
    """A function returning ``(fun(*args), gradient)``; the gradient is of
    fun's first output (a scalar array) with respect to the arguments in
    ``argnums`` (default 0) and the keyword arguments in ``argnames``.
    Containers passed in are filled with the traced arrays while ``fun``
    runs; what ``fun`` stores into them stays."""
    return functools.wraps(fun)(
        _value_and_grad(fun, argnums, argnames, "value_and_grad")
    )


def grad(fun, argnums=None, argnames=[]):
    """A function returning the gradient of ``fun`` (see value_and_grad),
    which must return a scalar array."""
    vg = _value_and_grad(fun, argnums, argnames, "grad")

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        return vg(*args, **kwargs)[1]

    return wrapper


def _flat_call(fun, args_def, outputs):
    def flat(arrays):
        out = fun(*_unflatten(args_def, arrays))
        return outputs.flatten(out)

    return flat


def vjp(fun, primals, cotangents):
    """``(fun(*primals), vjps)``: the cotangents of the primals for the
    given cotangents of the outputs (lists of arrays)."""
    leaves, treedef = _flatten(list(primals))
    _check_all_arrays(leaves, "vjp")
    outputs = _Outputs("vjp")
    cots = _flatten(
        list(cotangents) if isinstance(cotangents, (list, tuple)) else [cotangents]
    )[0]
    _check_all_arrays(cots, "vjp")
    outs, vjps = _core._vjp_flat(_flat_call(fun, treedef, outputs), leaves, cots)
    return _as_list(outputs.rebuild(outs)), _unflatten(treedef, vjps)


def jvp(fun, primals, tangents):
    """``(fun(*primals), jvps)``: the tangents of the outputs for the given
    tangents of the primals (lists of arrays)."""
    leaves, treedef = _flatten(list(primals))
    _check_all_arrays(leaves, "jvp")
    tans = _flatten(list(tangents))[0]
    _check_all_arrays(tans, "jvp")
    outputs = _Outputs("jvp")
    outs, jvps = _core._jvp_flat(_flat_call(fun, treedef, outputs), leaves, tans)
    return _as_list(outputs.rebuild(outs)), _as_list(outputs.rebuild(jvps))


def _as_list(x):
    if isinstance(x, list):
        return x
    if isinstance(x, tuple):
        return list(x)
    return [x]


def _is_axis(a):
    return a is None or isinstance(a, int)


def _axes_per_leaf(axes, tree, what, op="vmap"):
    """One axis (an int or None) per leaf of ``tree``, in _flatten's order.
    ``axes`` is a prefix of ``tree``: an int or None covers the whole
    subtree under it; a list or tuple matches a list or tuple of the same
    length (either kind for either, where MLX wants the same kind); a dict
    names every key of a dict (more keys are ignored)."""
    out = []
    _collect_axes(axes, tree, what, op, out)
    return out


def _collect_axes(axes, tree, what, op, out):
    if _is_axis(axes):
        out.extend([axes] * len(_flatten(tree)[0]))
        return
    if isinstance(tree, (list, tuple)) and isinstance(axes, (list, tuple)):
        if len(axes) != len(tree):
            raise ValueError(
                f"[{op}] {what} has {len(axes)} entries for {len(tree)} values."
            )
        for a, t in zip(axes, tree):
            _collect_axes(a, t, what, op, out)
        return
    if isinstance(tree, dict) and isinstance(axes, dict):
        for k in tree:
            if k not in axes:
                raise ValueError(f"[{op}] {what} has no entry for key {k!r}.")
            _collect_axes(axes[k], tree[k], what, op, out)
        return
    if isinstance(tree, (list, tuple, dict)):
        raise ValueError(
            f"[{op}] {what} must be an int, None, or a tree matching the "
            f"{type(tree).__name__} it maps; got a {type(axes).__name__}."
        )
    raise ValueError(f"[{op}] {what}: an axis must be an int or None; got {axes!r}.")


def _vmap_axes(axes, tree, what):
    """The axis of each leaf of ``tree`` (a lone argument or output, or the
    tuple of several) in ``[0, ndim)``; -1 for an array that is not mapped
    and None for a leaf that is not an array. Outputs come batched on
    axis 0, so their ``ndim`` counts the batch axis."""
    # A one-entry list or tuple around the axes of a lone argument or output
    # (MLX's out_axes=(1,) for one array, JAX's in_axes=(spec,)).
    if (
        isinstance(axes, (list, tuple))
        and len(axes) == 1
        and not (isinstance(tree, (list, tuple)) and len(tree) == 1)
    ):
        axes = axes[0]
    flat = []
    for leaf, ax in zip(_flatten(tree)[0], _axes_per_leaf(axes, tree, what)):
        if not _is_array(leaf):
            if ax is not None and what == "in_axes":
                raise ValueError(
                    "[vmap] only array arguments can be mapped; got an "
                    f"axis for a {type(leaf).__name__}."
                )
            flat.append(None)
        elif ax is None:
            flat.append(-1)
        elif -leaf.ndim <= ax < leaf.ndim:
            flat.append(ax % leaf.ndim)
        else:
            if what == "out_axes":
                held = f"an output of shape {tuple(leaf.shape[1:])} per example"
            else:
                held = f"an argument of shape {tuple(leaf.shape)}"
            raise ValueError(
                f"[vmap] {what}: axis {ax} is out of range for {held} "
                f"(valid: {-leaf.ndim} to {leaf.ndim - 1})."
            )
    return flat


def vmap(fun, in_axes=0, out_axes=0):
    """``fun`` mapped over an axis of its inputs. ``in_axes`` and
    ``out_axes`` are ints, None (not mapped) or trees of them, prefixes of
    the argument (the tuple of arguments when there are several) and of
    the output. Negative axes count from the end."""

    @functools.wraps(fun)
    def wrapper(*args):
        leaves, treedef = _flatten(args)
        axes = _vmap_axes(in_axes, args[0] if len(args) == 1 else args, "in_axes")
        arrays = [x for x in leaves if _is_array(x)]
        flat_axes = [a for a in axes if a is not None]
        slots = [_is_array(x) for x in leaves]
        if arrays and all(a == -1 for a in flat_axes):
            raise ValueError("[vmap] at least one argument must be mapped.")
        outputs = _Outputs("vmap")

        def flat(batched):
            it = iter(batched)
            full = [next(it) if s else x for s, x in zip(slots, leaves)]
            return outputs.flatten(fun(*_unflatten(treedef, full)))

        outs = _core._vmap_flat(flat, arrays, flat_axes)
        tree = outputs.rebuild(outs)
        oaxes = _vmap_axes(out_axes, tree, "out_axes")
        oleaves, odef = _flatten(tree)
        moved = []
        for leaf, ax in zip(oleaves, oaxes):
            if ax == -1:
                leaf = leaf[0]
            elif ax is not None and ax != 0:
                leaf = _core.moveaxis(leaf, 0, ax)
            moved.append(leaf)
        return _unflatten(odef, moved)

    return wrapper


def checkpoint(fun):
    """``fun`` whose intermediates are recomputed in the backward pass
    instead of being kept alive."""

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        # Keyword arguments are inputs too (arrays in them are checkpointed,
        # other leaves passed through), as in MLX.
        leaves, treedef = _flatten((args, kwargs))
        slots = [_is_array(x) for x in leaves]
        outputs = _Outputs("checkpoint")

        def flat(arrays):
            it = iter(arrays)
            full = [next(it) if s else x for s, x in zip(slots, leaves)]
            a, kw = _unflatten(treedef, full)
            return outputs.flatten(fun(*a, **kw))

        outs = _core._checkpoint_flat(flat, [x for x in leaves if _is_array(x)])
        return outputs.rebuild(outs)

    return wrapper


class custom_function:
    """A function with user-defined transformation rules, set with the
    decorators ``.vjp``, ``.jvp`` and ``.vmap``:

    - vjp(primals, cotangents, outputs) -> one cotangent per primal
    - jvp(primals, tangents) -> the outputs' tangents
    - vmap(inputs, axes) -> (outputs, output axes)

    As in MLX, a function of one argument gets that argument itself as
    ``primals``, ``tangents``, ``inputs`` and ``axes`` (an array, a list, an
    int), and one of several arguments gets them as a tuple; likewise a
    single output's cotangent and output. Absent rules fall back to
    transforming the function itself."""

    def __init__(self, f):
        functools.update_wrapper(self, f)
        self.fun = f
        self._vjp = self._jvp = self._vmap = None

    def vjp(self, f):
        self._vjp = f
        return self

    def jvp(self, f):
        self._jvp = f
        return self

    def vmap(self, f):
        self._vmap = f
        return self

    def __call__(self, *args):
        leaves, treedef = _flatten(args)
        _check_all_arrays(leaves, "custom_function")
        outputs = _Outputs("custom_function")

        def flat(arrays):
            return outputs.flatten(self.fun(*_unflatten(treedef, arrays)))

        def one_or_all(x):
            return x[0] if isinstance(x, tuple) and len(x) == 1 else x

        def flat_vjp(primals, cotangents, outs):
            p = _unflatten(treedef, primals)
            g = self._vjp(
                one_or_all(p),
                one_or_all(outputs.rebuild(cotangents)),
                one_or_all(outputs.rebuild(outs)),
            )
            if len(p) == 1 and not isinstance(g, (tuple, list)):
                g = (g,)
            return _flatten(list(g))[0]

        def flat_jvp(primals, tangents, argnums):
            full = [_core.zeros_like(p) for p in primals]
            for t, n in zip(tangents, argnums):
                full[n] = t
            r = self._jvp(one_or_all(_unflatten(treedef, primals)), one_or_all(_unflatten(treedef, full)))
            return _flatten(r)[0]

        def flat_vmap(inputs, axes):
            ax = [None if a < 0 else a for a in axes]
            out, oax = self._vmap(one_or_all(_unflatten(treedef, inputs)), one_or_all(_unflatten(treedef, ax)))
            o = _flatten(out)[0]
            oa = _axes_per_leaf(oax, out, "out_axes", op="custom vmap")
            return o, [-1 if a is None else a for a in oa]

        outs = _core._custom_function_flat(
            flat,
            flat_vjp if self._vjp else None,
            flat_jvp if self._jvp else None,
            flat_vmap if self._vmap else None,
            leaves,
        )
        return outputs.rebuild(outs)
