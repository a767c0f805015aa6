"""Timing shared by the CPU benchmark scripts (imported from their
directory)."""

import time


def best_ms(fn, sync, repeat=5):
    """The best of `repeat` timed calls of fn (each result passed to sync,
    which waits for it), after one untimed call, in ms."""
    sync(fn())
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        sync(fn())
        best = min(best, time.perf_counter() - t0)
    return best * 1e3
