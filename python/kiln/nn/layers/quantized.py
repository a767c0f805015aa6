"""Quantized layers (every mode of ``kiln.core.quantize``: affine with
biases, mxfp4, mxfp8 and nvfp4 without): a Linear and an Embedding whose
weights are stored quantized, a Linear whose inputs are quantized too
(``QQLinear``, nvfp4 and mxfp8), and ``quantize``, which swaps a model's
quantizable layers for them, as MLX's ``nn.quantize``."""

import math
from typing import Callable, Optional, Union

import kiln.core as mx
from kiln.utils import tree_map_with_path

from .base import Module


# The modes whose products quantize the inputs too (kiln.core.qqmm).
_INPUT_MODES = ("nvfp4", "mxfp8")


def _check_input_quantization(quantize_input: bool, mode: str):
    if quantize_input and mode not in _INPUT_MODES:
        raise ValueError(f"[quantize] quantize_input (inputs quantized too) is only supported in the 'nvfp4' "
                         f"and 'mxfp8' modes; got {mode!r}.")


# Group size and bits when None is given, per mode (MLX's defaults).
_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}


def _defaults(mode, group_size, bits):
    if mode not in _DEFAULTS:
        raise ValueError(f"[quantize] mode {mode!r} is not one of {', '.join(map(repr, _DEFAULTS))}.")
    g, b = _DEFAULTS[mode]
    return (g if group_size is None else group_size), (b if bits is None else bits)


def _store(layer, weight):
    """Quantizes ``weight`` into the layer's weight, scales and (affine
    mode) biases."""
    parts = mx.quantize(weight, layer.group_size, layer.bits, mode=layer.mode)
    layer.weight, layer.scales = parts[0], parts[1]
    if layer.mode == "affine":
        layer.biases = parts[2]


def _biases(layer, index=None):
    if "biases" not in layer:
        return None
    return layer["biases"] if index is None else layer["biases"][index]


class QuantizedLinear(Module):
    """``y = x W^T + b`` with ``W`` stored quantized (``weight``, ``scales``,
    ``biases`` from ``kiln.core.quantize``). Its parameters start frozen, as
    MLX's do; ``from_linear`` leaves the bias it copies trainable."""

    def __init__(self, input_dims: int, output_dims: int, bias: bool = True, group_size: int = None,
                 bits: int = None, mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        bound = math.sqrt(1.0 / input_dims)
        _store(self, mx.random.uniform(-bound, bound, (output_dims, input_dims)))
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self) -> str:
        out_dims, packed = self.weight.shape
        in_dims = packed * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, bias={'bias' in self}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    def __call__(self, x):
        x = mx.quantized_matmul(x, self["weight"], scales=self["scales"], biases=_biases(self), transpose=True,
                                group_size=self.group_size, bits=self.bits, mode=self.mode)
        if "bias" in self:
            x = x + self["bias"]
        return x

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None, mode: str = "affine"):
        """A QuantizedLinear holding ``linear_layer``'s weight quantized (and
        its bias as it is)."""
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, False, group_size, bits, mode)
        _store(ql, linear_layer.weight)
        if "bias" in linear_layer:
            ql.bias = linear_layer.bias
        return ql


class QQLinear(Module):
    """``y = x W^T`` with both ``x`` and ``W`` through a microscaling mode
    (nvfp4 or mxfp8), ``kiln.core.qqmm``; no bias. In training mode the
    weight is kept in floating point and quantized on the fly, so it
    receives gradients (which quantize their products too); ``eval()``
    stores it quantized (``weight`` codes and ``scales``) and ``train()``
    dequantizes it back, as MLX's."""

    def __init__(self, input_dims: int, output_dims: int, group_size: int = None, bits: int = None,
                 mode: str = "nvfp4"):
        super().__init__()
        if mode not in _INPUT_MODES:
            raise ValueError(f"[QQLinear] mode must be 'nvfp4' or 'mxfp8'; got {mode!r}.")
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        bound = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-bound, bound, (output_dims, input_dims))
        self._quantized = False
        self._float_dtype = self.weight.dtype

    def _extra_repr(self) -> str:
        out_dims, in_dims = self.weight.shape
        if self._quantized:
            in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def quantize(self):
        """Stores the weight quantized (codes and scales)."""
        if not self._quantized:
            self._float_dtype = self.weight.dtype
            self.weight, self.scales = mx.quantize(self.weight, self.group_size, self.bits, mode=self.mode)
            self._quantized = True

    def dequantize(self):
        """Stores the weight in floating point again, in the type it had
        (MLX's becomes bfloat16, dequantize's default)."""
        if self._quantized:
            self.weight = mx.dequantize(self.weight, scales=self.scales, group_size=self.group_size,
                                        bits=self.bits, mode=self.mode, dtype=self._float_dtype)
            del self.scales
            self._quantized = False

    def _set_training_mode(self, mode: bool):
        super()._set_training_mode(mode)
        if self._training:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer: Module, group_size: int = None, bits: int = None, mode: str = "nvfp4"):
        """A QQLinear holding ``linear_layer``'s weight, in its training mode
        (quantized when it is in eval mode). The layer must have no bias."""
        if "bias" in linear_layer:
            raise NotImplementedError("[QQLinear] a bias is not supported yet.")
        output_dims, input_dims = linear_layer.weight.shape
        ql = cls(input_dims, output_dims, group_size, bits, mode)
        ql.weight = linear_layer.weight
        ql.train(linear_layer.training)
        return ql


class QuantizedEmbedding(Module):
    """An Embedding whose table is stored quantized; rows are dequantized
    as they are looked up."""

    def __init__(self, num_embeddings: int, dims: int, group_size: int = None, bits: int = None,
                 mode: str = "affine"):
        super().__init__()
        self.group_size, self.bits = _defaults(mode, group_size, bits)
        self.mode = mode
        self.num_embeddings = num_embeddings
        self.dims = dims
        _store(self, mx.random.normal((num_embeddings, dims), scale=math.sqrt(1 / dims)))
        self.freeze()

    def _extra_repr(self):
        return f"{self.num_embeddings}, {self.dims}, group_size={self.group_size}, bits={self.bits}, mode={self.mode}"

    def __call__(self, x):
        shape = x.shape
        x = x.flatten()
        out = mx.dequantize(self["weight"][x], scales=self["scales"][x], biases=_biases(self, x),
                            group_size=self.group_size, bits=self.bits, mode=self.mode)
        return out.reshape(*shape, -1)

    def as_linear(self, x):
        """The table as a linear layer, ``x @ weight.T`` (tied output
        projections)."""
        return mx.quantized_matmul(x, self["weight"], scales=self["scales"], biases=_biases(self),
                                   transpose=True, group_size=self.group_size, bits=self.bits, mode=self.mode)

    @classmethod
    def from_embedding(cls, embedding_layer: Module, group_size: int = None, bits: int = None,
                       mode: str = "affine"):
        """A QuantizedEmbedding holding ``embedding_layer``'s table quantized."""
        num_embeddings, dims = embedding_layer.weight.shape
        qe = cls(num_embeddings, dims, group_size, bits, mode)
        _store(qe, embedding_layer.weight)
        return qe


def quantize(model: Module, group_size: int = None, bits: int = None, *, mode: str = "affine",
             quantize_input: bool = False,
             class_predicate: Optional[Callable[[str, Module], Union[bool, dict]]] = None):
    """Swaps ``model``'s leaf layers that can be quantized (those with a
    ``to_quantized`` method: Linear, Embedding) for their quantized forms, in
    place. ``class_predicate(path, module)`` picks the layers: False leaves
    one alone, True quantizes it with these arguments, a dict gives its own."""
    _check_input_quantization(quantize_input, mode)
    predicate = class_predicate or (lambda _, m: hasattr(m, "to_quantized"))

    def maybe_quantize(path, m):
        choice = predicate(path, m)
        if not choice:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"[quantize] cannot quantize a layer of type {type(m).__name__}")
        if isinstance(choice, dict):
            return m.to_quantized(**choice)
        kwargs = {"group_size": group_size, "bits": bits, "mode": mode}
        if quantize_input:  # layers of one's own may not take the argument
            kwargs["quantize_input"] = True
        return m.to_quantized(**kwargs)

    leaves = tree_map_with_path(maybe_quantize, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)
