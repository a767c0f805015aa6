"""all_sum over a group of processes on this host: kiln's (one lazy op,
evaluated) against MPI_Allreduce through mpi4py in the same run, on the
same float32 buffers. Run under the launcher:

    python -m kiln.launch -n 2 benchmarks/distributed_bench.py [--check 0|1]

Prints, from rank 0, the median time per all_sum and the bus bandwidth as
nccl-tests defines it (bytes * 2 (n-1)/n / time), and kiln/MPI.
"""

import argparse
import time

import numpy as np

import kiln.core as kc


def median_time(fn, iters):
    fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-mb", type=float, default=256)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    g = kc.distributed.init(strict=True, backend="mpi")
    try:
        from mpi4py import MPI
    except ImportError:
        MPI = None
    n = g.size()
    rows = []
    size = 1024
    while size <= args.max_mb * 2**20:
        count = size // 4
        # A dense array, as gradients are (kc.ones would be one broadcast
        # element, copied out before every call).
        x = kc.random.normal((count,))
        kc.eval(x)
        iters = args.iters if size >= 2**20 else args.iters * 10
        t_kiln = median_time(lambda: kc.eval(kc.distributed.all_sum(x)), iters)
        t_mpi = float("nan")
        if MPI is not None:
            a = np.array(x)
            b = np.empty_like(a)
            t_mpi = median_time(lambda: MPI.COMM_WORLD.Allreduce(a, b, op=MPI.SUM), iters)
        rows.append((size, t_kiln, t_mpi))
        size *= 4
    if g.rank() == 0:
        bus = lambda s, t: s * 2 * (n - 1) / n / t / 1e9
        print(f"all_sum, {n} processes, float32; KILN_DISTRIBUTED_CHECK as set")
        print("| bytes | kiln us | MPI us | kiln bus GB/s | MPI bus GB/s | kiln/MPI time |")
        print("| --- | --- | --- | --- | --- | --- |")
        for s, tk, tm in rows:
            print(f"| {s} | {tk * 1e6:.1f} | {tm * 1e6:.1f} | {bus(s, tk):.2f} | {bus(s, tm):.2f} | {tk / tm:.2f} |")


if __name__ == "__main__":
    main()
