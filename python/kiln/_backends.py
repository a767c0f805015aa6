"""``kiln.core.cuda`` and ``kiln.core.metal``: MLX's per-backend modules.

kiln's GPU backend is CUDA, so ``cuda.is_available()`` reports whether a
GPU can be used. kiln has no Metal backend; ``metal.is_available()`` is
False and its memory functions are the device-independent ones of
``kiln.core`` (in MLX they are deprecated aliases of those).
"""

import types


def make_modules(core):
    cuda = types.ModuleType("kiln.core.cuda", "The CUDA backend.")
    cuda.is_available = lambda: bool(core.is_available(core.gpu))
    cuda.is_available.__doc__ = "Whether kiln was built with CUDA and a GPU is present."

    metal = types.ModuleType("kiln.core.metal", "kiln has no Metal backend.")
    metal.is_available = lambda: False
    for name in (
        "clear_cache", "get_active_memory", "get_cache_memory", "get_peak_memory",
        "reset_peak_memory", "set_cache_limit", "set_memory_limit",
    ):
        setattr(metal, name, getattr(core, name))

    def set_wired_limit(limit):
        return core.set_wired_limit(limit)

    def device_info():
        raise RuntimeError("metal.device_info: kiln has no Metal backend.")

    def start_capture(path):
        raise RuntimeError("metal.start_capture: kiln has no Metal backend.")

    def stop_capture():
        raise RuntimeError("metal.stop_capture: kiln has no Metal backend.")

    metal.set_wired_limit = set_wired_limit
    metal.device_info = device_info
    metal.start_capture = start_capture
    metal.stop_capture = stop_capture
    return cuda, metal
