"""Optimizers and learning-rate schedules, as in mlx.optimizers."""

from . import optimizers, schedulers
from .optimizers import (
    AdaDelta,
    Adafactor,
    Adagrad,
    Adam,
    Adamax,
    AdamW,
    Lion,
    MultiOptimizer,
    Muon,
    Optimizer,
    RMSprop,
    SGD,
    clip_grad_norm,
)
from .schedulers import (
    cosine_decay,
    exponential_decay,
    join_schedules,
    linear_schedule,
    step_decay,
)

__all__ = optimizers.__all__ + schedulers.__all__
