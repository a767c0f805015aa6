"""kiln.core.load, savez and savez_compressed: the format dispatch and the
.npz container (a zip of .npy files, handled with zipfile); the formats
themselves are read and written by the C++ library."""

import os
import zipfile

from . import core

_FORMATS = ("npy", "npz", "safetensors", "gguf")


def _is_path(file):
    return isinstance(file, (str, os.PathLike))


def _format_of(file, op):
    name = os.fspath(file) if _is_path(file) else getattr(file, "name", None)
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    ext = os.path.splitext(name)[1] if isinstance(name, str) else ""
    if not ext:
        raise ValueError(
            f"[{op}] could not infer the file format from the extension; "
            f"pass format= (one of {', '.join(_FORMATS)})."
        )
    return ext[1:]


def _load_npz(file, stream):
    what = os.fspath(file) if _is_path(file) else repr(file)
    try:
        archive = zipfile.ZipFile(file, "r")
    except (OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"[load] {what} is not a readable .npz (zip) file: {e}")
    arrays = {}
    with archive:
        for info in archive.infolist():
            name = info.filename
            key = name[:-4] if name.endswith(".npy") else name
            with archive.open(info) as member:
                arrays[key] = core._load_npy(member, stream=stream)
    return arrays


def load(file, /, format=None, return_metadata=False, *, stream=None):
    """Load array(s) from a binary file.

    The formats are ``.npy``, ``.npz``, ``.safetensors`` and ``.gguf``.

    Args:
        file (file, str, pathlib.Path): The file to read.
        format (str, optional): ``npy``, ``npz``, ``safetensors`` or
          ``gguf``; inferred from the file's extension when ``None``.
        return_metadata (bool, optional): Also return the metadata of a
          ``.safetensors`` or ``.gguf`` file. Default: ``False``.

    Returns:
        An array for ``.npy``; a dict of names to arrays otherwise; with
        ``return_metadata``, a tuple ``(arrays, metadata)``.
    """
    if not _is_path(file) and not hasattr(file, "read"):
        raise ValueError(
            "[load] file must be a str, a pathlib.Path or a file-like object "
            f"opened in binary mode; got {type(file).__name__}."
        )
    if format is None:
        format = _format_of(file, "load")
    if format not in _FORMATS:
        raise ValueError(f"[load] Unknown file format {format}")
    if return_metadata and format not in ("safetensors", "gguf"):
        raise ValueError(f"[load] metadata not supported for format {format}")
    if format == "npy":
        return core._load_npy(file, stream=stream)
    if format == "npz":
        return _load_npz(file, stream)
    if format == "gguf" and not _is_path(file):
        raise ValueError("[load] GGUF files are read from a str or pathlib.Path.")
    reader = core._load_safetensors if format == "safetensors" else core._load_gguf
    arrays, metadata = reader(file, stream=stream)
    return (arrays, metadata) if return_metadata else arrays


def _savez(op, file, args, kwargs, compression):
    arrays = dict(kwargs)
    for i, a in enumerate(args):
        key = f"arr_{i}"
        if key in arrays:
            raise ValueError(f"[{op}] Cannot use un-named variables and keyword {key}")
        arrays[key] = a
    for key, a in arrays.items():
        if not isinstance(a, core.array):
            raise TypeError(f"[{op}] '{key}' must be an array; got {type(a).__name__}.")
    if _is_path(file):
        file = os.fspath(file)
        if not file.endswith(".npz"):
            file += ".npz"
    elif not hasattr(file, "write"):
        raise ValueError(
            f"[{op}] file must be a str, a pathlib.Path or a file-like "
            f"object; got {type(file).__name__}."
        )
    with zipfile.ZipFile(file, "w", compression=compression) as archive:
        for key, a in arrays.items():
            with archive.open(key + ".npy", "w", force_zip64=True) as member:
                core.save(member, a)


def savez(file, *args, **kwargs):
    """Save several arrays to a binary file in uncompressed ``.npz`` format.

    Positional arrays are named ``arr_0``, ``arr_1``, ... (as NumPy);
    keyword arrays by their keyword. ``.npz`` is appended to a path that
    lacks it.
    """
    _savez("savez", file, args, kwargs, zipfile.ZIP_STORED)


def savez_compressed(file, *args, **kwargs):
    """Save several arrays to a binary file in compressed ``.npz`` format
    (see :func:`savez`)."""
    _savez("savez_compressed", file, args, kwargs, zipfile.ZIP_DEFLATED)
