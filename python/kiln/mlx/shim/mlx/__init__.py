# A stub ``mlx`` that puts kiln in its place (kiln.mlx): found first when
# kiln.mlx's shim directory leads PYTHONPATH.
import sys as _sys

__kiln_shim__ = True
import kiln.mlx as _alias  # noqa: E402

_alias.install()
# The import that found this stub returns sys.modules["mlx"]: kiln's.
