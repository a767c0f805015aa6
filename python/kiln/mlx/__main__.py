"""python -m kiln.mlx [--path] (script.py | -m module) [args...]: runs an
MLX program on kiln (see kiln.mlx)."""

import os
import runpy
import sys

from . import install, shim_path

_USAGE = (
    "usage: python -m kiln.mlx script.py [args...]\n"
    "       python -m kiln.mlx -m module [args...]\n"
    "       python -m kiln.mlx --path   (the directory to put on PYTHONPATH)"
)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE)
        return 0 if argv else 2
    if argv[0] == "--path":
        print(shim_path())
        return 0
    # Interpreters the program starts find the stub first too.
    paths = [shim_path()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv[:]
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
