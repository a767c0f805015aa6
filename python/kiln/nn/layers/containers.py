"""Containers of layers."""

from .base import Module


class Sequential(Module):
    """Calls its modules (or plain callables) in order, each on the previous
    one's output."""

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
