"""kiln: lazy arrays and composable function transformations, with
MLX's programming model. ``import kiln.core as mx`` gives MLX's API."""

import sys as _sys

from . import core
from . import _compile, _io, _transforms

# The transformations are written in Python over the flat C++ ones; they
# belong to kiln.core, as in mlx.core.
for _name in (
    "eval",
    "async_eval",
    "grad",
    "value_and_grad",
    "vjp",
    "jvp",
    "vmap",
    "compile",
    "custom_function",
    "checkpoint",
):
    _fn = getattr(_compile if _name == "compile" else _transforms, _name)
    try:
        _fn.__module__ = "kiln.core"
    except (AttributeError, TypeError):
        pass
    setattr(core, _name, _fn)

# load and .npz are Python over the C++ readers and writers.
for _name in ("load", "savez", "savez_compressed"):
    _fn = getattr(_io, _name)
    _fn.__module__ = "kiln.core"
    setattr(core, _name, _fn)

from ._backends import make_modules as _make_backend_modules  # noqa: E402

core.cuda, core.metal = _make_backend_modules(core)

# Make ``import kiln.core.random`` and friends work.
for _sub in ("random", "linalg", "fast", "cuda", "metal"):
    _sys.modules[f"kiln.core.{_sub}"] = getattr(core, _sub)

core.newaxis = None
core.pi = 3.141592653589793
core.e = 2.718281828459045
core.inf = float("inf")
core.nan = float("nan")
core.euler_gamma = 0.5772156649015329

from . import utils  # noqa: E402

__version__ = "0.1.0"
