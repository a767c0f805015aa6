"""Sharded layers over a ``kiln.core.distributed`` group, with MLX's API:
tensor-parallel linear layers (``AllToShardedLinear`` keeps this member's
slice of the output features, ``ShardedToAllLinear`` its slice of the input
features and sums the partial products over the group), their quantized
forms, the helpers that shard existing layers, and fully sharded modules
(parameters split along axis 0, gathered for each call).

kiln runs one process, so its group is the singleton group: a member's
slice is the whole weight and the collectives return their input. The
slicing and the collectives are written for any group all the same."""

import functools
import math
from typing import Callable, Optional, Union

import kiln.core as mx

from ...utils import tree_flatten, tree_map_with_path, tree_unflatten
from .base import Module
from .linear import Linear
from .quantized import _biases, _defaults, _store

_SHARDINGS = ("all-to-sharded", "sharded-to-all")


def _group(group):
    return group or mx.distributed.init()


def _identity(x):
    return x


def sum_gradients(group):
    """The identity, whose gradient is summed over ``group``: what a layer
    applies to an input that every member holds whole."""
    return _identity if group.size() == 1 else _summed_gradients(group)


@functools.lru_cache(maxsize=None)
def _summed_gradients(group):
    @mx.custom_function
    def f(x):
        return x

    @f.vjp
    def f(primals, cotangent, output):
        return mx.distributed.all_sum(cotangent, group=group)

    return f


def _split_points(n, segments):
    """Where ``segments`` cuts an axis of n: a count of equal parts, the
    indices themselves, or fractions of n."""
    if isinstance(segments, int):
        if n % segments:
            raise ValueError(f"[shard] Cannot split an axis of size {n} into {segments} segments.")
        return [n // segments * i for i in range(1, segments)]
    if all(isinstance(s, int) for s in segments):
        return list(segments)
    return [int(s * n) for s in segments]


def _member_slice(weight, axis, segments, group):
    """This member's part of each segment of ``weight`` along ``axis``, the
    parts joined: a fused QKV weight (segments=3) keeps a slice of each of
    Q, K and V."""
    size, rank = group.size(), group.rank()
    n = weight.shape[axis]
    pieces = mx.split(weight, _split_points(n, segments), axis=axis) if segments != 1 else [weight]
    mine = []
    for p in pieces:
        if p.shape[axis] % size:
            raise ValueError(f"[shard] Cannot shard an axis of size {p.shape[axis]} across {size} members.")
        mine.append(mx.split(p, size, axis=axis)[rank])
    return mx.contiguous(mine[0] if len(mine) == 1 else mx.concatenate(mine, axis=axis))


def _shard_tree(parameters, predicate, group):
    """The tree with each array sharded as ``predicate(path, array)`` says:
    None leaves it whole, an axis shards it, (axis, segments) shards each
    segment."""
    group = _group(group)

    def shard(path, value):
        if not isinstance(value, mx.array):
            return value
        rule = predicate(path, value)
        if rule is None:
            return value
        if isinstance(rule, int):
            axis, segments = rule, 1
        elif isinstance(rule, tuple) and len(rule) == 2:
            axis, segments = rule
        else:
            raise ValueError("[shard] The sharding function should return None, an axis, or (axis, segments).")
        return _member_slice(value, axis, segments, group)

    return tree_map_with_path(shard, parameters)


def _all_to_sharded(segments):
    # Output features: the weight's rows (axis -2 of a matrix), the bias.
    def rule(path, value):
        if path.endswith("bias"):
            return -1, segments
        return max(value.ndim - 2, 0), segments

    return rule


def _sharded_to_all(segments):
    # Input features: the weight's columns (and the quantization scales'
    # and biases' groups); the bias is added once, whole.
    def rule(path, value):
        if path.endswith("bias"):
            return None
        return -1, segments

    return rule


def _rule_for(sharding, segments):
    if sharding not in _SHARDINGS:
        raise ValueError(f"[shard] Sharding type {sharding!r} not supported, choose one of "
                         f"'all-to-sharded' or 'sharded-to-all'.")
    return _all_to_sharded(segments) if sharding == "all-to-sharded" else _sharded_to_all(segments)


def shard_inplace(module: Module, sharding: Union[str, Callable], *, segments: Union[int, list] = 1,
                  group: Optional[mx.distributed.Group] = None):
    """Replaces ``module``'s parameters by this member's shards. ``sharding``
    is "all-to-sharded", "sharded-to-all", or a function of (path, array)
    giving None, an axis, or (axis, segments). The module's computation is
    unchanged, so it communicates only if it does so itself."""
    rule = _rule_for(sharding, segments) if isinstance(sharding, str) else sharding
    module.update(_shard_tree(module.parameters(), rule, group))


def shard_linear(module: Module, sharding: str, *, segments: Union[int, list] = 1,
                 group: Optional[mx.distributed.Group] = None):
    """A new sharded layer from a Linear or QuantizedLinear ``module`` (left
    as it is), which communicates over ``group``: "all-to-sharded" makes an
    (Quantized)AllToShardedLinear, "sharded-to-all" a
    (Quantized)ShardedToAllLinear."""
    _rule_for(sharding, segments)
    dense = isinstance(module, Linear)
    if sharding == "all-to-sharded":
        make = AllToShardedLinear.from_linear if dense else QuantizedAllToShardedLinear.from_quantized_linear
    else:
        make = ShardedToAllLinear.from_linear if dense else QuantizedShardedToAllLinear.from_quantized_linear
    return make(module, segments=segments, group=group)


def _member_dims(what, dims, group):
    """dims / the group's size, which must divide it."""
    if dims % group.size():
        raise ValueError(f"[{what}] Cannot shard {dims} features across {group.size()} members of the group.")
    return dims // group.size()


def _sharded_copy(cls, layer, rule, group, input_dims, **settings):
    """A ``cls`` layer holding this member's shards of ``layer``'s
    parameters, as ``rule`` cuts them."""
    group = _group(group)
    sharded = cls(input_dims, layer.weight.shape[0], "bias" in layer, group=group, **settings)
    sharded.update(_shard_tree(layer.parameters(), rule, group))
    return sharded


class _DenseSharded(Module):
    """A random weight of the member's shape (and bias), drawn as Linear
    draws its own."""

    def __init__(self, weight_shape, bias_dims, group, bound):
        super().__init__()
        self.group = group
        self.weight = mx.random.uniform(-bound, bound, weight_shape)
        if bias_dims:
            self.bias = mx.random.uniform(-bound, bound, (bias_dims,))


class AllToShardedLinear(_DenseSharded):
    """``x W^T + b`` for this member's slice of the output features: every
    member holds the whole input, and the input's gradient is summed over
    the group."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        group = _group(group)
        out_dims = _member_dims("AllToShardedLinear", output_dims, group)
        super().__init__((out_dims, input_dims), out_dims if bias else 0, group, math.sqrt(1.0 / input_dims))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        return f"input_dims={in_dims}, output_dims={out_dims * self.group.size()}, bias={'bias' in self}"

    def __call__(self, x):
        x = sum_gradients(self.group)(x)
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None):
        return _sharded_copy(cls, linear_layer, _all_to_sharded(segments), group, linear_layer.weight.shape[1])


class ShardedToAllLinear(_DenseSharded):
    """``x W^T + b`` from this member's slice of the input features: the
    partial products are summed over the group (every member gets the whole
    result), then the bias is added once."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True,
                 group: Optional[mx.distributed.Group] = None):
        group = _group(group)
        in_dims = _member_dims("ShardedToAllLinear", input_dims, group)
        super().__init__((output_dims, in_dims), output_dims if bias else 0, group, math.sqrt(1.0 / input_dims))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        return f"input_dims={in_dims * self.group.size()}, output_dims={out_dims}, bias={'bias' in self}"

    def __call__(self, x):
        x = mx.distributed.all_sum(x @ self["weight"].T, group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(cls, linear_layer: Module, *, segments: Union[int, list] = 1,
                    group: Optional[mx.distributed.Group] = None):
        return _sharded_copy(cls, linear_layer, _sharded_to_all(segments), group, linear_layer.weight.shape[1])


class _QuantizedSharded(Module):
    """What the two quantized sharded layers share: the quantization
    settings, a quantized random weight of the member's shape, frozen
    parameters (as QuantizedLinear's), and the product with the input."""

    def __init__(self, weight_shape, bias_dims, group_size, bits, mode, group, bound):
        super().__init__()
        self.group = group
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        _store(self, mx.random.uniform(-bound, bound, weight_shape))
        if bias_dims:
            self.bias = mx.zeros((bias_dims,))
        self.freeze()

    def unfreeze(self, *args, **kwargs):
        """Unfreezes contained layers; this layer's own parameters stay
        frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(recurse=False)

    def _dims(self):
        out_dims, packed = self.weight.shape
        return out_dims, packed * 32 // self.bits

    def _repr_with(self, in_dims, out_dims):
        return (f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    def _product(self, x):
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"], biases=_biases(self), transpose=True,
                                   group_size=self.group_size, bits=self.bits, mode=self.mode)

    @classmethod
    def _from(cls, layer, rule, group):
        return _sharded_copy(cls, layer, rule, group, layer.weight.shape[1] * 32 // layer.bits,
                             group_size=layer.group_size, bits=layer.bits, mode=getattr(layer, "mode", "affine"))


class QuantizedAllToShardedLinear(_QuantizedSharded):
    """AllToShardedLinear with a quantized weight (frozen, as
    QuantizedLinear's)."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True, group_size: int = 64, bits: int = 4,
                 mode: str = "affine", group: Optional[mx.distributed.Group] = None):
        group = _group(group)
        out_dims = _member_dims("QuantizedAllToShardedLinear", output_dims, group)
        super().__init__((out_dims, input_dims), out_dims if bias else 0, group_size, bits, mode, group,
                         math.sqrt(1.0 / input_dims))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self._dims()
        return self._repr_with(in_dims, out_dims * self.group.size())

    def __call__(self, x):
        x = self._product(sum_gradients(self.group)(x))
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *, segments: Union[int, list] = 1,
                              group: Optional[mx.distributed.Group] = None):
        return cls._from(quantized_linear_layer, _all_to_sharded(segments), group)


class QuantizedShardedToAllLinear(_QuantizedSharded):
    """ShardedToAllLinear with a quantized weight (frozen, as
    QuantizedLinear's)."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True, group_size: int = 64, bits: int = 4,
                 mode: str = "affine", group: Optional[mx.distributed.Group] = None):
        group = _group(group)
        in_dims = _member_dims("QuantizedShardedToAllLinear", input_dims, group)
        super().__init__((output_dims, in_dims), output_dims if bias else 0, group_size, bits, mode, group,
                         math.sqrt(1.0 / input_dims))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self._dims()
        return self._repr_with(in_dims * self.group.size(), out_dims)

    def __call__(self, x):
        x = mx.distributed.all_sum(self._product(x), group=self.group)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_quantized_linear(cls, quantized_linear_layer: Module, *, segments: Union[int, list] = 1,
                              group: Optional[mx.distributed.Group] = None):
        return cls._from(quantized_linear_layer, _sharded_to_all(segments), group)


def _shardable(module, key, value):
    # A nested FullyShardedModule keeps its own shards.
    return not isinstance(value, FullyShardedModule) and Module.valid_parameter_filter(module, key, value)


def _gather(group, full_shapes, compute_dtype):
    """A function from this member's shards (axis 0 of each parameter) to
    the full parameters, in one all_gather of them packed together (cast to
    compute_dtype when given); its gradient reduce-scatters the cotangents
    (their mean over the group) back into shards of the shards' dtypes."""
    size = group.size()
    shard_sizes = [math.prod(s) // size for s in full_shapes]
    cuts = [sum(shard_sizes[:i]) for i in range(1, len(shard_sizes))]

    def cast(x, dtype):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)

    @mx.custom_function
    def gather(shards):
        packed = mx.concatenate([cast(s.reshape(1, -1), compute_dtype) for s in shards], axis=1)
        full = mx.distributed.all_gather(packed, group=group)  # (size, total shard size)
        return [p.reshape(s) for p, s in zip(mx.split(full, cuts, axis=1), full_shapes)]

    @gather.vjp
    def gather(shards, cotangents, outputs):
        rows = mx.concatenate([c.reshape(size, -1) for c in cotangents], axis=1)
        mine = mx.distributed.sum_scatter(rows, group=group) / size
        return [cast(p.reshape(s.shape), s.dtype) for p, s in zip(mx.split(mine, cuts, axis=1), shards)]

    return gather


class FullyShardedModule(Module):
    """``module`` holding only this member's shard of each parameter (axis 0
    split across ``group``): a call gathers the full parameters (cast to
    ``compute_dtype`` when given), and the gradients are reduce-scattered
    back to the shards, so each member stores and updates only its own.
    Made by ``fully_shard``."""

    def __init__(self, module: Module, group: Optional[mx.distributed.Group] = None,
                 compute_dtype: Optional[mx.Dtype] = None):
        super().__init__()
        group = _group(group)
        size = group.size()
        flat = tree_flatten(module.filter_and_map(_shardable))
        for path, value in flat:
            if value.ndim == 0:
                raise ValueError(f"[fully_shard] Cannot shard parameter '{path}': it is a scalar.")
            if value.shape[0] % size:
                raise ValueError(f"[fully_shard] Cannot shard parameter '{path}' of shape {tuple(value.shape)} "
                                 f"across {size} members: axis 0 must divide by {size}.")
        # Plain attributes, not parameters.
        object.__setattr__(self, "_paths", [p for p, _ in flat])
        gather = _gather(group, [tuple(v.shape) for _, v in flat], compute_dtype)
        module.update(_shard_tree(module.filter_and_map(_shardable), lambda path, value: 0, group))
        self.module = module
        object.__setattr__(self, "_gather_fn", gather)

    def _extra_repr(self) -> str:
        return f"num_sharded_params={len(self._paths)}"

    def _with_full_parameters(self, fn, *args, **kwargs):
        shards = self.module.filter_and_map(_shardable)
        full = self._gather_fn([v for _, v in tree_flatten(shards)])
        self.module.update(tree_unflatten(list(zip(self._paths, full))))
        try:
            return fn(*args, **kwargs)
        finally:
            self.module.update(shards)

    def __call__(self, *args, **kwargs):
        return self._with_full_parameters(self.module, *args, **kwargs)

    def as_linear(self, *args, **kwargs):
        return self._with_full_parameters(self.module.as_linear, *args, **kwargs)


def fully_shard(module: Module, *, group: Optional[mx.distributed.Group] = None,
                compute_dtype: Optional[mx.Dtype] = None) -> Module:
    """``module`` wrapped in a FullyShardedModule over ``group``; ``module``
    itself when the group has one member, it is wrapped already, or it has
    nothing to shard."""
    group = _group(group)
    if group.size() == 1 or isinstance(module, FullyShardedModule):
        return module
    wrapped = FullyShardedModule(module, group=group, compute_dtype=compute_dtype)
    return wrapped if wrapped._paths else module
