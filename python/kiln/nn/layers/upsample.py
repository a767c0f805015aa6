"""Spatial upsampling (and downsampling) of channels-last inputs
(N, *spatial, C) by nearest neighbour, linear or cubic interpolation.

Each output position along an axis reads a few input positions ("taps")
with weights; interpolation is separable, so the axes are resampled one
after the other, each with one gather and one weighted sum. The sampling
positions and weights are constants of the shapes, computed in float32 with
NumPy exactly as the float32 array arithmetic would compute them."""

import math
from numbers import Real
from typing import Literal, Tuple, Union

import numpy as np

import kiln.core as mx

from .base import Module


def _check_scales(x, scale_factor):
    if x.ndim - 2 != len(scale_factor):
        raise ValueError("A scale needs to be provided for each spatial dimension")


def _source_positions(n, scale, align_corners):
    """Where each of the ``int(scale * n)`` outputs samples the input, in
    input coordinates (float32)."""
    m = int(scale * n)
    i = np.arange(m, dtype=np.float32)
    if align_corners:
        # The first and last outputs sit on the first and last inputs.
        return i * np.float32((n - 1) / max(m - 1, 1))
    # Output and input pixel centres line up: (i + 0.5) / scale - 0.5,
    # written as a step and an offset that centre the output grid.
    step = 1 / scale
    start = ((m - 1) * step - n + 1) / 2
    return i * np.float32(step) - np.float32(start)


def _nearest_taps(n, scale):
    m = int(scale * n)
    i = np.arange(m, dtype=np.float32)
    if m > n:
        index = np.round((i + np.float32(0.5)) * np.float32(n / m) - np.float32(0.5))
    else:
        index = i * np.float32(n / m)
    return index.astype(np.int64)[:, None], None


def _linear_taps(n, scale, align_corners):
    pos = np.clip(_source_positions(n, scale, align_corners), 0, n - 1)
    lo, hi = np.floor(pos), np.ceil(pos)
    frac = pos - lo
    index = np.stack([lo, hi], axis=1).astype(np.int64)
    weight = np.stack([np.float32(1) - frac, frac], axis=1)
    return index, weight


def _keys_near(distance, a):
    """Keys' cubic convolution kernel with coefficient ``a`` for distances
    up to 1."""
    return ((a + 2) * distance - (a + 3)) * distance * distance + 1


def _keys_far(distance, a):
    """Keys' kernel for distances between 1 and 2."""
    return (((distance - 5) * distance + 8) * distance - 4) * a


def _keys_cubic(distance, a):
    """Keys' kernel at any distance >= 0 (0 beyond 2)."""
    near, far = _keys_near(distance, a), _keys_far(distance, a)
    return np.where(distance <= 1, near, np.where(distance <= 2, far, 0)).astype(
        np.float32
    )


def _cubic_taps(n, scale, align_corners):
    pos = _source_positions(n, scale, align_corners)
    a = np.float32(-0.75)
    left = np.floor(pos)
    right = np.floor(pos + np.float32(1))
    # The two inputs on each side of each position; beyond the borders the
    # border value repeats (the weights are those of the unclipped taps).
    grid = np.stack([left - 1, left, right, right + 1], axis=1)
    distance = np.abs(pos[:, None] - grid)
    weight = np.concatenate(
        [_keys_far(distance[:, :1], a), _keys_near(distance[:, 1:3], a),
         _keys_far(distance[:, 3:], a)],
        axis=1,
    )
    return np.clip(grid, 0, n - 1).astype(np.int64), weight.astype(np.float32)


def _antialiased_taps(n, scale, align_corners, kernel, radius):
    """Taps of ``kernel`` (support ``radius``) stretched by 1 / scale when
    downsampling, so that each output averages every input it covers; taps
    outside the input are dropped and the rest renormalized."""
    pos = _source_positions(n, scale, align_corners)
    stretch = 1.0 / scale if scale < 1 else 1.0
    reach = math.ceil(radius * stretch) + 1
    grid = np.floor(pos)[:, None] + np.arange(-reach + 1, reach, dtype=np.float32)
    distance = np.abs(pos[:, None] - grid) / np.float32(stretch)
    weight = np.where((grid >= 0) & (grid < n), kernel(distance), np.float32(0))
    total = weight.sum(axis=1, keepdims=True, dtype=np.float32)
    weight = weight / np.where(total > 0, total, np.float32(1))
    return np.clip(grid, 0, n - 1).astype(np.int64), weight.astype(np.float32)


def _triangle(distance):
    return np.maximum(np.float32(1) - distance, np.float32(0))


def _resample(x, scale_factor, taps_fn):
    """Resample each spatial axis of ``x`` with the taps ``taps_fn(n, scale)``
    gives: an (m, taps) index array and an (m, taps) weight array (None for
    a plain gather)."""
    _check_scales(x, scale_factor)
    for axis, scale in enumerate(scale_factor, start=1):
        index, weight = taps_fn(x.shape[axis], scale)
        m, taps = index.shape
        x = mx.take(x, mx.array(index.reshape(-1), dtype=mx.int32), axis=axis)
        if weight is None:
            continue
        x = x.reshape(*x.shape[:axis], m, taps, *x.shape[axis + 1 :])
        w = mx.array(weight).reshape(m, taps, *([1] * (x.ndim - axis - 2)))
        x = (x * w).sum(axis=axis + 1)
    return x


def upsample_nearest(x: mx.array, scale_factor: Tuple):
    """Nearest-neighbour resampling of the spatial axes of ``x`` (N, *spatial,
    C) by one scale per spatial axis."""
    _check_scales(x, scale_factor)
    if not all(float(s).is_integer() for s in scale_factor):
        return _resample(x, scale_factor, _nearest_taps)
    # Integer scales repeat each element: a size-1 axis after each spatial
    # axis, broadcast to the scale, then merged into it.
    scales = [int(s) for s in scale_factor]
    spatial = x.shape[1:-1]
    spread = [x.shape[0]]
    repeated = [x.shape[0]]
    for size, s in zip(spatial, scales):
        spread += [size, 1]
        repeated += [size, s]
    out = mx.broadcast_to(x.reshape(*spread, x.shape[-1]), (*repeated, x.shape[-1]))
    merged = [size * s for size, s in zip(spatial, scales)]
    return out.reshape(x.shape[0], *merged, x.shape[-1])


def _check_antialias(align_corners, antialias):
    if antialias and align_corners:
        raise ValueError(
            "[Upsample] antialias=True with align_corners=True is not "
            "supported. Use align_corners=False for antialiased interpolation."
        )


def upsample_linear(
    x: mx.array,
    scale_factor: Tuple,
    align_corners: bool = False,
    antialias: bool = False,
):
    """Linear (bilinear, trilinear, ...) resampling of the spatial axes of
    ``x``. With ``antialias``, downsampling averages with a triangle filter
    widened by 1 / scale."""
    _check_antialias(align_corners, antialias)
    if antialias:
        taps = lambda n, s: _antialiased_taps(n, s, align_corners, _triangle, 1.0)
    else:
        taps = lambda n, s: _linear_taps(n, s, align_corners)
    return _resample(x, scale_factor, taps)


def upsample_cubic(
    x: mx.array,
    scale_factor: Tuple,
    align_corners: bool = False,
    antialias: bool = False,
):
    """Cubic (bicubic, ...) resampling of the spatial axes of ``x`` with
    Keys' kernel, a = -0.75; with ``antialias``, a = -0.5 and the kernel is
    widened by 1 / scale when downsampling."""
    _check_antialias(align_corners, antialias)
    if antialias:
        kernel = lambda d: _keys_cubic(d, np.float32(-0.5))
        taps = lambda n, s: _antialiased_taps(n, s, align_corners, kernel, 2.0)
    else:
        taps = lambda n, s: _cubic_taps(n, s, align_corners)
    return _resample(x, scale_factor, taps)


class Upsample(Module):
    """Resample the spatial axes ``1 .. x.ndim - 2`` of a channels-last input
    by ``scale_factor``; the output size is ``int(scale * size)``.

    Args:
        scale_factor (float or tuple): one scale for every spatial axis, or
            one per spatial axis.
        mode (str): ``"nearest"``, ``"linear"`` or ``"cubic"``. Default:
            ``"nearest"``.
        align_corners (bool): for linear and cubic, make the corner outputs
            sample the corner inputs exactly. Default: ``False``.
        antialias (bool): for linear and cubic, low-pass filter when
            downsampling (cubic then uses a = -0.5). Not with
            ``align_corners``. Default: ``False``.
    """

    def __init__(
        self,
        scale_factor: Union[float, Tuple],
        mode: Literal["nearest", "linear", "cubic"] = "nearest",
        align_corners: bool = False,
        antialias: bool = False,
    ):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias and mode == "nearest":
            raise ValueError(
                "[Upsample] Antialiasing is not supported for nearest neighbor "
                "upsampling"
            )
        _check_antialias(align_corners, antialias)
        scales = scale_factor if isinstance(scale_factor, (list, tuple)) else [scale_factor]
        if not all(isinstance(s, Real) and not isinstance(s, bool) and s > 0 for s in scales):
            raise ValueError(
                f"[Upsample] scale_factor must be a positive number or a tuple of "
                f"them but got {scale_factor!r}."
            )
        if isinstance(scale_factor, (list, tuple)):
            scale_factor = tuple(float(s) for s in scale_factor)
        else:
            scale_factor = float(scale_factor)
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self):
        text = (
            f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
            f"align_corners={self.align_corners}"
        )
        return text + (", antialias=True" if self.antialias else "")

    def __call__(self, x: mx.array) -> mx.array:
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError(
                f"[Upsample] The input should have at least 1 spatial dimension "
                f"which means it should be at least 3D but {x.ndim}D was provided"
            )
        scale_factor = self.scale_factor
        if isinstance(scale_factor, tuple):
            if len(scale_factor) != dims:
                raise ValueError(
                    f"[Upsample] One scale per spatial dimension is required but "
                    f"scale_factor={scale_factor} and the number of spatial "
                    f"dimensions were {dims}"
                )
        else:
            scale_factor = (scale_factor,) * dims
        if self.mode == "nearest":
            return upsample_nearest(x, scale_factor)
        if self.mode == "linear":
            return upsample_linear(x, scale_factor, self.align_corners, self.antialias)
        return upsample_cubic(x, scale_factor, self.align_corners, self.antialias)
