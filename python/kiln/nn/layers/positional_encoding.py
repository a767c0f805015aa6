"""Positional encodings: rotary (RoPE), sinusoidal, and ALiBi's linear
attention biases."""

import math
from typing import Optional

import kiln.core as mx

from ._arguments import positive_int
from .base import Module


class RoPE(Module):
    """Rotary positional encoding (RoFormer) of the last axis of ``x``,
    through ``kiln.core.fast.rope``.

    Args:
        dims (int): how many leading features are rotated; the rest pass
            through unchanged.
        traditional (bool): rotate consecutive pairs of features instead of
            pairs half the rotated features apart. Default: ``False``.
        base (float): the base of the rotation frequencies. Default:
            ``10000``.
        scale (float): multiplies the positions. Default: ``1.0``.
    """

    def __init__(
        self,
        dims: int,
        traditional: bool = False,
        base: float = 10000,
        scale: float = 1.0,
    ):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        """Rotate ``x`` (..., L, D) as positions ``offset .. offset + L - 1``."""
        return mx.fast.rope(
            x,
            self.dims,
            traditional=self.traditional,
            base=self.base,
            scale=self.scale,
            offset=offset,
        )


class SinusoidalPositionalEncoding(Module):
    """Sinusoidal embeddings of positions (Attention Is All You Need): for
    positions ``x`` of any shape, an array of shape ``(*x.shape, dims)``
    holding ``sin`` and ``cos`` of ``x`` times ``dims / 2`` frequencies
    spaced geometrically from ``max_freq`` down to ``min_freq``.

    Args:
        dims (int): the embedding size (positive, even).
        min_freq (float): the lowest frequency. Default: ``0.0001``.
        max_freq (float): the highest frequency. Default: ``1``.
        scale (float, optional): multiplies the embeddings. Default:
            ``sqrt(2 / dims)``.
        cos_first (bool): put the cosines first. Default: ``False``.
        full_turns (bool): multiply the frequencies by ``2 pi``. Default:
            ``False``.
    """

    def __init__(
        self,
        dims: int,
        min_freq: float = 0.0001,
        max_freq: float = 1,
        scale: Optional[float] = None,
        cos_first: bool = False,
        full_turns: bool = False,
    ):
        super().__init__()
        if not isinstance(dims, int) or dims <= 0 or dims % 2 != 0:
            raise ValueError(
                f"[SinusoidalPositionalEncoding] dims must be positive and even "
                f"but got {dims}."
            )
        half = dims // 2
        # Fractions from 1 down to 0 pick log-frequencies from max to min.
        if half == 1:
            fraction = mx.array([1.0])
        else:
            fraction = 1 - mx.arange(0, half) / (half - 1)
        log_min, log_max = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(fraction * (log_max - log_min) + log_min)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale if scale is not None else (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        angles = x[..., None] * self._sigmas
        parts = [mx.sin(angles), mx.cos(angles)]
        if self.cos_first:
            parts.reverse()
        y = mx.concatenate(parts, axis=-1)
        return y * self.scale if self.scale != 1 else y


def _alibi_slopes(num_heads):
    """The geometric head slopes of ALiBi: for a power of two n, 2^(-8/n)
    raised to 1 .. n; otherwise those of the power of two below, then every
    other slope of the power of two above."""
    if math.log2(num_heads).is_integer():
        first = 2.0 ** (-(2.0 ** -(math.log2(num_heads) - 3)))
        return [first ** (i + 1) for i in range(num_heads)]
    below = 2 ** math.floor(math.log2(num_heads))
    return _alibi_slopes(below) + _alibi_slopes(2 * below)[0::2][: num_heads - below]


class ALiBi(Module):
    """Attention with Linear Biases: adds to attention scores (B, H, Lq, Lk)
    minus each head's slope times the distance between query and key
    positions."""

    @staticmethod
    def create_alibi_matrix(
        q_sequence_length: int,
        k_sequence_length: int,
        num_heads: int,
        offset: int = 0,
        dtype: mx.Dtype = mx.float32,
    ) -> mx.array:
        """The biases (1, num_heads, q_sequence_length - offset,
        k_sequence_length) for queries at positions ``offset ..
        q_sequence_length - 1`` and keys at ``0 .. k_sequence_length - 1``."""
        queries = mx.arange(offset, q_sequence_length)
        keys = mx.arange(0, k_sequence_length)
        distance = mx.abs(queries[:, None] - keys[None, :])
        distance = mx.expand_dims(distance, axis=(0, 1))
        slopes = ALiBi.create_alibi_slope(num_heads=num_heads, dtype=dtype)
        return (-distance * slopes).astype(dtype)

    @staticmethod
    def create_alibi_slope(num_heads: int, dtype: mx.Dtype = mx.float32) -> mx.array:
        """The slopes (num_heads, 1, 1), one per head."""
        num_heads = positive_int(num_heads, "ALiBi", "num_heads")
        slopes = mx.array(_alibi_slopes(num_heads), dtype=dtype)
        return mx.expand_dims(slopes, axis=(-1, -2))

    def __call__(
        self,
        attention_scores: mx.array,
        offset: int = 0,
        mask: Optional[mx.array] = None,
    ) -> mx.array:
        """``attention_scores`` (B, H, Lq, Lk) plus the biases (and
        ``mask``), the queries being at positions ``offset ..
        offset + Lq - 1``."""
        if attention_scores.ndim != 4:
            raise ValueError(
                "[ALiBi] expected attention scores of shape (batch, heads, "
                f"queries, keys) but got shape {tuple(attention_scores.shape)}."
            )
        bias = ALiBi.create_alibi_matrix(
            q_sequence_length=attention_scores.shape[-2] + offset,
            k_sequence_length=attention_scores.shape[-1],
            num_heads=attention_scores.shape[1],
            offset=offset,
            dtype=attention_scores.dtype,
        )
        if mask is not None:
            bias = bias + mask
        return attention_scores + bias
