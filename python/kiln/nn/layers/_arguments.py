"""Checks shared by the layers' constructors, so that a bad argument fails
when the layer is built, with a message naming the layer."""

from numbers import Integral


def int_tuple(value, n, owner, name, minimum=None):
    """``value`` (an int, or a sequence of ``n`` ints) as a tuple of ``n``
    ints, each at least ``minimum`` when given."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        values = (int(value),) * n
    elif (
        isinstance(value, (tuple, list))
        and len(value) == n
        and all(isinstance(v, Integral) and not isinstance(v, bool) for v in value)
    ):
        values = tuple(int(v) for v in value)
    else:
        ints = "1 integer" if n == 1 else f"{n} integers"
        raise ValueError(
            f"[{owner}] '{name}' must be an integer or a tuple containing "
            f"{ints} but got {value!r}."
        )
    if minimum is not None and any(v < minimum for v in values):
        what = "positive" if minimum == 1 else f"at least {minimum}"
        raise ValueError(f"[{owner}] '{name}' must be {what} but got {value!r}.")
    return values


def positive_int(value, owner, name):
    """``value`` checked to be a positive int."""
    return int_tuple(value, 1, owner, name, minimum=1)[0]
