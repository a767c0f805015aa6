"""kiln: lazy arrays and composable function transformations, with
MLX's programming model. ``import kiln.core as mx`` gives MLX's API."""

import os as _os
import sys as _sys


def _pick_openblas_kernels():
    """Debian's OpenBLAS 0.3.21 does not recognise recent x86 CPUs and falls
    back to its generic kernels, which run GEMM several times slower. It
    reads OPENBLAS_CORETYPE when the library loads (with kiln.core, just
    below), so name the kernels the CPU supports unless the user has."""
    if "OPENBLAS_CORETYPE" in _os.environ or not _sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return
    if {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= set(flags):
        _os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= set(flags):
        _os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_pick_openblas_kernels()


def _find_wheel_library(variable, *path):
    """The CUDA backend loads cuDNN (attention, convolutions) and NCCL (the
    'nccl' distributed backend) at run time, never linked, from the
    system's library path. Python environments often hold them in NVIDIA's
    wheels instead (PyTorch's and JAX's CUDA wheels install them): point
    the backend at the wheel's copy unless the user has named one."""
    if variable in _os.environ:
        return
    for entry in _sys.path:
        lib = _os.path.join(entry, *path)
        if _os.path.isfile(lib):
            _os.environ[variable] = lib
            return


def _find_wheel_toolkit():
    """With the GPU backend, kiln loads the CUDA runtime, cuBLASLt, NVRTC,
    cuFFT and cuSOLVER at run time, and NVRTC compiles against the CUDA
    headers. ``pip install kiln[cuda13]`` installs them as NVIDIA's wheels,
    under site-packages/nvidia/cu13 (lib/ and include/, laid out as a
    toolkit is), perhaps in several environments on the path: list those
    folders to the backend unless the user has."""
    if "KILN_CUDA_PATH" in _os.environ:
        return
    roots = [_os.path.join(entry, "nvidia", "cu13") for entry in _sys.path]
    roots = [r for r in roots if _os.path.isdir(r)]
    if roots:
        _os.environ["KILN_CUDA_PATH"] = ":".join(roots)


_find_wheel_toolkit()
_find_wheel_library("KILN_CUDNN_LIBRARY", "nvidia", "cudnn", "lib", "libcudnn.so.9")
_find_wheel_library("KILN_NCCL_LIBRARY", "nvidia", "nccl", "lib", "libnccl.so.2")

from . import core  # noqa: E402
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

from . import _graph  # noqa: E402

for _name in ("depends", "export_to_dot", "get_array_buffer_size"):
    _fn = getattr(_graph, _name)
    _fn.__module__ = "kiln.core"
    setattr(core, _name, _fn)


class _ArrayLikeMeta(type):
    def __instancecheck__(cls, obj):
        if isinstance(obj, (core.array, bool, int, float, complex, list, tuple)):
            return True
        if hasattr(obj, "__array__"):
            return True
        try:
            memoryview(obj)
            return True
        except TypeError:
            return False


class ArrayLike(metaclass=_ArrayLikeMeta):
    """Anything kiln.core.array accepts as data: arrays, Python scalars,
    nested lists and tuples, NumPy arrays and scalars, and objects with a
    buffer or ``__array__``. ``isinstance(x, ArrayLike)`` tells which."""


ArrayLike.__module__ = "kiln.core"
# mlx.core.matrix_norm is mlx.core.linalg.norm.
core.matrix_norm = core.linalg.norm
core.ArrayLike = ArrayLike

from ._backends import make_modules as _make_backend_modules  # noqa: E402
from ._matmul_variants import install as _install_matmul_variants  # noqa: E402

_install_matmul_variants(core)

from ._fft import install as _install_fft  # noqa: E402
from ._distributed import install as _install_distributed  # noqa: E402

_install_fft(core)
_install_distributed(core)

core.cuda, core.metal = _make_backend_modules(core)

# Make ``import kiln.core.random`` and friends work.
for _sub in ("random", "linalg", "fast", "fft", "distributed", "cuda", "metal"):
    _sys.modules[f"kiln.core.{_sub}"] = getattr(core, _sub)

core.newaxis = None
core.pi = 3.141592653589793
core.e = 2.718281828459045
core.inf = float("inf")
core.nan = float("nan")
core.euler_gamma = 0.5772156649015329

from . import utils  # noqa: E402

__version__ = "0.1.0"
# kiln.core stands in for mlx.core: its version is the MLX release whose
# behaviour and test suite kiln follows.
core.__version__ = "0.32.4"
