"""Pytrees: nested lists, tuples and dicts whose leaves are arrays (or
anything else). This module is kiln's one pytree implementation: the
function transformations in ``kiln.core`` flatten their arguments with it.
"""

from collections import OrderedDict, defaultdict

__all__ = [
    "tree_map",
    "tree_map_with_path",
    "tree_flatten",
    "tree_unflatten",
    "tree_reduce",
    "tree_merge",
]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _children(tree):
    """(kind, keys, children) for a container, or None for a leaf."""
    if isinstance(tree, (list, tuple)):
        return type(tree), range(len(tree)), list(tree)
    if isinstance(tree, dict):
        keys = list(tree.keys())
        return type(tree), keys, [tree[k] for k in keys]
    return None


def _rebuild(kind, keys, children):
    if issubclass(kind, dict):
        # Other dict subclasses (nn.Module among them) come back as plain
        # dicts, as in MLX: their constructors may need arguments.
        out = OrderedDict() if issubclass(kind, OrderedDict) else {}
        for k, c in zip(keys, children):
            out[k] = c
        return out
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return kind(*children)
    return kind(children)


def tree_map(fn, tree, *rest, is_leaf=None):
    """Apply ``fn`` to the leaves of ``tree`` (and the matching leaves of
    each tree in ``rest``), returning a tree of the same structure."""
    if is_leaf is not None and is_leaf(tree):
        return fn(tree, *rest)
    node = _children(tree)
    if node is None:
        return fn(tree, *rest)
    kind, keys, children = node
    mapped = [
        tree_map(fn, c, *[r[k] for r in rest], is_leaf=is_leaf)
        for k, c in zip(keys, children)
    ]
    return _rebuild(kind, keys, mapped)


def tree_map_with_path(fn, tree, *rest, is_leaf=None, path=None):
    """Like tree_map, but ``fn`` also receives each leaf's path ("a.0.b")."""
    if is_leaf is not None and is_leaf(tree):
        return fn(path, tree, *rest)
    node = _children(tree)
    if node is None:
        return fn(path, tree, *rest)
    kind, keys, children = node
    mapped = [
        tree_map_with_path(
            fn,
            c,
            *[r[k] for r in rest],
            is_leaf=is_leaf,
            path=f"{path}.{k}" if path else str(k),
        )
        for k, c in zip(keys, children)
    ]
    return _rebuild(kind, keys, mapped)


def tree_flatten(tree, prefix="", is_leaf=None, destination=None):
    """The leaves of ``tree`` as a list of ``(path, leaf)`` pairs, paths
    joined with dots: ``tree_flatten([[1], {"a": 2}])`` gives
    ``[("0.0", 1), ("1.a", 2)]``. With ``destination`` (a list or a dict)
    the pairs are added to it and it is returned: ``destination={}`` gives
    ``{"0.0": 1, "1.a": 2}``."""
    if destination is None:
        destination = []
    if not isinstance(destination, (list, dict)):
        raise ValueError(
            "tree_flatten: destination must be a list, a dict or None, "
            f"got {type(destination).__name__}."
        )
    pairs = []
    _flatten_paths(tree, prefix, is_leaf, pairs)
    if isinstance(destination, list):
        destination.extend(pairs)
    else:
        destination.update(pairs)
    return destination


# Module-level recursion (not nested closures, which would form reference
# cycles that keep the leaves alive until the garbage collector runs).
def _flatten_paths(t, p, is_leaf, out):
    node = None if (is_leaf is not None and is_leaf(t)) else _children(t)
    if node is None:
        out.append((p[1:], t))
        return
    _, keys, children = node
    for k, c in zip(keys, children):
        _flatten_paths(c, f"{p}.{k}", is_leaf, out)


def tree_unflatten(tree):
    """The inverse of tree_flatten: nested lists (where every key at a level
    is an integer) and dicts from ``(path, value)`` pairs, or from a dict of
    them. List indices that are missing hold empty dicts, so that a subset
    of a tree's leaves keeps their positions: ``[("a.1", x)]`` gives
    ``{"a": [{}, x]}``."""
    if isinstance(tree, dict):
        tree = list(tree.items())
    if len(tree) == 0:
        return []
    if len(tree) == 1 and tree[0][0] == "":
        return tree[0][1]
    groups = defaultdict(list)
    for path, value in tree:
        head, _, tail = path.partition(".")
        groups[head].append((tail, value))
    # A list only where every key is an index as tree_flatten writes it:
    # "01" next to "1" must not collide.
    is_list = all(k.isdigit() and str(int(k)) == k for k in groups)
    if is_list:
        out = []
        for k in sorted(groups, key=int):
            out.extend({} for _ in range(int(k) - len(out)))
            out.append(tree_unflatten(groups[k]))
        return out
    return {k: tree_unflatten(v) for k, v in groups.items()}


def tree_reduce(fn, tree, initializer=None, is_leaf=None):
    """Fold ``fn(accumulator, leaf)`` over the leaves of ``tree``."""
    acc = initializer
    first = initializer is None
    for _, leaf in tree_flatten(tree, is_leaf=is_leaf):
        if first:
            acc, first = leaf, False
        else:
            acc = fn(acc, leaf)
    return acc


def tree_merge(tree_a, tree_b, merge_fn=None):
    """Merge two trees of one structure where, at each position, at most one
    side holds something (the other is None or an empty container), unless
    ``merge_fn(a, b)`` resolves the clash."""

    def empty(t):
        return t is None or (isinstance(t, (list, tuple, dict)) and len(t) == 0)

    if (
        tree_a is not None
        and tree_b is not None
        and empty(tree_a)
        and empty(tree_b)
        and isinstance(tree_a, dict) != isinstance(tree_b, dict)
    ):
        raise ValueError("tree_merge: a dict cannot merge with a list.")
    if empty(tree_a):
        return tree_b
    if empty(tree_b):
        return tree_a
    na, nb = _children(tree_a), _children(tree_b)
    if na is not None and nb is not None:
        if isinstance(tree_a, dict) != isinstance(tree_b, dict):
            raise ValueError("tree_merge: a dict cannot merge with a list.")
        if isinstance(tree_a, dict):
            keys = list(tree_a) + [k for k in tree_b if k not in tree_a]
            return {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn) for k in keys}
        n = max(len(tree_a), len(tree_b))
        a = list(tree_a) + [None] * (n - len(tree_a))
        b = list(tree_b) + [None] * (n - len(tree_b))
        merged = [tree_merge(x, y, merge_fn) for x, y in zip(a, b)]
        return _rebuild(type(tree_a), range(n), merged)
    if merge_fn is None:
        raise ValueError(
            "tree_merge: both trees hold a value at the same position; "
            "pass merge_fn to combine them."
        )
    return merge_fn(tree_a, tree_b)


# ---- Structure-preserving flattening, used by the transformations --------

_LEAF = None


def _flatten(tree, is_leaf=None):
    """(leaves, treedef): the leaves in order and a hashable description of
    the containers, from which _unflatten rebuilds the tree exactly."""
    leaves = []
    return leaves, _flatten_def(tree, is_leaf, leaves)


def _flatten_def(t, is_leaf, leaves):
    node = None if (is_leaf is not None and is_leaf(t)) else _children(t)
    if node is None:
        leaves.append(t)
        return _LEAF
    kind, keys, children = node
    return (
        kind,
        tuple(keys),
        tuple(_flatten_def(c, is_leaf, leaves) for c in children),
    )


def _unflatten(treedef, leaves):
    return _build(treedef, iter(leaves))


def _build(d, it):
    if d is _LEAF:
        return next(it)
    kind, keys, children = d
    return _rebuild(kind, keys, [_build(c, it) for c in children])
