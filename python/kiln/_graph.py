"""Graph utilities over pytrees: depends, export_to_dot and
get_array_buffer_size (the flat work is in C++)."""

import os

from . import core as _core
from .utils import _flatten

array = _core.array


def _arrays_of(tree):
    return [x for x in _flatten(tree)[0] if isinstance(x, array)]


def depends(inputs, dependencies):
    """Arrays equal to ``inputs`` (an array or a sequence of arrays) that are
    evaluated only after ``dependencies`` (likewise); the dependencies get
    no gradient."""
    single = isinstance(inputs, array)
    ins = [inputs] if single else list(inputs)
    deps = [dependencies] if isinstance(dependencies, array) else list(dependencies)
    for x in ins + deps:
        if not isinstance(x, array):
            raise TypeError(f"[depends] expected arrays, got {type(x).__name__}.")
    outs = _core._depends(ins, deps)
    return (
        outs[0] if single else type(inputs)(outs) if isinstance(inputs, tuple) else outs
    )


def export_to_dot(file, *args, **kwargs):
    """Write the lazy graph computing the arrays in ``args`` and ``kwargs``
    as Graphviz DOT to ``file`` (a path or a writable text file); keyword
    arguments are arrays of the graph given with their names, as MLX's."""
    outputs = _arrays_of(args)
    names = []
    for name, value in kwargs.items():
        if not isinstance(value, array):
            raise TypeError(
                f"[export_to_dot] {name} must be an array, got "
                f"{type(value).__name__}."
            )
        names.append((name, value))
        outputs.append(value)
    if not (hasattr(file, "write") or isinstance(file, (str, os.PathLike))):
        # open() would take an int (or an array's __index__) as a file
        # descriptor.
        raise TypeError(
            "[export_to_dot] file must be a path or a writable text file, "
            f"got {type(file).__name__}."
        )
    text = _core._graph_to_dot(outputs, names)
    if hasattr(file, "write"):
        file.write(text)
    else:
        with open(file, "w") as f:
            f.write(text)


def get_array_buffer_size(*args):
    """Bytes of the distinct buffers behind the (evaluated) arrays in the
    given pytrees, each counted once at its allocated size."""
    return _core._array_buffer_size(_arrays_of(args))
