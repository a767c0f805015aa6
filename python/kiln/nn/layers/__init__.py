"""The layers of kiln.nn, one module per family."""

from .base import Module
from .containers import Sequential
from .convolution import Conv1d, Conv2d, Conv3d
from .convolution_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .pooling import AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d
from .positional_encoding import ALiBi, RoPE, SinusoidalPositionalEncoding
from .recurrent import GRU, LSTM, RNN
from .upsample import Upsample
