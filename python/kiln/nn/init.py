"""Initializers, as in ``mlx.nn.init``: each function returns an
initializer that takes an array and returns a new array of its shape (and
the initializer's ``dtype``)."""

import math
from typing import Callable, Literal

import kiln.core as mx


def constant(value: float, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """Fill with ``value``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(
    mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Draw from ``N(mean, std^2)``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.random.normal(a.shape, dtype=dtype, loc=mean, scale=std)

    return initializer


def uniform(
    low: float = 0.0, high: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """Draw from ``U(low, high)``."""

    def initializer(a: mx.array) -> mx.array:
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """The identity matrix, for square 2-D arrays."""

    def initializer(arr: mx.array) -> mx.array:
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"The input array must be a square matrix but got shape {arr.shape}.")
        return mx.eye(arr.shape[0], dtype=dtype)

    return initializer


def _fans(a):
    """``(fan_in, fan_out)`` of a weight of shape ``(out, *receptive, in)``
    (kiln's Linear and Conv layouts)."""
    if a.ndim < 2:
        raise ValueError(
            "Glorot / He initialization requires at least 2 dimensional input"
            f" but input with {a.ndim} dimensions."
        )
    receptive = math.prod(a.shape[1:-1])
    return a.shape[-1] * receptive, a.shape[0] * receptive


def _fan(a, mode):
    fan_in, fan_out = _fans(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")


def glorot_normal(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    """Glorot (Xavier) normal: ``N(0, std^2)`` with
    ``std = gain * sqrt(2 / (fan_in + fan_out))``."""

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _fans(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(a.shape, dtype=dtype, scale=std)

    return initializer


def glorot_uniform(dtype: mx.Dtype = mx.float32) -> Callable[[mx.array, float], mx.array]:
    """Glorot (Xavier) uniform: ``U(-limit, limit)`` with
    ``limit = gain * sqrt(6 / (fan_in + fan_out))``."""

    def initializer(a: mx.array, gain: float = 1.0) -> mx.array:
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def he_normal(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    """He (Kaiming) normal: ``N(0, std^2)`` with ``std = gain / sqrt(fan)``,
    ``fan`` the fan-in or fan-out by ``mode``."""

    def initializer(
        a: mx.array, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0
    ) -> mx.array:
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(a.shape, dtype=dtype, scale=std)

    return initializer


def he_uniform(
    dtype: mx.Dtype = mx.float32,
) -> Callable[[mx.array, Literal["fan_in", "fan_out"], float], mx.array]:
    """He (Kaiming) uniform: ``U(-limit, limit)`` with
    ``limit = gain * sqrt(3 / fan)``, ``fan`` the fan-in or fan-out by
    ``mode``."""

    def initializer(
        a: mx.array, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0
    ) -> mx.array:
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(
    sparsity: float, mean: float = 0.0, std: float = 1.0, dtype: mx.Dtype = mx.float32
) -> Callable[[mx.array], mx.array]:
    """``N(mean, std^2)`` with ``ceil(sparsity * cols)`` entries of each row
    of a 2-D array set to zero, at random columns chosen per row."""

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        # Sorting random keys along each row gives each row its own
        # random column order; its first num_zeros columns are zeroed.
        order = mx.argsort(mx.random.uniform(shape=a.shape), axis=1)
        out = mx.random.normal(a.shape, dtype=dtype, loc=mean, scale=std)
        out[mx.arange(rows).reshape(rows, 1), order[:, :num_zeros]] = 0
        return out

    return initializer


def orthogonal(gain: float = 1.0, dtype: mx.Dtype = mx.float32) -> Callable[[mx.array], mx.array]:
    """A (semi-)orthogonal matrix scaled by ``gain``: the ``Q`` factor of a
    random normal square matrix, cut to the array's 2-D shape."""

    def initializer(a: mx.array) -> mx.array:
        if a.ndim != 2:
            raise ValueError(
                "Orthogonal initialization requires a 2D array but got" f" a {a.ndim}D array."
            )
        rows, cols = a.shape
        n = max(rows, cols)
        q, r = mx.linalg.qr(mx.random.normal((n, n)), stream=mx.cpu)
        # Q is unique up to the signs of R's diagonal; fixing them makes the
        # result uniformly distributed over orthogonal matrices.
        diag = r[mx.arange(n), mx.arange(n)]
        q = q * mx.sign(diag)
        return (q[:rows, :cols] * gain).astype(dtype)

    return initializer
