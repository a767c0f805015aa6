"""The layers of kiln.nn, one module per family."""

from .base import Module
from .containers import Sequential
