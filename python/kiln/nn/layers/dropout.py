"""Dropout of elements (Dropout) or of whole channels (Dropout2d/3d)."""

import kiln.core as mx

from .base import Module


class _DropoutBase(Module):
    """Holds the keep probability. In training, entries of a Bernoulli mask
    (of ``_mask_shape(x)``, broadcast over ``x``) zero ``x`` and the rest
    are scaled by ``1 / (1 - p)``; in evaluation the input passes through."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError(f"The dropout probability {p} is not in [0, 1)")
        self._p_1 = 1 - p

    def _extra_repr(self) -> str:
        return f"p={1 - self._p_1}"

    def _mask_shape(self, x):
        return x.shape

    def __call__(self, x):
        mask_shape = self._mask_shape(x)
        if self._p_1 == 1 or not self.training:
            return x
        mask = mx.random.bernoulli(self._p_1, mask_shape)
        return (mask * x) * (1 / self._p_1)


class Dropout(_DropoutBase):
    """Zeroes each element with probability ``p`` in training and scales
    the rest by ``1 / (1 - p)``."""


class _ChannelDropout(_DropoutBase):
    """Drops whole channels: the mask is 1 over the ``_spatial`` axes before
    the last (channel) axis. Inputs are channels-last, with or without a
    batch axis."""

    _spatial = 0

    def _mask_shape(self, x):
        ranks = (self._spatial + 1, self._spatial + 2)
        if x.ndim not in ranks:
            raise ValueError(
                f"Received input with {x.ndim} dimensions. "
                f"Expected {ranks[0]} or {ranks[1]} dimensions."
            )
        shape = list(x.shape)
        shape[-1 - self._spatial : -1] = [1] * self._spatial
        return shape


class Dropout2d(_ChannelDropout):
    """Zeroes whole channels of ``(N, H, W, C)`` or ``(H, W, C)`` inputs
    with probability ``p`` in training, scaling the rest by
    ``1 / (1 - p)``."""

    _spatial = 2


class Dropout3d(_ChannelDropout):
    """Zeroes whole channels of ``(N, D, H, W, C)`` or ``(D, H, W, C)``
    inputs with probability ``p`` in training, scaling the rest by
    ``1 / (1 - p)``."""

    _spatial = 3
