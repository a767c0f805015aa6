"""Transposed convolutions (the gradients of the convolutions with respect to
their inputs) over channels-last inputs, with weights
(C_out, *kernel, C_in)."""

from typing import Union

import kiln.core as mx

from ._arguments import int_tuple, positive_int
from .base import Module
from .convolution import init_conv_parameters


class ConvTranspose1d(Module):
    """A 1-d transposed convolution over inputs of shape ``NLC``.

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int): the filter's length.
        stride (int): the filter's step. Default: ``1``.
        padding (int): removed from both sides of the output. Default: ``0``.
        dilation (int): spacing of the filter's taps. Default: ``1``.
        output_padding (int): extra size added to one side of the output.
            Default: ``0``.
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
        output_padding: int = 0,
        bias: bool = True,
    ):
        super().__init__()
        name = "ConvTranspose1d"
        kernel_size = positive_int(kernel_size, name, "kernel_size")
        init_conv_parameters(
            self, name, in_channels, out_channels, (kernel_size,), 1, bias
        )
        self.padding = int_tuple(padding, 1, name, "padding", minimum=0)[0]
        self.dilation = positive_int(dilation, name, "dilation")
        self.stride = positive_int(stride, name, "stride")
        self.output_padding = int_tuple(
            output_padding, 1, name, "output_padding", minimum=0
        )[0]

    def _extra_repr(self):
        return (
            f"{self.weight.shape[-1]}, {self.weight.shape[0]}, "
            f"kernel_size={self.weight.shape[1]}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}, "
            f"output_padding={self.output_padding}, bias={'bias' in self}"
        )

    def __call__(self, x):
        y = mx.conv_transpose1d(
            x,
            self.weight,
            self.stride,
            self.padding,
            self.dilation,
            self.output_padding,
        )
        return y + self.bias if "bias" in self else y


class _ConvTransposeNd(Module):
    """ConvTranspose2d and ConvTranspose3d: the same arguments as tuples of
    ``_ndim`` ints."""

    _ndim: int

    def __init__(
        self,
        in_channels, out_channels, kernel_size, stride, padding, dilation,
        output_padding, bias,
    ):
        super().__init__()
        name, n = type(self).__name__, self._ndim
        kernel_size = int_tuple(kernel_size, n, name, "kernel_size", minimum=1)
        init_conv_parameters(self, name, in_channels, out_channels, kernel_size, 1, bias)
        self.padding = int_tuple(padding, n, name, "padding", minimum=0)
        self.stride = int_tuple(stride, n, name, "stride", minimum=1)
        int_tuple(dilation, n, name, "dilation", minimum=1)
        # Kept as given (int or tuple), as MLX keeps it.
        self.dilation = dilation
        self.output_padding = int_tuple(
            output_padding, n, name, "output_padding", minimum=0
        )

    def _extra_repr(self):
        return (
            f"{self.weight.shape[-1]}, {self.weight.shape[0]}, "
            f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
            f"padding={self.padding}, dilation={self.dilation}, "
            f"output_padding={self.output_padding}, bias={'bias' in self}"
        )

    def __call__(self, x):
        conv = mx.conv_transpose2d if self._ndim == 2 else mx.conv_transpose3d
        y = conv(
            x,
            self.weight,
            self.stride,
            self.padding,
            self.dilation,
            self.output_padding,
        )
        return y + self.bias if "bias" in self else y


class ConvTranspose2d(_ConvTransposeNd):
    """A 2-d transposed convolution over inputs of shape ``NHWC``.

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int or tuple): the filter's size.
        stride (int or tuple): the filter's step. Default: ``1``.
        padding (int or tuple): removed from both sides of each output axis.
            Default: ``0``.
        dilation (int or tuple): spacing of the filter's taps. Default: ``1``.
        output_padding (int or tuple): extra size added to one side of each
            output axis. Default: ``0``.
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
        output_padding: Union[int, tuple] = 0,
        bias: bool = True,
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation,
            output_padding, bias,
        )


class ConvTranspose3d(_ConvTransposeNd):
    """A 3-d transposed convolution over inputs of shape ``NDHWC``.

    Args:
        in_channels (int): input channels ``C``.
        out_channels (int): output channels.
        kernel_size (int or tuple): the filter's size.
        stride (int or tuple): the filter's step. Default: ``1``.
        padding (int or tuple): removed from both sides of each output axis.
            Default: ``0``.
        dilation (int or tuple): spacing of the filter's taps. Default: ``1``.
        output_padding (int or tuple): extra size added to one side of each
            output axis. Default: ``0``.
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
        output_padding: Union[int, tuple] = 0,
        bias: bool = True,
    ):
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation,
            output_padding, bias,
        )
