"""Learning-rate schedules: functions of the optimizer's step (a uint64
array) that return the value to use at that step, as in mlx.optimizers."""

import math
from typing import Callable, List

from .. import core as mx

__all__ = [
    "exponential_decay",
    "step_decay",
    "cosine_decay",
    "linear_schedule",
    "join_schedules",
]


def exponential_decay(init: float, decay_rate: float) -> Callable:
    """A schedule ``init * decay_rate ** step``.

    Example:
        >>> lr_schedule = optim.exponential_decay(1e-1, 0.9)
        >>> optimizer = optim.SGD(learning_rate=lr_schedule)
    """

    def schedule(step):
        return init * decay_rate**step

    return schedule


def step_decay(init: float, decay_rate: float, step_size: int) -> Callable:
    """A schedule that multiplies ``init`` by ``decay_rate`` once every
    ``step_size`` steps: ``init * decay_rate ** (step // step_size)``."""

    def schedule(step):
        return init * decay_rate ** (step // step_size)

    return schedule


def cosine_decay(init: float, decay_steps: int, end: float = 0.0) -> Callable:
    """A schedule that follows half a cosine from ``init`` down to ``end``
    over ``decay_steps`` steps and stays at ``end`` after them."""

    def schedule(step):
        progress = mx.minimum(step, decay_steps)
        weight = 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * progress))
        return end + weight * (init - end)

    return schedule


def linear_schedule(init: float, end: float, steps: int) -> Callable:
    """A schedule that goes in a straight line from ``init`` to ``end`` over
    ``steps`` steps and stays at ``end`` after them."""
    if steps < 1:
        raise ValueError(f"[linear_schedule] steps must be at least 1, got {steps}.")
    slope = (end - init) / steps

    def schedule(step):
        return mx.minimum(step, steps) * slope + init

    return schedule


def join_schedules(schedules: List[Callable], boundaries: List[int]) -> Callable:
    """Run ``schedules[0]`` until ``boundaries[0]``, then ``schedules[1]``
    until ``boundaries[1]``, and so on. Schedule ``i + 1`` sees the number of
    steps since boundary ``i``."""
    if len(schedules) == 0:
        raise ValueError("[join_schedules] at least one schedule is needed.")
    if len(boundaries) != len(schedules) - 1:
        raise ValueError(
            f"[join_schedules] {len(schedules)} schedules need "
            f"{len(schedules) - 1} boundaries, got {len(boundaries)}."
        )

    def schedule(step):
        value = schedules[0](step)
        for boundary, later in zip(boundaries, schedules[1:]):
            # Both branches are computed; the unsigned step - boundary wraps
            # around before the boundary, but that value is never selected.
            value = mx.where(step < boundary, value, later(step - boundary))
        return value

    return schedule
