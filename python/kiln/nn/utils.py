"""Transformations over a module's trainable parameters."""

from functools import wraps
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
    """Average gradients over the processes of a distributed group (the
    sum over the group divided by its size). kiln's groups hold one process
    (``kiln.core.distributed``), where the average is the gradients
    themselves."""
    group = group or mx.distributed.init()
    if group.size() == 1:
        return gradients
    from kiln.utils import tree_map

    return tree_map(lambda g: mx.distributed.all_sum(g, group=group) / group.size(), gradients)


def clip_grad_norm_sharded(gradients: Any, max_norm: float, group: Optional[Any] = None):
    """``kiln.optimizers.clip_grad_norm`` for gradients sharded across a
    group (as ``fully_shard`` leaves them): the global norm sums the members'
    squared norms. Returns the rescaled local gradients and the global norm."""
    from kiln.optimizers.optimizers import clip_to_norm, squared_norm

    norm = mx.sqrt(mx.distributed.all_sum(squared_norm(gradients), group=group))
    return clip_to_norm(gradients, norm, max_norm)
