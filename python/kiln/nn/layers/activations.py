"""Activation functions and their layers, with MLX's names and formulas.

The elementwise activations are compiled with ``shapeless=True``, as in MLX:
one trace per dtype and rank, and their ops fuse into a single kernel.
"""

import math
from functools import partial, wraps

import kiln.core as mx

from .base import Module

_shapeless = partial(mx.compile, shapeless=True)
# Compiled per shape instead, until shapeless traces handle them:
# - an implicit broadcast between two arrays (log_softmax, prelu) is a
#   Broadcast node with a fixed target shape, which cannot be re-inferred;
# - a lone elementwise op with a scalar (relu's maximum(x, 0), softplus's
#   logaddexp(x, 0)) is left unfused, and its scalar stays broadcast to the
#   first call's shape.
_per_shape = mx.compile


def _compiled_by_axis(fn):
    """``fn(x, axis)`` compiled shapeless for one axis and per shape for
    several: kiln's softmax over several axes reshapes to the traced
    shape."""
    one_axis, many_axes = _shapeless(fn), _per_shape(fn)

    @wraps(fn)
    def wrapper(x, axis=-1):
        return (one_axis if isinstance(axis, int) else many_axes)(x, axis)

    return wrapper


# SELU's constants as MLX writes them (truncated), so results match MLX's.
_SELU_ALPHA = 1.67326
_SELU_SCALE = 1.0507


# ---- functions ------------------------------------------------------------


@_shapeless
def sigmoid(x):
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return mx.sigmoid(x)


@_per_shape
def relu(x):
    """``max(x, 0)``."""
    return mx.maximum(x, 0)


@_shapeless
def relu2(x):
    """The squared ReLU, ``max(x, 0) ** 2``."""
    return mx.square(mx.maximum(x, 0))


@_shapeless
def relu6(x):
    """``min(max(x, 0), 6)``."""
    return mx.minimum(mx.maximum(x, 0), 6.0)


@_shapeless
def leaky_relu(x, negative_slope=0.01):
    """``max(negative_slope * x, x)``."""
    return mx.maximum(negative_slope * x, x)


@_per_shape
def log_softmax(x, axis=-1):
    """``x - logsumexp(x)`` along ``axis``."""
    # Shifting by the (constant) max first keeps the normalizer from being
    # rounded away when it is added to a large maximum.
    x = x - mx.stop_gradient(mx.max(x, axis=axis, keepdims=True))
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


@_shapeless
def elu(x, alpha=1.0):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


@_compiled_by_axis
def softmax(x, axis=-1):
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return mx.softmax(x, axis=axis)


@_per_shape
def softplus(x):
    """``log(1 + exp(x))``, computed without overflow."""
    return mx.logaddexp(x, 0)


@_shapeless
def softsign(x):
    """``x / (1 + |x|)``."""
    return mx.divide(x, 1 + mx.abs(x))


@_shapeless
def softshrink(x, lambd: float = 0.5):
    """``x - lambd * sign(x)`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


@_shapeless
def celu(x, alpha=1.0):
    """``max(0, x) + alpha * (exp(min(0, x) / alpha) - 1)``."""
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


@_shapeless
def silu(x):
    """The sigmoid-weighted linear unit (swish), ``x * sigmoid(x)``."""
    return x * mx.sigmoid(x)


@_shapeless
def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``."""
    return -mx.logaddexp(-x, 0)


@_shapeless
def gelu(x):
    """The Gaussian error linear unit, ``x * Phi(x)`` with the exact normal
    CDF."""
    return x * (1 + mx.erf(x / math.sqrt(2))) / 2


@_shapeless
def gelu_approx(x):
    """GELU's tanh approximation,
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
    return 0.5 * x * (1 + mx.tanh(inner))


@_shapeless
def gelu_fast_approx(x):
    """GELU's sigmoid approximation, ``x * sigmoid(1.702 x)``."""
    return x * mx.sigmoid(1.702 * x)


def glu(x, axis: int = -1):
    """The gated linear unit: ``x`` split in two halves ``a, b`` along
    ``axis``, then ``a * sigmoid(b)``."""
    # Not compiled: the split point depends on the shape.
    a, b = mx.split(x, 2, axis=axis)
    return a * mx.sigmoid(b)


@_shapeless
def step(x, threshold: float = 0.0):
    """1 where ``x >= threshold``, else 0 (int32, as MLX)."""
    return mx.where(x >= threshold, 1, 0)


@_shapeless
def selu(x):
    """The scaled exponential linear unit, ``1.0507 * elu(x, 1.67326)``."""
    return _SELU_SCALE * mx.where(x > 0, x, _SELU_ALPHA * (mx.exp(x) - 1))


@_per_shape
def prelu(x, alpha):
    """``max(0, x) + alpha * min(0, x)`` with a learnable ``alpha``
    (broadcast against ``x``)."""
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


@_shapeless
def mish(x):
    """``x * tanh(softplus(x))``."""
    return x * mx.tanh(mx.logaddexp(x, 0))


@_shapeless
def hardswish(x):
    """``x * min(max(x + 3, 0), 6) / 6``."""
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


@_shapeless
def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """``x`` clipped to ``[min_val, max_val]``."""
    return mx.minimum(mx.maximum(x, min_val), max_val)


@_shapeless
def hard_shrink(x, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    return mx.where(mx.abs(x) > lambd, x, 0)


@_compiled_by_axis
def softmin(x, axis=-1):
    """``softmax(-x)`` along ``axis``."""
    return mx.softmax(-x, axis=axis)


def tanh(x):
    """The hyperbolic tangent."""
    return mx.tanh(x)


# ---- layers ---------------------------------------------------------------


def _activation_layer(fn, name):
    """A parameterless layer that applies ``fn``."""

    def __call__(self, x):
        return fn(x)

    doc = f"Applies :func:`{fn.__name__}` with its defaults. See its documentation."
    return type(name, (Module,), {"__call__": __call__, "__doc__": doc})


Sigmoid = _activation_layer(sigmoid, "Sigmoid")
Mish = _activation_layer(mish, "Mish")
ReLU = _activation_layer(relu, "ReLU")
ReLU2 = _activation_layer(relu2, "ReLU2")
ReLU6 = _activation_layer(relu6, "ReLU6")
Softmax = _activation_layer(softmax, "Softmax")
Softplus = _activation_layer(softplus, "Softplus")
Softsign = _activation_layer(softsign, "Softsign")
SiLU = _activation_layer(silu, "SiLU")
LogSoftmax = _activation_layer(log_softmax, "LogSoftmax")
LogSigmoid = _activation_layer(log_sigmoid, "LogSigmoid")
Tanh = _activation_layer(tanh, "Tanh")
Hardswish = _activation_layer(hardswish, "Hardswish")
SELU = _activation_layer(selu, "SELU")
HardTanh = _activation_layer(hard_tanh, "HardTanh")
Softmin = _activation_layer(softmin, "Softmin")


class GLU(Module):
    """The gated linear unit along ``axis``. See :func:`glu`."""

    def __init__(self, axis: int = -1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return glu(x=x, axis=self.axis)


class LeakyReLU(Module):
    """``max(negative_slope * x, x)``. See :func:`leaky_relu`."""

    def __init__(self, negative_slope=1e-2):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    """The exponential linear unit. See :func:`elu`."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


class CELU(Module):
    """The continuously differentiable ELU. See :func:`celu`."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


class Softshrink(Module):
    """Soft shrinkage by ``lambd``. See :func:`softshrink`."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return softshrink(x, self.lambd)


class HardShrink(Module):
    """Hard shrinkage by ``lambd``. See :func:`hard_shrink`."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self.lambd)


class Step(Module):
    """1 where ``x >= threshold``, else 0. See :func:`step`."""

    def __init__(self, threshold: float = 0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x):
        return step(x, self.threshold)


class PReLU(Module):
    """The parametric ReLU with a learnable slope ``weight`` of
    ``num_parameters`` entries (broadcast over the last axis), initialized
    to ``init``."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


class GELU(Module):
    """The Gaussian error linear unit. ``approx`` picks the formula:
    ``'none'`` the exact one (:func:`gelu`), ``'precise'`` or ``'tanh'``
    the tanh approximation (:func:`gelu_approx`), ``'fast'`` the sigmoid
    approximation (:func:`gelu_fast_approx`)."""

    _FORMULAS = {
        "none": gelu,
        "precise": gelu_approx,
        "tanh": gelu_approx,
        "fast": gelu_fast_approx,
    }

    def __init__(self, approx="none"):
        super().__init__()
        if approx not in self._FORMULAS:
            raise ValueError(
                f"The approximation should be in {list(self._FORMULAS)} but "
                f"'{approx}' was given"
            )
        self._approx = approx

    def __call__(self, x):
        return self._FORMULAS[self._approx](x)
