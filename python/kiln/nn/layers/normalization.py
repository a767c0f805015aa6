"""Normalization layers: LayerNorm, RMSNorm, GroupNorm, InstanceNorm and
BatchNorm. Inputs are channels-last (features on the last axis)."""

import kiln.core as mx

from .base import Module


def _check_eps(layer, eps):
    if eps <= 0.0:
        raise ValueError(f"[{layer}] 'eps' must be positive but got {eps}.")


def _affine(module, x):
    """``weight * x + bias`` when the module has them, else ``x``."""
    return module.weight * x + module.bias if "weight" in module else x


class LayerNorm(Module):
    """Normalizes over the last axis to zero mean and unit variance, then
    scales by ``weight`` and shifts by ``bias`` (learned, when ``affine``;
    ``bias`` only when ``bias`` too)."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = True, bias: bool = True):
        super().__init__()
        _check_eps("LayerNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        weight = self["weight"] if "weight" in self else None
        bias = self["bias"] if "bias" in self else None
        return mx.fast.layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    """Divides by the root mean square over the last axis, then scales by a
    learned ``weight``."""

    def __init__(self, dims: int, eps: float = 1e-5):
        super().__init__()
        _check_eps("RMSNorm", eps)
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalizes each sample over groups of features (and every axis
    between the batch and the features), then applies a per-feature affine
    map when ``affine``.

    As in MLX, feature ``c`` belongs to group ``c % num_groups``; with
    ``pytorch_compatible=True`` groups are contiguous blocks of features,
    as in PyTorch.
    """

    def __init__(
        self,
        num_groups: int,
        dims: int,
        eps: float = 1e-5,
        affine: bool = True,
        pytorch_compatible: bool = False,
    ):
        super().__init__()
        _check_eps("GroupNorm", eps)
        if num_groups <= 0:
            raise ValueError(f"The number of groups ({num_groups}) must be a positive integer.")
        if dims <= 0:
            raise ValueError(f"The number of features ({dims}) must be a positive integer.")
        if dims % num_groups != 0:
            raise ValueError(
                f"The number of features ({dims}) must be evenly divisible"
                f" by the number of groups ({num_groups})."
            )
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (
            f"{self.num_groups}, {self.dims}, eps={self.eps}, "
            f"affine={'weight' in self}, pytorch_compatible={self.pytorch_compatible}"
        )

    def _blocked_groups(self, x):
        # Gather each group's block of features into one row, layer-norm the
        # rows, then put the features back where they were.
        batch, *rest, dims = x.shape
        g = self.num_groups
        size = dims // g
        x = x.reshape(batch, -1, g, size).transpose(0, 2, 1, 3).reshape(batch, g, -1)
        x = mx.fast.layer_norm(x, None, None, self.eps)
        x = x.reshape(batch, g, -1, size).transpose(0, 2, 1, 3)
        return x.reshape(batch, *rest, dims)

    def _strided_groups(self, x):
        batch, *rest, dims = x.shape
        x = x.reshape(batch, -1, self.num_groups)
        mean = mx.mean(x, axis=1, keepdims=True)
        var = mx.var(x, axis=1, keepdims=True)
        x = (x - mean) * mx.rsqrt(var + self.eps)
        return x.reshape(batch, *rest, dims)

    def __call__(self, x):
        if self.pytorch_compatible:
            x = self._blocked_groups(x)
        else:
            x = self._strided_groups(x)
        return _affine(self, x)


class InstanceNorm(Module):
    """Normalizes each sample's each feature over the spatial axes of an
    ``(N, ..., C)`` input, then applies a per-feature affine map when
    ``affine``."""

    def __init__(self, dims: int, eps: float = 1e-5, affine: bool = False):
        super().__init__()
        _check_eps("InstanceNorm", eps)
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        if x.ndim < 3:
            raise ValueError(
                "InstanceNorm expects inputs with at least 3 dimensions"
                f" (N, ..., C) but the input has {x.ndim} dimensions."
            )
        batch, *spatial, features = x.shape
        # Features first, so each (sample, feature) row is one layer_norm row.
        rows = mx.moveaxis(x, -1, 1).reshape(batch, features, -1)
        y = mx.fast.layer_norm(rows, None, None, self.eps)
        y = mx.moveaxis(y.reshape(batch, features, *spatial), 1, -1)
        return _affine(self, y)


class BatchNorm(Module):
    """Normalizes each feature over the batch (and spatial) axes of an
    ``(N, C)``, ``(N, L, C)`` or ``(N, H, W, C)`` input.

    In training the batch's statistics are used and, when
    ``track_running_stats``, folded into ``running_mean`` and
    ``running_var`` (unbiased) with ``momentum``; in evaluation the running
    statistics are used. The running statistics are parameters but never
    trainable ones.
    """

    _STATS = ["running_mean", "running_var"]

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
    ):
        super().__init__()
        _check_eps("BatchNorm", eps)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=self._STATS, recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreeze as Module does; the running statistics stay frozen."""
        super().unfreeze(*args, **kwargs)
        if self.track_running_stats:
            self.freeze(keys=self._STATS, recurse=False)
        return self

    def _extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, "
            f"momentum={self.momentum}, affine={'weight' in self}, "
            f"track_running_stats={self.track_running_stats}"
        )

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError(
                f"Expected input tensor to have 2, 3 or 4 dimensions, but got {x.ndim}"
            )
        axes = tuple(range(x.ndim - 1))
        if self.training:
            count = 1
            for n in x.shape[:-1]:
                count *= n
            if count == 1:
                raise ValueError("BatchNorm training requires more than one value per channel.")
        mean = mx.mean(x, axis=axes)
        var = mx.var(x, axis=axes)
        if self.track_running_stats:
            if self.training:
                mu = self.momentum
                unbiased = mx.var(x, axis=axes, ddof=1)
                self.running_mean = (1 - mu) * self.running_mean + mu * mean
                self.running_var = (1 - mu) * self.running_var + mu * unbiased
            else:
                mean, var = self.running_mean, self.running_var
        return _affine(self, (x - mean) * mx.rsqrt(var + self.eps))
