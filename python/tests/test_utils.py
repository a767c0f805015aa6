from collections import namedtuple

import pytest

import kiln.core as kc
from kiln.utils import (
    tree_flatten,
    tree_map,
    tree_map_with_path,
    tree_merge,
    tree_reduce,
    tree_unflatten,
)


def test_tree_map_and_flatten():
    t = {"a": [1, 2], "b": (3, {"c": 4})}
    assert tree_map(lambda x: x * 10, t) == {"a": [10, 20], "b": (30, {"c": 40})}
    assert tree_map(lambda x, y: x + y, [1, 2], [10, 20]) == [11, 22]
    assert tree_flatten(t) == [("a.0", 1), ("a.1", 2), ("b.0", 3), ("b.1.c", 4)]
    assert tree_flatten(5) == [("", 5)]
    assert tree_flatten([1], prefix=".p") == [("p.0", 1)]  # as mlx.utils
    assert tree_unflatten(tree_flatten(t)) == {"a": [1, 2], "b": [3, {"c": 4}]}
    assert tree_unflatten([("", 3)]) == 3
    paths = tree_map_with_path(lambda p, x: p, t)
    assert paths == {"a": ["a.0", "a.1"], "b": ("b.0", {"c": "b.1.c"})}
    P = namedtuple("P", "x y")
    assert tree_map(lambda v: v + 1, P(1, 2)) == P(2, 3)
    assert tree_map(
        lambda v: 0, [[1], 2], is_leaf=lambda v: isinstance(v, list) and len(v) == 1
    ) == [0, 0]


def test_tree_unflatten_of_a_subset_keeps_list_positions():
    # As mlx.utils: missing list indices hold empty dicts, so that part of a
    # tree (one optimizer's share of the parameters) merges back in place.
    assert tree_unflatten([("a.1.b", 1)]) == {"a": [{}, {"b": 1}]}
    assert tree_unflatten([("x.3", 1), ("x.1", 2)]) == {"x": [{}, 2, {}, 1]}
    assert tree_unflatten([("0", 5), ("2", 6)]) == [5, {}, 6]
    assert tree_unflatten({"a.b": 1, "c": 2}) == {"a": {"b": 1}, "c": 2}
    assert tree_unflatten([]) == []
    part = tree_unflatten([("l.1", 2)])
    assert tree_merge(tree_unflatten([("l.0", 1)]), part) == {"l": [1, 2]}


def test_tree_reduce_and_merge():
    assert tree_reduce(lambda a, b: a + b, {"a": [1, 2], "b": 3}) == 6
    assert tree_reduce(lambda a, b: a + b, [1, 2], initializer=10) == 13
    m = tree_merge({"a": 1, "b": None}, {"b": [2], "a": None})
    assert m == {"a": 1, "b": [2]}
    assert tree_merge([1, None], [None, 2]) == [1, 2]


def test_trees_of_arrays():
    t = {"w": kc.ones((2,)), "b": [kc.zeros((1,))]}
    s = tree_map(lambda a: a + 1, t)
    assert s["w"].tolist() == [2.0, 2.0] and s["b"][0].tolist() == [1.0]
    assert tree_reduce(lambda acc, a: acc + a.size, t, 0) == 3


def test_tree_merge_keeps_container_types_and_checks_empty_kinds():
    from typing import NamedTuple

    class Pair(NamedTuple):
        a: object
        b: object

    class Row(tuple):
        pass

    p = tree_merge(Pair(1, None), Pair(None, 2))
    assert isinstance(p, Pair) and p == Pair(1, 2)
    r = tree_merge(Row([1, None]), Row([None, 2]))
    assert type(r) is Row and tuple(r) == (1, 2)
    assert tree_merge(Pair(1, 2), Pair(3, 4), lambda x, y: x + y) == Pair(4, 6)
    assert tree_merge({}, {}) == {}
    assert tree_merge({"a": 1, "b": {}}, {"a": {}, "b": {}}) == {"a": 1, "b": {}}
    with pytest.raises(ValueError):
        tree_merge({}, [])
    with pytest.raises(ValueError):
        tree_merge([], {})
    assert tree_merge(None, []) == []


def test_tree_unflatten_lists_only_for_canonical_indices():
    t = tree_unflatten([("01", "a"), ("1", "b"), ("2", "c")])
    assert t == {"01": "a", "1": "b", "2": "c"}
    assert tree_unflatten([("0", "a"), ("1", "b"), ("2", "c")]) == ["a", "b", "c"]
    assert tree_unflatten([("x.1", 5)]) == {"x": [{}, 5]}
    assert tree_flatten({"a": {}}) == []


def test_tree_flatten_into_a_destination():
    t = {"a": [1, {"b": 2}], "c": 3}
    flat = tree_flatten(t, destination={})
    assert flat == {"a.0": 1, "a.1.b": 2, "c": 3}
    assert tree_unflatten(flat) == t
    # A given list or dict is filled in place and returned.
    into = [("z", 0)]
    assert tree_flatten([5], destination=into) is into
    assert into == [("z", 0), ("0", 5)]
    seen = {"z": 0}
    assert tree_flatten({"y": 1}, prefix=".p", destination=seen) is seen
    assert seen == {"z": 0, "p.y": 1}
    assert tree_flatten(7, destination={}) == {"": 7}
    with pytest.raises(ValueError, match="tree_flatten: destination"):
        tree_flatten([1], destination=set())
