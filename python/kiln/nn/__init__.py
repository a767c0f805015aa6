"""kiln.nn: layers, losses and initializers with MLX's API
(``import kiln.nn as nn``)."""

from . import init, losses
from .layers import *  # noqa: F401,F403
from .layers import Module, Sequential
from .utils import average_gradients, checkpoint, value_and_grad
