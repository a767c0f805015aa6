"""Max and average pooling over the spatial axes of channels-last inputs.

The input is padded, viewed as its windows and reduced over the window
axes. Windows that tile the input (the stride is the window, the default)
are a reshape: (N, P0, W0, P1, W1, ..., C), reduced over the W axes, so
the gradient is a reshape too. Other windows are an ``as_strided`` view
(no copy: each window position and each tap within it is a stride of the
padded array), whose gradient adds the cotangents up by position."""

import math
from typing import Optional, Tuple, Union

import kiln.core as mx

from ._arguments import int_tuple
from .base import Module


def _row_strides(shape):
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    return strides


def _sliding_windows(x, window, stride):
    """View ``x`` of shape (N, *spatial, C) as (N, *positions, *window, C)."""
    spatial = x.shape[1:-1]
    # A window longer than the (padded) input has no position (as MLX).
    positions = [max(0, (s - w) // st + 1) for s, w, st in zip(spatial, window, stride)]
    strides = _row_strides(x.shape)
    spatial_strides = strides[1:-1]
    shape = [x.shape[0], *positions, *window, x.shape[-1]]
    view_strides = [
        strides[0],
        *(st * s for st, s in zip(stride, spatial_strides)),
        *spatial_strides,
        strides[-1],
    ]
    return mx.as_strided(x, shape, view_strides)


def _tiles(x, window):
    """Windows that tile ``x`` (N, *spatial, C), a spatial remainder
    dropped: the view (N, P0, W0, P1, W1, ..., C) and its window axes."""
    spatial = x.shape[1:-1]
    positions = [s // w for s, w in zip(spatial, window)]
    if any(p * w != s for p, w, s in zip(positions, window, spatial)):
        x = x[(slice(None), *(slice(0, p * w) for p, w in zip(positions, window)))]
    shape = [x.shape[0]]
    for p, w in zip(positions, window):
        shape += [p, w]
    shape.append(x.shape[-1])
    return x.reshape(shape), tuple(range(2, 2 * len(window) + 1, 2))


class _Pool(Module):
    """Pooling with a reduction (max or mean) over ``_ndim`` spatial axes,
    after padding both sides with ``_padding_value``."""

    _ndim: int

    def __init__(self, reduce, padding_value, kernel_size, stride, padding):
        super().__init__()
        name, n = type(self).__name__, self._ndim
        self._kernel_size = int_tuple(kernel_size, n, name, "kernel_size", minimum=1)
        stride = self._kernel_size if stride is None else stride
        self._stride = int_tuple(stride, n, name, "stride", minimum=1)
        self._padding = int_tuple(padding, n, name, "padding", minimum=0)
        self._axes = tuple(range(-n - 1, -1))
        self._pooling_function = reduce
        self._padding_value = padding_value

    def _extra_repr(self):
        return (
            f"kernel_size={self._kernel_size}, stride={self._stride}, "
            f"padding={self._padding}"
        )

    def __call__(self, x):
        n = self._ndim
        if x.ndim != n + 2:
            raise ValueError(
                f"[{type(self).__name__}] expected a {n + 2}-d input (batch, "
                f"{n} spatial axes, channels) but got shape {tuple(x.shape)}."
            )
        if any(self._padding):
            pad_width = [(0, 0), *((p, p) for p in self._padding), (0, 0)]
            x = mx.pad(x, pad_width, constant_values=self._padding_value)
        if self._stride == self._kernel_size:
            windows, axes = _tiles(x, self._kernel_size)
            return self._pooling_function(windows, axes)
        windows = _sliding_windows(x, self._kernel_size, self._stride)
        return self._pooling_function(windows, self._axes)


class MaxPool1d(_Pool):
    """1-d max pooling over inputs of shape ``NLC``.

    Args:
        kernel_size (int or tuple(int)): the window's length.
        stride (int or tuple(int), optional): the window's step. Default:
            ``kernel_size``.
        padding (int or tuple(int)): negative infinity added on both sides.
            Default: ``0``.
    """

    _ndim = 1

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int]],
        stride: Optional[Union[int, Tuple[int]]] = None,
        padding: Union[int, Tuple[int]] = 0,
    ):
        super().__init__(mx.max, -math.inf, kernel_size, stride, padding)


class MaxPool2d(_Pool):
    """2-d max pooling over inputs of shape ``NHWC``.

    Args:
        kernel_size (int or tuple(int, int)): the window's size.
        stride (int or tuple(int, int), optional): the window's step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int)): negative infinity added on both
            sides of each spatial axis. Default: ``0``.
    """

    _ndim = 2

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int, int]],
        stride: Optional[Union[int, Tuple[int, int]]] = None,
        padding: Optional[Union[int, Tuple[int, int]]] = 0,
    ):
        super().__init__(mx.max, -math.inf, kernel_size, stride, padding)


class MaxPool3d(_Pool):
    """3-d max pooling over inputs of shape ``NDHWC``.

    Args:
        kernel_size (int or tuple(int, int, int)): the window's size.
        stride (int or tuple(int, int, int), optional): the window's step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int, int)): negative infinity added on
            both sides of each spatial axis. Default: ``0``.
    """

    _ndim = 3

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int, int, int]],
        stride: Optional[Union[int, Tuple[int, int, int]]] = None,
        padding: Optional[Union[int, Tuple[int, int, int]]] = 0,
    ):
        super().__init__(mx.max, -math.inf, kernel_size, stride, padding)


class AvgPool1d(_Pool):
    """1-d average pooling over inputs of shape ``NLC``. Padding adds zeros,
    which count in the average.

    Args:
        kernel_size (int or tuple(int)): the window's length.
        stride (int or tuple(int), optional): the window's step. Default:
            ``kernel_size``.
        padding (int or tuple(int)): zeros added on both sides. Default:
            ``0``.
    """

    _ndim = 1

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int]],
        stride: Optional[Union[int, Tuple[int]]] = None,
        padding: Union[int, Tuple[int]] = 0,
    ):
        super().__init__(mx.mean, 0, kernel_size, stride, padding)


class AvgPool2d(_Pool):
    """2-d average pooling over inputs of shape ``NHWC``. Padding adds zeros,
    which count in the average.

    Args:
        kernel_size (int or tuple(int, int)): the window's size.
        stride (int or tuple(int, int), optional): the window's step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int)): zeros added on both sides of each
            spatial axis. Default: ``0``.
    """

    _ndim = 2

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int, int]],
        stride: Optional[Union[int, Tuple[int, int]]] = None,
        padding: Optional[Union[int, Tuple[int, int]]] = 0,
    ):
        super().__init__(mx.mean, 0, kernel_size, stride, padding)


class AvgPool3d(_Pool):
    """3-d average pooling over inputs of shape ``NDHWC``. Padding adds
    zeros, which count in the average.

    Args:
        kernel_size (int or tuple(int, int, int)): the window's size.
        stride (int or tuple(int, int, int), optional): the window's step.
            Default: ``kernel_size``.
        padding (int or tuple(int, int, int)): zeros added on both sides of
            each spatial axis. Default: ``0``.
    """

    _ndim = 3

    def __init__(
        self,
        kernel_size: Union[int, Tuple[int, int, int]],
        stride: Optional[Union[int, Tuple[int, int, int]]] = None,
        padding: Optional[Union[int, Tuple[int, int, int]]] = 0,
    ):
        super().__init__(mx.mean, 0, kernel_size, stride, padding)
