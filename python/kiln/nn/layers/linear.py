"""Affine layers: Identity, Linear and Bilinear."""

import math
from typing import Any

import kiln.core as mx

from .base import Module


class Identity(Module):
    """Returns its input unchanged; accepts (and ignores) any constructor
    arguments, so it can stand in for another layer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """``y = x W^T + b`` with ``W`` of shape ``(output_dims, input_dims)``.

    ``W`` and ``b`` start uniform in ``[-k, k]`` with ``k = 1/sqrt(input_dims)``.
    """

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True) -> None:
        super().__init__()
        bound = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-bound, bound, (output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (output_dims,))

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        return f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}"

    def __call__(self, x):
        if "bias" in self:
            # One addmm, so the GEMM applies the bias in its epilogue.
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T

    def to_quantized(self, group_size: int = None, bits: int = None, mode: str = "affine",
                     quantize_input: bool = False):
        """This layer as a QuantizedLinear, or with ``quantize_input`` (nvfp4
        and mxfp8) a QQLinear, whose inputs are quantized too (nn.quantize
        calls it)."""
        from .quantized import QQLinear, QuantizedLinear, _check_input_quantization

        _check_input_quantization(quantize_input, mode)
        if quantize_input:
            return QQLinear.from_linear(self, group_size, bits, mode)
        return QuantizedLinear.from_linear(self, group_size, bits, mode)


class Bilinear(Module):
    """``y_i = x1^T W_i x2 + b_i`` with ``W`` of shape
    ``(output_dims, input2_dims, input1_dims)``.

    ``W`` and ``b`` start uniform in ``[-k, k]`` with ``k = 1/sqrt(input1_dims)``.
    """

    def __init__(
        self, input1_dims: int, input2_dims: int, output_dims: int, bias: bool = True
    ) -> None:
        super().__init__()
        bound = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(-bound, bound, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = mx.random.uniform(-bound, bound, (output_dims,))

    def _extra_repr(self) -> str:
        out_dims, in2, in1 = self.weight.shape
        return (
            f"input1_dims={in1}, input2_dims={in2}, output_dims={out_dims}, "
            f"bias={'bias' in self}"
        )

    def __call__(self, x1, x2):
        out_dims, in2, in1 = self.weight.shape
        batch_shape = x1.shape[:-1]
        x1 = x1.reshape(-1, in1)
        x2 = x2.reshape(-1, 1, in2)
        # Contract x1 first with one GEMM: (B, in1) @ (in1, out*in2), then
        # each row's (in2, out) block with its x2 row.
        y = x1 @ self.weight.reshape(out_dims * in2, in1).T
        y = y.reshape(-1, out_dims, in2).swapaxes(-2, -1)
        y = (x2 @ y).squeeze(1)
        y = y.reshape(*batch_shape, out_dims)
        if "bias" in self:
            y = y + self.bias
        return y
