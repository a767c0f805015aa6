"""compile over pytrees, with captured state (``inputs=`` / ``outputs=``)."""

import functools

from . import core as _core
from ._transforms import _Outputs, _is_array, _arrays_of
from .utils import _flatten, _unflatten

_CONSTANT_TYPES = (bool, int, float, str, type(None))


def _state_accessors(container):
    """(get, set) for one captured state container: the random state, or a
    tree of arrays (list, dict, module) updated in place."""
    if isinstance(container, _core.random.KeyState):
        return (lambda: [container[0]], lambda v: container.__setitem__(0, v[0]))

    def get():
        return _arrays_of(container)

    def set_(values):
        # Writes values over the container's arrays in place (C++ walk).
        _core._tree_assign(container, list(values))

    return get, set_


def _item_accessors(seq, i):
    """(get, set) for an array held directly in the list given as state:
    writes replace the list's element (a tuple's stays as it is)."""

    def set_(values):
        if isinstance(seq, list):
            seq[i] = values[0]

    return (lambda: [seq[i]], set_)


def _states(spec):
    if spec is None:
        return []
    if isinstance(spec, _core.random.KeyState) or isinstance(spec, dict):
        spec = [spec]
    return [
        _item_accessors(spec, i) if _is_array(c) else _state_accessors(c)
        for i, c in enumerate(spec)
    ]


def compile(fun, inputs=None, outputs=None, shapeless=False):
    """``fun`` compiled: traced once per argument structure, dtypes and
    shapes (ranks when ``shapeless``) and values of non-array arguments
    (bool, int, float, str, None), then replayed. ``inputs`` and
    ``outputs`` are state containers read before and written after each
    call, such as ``kiln.core.random.state``.

    With ``shapeless`` a new shape replays the trace: slices keep their
    bounds as written (``x[1:-1]`` and ``x[-1]`` move with the size),
    ``zeros_like``/``ones_like``/``full_like`` and the gradients' own
    broadcasts and index clamps follow their arrays, and what cannot follow
    raises. Shapes read in Python (``x.shape``) are fixed at trace time."""
    in_states, out_states = _states(inputs), _states(outputs)
    cache = {}

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if not _core._compile_enabled():
            return fun(*args, **kwargs)
        # Calls with arrays only (the usual case) find their trace by the
        # number of arrays, without walking the arguments as a tree.
        only_arrays = not kwargs and all(type(x) is _core.array for x in args)
        if only_arrays:
            entry = cache.get(len(args))
            if entry is not None:
                compiled, outs_rec = entry
                return outs_rec.rebuild(compiled(list(args)))
        leaves, treedef = _flatten((args, kwargs))
        consts = []
        for x in leaves:
            if _is_array(x):
                consts.append(None)
            elif isinstance(x, _CONSTANT_TYPES):
                consts.append((type(x), x))
            else:
                # ValueError, as MLX raises for an argument it cannot key on.
                raise ValueError(
                    "[compile] arguments must be arrays, pytrees of arrays, or "
                    "bool, int, float, str or None; got a "
                    f"{type(x).__name__}."
                )
        key = (treedef, tuple(consts))
        entry = cache.get(key)
        if entry is None:
            outs_rec = _Outputs("compile")
            # The cached trace keeps only the constants, not this call's arrays.
            in_consts = [None if c is None else c[1] for c in consts]
            in_slots = [c is None for c in consts]

            def flat(arrays):
                it = iter(arrays)
                full = [next(it) if s else c for s, c in zip(in_slots, in_consts)]
                a, kw = _unflatten(treedef, full)
                arrays_out = outs_rec.flatten(fun(*a, **kw))
                for x in outs_rec.consts:
                    if not isinstance(x, _CONSTANT_TYPES):
                        raise ValueError(
                            "[compile] the function must return arrays or "
                            f"pytrees of arrays; got a {type(x).__name__}."
                        )
                return arrays_out

            compiled = _core._compile_flat(flat, shapeless, in_states, out_states)
            entry = cache[key] = (compiled, outs_rec)
            if only_arrays:
                cache[len(args)] = entry
        compiled, outs_rec = entry
        outs = compiled([x for x in leaves if _is_array(x)])
        return outs_rec.rebuild(outs)

    return wrapper
