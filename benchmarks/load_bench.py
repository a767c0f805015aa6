"""Loading a checkpoint: a 1 GB safetensors file (16 float32 tensors of 64 MB),
loaded and one tensor of it evaluated, by kiln, MLX and the safetensors
package with NumPy, in the same run.

    PYTHONPATH=build/python python3 benchmarks/load_bench.py [--gb 1] [--repeat 3]

Each peer is timed from the open to the tensor's values in memory (its sum
taken, so that every byte of it is read): kiln's `load` maps the file and
reads a tensor when it is evaluated, as MLX's does; `safetensors.numpy`'s
`load_file` reads every tensor, and its `safe_open(...).get_tensor` the one
asked for. Two states of the operating system's page cache: "cold", the
file's pages dropped before each call (posix_fadvise DONTNEED, which needs
no privileges), and "warm", the file read once before. Times are the
median of --repeat calls, in ms; ratios are peer / kiln (> 1: kiln faster).
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import kiln.core as kc

try:
    import mlx.core as mc
except ImportError:  # pragma: no cover
    mc = None
try:
    from safetensors.numpy import load_file, save_file
    from safetensors import safe_open
except ImportError:  # pragma: no cover
    load_file = None


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_cache(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def timed(fn, path, cold, repeat):
    times = []
    for _ in range(repeat):
        drop_cache(path) if cold else warm_cache(path)
        t0 = time.perf_counter()
        value = fn(path)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0, help="file size in GB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    tensors = 16
    per = int(args.gb * 1e9 / tensors / 4)
    rng = np.random.default_rng(0)
    data = {f"layer{i}.weight": rng.standard_normal(per, dtype=np.float32)
            for i in range(tensors)}
    name = "layer7.weight"
    want = float(data[name].astype(np.float64).sum())
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        if load_file is not None:
            save_file(data, path)
        else:
            kc.save_safetensors(path, {k: kc.array(v) for k, v in data.items()})
        size = os.path.getsize(path)
        del data

        peers = {
            "kiln load + eval one": lambda p: kc.load(p)[name].sum().item(),
        }
        if mc is not None:
            peers["MLX load + eval one"] = lambda p: mc.load(p)[name].sum().item()
        if load_file is not None:
            def one_tensor(p):
                with safe_open(p, framework="numpy") as f:
                    return float(f.get_tensor(name).sum())
            peers["safetensors get_tensor (one)"] = one_tensor
            peers["safetensors load_file (all)"] = lambda p: float(load_file(p)[name].sum())

        print(f"file: {size / 1e9:.2f} GB, {tensors} float32 tensors of "
              f"{per * 4 / 1e6:.0f} MB; one evaluated")
        rows = {}
        for label, fn in peers.items():
            for cold in (True, False):
                ms, value = timed(fn, path, cold, args.repeat)
                assert abs(value - want) <= 1e-3 * (abs(want) + per ** 0.5), (label, value, want)
                rows[(label, cold)] = ms

    base = {c: rows[("kiln load + eval one", c)] for c in (True, False)}
    print("\n| reader | cold cache ms | warm cache ms | cold: peer / kiln | warm: peer / kiln |")
    print("| --- | --- | --- | --- | --- |")
    for label in peers:
        c, w = rows[(label, True)], rows[(label, False)]
        print(f"| {label} | {c:.1f} | {w:.1f} | {c / base[True]:.2f} | {w / base[False]:.2f} |")


if __name__ == "__main__":
    main()
