"""Multi-head attention and the transformer of "Attention Is All You Need",
with pre-norm (``norm_first``, the default) or post-norm residual blocks."""

import math
from typing import Any, Callable, Optional

import kiln.core as mx

from ..utils import checkpoint
from .activations import relu
from .base import Module
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm


class MultiHeadAttention(Module):
    """Scaled dot-product attention over ``num_heads`` heads, with linear
    projections (without bias by default) of the queries, keys and values
    in and of the result out.

    ``mask`` is additive (``-inf`` or a large negative number where a query
    must not see a key) or boolean (``True`` where it may), broadcastable
    to ``(batch, num_heads, # queries, # keys)``.

    Args:
        dims (int): the model size: the projected queries' and keys' size
            and the default for every other size.
        num_heads (int): the number of heads; must divide ``dims``.
        query_input_dims (int, optional): the queries' size. Default:
            ``dims``.
        key_input_dims (int, optional): the keys' size. Default: ``dims``.
        value_input_dims (int, optional): the values' size. Default:
            ``key_input_dims``.
        value_dims (int, optional): the projected values' size. Default:
            ``dims``.
        value_output_dims (int, optional): the output's size. Default:
            ``dims``.
        bias (bool): give the projections a bias. Default: ``False``.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        query_input_dims: Optional[int] = None,
        key_input_dims: Optional[int] = None,
        value_input_dims: Optional[int] = None,
        value_dims: Optional[int] = None,
        value_output_dims: Optional[int] = None,
        bias: bool = False,
    ):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError(
                "The input feature dimensions should be divisible by the "
                f"number of heads ({dims} % {num_heads}) != 0"
            )
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        if value_dims % num_heads != 0:
            raise ValueError(
                "The value dimensions should be divisible by the number of "
                f"heads ({value_dims} % {num_heads}) != 0"
            )
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def _split_heads(self, x, what):
        """(B, L, H * d) -> (B, H, L, d)."""
        if x.ndim != 3:
            raise ValueError(
                f"[MultiHeadAttention] expected {what} of shape (batch, length, "
                f"features) but got shape {tuple(x.shape)}."
            )
        return mx.unflatten(x, -1, (self.num_heads, -1)).transpose(0, 2, 1, 3)

    def __call__(self, queries, keys, values, mask=None):
        queries = self._split_heads(self.query_proj(queries), "queries")
        keys = self._split_heads(self.key_proj(keys), "keys")
        values = self._split_heads(self.value_proj(values), "values")
        scale = math.sqrt(1 / queries.shape[-1])
        out = mx.fast.scaled_dot_product_attention(
            queries, keys, values, scale=scale, mask=mask
        )
        return self.out_proj(out.transpose(0, 2, 1, 3).flatten(-2, -1))

    @staticmethod
    def create_additive_causal_mask(N: int, dtype: mx.Dtype = mx.float32):
        """An (N, N) additive mask that hides later keys from each query:
        the dtype's lowest value above the diagonal, 0 elsewhere."""
        positions = mx.arange(N)
        later = positions[:, None] < positions[None]
        return later.astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """Self-attention then a two-layer MLP, each in a residual block with a
    LayerNorm before it (``norm_first``) or after the residual sum.

    Args:
        dims (int): the model size.
        num_heads (int): attention heads.
        mlp_dims (int, optional): the MLP's hidden size. Default:
            ``4 * dims``.
        dropout (float): dropout after the attention and in the MLP.
            Default: ``0.0``.
        activation (callable): the MLP's activation. Default: ``relu``.
        norm_first (bool): pre-norm blocks. Default: ``True``.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        norm_first: bool = True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout2(self.activation(self.linear1(x))))

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x))


class TransformerDecoderLayer(Module):
    """Self-attention, attention to the encoder's output (``memory``), then a
    two-layer MLP, each in a residual block with a LayerNorm before it
    (``norm_first``) or after the residual sum.

    Args: as :class:`TransformerEncoderLayer`.
    """

    def __init__(
        self,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        norm_first: bool = True,
    ):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, x):
        return self.linear2(self.dropout3(self.activation(self.linear1(x))))

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(
            x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask))
        )
        return self.ln3(x + self._mlp(x))


class _LayerStack(Module):
    """``num_layers`` layers of one class, then a LayerNorm; with
    ``checkpoint`` each layer's activations are recomputed in the backward
    pass instead of kept."""

    def __init__(self, layer_class, num_layers, dims, num_heads, mlp_dims,
                 dropout, activation, norm_first, checkpoint):
        super().__init__()
        self.layers = [
            layer_class(dims, num_heads, mlp_dims, dropout, activation, norm_first)
            for _ in range(num_layers)
        ]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, *args):
        for layer in self.layers:
            x = (checkpoint(layer) if self.checkpoint else layer)(x, *args)
        return self.ln(x)


class TransformerEncoder(_LayerStack):
    """``num_layers`` encoder layers then a LayerNorm. With ``checkpoint``,
    each layer's activations are recomputed in the backward pass instead of
    kept.

    Args: ``num_layers``, then as :class:`TransformerEncoderLayer`, and
    ``checkpoint`` (bool, default ``False``).
    """

    def __init__(
        self,
        num_layers: int,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation=relu,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__(TransformerEncoderLayer, num_layers, dims, num_heads,
                         mlp_dims, dropout, activation, norm_first, checkpoint)

    def __call__(self, x, mask):
        return super().__call__(x, mask)


class TransformerDecoder(_LayerStack):
    """``num_layers`` decoder layers then a LayerNorm. With ``checkpoint``,
    each layer's activations are recomputed in the backward pass instead of
    kept.

    Args: ``num_layers``, then as :class:`TransformerDecoderLayer`, and
    ``checkpoint`` (bool, default ``False``).
    """

    def __init__(
        self,
        num_layers: int,
        dims: int,
        num_heads: int,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation=relu,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__(TransformerDecoderLayer, num_layers, dims, num_heads,
                         mlp_dims, dropout, activation, norm_first, checkpoint)

    def __call__(self, x, memory, x_mask, memory_mask):
        return super().__call__(x, memory, x_mask, memory_mask)


class Transformer(Module):
    """An encoder-decoder transformer: the encoder reads ``src`` into a
    memory that the decoder attends to while reading ``tgt``.

    Args:
        dims (int): the model size. Default: ``512``.
        num_heads (int): attention heads. Default: ``8``.
        num_encoder_layers (int): encoder layers. Default: ``6``.
        num_decoder_layers (int): decoder layers. Default: ``6``.
        mlp_dims (int, optional): the MLPs' hidden size. Default:
            ``4 * dims``.
        dropout (float): dropout rate. Default: ``0.0``.
        activation (callable): the MLPs' activation. Default: ``relu``.
        custom_encoder (Module, optional): used instead of the encoder.
        custom_decoder (Module, optional): used instead of the decoder.
        norm_first (bool): pre-norm blocks. Default: ``True``.
        checkpoint (bool): recompute each layer's activations in the
            backward pass. Default: ``False``.
    """

    def __init__(
        self,
        dims: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        mlp_dims: Optional[int] = None,
        dropout: float = 0.0,
        activation: Callable[[Any], Any] = relu,
        custom_encoder: Optional[Any] = None,
        custom_decoder: Optional[Any] = None,
        norm_first: bool = True,
        checkpoint: bool = False,
    ):
        super().__init__()
        shared = (dims, num_heads, mlp_dims, dropout, activation, norm_first, checkpoint)
        # A module is a dict, so an empty custom one is falsy: test for None.
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(num_encoder_layers, *shared)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(num_decoder_layers, *shared)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
