"""Embedding: a lookup table of vectors."""

import math

import kiln.core as mx

from .base import Module


class Embedding(Module):
    """Maps integer indices to rows of a ``(num_embeddings, dims)`` table,
    initialized from ``N(0, 1/dims)``."""

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        self.weight = mx.random.normal((num_embeddings, dims), scale=math.sqrt(1 / dims))

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """Use the table as a linear layer, ``x @ weight.T`` (the output
        projection of a model with tied embeddings)."""
        return x @ self.weight.T

    def to_quantized(self, group_size: int = None, bits: int = None, mode: str = "affine",
                     quantize_input: bool = False):
        """This layer as a QuantizedEmbedding (nn.quantize calls it); an
        embedding's input (indices) is not quantized."""
        from .quantized import QuantizedEmbedding

        if quantize_input:
            raise ValueError("[quantize] an Embedding's input cannot be quantized (quantize_input).")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
