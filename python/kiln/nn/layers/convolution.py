"""Convolutions over channels-last inputs: (N, L, C), (N, H, W, C) and
(N, D, H, W, C), with weights (C_out, *kernel, C_in / groups)."""

import math
from typing import Union

import kiln.core as mx

from ._arguments import int_tuple, positive_int
from .base import Module


def init_conv_parameters(
    module, owner, in_channels, out_channels, kernel_size, groups, bias
):
    """Give ``module`` MLX's convolution weight, uniform in +-1/sqrt(fan_in)
    with fan_in = in_channels / groups * prod(kernel_size), and a zero bias
    when ``bias``."""
    in_channels = positive_int(in_channels, owner, "in_channels")
    out_channels = positive_int(out_channels, owner, "out_channels")
    groups = positive_int(groups, owner, "groups")
    if in_channels % groups != 0 or out_channels % groups != 0:
        raise ValueError(
            f"[{owner}] The number of input channels ({in_channels}) and output "
            f"channels ({out_channels}) must be divisible by the number of "
            f"groups ({groups})."
        )
    fan_in = in_channels // groups * math.prod(kernel_size)
    scale = math.sqrt(1 / fan_in)
    module.weight = mx.random.uniform(
        low=-scale,
        high=scale,
        shape=(out_channels, *kernel_size, in_channels // groups),
    )
    if bias:
        module.bias = mx.zeros((out_channels,))


class Conv1d(Module):
    """A 1-d convolution over inputs of shape ``NLC`` (channels last).

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int): the filter's length.
        stride (int): the filter's step. Default: ``1``.
        padding (int): zeros added on both sides of ``L``. Default: ``0``.
        dilation (int): spacing of the filter's taps. Default: ``1``.
        groups (int): channel groups convolved separately. Default: ``1``.
        bias (bool): add a learnable bias. Default: ``True``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        super().__init__()
        name = "Conv1d"
        kernel_size = positive_int(kernel_size, name, "kernel_size")
        init_conv_parameters(
            self, name, in_channels, out_channels, (kernel_size,), groups, bias
        )
        self.padding = int_tuple(padding, 1, name, "padding", minimum=0)[0]
        self.dilation = positive_int(dilation, name, "dilation")
        self.stride = positive_int(stride, name, "stride")
        self.groups = groups

    def _extra_repr(self):
        return (
            f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
            f"kernel_size={self.weight.shape[1]}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}, "
            f"groups={self.groups}, bias={'bias' in self}"
        )

    def __call__(self, x):
        y = mx.conv1d(
            x, self.weight, self.stride, self.padding, self.dilation, self.groups
        )
        return y + self.bias if "bias" in self else y


class _ConvNd(Module):
    """Conv2d and Conv3d: the same arguments as tuples of ``_ndim`` ints."""

    _ndim: int

    def __init__(
        self, in_channels, out_channels, kernel_size, stride, padding, dilation,
        groups, bias,
    ):
        super().__init__()
        name, n = type(self).__name__, self._ndim
        kernel_size = int_tuple(kernel_size, n, name, "kernel_size", minimum=1)
        init_conv_parameters(
            self, name, in_channels, out_channels, kernel_size, groups, bias
        )
        self.padding = int_tuple(padding, n, name, "padding", minimum=0)
        self.stride = int_tuple(stride, n, name, "stride", minimum=1)
        int_tuple(dilation, n, name, "dilation", minimum=1)
        # Kept as given (int or tuple), as MLX keeps it.
        self.dilation = dilation
        self.groups = groups

    def _extra_repr(self):
        groups = f"groups={self.groups}, " if self._ndim == 2 else ""
        return (
            f"{self.weight.shape[-1] * self.groups}, {self.weight.shape[0]}, "
            f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}, "
            f"{groups}bias={'bias' in self}"
        )

    def __call__(self, x):
        if self._ndim == 2:
            y = mx.conv2d(
                x, self.weight, self.stride, self.padding, self.dilation, self.groups
            )
        else:
            y = mx.conv3d(x, self.weight, self.stride, self.padding, self.dilation)
        return y + self.bias if "bias" in self else y


class Conv2d(_ConvNd):
    """A 2-d convolution over inputs of shape ``NHWC`` (channels last).

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int or tuple): the filter's size.
        stride (int or tuple): the filter's step. Default: ``1``.
        padding (int or tuple): zeros added on both sides of ``H`` and ``W``.
            Default: ``0``.
        dilation (int or tuple): spacing of the filter's taps. Default: ``1``.
        groups (int): channel groups convolved separately. Default: ``1``.
        bias (bool): add a learnable bias. Default: ``True``.
    """

    _ndim = 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, tuple],
        stride: Union[int, tuple] = 1,
        padding: Union[int, tuple] = 0,
        dilation: Union[int, tuple] = 1,
        groups: int = 1,
        bias: bool = True,
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation,
            groups, bias,
        )


class Conv3d(_ConvNd):
    """A 3-d convolution over inputs of shape ``NDHWC`` (channels last).

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int or tuple): the filter's size.
        stride (int or tuple): the filter's step. Default: ``1``.
        padding (int or tuple): zeros added on both sides of each spatial
            axis. Default: ``0``.
        dilation (int or tuple): spacing of the filter's taps. Default: ``1``.
        bias (bool): add a learnable bias. Default: ``True``.
    """

    _ndim = 3

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, tuple],
        stride: Union[int, tuple] = 1,
        padding: Union[int, tuple] = 0,
        dilation: Union[int, tuple] = 1,
        bias: bool = True,
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation,
            1, bias,
        )
