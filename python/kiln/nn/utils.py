"""Transformations over a module's trainable parameters."""

from functools import wraps
from itertools import accumulate
from typing import Any, Callable, Optional

import kiln.core as mx

from .layers.base import Module


def value_and_grad(model: Module, fn: Callable):
    """``fn``'s value and its gradient with respect to ``model``'s trainable
    parameters. The returned function takes ``fn``'s arguments."""

    def inner(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    value_grad = mx.value_and_grad(inner)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = model.trainable_parameters()
        try:
            return value_grad(params, *args, **kwargs)
        finally:
            # The traced call left the transformation's inputs in the model.
            model.update(params)

    return wrapped


def checkpoint(module: Module, fn: Optional[Callable] = None):
    """``fn`` (the module itself by default) with gradient checkpointing:
    the backward pass recomputes the intermediates instead of keeping them,
    with respect to the module's trainable parameters and ``fn``'s
    inputs."""
    fn = module if fn is None else fn

    def inner(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    checkpointed = mx.checkpoint(inner)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        params = module.trainable_parameters()
        try:
            return checkpointed(params, *args, **kwargs)
        finally:
            module.update(params)

    return wrapped


def average_gradients(
    gradients: Any,
    group: Optional[Any] = None,
    all_reduce_size: int = 32 * 1024**2,
    communication_stream: Optional[mx.Stream] = None,
):
    """Average gradients over the processes of a distributed group (the sum
    over the group divided by its size).

    Small gradients travel together: arrays of one dtype are flattened into
    buckets of at least ``all_reduce_size`` bytes, each bucket is summed by
    one ``all_sum`` and split back (``all_reduce_size <= 0`` sums each array
    on its own). The tree must have the same structure on every process.
    """
    from kiln.utils import tree_flatten, tree_unflatten

    group = group or mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients

    def reduce(x):
        return mx.distributed.all_sum(x, group=group, stream=communication_stream) / n

    leaves = tree_flatten(gradients)
    if not leaves:
        return gradients

    out = [None] * len(leaves)

    def flush(bucket):
        if len(bucket) == 1:
            i = bucket[0]
            out[i] = (leaves[i][0], reduce(leaves[i][1]))
            return
        flat = mx.concatenate([leaves[i][1].reshape(-1) for i in bucket])
        summed = reduce(flat)
        offsets = list(accumulate(leaves[i][1].size for i in bucket[:-1]))
        for i, part in zip(bucket, mx.split(summed, offsets)):
            out[i] = (leaves[i][0], part.reshape(leaves[i][1].shape))

    # One open bucket per dtype, closed once it holds all_reduce_size bytes
    # (at once when that is 0 or less).
    open_buckets = {}
    for i, (_, v) in enumerate(leaves):
        b = open_buckets.setdefault(v.dtype, [[], 0])
        b[0].append(i)
        b[1] += v.nbytes
        if b[1] >= all_reduce_size:
            flush(b[0])
            del open_buckets[v.dtype]
    for bucket, _ in open_buckets.values():
        flush(bucket)
    return tree_unflatten(out)


def clip_grad_norm_sharded(gradients: Any, max_norm: float, group: Optional[Any] = None):
    """``kiln.optimizers.clip_grad_norm`` for gradients sharded across a
    group (as ``fully_shard`` leaves them): the global norm sums the members'
    squared norms. Returns the rescaled local gradients and the global norm."""
    from kiln.optimizers.optimizers import check_max_norm, clip_to_norm, squared_norm

    check_max_norm("clip_grad_norm_sharded", max_norm)
    norm = mx.sqrt(mx.distributed.all_sum(squared_norm(gradients), group=group))
    return clip_to_norm(gradients, norm, max_norm)
