"""Recurrent layers over sequences (N, L, D) or (L, D): Elman RNN, GRU and
LSTM, with MLX's parameter names and gate orders.

Each layer projects the whole input sequence at once (one GEMM) and then
steps through time with one small GEMM per step for the hidden state. A
missing initial state is zero; its terms are left out rather than computed."""

import math
from typing import Callable, Optional

import kiln.core as mx

from ._arguments import positive_int
from .activations import tanh
from .base import Module


def _uniform(scale, shape):
    return mx.random.uniform(low=-scale, high=scale, shape=shape)


def _check_sequence(owner, x, input_size):
    if x.ndim not in (2, 3) or x.shape[-1] != input_size:
        raise ValueError(
            f"[{owner}] expected an input of shape (N, L, {input_size}) or "
            f"(L, {input_size}) but got shape {tuple(x.shape)} ({x.dtype})."
        )


def _project(x, weight, bias):
    """``x @ weight.T (+ bias)`` for the whole sequence."""
    if bias is None:
        return x @ weight.T
    return mx.addmm(bias, x, weight.T)


class RNN(Module):
    r"""An Elman recurrent layer: ``h_{t+1} = f(W_xh x_t + W_hh h_t + b)``.

    Returns the hidden state at every step, of shape ``NLH`` or ``LH``.

    Args:
        input_size (int): the input's feature size ``D``.
        hidden_size (int): the hidden state's size ``H``.
        bias (bool): use a bias. Default: ``True``.
        nonlinearity (callable, optional): ``f``; ``tanh`` when ``None``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: Optional[Callable] = None,
    ):
        super().__init__()
        self.nonlinearity = nonlinearity or tanh
        if not callable(self.nonlinearity):
            raise ValueError(
                f"Nonlinearity must be callable. Current value: {nonlinearity}."
            )
        input_size = positive_int(input_size, "RNN", "input_size")
        self.hidden_size = positive_int(hidden_size, "RNN", "hidden_size")
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wxh = _uniform(scale, (hidden_size, input_size))
        self.Whh = _uniform(scale, (hidden_size, hidden_size))
        self.bias = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
            f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None):
        _check_sequence("RNN", x, self.Wxh.shape[1])
        x = _project(x, self.Wxh, self.bias)
        states = []
        for t in range(x.shape[-2]):
            pre = x[..., t, :]
            if hidden is not None:
                pre = mx.addmm(pre, hidden, self.Whh.T)
            hidden = self.nonlinearity(pre)
            states.append(hidden)
        return mx.stack(states, axis=-2)


class GRU(Module):
    r"""A gated recurrent unit layer. With gates in the order reset ``r``,
    update ``z``, candidate ``n``:

    .. math::

        r_t = \sigma(W_{xr} x_t + W_{hr} h_t + b_r), \quad
        z_t = \sigma(W_{xz} x_t + W_{hz} h_t + b_z) \\
        n_t = \tanh(W_{xn} x_t + b_n + r_t \odot (W_{hn} h_t + b_{hn})), \quad
        h_{t+1} = (1 - z_t) \odot n_t + z_t \odot h_t

    Returns the hidden state at every step, of shape ``NLH`` or ``LH``.

    Args:
        input_size (int): the input's feature size ``D``.
        hidden_size (int): the hidden state's size ``H``.
        bias (bool): use biases. Default: ``True``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        input_size = positive_int(input_size, "GRU", "input_size")
        self.hidden_size = positive_int(hidden_size, "GRU", "hidden_size")
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (3 * hidden_size, input_size))
        self.Wh = _uniform(scale, (3 * hidden_size, hidden_size))
        self.b = _uniform(scale, (3 * hidden_size,)) if bias else None
        self.bhn = _uniform(scale, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.b is not None}"
        )

    def __call__(self, x, hidden=None):
        _check_sequence("GRU", x, self.Wx.shape[1])
        H = self.hidden_size
        x = _project(x, self.Wx, self.b)
        x_rz, x_n = x[..., :-H], x[..., -H:]
        states = []
        for t in range(x.shape[-2]):
            rz = x_rz[..., t, :]
            n = x_n[..., t, :]
            if hidden is not None:
                h_proj = hidden @ self.Wh.T
                h_n = h_proj[..., -H:]
                if self.bhn is not None:
                    h_n = h_n + self.bhn
                rz = rz + h_proj[..., :-H]
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            # With no hidden state W_hn h is zero and only b_hn is gated.
            if hidden is not None:
                n = n + r * h_n
            elif self.bhn is not None:
                n = n + r * self.bhn
            n = mx.tanh(n)
            hidden = (1 - z) * n if hidden is None else (1 - z) * n + z * hidden
            states.append(hidden)
        return mx.stack(states, axis=-2)


class LSTM(Module):
    r"""A long short-term memory layer. With gates in the order input ``i``,
    forget ``f``, cell ``g``, output ``o``:

    .. math::

        i_t, f_t, o_t = \sigma(W_{x\cdot} x_t + W_{h\cdot} h_t + b_\cdot), \quad
        g_t = \tanh(W_{xg} x_t + W_{hg} h_t + b_g) \\
        c_{t+1} = f_t \odot c_t + i_t \odot g_t, \quad
        h_{t+1} = o_t \odot \tanh(c_{t+1})

    Returns the hidden and the cell states at every step, each of shape
    ``NLH`` or ``LH``.

    Args:
        input_size (int): the input's feature size ``D``.
        hidden_size (int): the hidden state's size ``H``.
        bias (bool): use a bias. Default: ``True``.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
        super().__init__()
        input_size = positive_int(input_size, "LSTM", "input_size")
        self.hidden_size = positive_int(hidden_size, "LSTM", "hidden_size")
        scale = 1.0 / math.sqrt(hidden_size)
        self.Wx = _uniform(scale, (4 * hidden_size, input_size))
        self.Wh = _uniform(scale, (4 * hidden_size, hidden_size))
        self.bias = _uniform(scale, (4 * hidden_size,)) if bias else None

    def _extra_repr(self):
        return (
            f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
            f"bias={self.bias is not None}"
        )

    def __call__(self, x, hidden=None, cell=None):
        _check_sequence("LSTM", x, self.Wx.shape[1])
        x = _project(x, self.Wx, self.bias)
        hiddens, cells = [], []
        for t in range(x.shape[-2]):
            gates = x[..., t, :]
            if hidden is not None:
                gates = mx.addmm(gates, hidden, self.Wh.T)
            i, f, g, o = mx.split(gates, 4, axis=-1)
            i, f, o = mx.sigmoid(i), mx.sigmoid(f), mx.sigmoid(o)
            g = mx.tanh(g)
            cell = i * g if cell is None else f * cell + i * g
            hidden = o * mx.tanh(cell)
            hiddens.append(hidden)
            cells.append(cell)
        return mx.stack(hiddens, axis=-2), mx.stack(cells, axis=-2)
