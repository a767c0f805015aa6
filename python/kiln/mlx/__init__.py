"""Run MLX programs on kiln unchanged: ``import mlx``, ``mlx.core``,
``mlx.nn``, ``mlx.optimizers``, ``mlx.utils`` and their submodules resolve
to kiln's modules.

Never on by default. Three ways to ask for it:

- ``python -m kiln.mlx script.py args...`` or
  ``python -m kiln.mlx -m module args...`` runs a program with the alias;
- ``kiln.mlx.install()`` in a program, before it imports ``mlx``;
- for tools that start interpreters of their own, put the directory that
  ``python -m kiln.mlx --path`` prints at the front of ``PYTHONPATH``
  (``python -m kiln.mlx`` does this for the processes it starts): there
  ``import mlx`` finds a stub that installs the alias.

A real MLX installed beside kiln is shadowed only where the alias is asked
for; ``install()`` raises if ``mlx`` was already imported from elsewhere.
"""

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types

__all__ = ["install", "installed", "shim_path", "MLX_VERSION"]

from .. import core as _core

# The MLX release whose behaviour and test suite kiln follows.
MLX_VERSION = _core.__version__

_PREFIX = "mlx"


def shim_path():
    """The directory whose ``mlx`` stub installs the alias on import."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")


def _kiln_name(name):
    # mlx -> kiln; mlx.core.fast -> kiln.core.fast
    return "kiln" + name[len(_PREFIX):]


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self._target = target

    def create_module(self, spec):
        return self._target

    def exec_module(self, module):
        pass  # kiln's module is already initialized


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds mlx.X.Y as the module object kiln.X.Y (the same object, so
    classes and functions are identical under both names)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _PREFIX and not fullname.startswith(_PREFIX + "."):
            return None
        if fullname == _PREFIX:
            module = _package()
        else:
            module = _resolve(_kiln_name(fullname))
            if module is None:
                return None
        spec = importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(module), is_package=hasattr(module, "__path__")
        )
        return spec


def _resolve(name):
    """kiln's module (or module-like attribute, as kiln.core.fast) named
    name, or None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    parent, _, attr = name.rpartition(".")
    if not parent:
        return None
    owner = _resolve(parent)
    value = getattr(owner, attr, None) if owner is not None else None
    return value if isinstance(value, types.ModuleType) else None


_mlx_package = None


def _package():
    """The module that stands for the ``mlx`` package: kiln's top-level
    subpackages as attributes, and a version."""
    global _mlx_package
    if _mlx_package is None:
        import kiln

        pkg = types.ModuleType(_PREFIX, "kiln, imported as mlx")
        pkg.__path__ = []  # a package; its submodules come from the finder
        # A spec, as every imported module has: importlib.util.find_spec
        # ("mlx"), which libraries call to see whether mlx is there, needs it.
        pkg.__spec__ = importlib.machinery.ModuleSpec(
            _PREFIX, _AliasLoader(pkg), is_package=True
        )
        pkg.__spec__.submodule_search_locations = []
        pkg.__version__ = MLX_VERSION
        pkg.__kiln__ = kiln

        def __getattr__(name):
            # mlx.core, mlx.nn, ... as attributes once imported or asked for.
            if name.startswith("__"):
                raise AttributeError(name)
            try:
                return importlib.import_module(f"{_PREFIX}.{name}")
            except ImportError:
                raise AttributeError(f"module 'mlx' has no attribute {name!r}")

        pkg.__getattr__ = __getattr__
        _mlx_package = pkg
    return _mlx_package


_finder = _AliasFinder()


def installed():
    """Whether the alias is active in this interpreter."""
    return _finder in sys.meta_path


def install():
    """Makes ``import mlx`` and its submodules resolve to kiln from now on.
    Raises RuntimeError if a real ``mlx`` has already been imported."""
    if installed():
        return
    current = sys.modules.get(_PREFIX)
    if current is not None and current is not _mlx_package and not getattr(
        current, "__kiln_shim__", False
    ):
        raise RuntimeError(
            "[kiln.mlx] mlx was already imported from "
            f"{getattr(current, '__path__', current)}; install the alias "
            "before the program imports mlx."
        )
    sys.meta_path.insert(0, _finder)
    _core._set_display_name("mlx.core")
    # Modules already imported under kiln's names become visible as mlx's.
    sys.modules[_PREFIX] = _package()
    for name, module in list(sys.modules.items()):
        if name.startswith("kiln.") and module is not None:
            alias = _PREFIX + name[len("kiln"):]
            sys.modules.setdefault(alias, module)
            parent, _, child = alias.rpartition(".")
            if parent == _PREFIX:
                setattr(_package(), child, module)
