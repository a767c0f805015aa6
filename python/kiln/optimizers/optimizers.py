"""Optimizers over pytrees of parameters, with mlx.optimizers' API.

An optimizer keeps all of its state in one dict, ``optimizer.state``: the
step count and any scheduled hyper-parameter (``learning_rate``) as arrays,
and beside them one dict of arrays per parameter, laid out like the
parameter tree. Everything that changes from step to step is an array in
that dict, so ``compile(step, inputs=state, outputs=state)`` can capture it.
Subclasses only say how to start a parameter's state (``init_single``) and
how to update one parameter (``apply_single``).
"""

import math
from typing import Callable, List, Optional, Tuple, Union

from .. import core as mx
from ..utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten

__all__ = [
    "Optimizer",
    "SGD",
    "RMSprop",
    "Adagrad",
    "AdaDelta",
    "Adam",
    "AdamW",
    "Adamax",
    "Lion",
    "Adafactor",
    "Muon",
    "MultiOptimizer",
    "clip_grad_norm",
]

Schedule = Callable[[mx.array], mx.array]


def _as_array(value):
    return value if isinstance(value, mx.array) else mx.array(value)


def _check_positive_eps(name, eps):
    # The accumulator starts at zero, so with eps == 0 a zero gradient
    # divides 0 by 0 and the parameter becomes NaN.
    if not eps > 0.0:
        raise ValueError(f"[{name}] eps must be >0, got {eps}.")


def _check_betas(name, betas):
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"[{name}] betas[{i}] must be in [0, 1), got {beta}.")


class Optimizer:
    """The base class of all optimizers: it applies a per-parameter update
    (``apply_single``) over a tree of parameters and keeps the state."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers or {})

    def update(self, model, gradients):
        """Apply ``gradients`` to the parameters of ``model`` and write the
        new parameters into it with ``model.update(params)``. A model that
        is a dict (an ``nn.Module``) is read directly, any other through
        ``model.trainable_parameters()``."""
        parameters = model if isinstance(model, dict) else model.trainable_parameters()
        model.update(self.apply_gradients(gradients, parameters))

    def init(self, parameters):
        """Set up the state of every parameter in ``parameters`` that has
        none yet. Optional: the first update does it, but calling it first
        makes ``state`` complete before then (for ``compile``, say)."""
        if not isinstance(parameters, dict):
            raise TypeError(
                f"[{type(self).__name__}.init] the parameters must be a dict "
                "at the top level (the state keeps the step beside them); "
                f"got a {type(parameters).__name__}."
            )
        self._init_tree(parameters, self._state)
        self._initialized = True

    def _init_tree(self, parameters, state):
        """The state for ``parameters``: ``state`` (a dict updated in place,
        or a sequence rebuilt) with a fresh dict for each parameter that has
        none, filled by ``init_single``."""
        if isinstance(parameters, dict):
            state = state if isinstance(state, dict) else {}
            for key, p in parameters.items():
                state[key] = self._init_tree(p, state.get(key))
            return state
        if isinstance(parameters, (list, tuple)):
            old = list(state) if isinstance(state, (list, tuple)) else []
            new = [
                self._init_tree(p, old[i] if i < len(old) else None)
                for i, p in enumerate(parameters)
            ]
            return tuple(new) if isinstance(parameters, tuple) else new
        state = state if isinstance(state, dict) else {}
        if not state and isinstance(parameters, mx.array):
            self.init_single(parameters, state)
        return state

    def init_single(self, parameter: mx.array, state: dict):
        """Fill ``state`` (an empty dict) with the arrays this optimizer
        keeps for ``parameter``."""
        raise NotImplementedError

    def apply_gradients(self, gradients: dict, parameters: dict):
        """The parameters after one step with ``gradients``. ``parameters``
        may hold more than ``gradients``; the result has the structure of
        ``gradients``. ``model.update(opt.apply_gradients(grads, model))`` is
        what ``update`` does."""
        if not self._initialized:
            self.init(gradients)
        # Schedules see the step before it is counted: the first update
        # uses schedule(0).
        for name, schedule in self._schedulers.items():
            self._state[name] = _as_array(schedule(self.step))
        self._state["step"] = self.step + 1
        return tree_map(self._apply_leaf, gradients, parameters, self._state)

    def _apply_leaf(self, gradient, parameter, state):
        if not isinstance(gradient, mx.array):
            return gradient
        return self.apply_single(gradient, parameter, state)

    def apply_single(self, gradient: mx.array, parameter: mx.array, state: dict):
        """The updated ``parameter``; writes the new per-parameter arrays
        into ``state``."""
        raise NotImplementedError

    @property
    def state(self):
        """The optimizer's state: a dict of arrays (and dicts and lists of
        them) holding the step, the scheduled values and the per-parameter
        state."""
        return self._state

    @state.setter
    def state(self, state: dict):
        # Parameters missing from a loaded state get theirs at the next step.
        self._initialized = False
        self._state = state

    @property
    def step(self):
        """The number of updates applied so far (a uint64 array)."""
        return self._state["step"]

    @property
    def learning_rate(self):
        """The learning rate (an array): the value the last update used, or
        the initial value. Set it to a number or to a schedule (a function
        of the step count, evaluated at the start of each update)."""
        return self._state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate: Union[float, mx.array, Schedule]):
        self._maybe_schedule("learning_rate", learning_rate)

    def _maybe_schedule(self, name: str, value):
        """Keep hyper-parameter ``name`` in the state: a fixed value as an
        array, or a schedule that is evaluated at every step."""
        if callable(value):
            self._schedulers[name] = value
            value = value(self.step)
        else:
            # A fixed value replaces a schedule set earlier.
            self._schedulers.pop(name, None)
        self._state[name] = _as_array(value)


class SGD(Optimizer):
    r"""Stochastic gradient descent, with optional momentum, weight decay
    (L2 penalty), dampening and Nesterov momentum.

    .. math::

        v_{t+1} &= \mu v_t + (1 - \tau) g_t \\
        w_{t+1} &= w_t - \lambda v_{t+1}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        momentum (float, optional): The momentum :math:`\mu`. Default: ``0``
        weight_decay (float, optional): The L2 penalty. Default: ``0``
        dampening (float, optional): The dampening :math:`\tau`. Default: ``0``
        nesterov (bool, optional): Nesterov momentum. Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
    ):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "[SGD] Nesterov momentum needs a positive momentum and zero "
                f"dampening; got momentum={momentum}, dampening={dampening}."
            )
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        if self.momentum <= 0:
            return parameter - lr * gradient
        v = self.momentum * state["v"]
        if self.dampening > 0:
            v = v + (1 - self.dampening) * gradient
        else:
            v = v + gradient
        state["v"] = v
        direction = gradient + self.momentum * v if self.nesterov else v
        return parameter - lr * direction


class RMSprop(Optimizer):
    r"""RMSprop (Tieleman and Hinton, 2012).

    .. math::

        v_{t+1} &= \alpha v_t + (1 - \alpha) g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{g_t}{\sqrt{v_{t+1}} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        alpha (float, optional): The smoothing constant. Default: ``0.99``
        eps (float, optional): Added to the denominator. Default: ``1e-8``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        alpha: float = 0.99,
        eps: float = 1e-8,
    ):
        if alpha < 0.0:
            raise ValueError(f"[RMSprop] alpha must be >= 0, got {alpha}.")
        _check_positive_eps("RMSprop", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""Adagrad (Duchi, Hazan and Singer, 2011).

    .. math::

        v_{t+1} &= v_t + g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{g_t}{\sqrt{v_{t+1}} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        eps (float, optional): Added to the denominator. Default: ``1e-8``
    """

    def __init__(self, learning_rate: Union[float, Schedule], eps: float = 1e-8):
        _check_positive_eps("Adagrad", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - lr * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""AdaDelta (Zeiler, 2012), with a learning rate.

    .. math::

        v_{t+1} &= \rho v_t + (1 - \rho) g_t^2 \\
        \Delta w_{t+1} &= \frac{\sqrt{u_t + \epsilon}}{\sqrt{v_{t+1} + \epsilon}} g_t \\
        u_{t+1} &= \rho u_t + (1 - \rho) \Delta w_{t+1}^2 \\
        w_{t+1} &= w_t - \lambda \Delta w_{t+1}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        rho (float, optional): The averaging coefficient. Default: ``0.9``
        eps (float, optional): Added inside the square roots. Default: ``1e-6``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        rho: float = 0.9,
        eps: float = 1e-6,
    ):
        if rho < 0.0:
            raise ValueError(f"[AdaDelta] rho must be >= 0, got {rho}.")
        _check_positive_eps("AdaDelta", eps)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        delta = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        u = rho * state["u"] + (1 - rho) * mx.square(delta)
        state["v"] = v
        state["u"] = u
        return parameter - lr * delta


class Adam(Optimizer):
    r"""Adam (Kingma and Ba, 2015), by default without bias correction.

    .. math::

        m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        v_{t+1} &= \beta_2 v_t + (1 - \beta_2) g_t^2 \\
        w_{t+1} &= w_t - \lambda \frac{m_{t+1}}{\sqrt{v_{t+1}} + \epsilon}

    With ``bias_correction``, :math:`m` is divided by :math:`1 - \beta_1^t`
    and :math:`v` by :math:`1 - \beta_2^t` (t counted from 1).

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        betas (Tuple[float, float], optional): :math:`(\beta_1, \beta_2)`.
          Default: ``(0.9, 0.999)``
        eps (float, optional): Added to the denominator. Default: ``1e-8``
        bias_correction (bool, optional): Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        betas: List[float] = [0.9, 0.999],
        eps: float = 1e-8,
        bias_correction: bool = False,
    ):
        _check_betas(type(self).__name__, betas)
        if not eps >= 0.0:
            raise ValueError(f"[{type(self).__name__}] eps must be >= 0, got {eps}.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"] = m
        state["v"] = v
        if not self.bias_correction:
            return parameter - lr * m / (mx.sqrt(v) + self.eps)
        # The corrections are computed in float32 from the step, then cast,
        # so that half-precision parameters do not lose them.
        step = self.step
        m_scale = (lr / (1 - b1**step)).astype(gradient.dtype)
        v_scale = mx.rsqrt(1 - b2**step).astype(gradient.dtype)
        return parameter - m_scale * m / (mx.sqrt(v) * v_scale + self.eps)


class AdamW(Adam):
    r"""AdamW (Loshchilov and Hutter, 2019): Adam with decoupled weight
    decay.

    .. math::

        w_{t+1} = w_t - \alpha \left(\frac{m_{t+1}}{\sqrt{v_{t+1}} + \epsilon}
        + \lambda w_t\right)

    Args:
        learning_rate (float or callable): The learning rate :math:`\alpha`.
        betas (Tuple[float, float], optional): Default: ``(0.9, 0.999)``
        eps (float, optional): Added to the denominator. Default: ``1e-8``
        weight_decay (float, optional): :math:`\lambda`. Default: ``0.01``
        bias_correction (bool, optional): Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        betas: List[float] = [0.9, 0.999],
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        bias_correction: bool = False,
    ):
        super().__init__(
            learning_rate=learning_rate,
            betas=betas,
            eps=eps,
            bias_correction=bias_correction,
        )
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        decayed = parameter * (1 - lr * self.weight_decay)
        return super().apply_single(gradient, decayed, state)


class Adamax(Optimizer):
    r"""Adamax (Kingma and Ba, 2015), Adam with the infinity norm and no
    bias correction.

    .. math::

        m_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        v_{t+1} &= \max(\beta_2 v_t, |g_t|) \\
        w_{t+1} &= w_t - \lambda \frac{m_{t+1}}{v_{t+1} + \epsilon}

    Args:
        learning_rate (float or callable): The learning rate :math:`\lambda`.
        betas (Tuple[float, float], optional): Default: ``(0.9, 0.999)``
        eps (float, optional): Added to the denominator. Default: ``1e-8``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        betas: List[float] = [0.9, 0.999],
        eps: float = 1e-8,
    ):
        _check_betas("Adamax", betas)
        if eps < 0.0:
            raise ValueError(f"[Adamax] eps must be >= 0, got {eps}.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"] = m
        state["v"] = v
        return parameter - lr * m / (v + self.eps)


class Lion(Optimizer):
    r"""Lion (Chen et al., 2023): the update is the sign of an interpolated
    momentum, so use a smaller learning rate and a larger weight decay than
    with AdamW.

    .. math::

        c_{t+1} &= \beta_1 m_t + (1 - \beta_1) g_t \\
        m_{t+1} &= \beta_2 m_t + (1 - \beta_2) g_t \\
        w_{t+1} &= w_t - \eta (\text{sign}(c_{t+1}) + \lambda w_t)

    Args:
        learning_rate (float or callable): The learning rate :math:`\eta`.
        betas (Tuple[float, float], optional): Default: ``(0.9, 0.99)``
        weight_decay (float, optional): :math:`\lambda`. Default: ``0.0``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        betas: List[float] = [0.9, 0.99],
        weight_decay: float = 0.0,
    ):
        _check_betas("Lion", betas)
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        lr = self.learning_rate.astype(gradient.dtype)
        b1, b2 = self.betas
        m = state["m"]
        direction = b1 * m + (1 - b1) * gradient
        state["m"] = b2 * m + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(direction)


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer and Stern, 2018): second moments of matrices kept
    as a row and a column factor, sublinear memory.

    Args:
        learning_rate (float or callable, optional): Used only when
          ``relative_step`` is ``False``. Default: ``None``
        eps (tuple(float, float), optional): :math:`\epsilon_1` added to the
          squared gradients and :math:`\epsilon_2`, the least parameter
          scale. Default: ``(1e-30, 1e-3)``
        clip_threshold (float, optional): The RMS to which the unscaled
          update is clipped. Default: ``1.0``
        decay_rate (float, optional): The exponent of the step in the second
          moment's decay, :math:`\beta_2 = 1 - t^{c}`. Default: ``-0.8``
        beta_1 (float, optional): When set, a first moment is kept.
          Default: ``None``
        weight_decay (float, optional): Default: ``0.0``
        scale_parameter (bool, optional): Scale the step by
          :math:`\max(\epsilon_2, \text{RMS}(w))`. Default: ``True``
        relative_step (bool, optional): Ignore ``learning_rate`` and use
          :math:`\min(10^{-2}, 1/\sqrt{t})`. Default: ``True``
        warmup_init (bool, optional): With ``relative_step``, use
          :math:`\min(10^{-6} t, 1/\sqrt{t})`. Default: ``False``
    """

    def __init__(
        self,
        learning_rate: Union[float, Schedule, None] = None,
        eps: Tuple[float, float] = (1e-30, 1e-3),
        clip_threshold: float = 1.0,
        decay_rate: float = -0.8,
        beta_1: Optional[float] = None,
        weight_decay: float = 0.0,
        scale_parameter: bool = True,
        relative_step: bool = True,
        warmup_init: bool = False,
    ):
        if learning_rate is None and not relative_step:
            raise ValueError(
                "[Adafactor] a learning_rate is needed when relative_step is False."
            )
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state):
        if parameter.ndim >= 2:
            shape, dtype = parameter.shape, parameter.dtype
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    @staticmethod
    def _rms(x):
        return mx.sqrt(mx.mean(mx.square(x)))

    @staticmethod
    def _approximate_exp_moving_avg(exp_avg_sq_row, exp_avg_sq_col):
        """The rank-one estimate of 1/sqrt(v) from the factors of v: rows
        normalized by their mean, times the columns (batched over leading
        axes)."""
        row_factor = mx.rsqrt(
            exp_avg_sq_row / mx.mean(exp_avg_sq_row, axis=-1, keepdims=True)
        )
        col_factor = mx.rsqrt(exp_avg_sq_col)
        return mx.expand_dims(row_factor, -1) * mx.expand_dims(col_factor, -2)

    def _step_size(self, step, parameter_rms):
        if self.relative_step:
            ceiling = 1e-6 * step if self.warmup_init else 1e-2
            size = mx.minimum(ceiling, mx.rsqrt(step))
        else:
            size = self.learning_rate
        size = size.astype(parameter_rms.dtype)
        if self.scale_parameter:
            return mx.maximum(self.eps[1], parameter_rms) * size
        return size

    def apply_single(self, gradient, parameter, state):
        step = self.step
        parameter_rms = self._rms(parameter)
        step_size = self._step_size(step, parameter_rms)
        beta_2 = 1.0 - (step**self.decay_rate).astype(parameter_rms.dtype)
        squared = mx.square(gradient) + self.eps[0]
        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(
                squared, axis=-1
            )
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(
                squared, axis=-2
            )
            state["exp_avg_sq_row"] = row
            state["exp_avg_sq_col"] = col
            update = self._approximate_exp_moving_avg(row, col) * gradient
        else:
            v = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * squared
            state["exp_avg_sq"] = v
            update = mx.rsqrt(v) * gradient
        update = update / mx.maximum(1.0, self._rms(update) / self.clip_threshold)
        update = step_size * update
        if self.beta_1 is not None:
            update = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = update
        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * step_size)
        return parameter - update


class Muon(Optimizer):
    r"""Muon (MomentUm Orthogonalized by Newton-Schulz, Jordan et al.,
    2024): SGD momentum whose update, for matrices, is replaced by the
    nearest semi-orthogonal matrix, found by a few Newton-Schulz steps.

    Meant for hidden layers; embeddings, the output layer and 0D/1D
    parameters are better served by another optimizer (see
    :class:`MultiOptimizer`); those get the plain momentum update here.
    Parameters of more than two dimensions are flattened after the first.

    Args:
        learning_rate (float or callable): The learning rate.
        momentum (float, optional): Default: ``0.95``
        weight_decay (float, optional): The L2 penalty. Default: ``0.01``
        nesterov (bool, optional): Default: ``True``
        ns_steps (int, optional): Newton-Schulz steps. Default: ``5``
    """

    # The quintic iteration's coefficients, chosen to converge fast from a
    # matrix of spectral norm <= 1.
    _NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)

    def __init__(
        self,
        learning_rate: Union[float, Schedule],
        momentum: float = 0.95,
        weight_decay: float = 0.01,
        nesterov: bool = True,
        ns_steps: int = 5,
    ):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def _orthogonalize(self, x):
        """Newton-Schulz iterations towards U V^T of x = U S V^T, in the
        dtype of x."""
        a, b, c = self._NS_COEFFICIENTS
        tall = x.shape[-2] > x.shape[-1]
        if tall:
            x = x.T
        x = x / (mx.linalg.norm(x, keepdims=True) + 1e-7)
        for _ in range(self.ns_steps):
            gram = x @ x.T
            poly = mx.addmm(b * gram, gram, gram, alpha=c, beta=1.0)
            x = mx.addmm(x, poly, x, alpha=1.0, beta=a)
        return x.T if tall else x

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        mu = self.momentum
        v = mu * state["v"] + (1 - mu) * gradient
        state["v"] = v
        update = gradient * (1 - mu) + v * mu if self.nesterov else v
        lr = self.learning_rate.astype(gradient.dtype)
        if update.ndim >= 2:
            shape = update.shape
            update = self._orthogonalize(mx.reshape(update, (shape[0], -1)))
            update = mx.reshape(update, shape)
            # Scale so that tall and wide matrices take steps of like size.
            lr = lr * math.sqrt(max(1.0, shape[-2] / shape[-1]))
        return parameter - lr * update


class MultiOptimizer(Optimizer):
    """Several optimizers, each for the parameters its filter picks.

    A filter is called with a parameter's path ("layers.0.weight") and the
    array and returns True to claim it; the first match wins. The last
    optimizer takes everything left and has no filter.

    Args:
        optimizers (list[Optimizer]): The optimizers to delegate to.
        filters (list[Callable[[str, array], bool]]): One fewer than the
          optimizers.
    """

    def __init__(self, optimizers, filters: list = []):
        super().__init__()
        self._state = {}
        if len(filters) != len(optimizers) - 1:
            raise ValueError(
                f"[MultiOptimizer] {len(optimizers)} optimizers need "
                f"{len(optimizers) - 1} filters, got {len(filters)}."
            )
        self.optimizers = list(optimizers)
        self.filters = list(filters) + [lambda *args, **kwargs: True]

    def _split(self, tree):
        """``tree`` split into one tree per optimizer, each keeping the
        paths of the full tree (with empty dicts in the gaps)."""
        if len(self.optimizers) == 1:
            return [tree]
        parts = [[] for _ in self.optimizers]
        for path, leaf in tree_flatten(tree):
            for part, keep in zip(parts, self.filters):
                if keep(path, leaf):
                    part.append((path, leaf))
                    break
        return [tree_unflatten(p) if p else {} for p in parts]

    def init(self, parameters):
        for optimizer, part in zip(self.optimizers, self._split(parameters)):
            optimizer.init(part)

    def apply_gradients(self, gradients, parameters):
        merged = {}
        for optimizer, part in zip(self.optimizers, self._split(gradients)):
            merged = tree_merge(merged, optimizer.apply_gradients(part, parameters))
        return merged

    @property
    def state(self):
        """``{"states": [...]}``, the state of each optimizer in order."""
        return {"states": [o.state for o in self.optimizers]}

    @state.setter
    def state(self, state):
        states = state.get("states") if isinstance(state, dict) else None
        if states is None or len(states) != len(self.optimizers):
            raise ValueError(
                "[MultiOptimizer] the state must be {'states': [...]} with one "
                f"state per optimizer ({len(self.optimizers)})."
            )
        for optimizer, s in zip(self.optimizers, states):
            optimizer.state = s

    @property
    def step(self):
        return self.optimizers[0].step

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        for optimizer in self.optimizers:
            optimizer.learning_rate = learning_rate


def clip_grad_norm(grads, max_norm: float):
    """Scale ``grads`` down so that their global L2 norm is at most
    ``max_norm``; returns ``(clipped_grads, total_norm)`` where
    ``total_norm`` is the norm before clipping.

    Example:
        >>> grads = {"w1": mx.array([2, 3]), "w2": mx.array([1])}
        >>> clipped_grads, total_norm = clip_grad_norm(grads, max_norm=2.0)
    """
    check_max_norm("clip_grad_norm", max_norm)
    return clip_to_norm(grads, mx.sqrt(squared_norm(grads)), max_norm)


def squared_norm(grads):
    """The sum of the squares of every entry of the tree ``grads``."""
    return tree_reduce(lambda total, g: total + mx.sum(mx.square(g)), grads, 0.0)


def check_max_norm(name, max_norm):
    # A negative bound would flip the gradients' sign rather than clip them.
    if max_norm < 0:
        raise ValueError(f"[{name}] max_norm must be >= 0, got {max_norm}.")


def clip_to_norm(grads, total_norm, max_norm: float):
    """``grads`` scaled down so that ``total_norm`` (their norm, however
    it was computed) becomes at most ``max_norm``, and that norm."""
    scale = mx.minimum(max_norm / (total_norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, grads), total_norm
