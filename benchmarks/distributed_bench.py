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


def paired_times(fa, fb, iters, rounds=10):
    """Median times of fa and fb, run in alternating blocks so that both see
    the same drift of a shared machine (a 1 KB all_sum's time moves by 20%
    from one second to the next here)."""
    ta, tb = [], []
    block = max(1, iters // rounds)
    for f, ts in ((fa, ta), (fb, tb)):
        f()
    for _ in range(rounds):
        for f, ts in ((fa, ta), (fb, tb)):
            for _ in range(block):
                t = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t)
    return float(np.median(ta)), float(np.median(tb))


def step_bench(g, batch, iters):
    import kiln.nn as nn
    import kiln.optimizers as optim
    from kiln.utils import tree_flatten

    n, r = g.size(), g.rank()
    if batch % n:
        raise SystemExit(f"--batch {batch} must be a multiple of the {n} processes")
    kc.random.seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    opt = optim.Adam(learning_rate=1e-3)
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((batch, 784)).astype(np.float32)
    y_all = rng.integers(0, 10, batch).astype(np.int32)
    share = batch // n
    x = kc.array(x_all[r * share:(r + 1) * share])
    y = kc.array(y_all[r * share:(r + 1) * share])

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x), y, reduction="mean")

    grad_fn = nn.value_and_grad(model, loss_fn)

    def step():
        loss, grads = grad_fn(model, x, y)
        grads = nn.average_gradients(grads, group=g)
        opt.update(model, grads)
        kc.eval(loss, model.parameters(), opt.state)

    _, grads = grad_fn(model, x, y)
    kc.eval(grads)
    t_step = median_time(step, iters)
    t_reduce = median_time(lambda: kc.eval(nn.average_gradients(grads, group=g)), iters) if n > 1 else 0.0
    if r == 0:
        nbytes = sum(v.nbytes for _, v in tree_flatten(grads))
        print(f"data-parallel step, {n} process(es), global batch {batch}, "
              f"{nbytes / 2**20:.1f} MB of gradients")
        print("| processes | step ms | samples/s | all-reduce ms | all-reduce share |")
        print("| --- | --- | --- | --- | --- |")
        print(f"| {n} | {t_step * 1e3:.2f} | {batch / t_step:.0f} | {t_reduce * 1e3:.2f} | "
              f"{t_reduce / t_step:.0%} |")


def sizes(max_mb):
    size = 1024
    while size <= max_mb * 2**20:
        yield size
        size *= 4


def print_table(title, peer, rows, n):
    bus = lambda s, t: s * 2 * (n - 1) / n / t / 1e9
    print(title)
    print(f"| bytes | kiln us | {peer} us | kiln bus GB/s | {peer} bus GB/s | kiln/{peer} time |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s, tk, tp in rows:
        print(f"| {s} | {tk * 1e6:.1f} | {tp * 1e6:.1f} | {bus(s, tk):.2f} | {bus(s, tp):.2f} | "
              f"{tk / tp:.2f} |")


def gpu_bench(g, max_mb, iters):
    """kiln's all_sum over NCCL against torch.distributed's all_reduce."""
    import os

    n, r = g.size(), g.rank()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        torch = None
    if torch is not None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=r, world_size=n)
        torch.cuda.set_device(int(os.environ.get("KILN_LOCAL_RANK", r)))
    rows = []
    for size in sizes(max_mb):
        count = size // 4
        x = kc.random.normal((count,), stream=kc.gpu)
        kc.eval(x)
        it = iters if size >= 2**20 else iters * 10

        def kiln_call():
            kc.eval(kc.distributed.all_sum(x, group=g, stream=kc.gpu))
            kc.synchronize()

        t_kiln = median_time(kiln_call, it)
        t_torch = float("nan")
        if torch is not None:
            t = torch.randn(count, device="cuda")

            def torch_call():
                dist.all_reduce(t)
                torch.cuda.synchronize()

            t_torch = median_time(torch_call, it)
        rows.append((size, t_kiln, t_torch))
    if r == 0:
        print_table(f"all_sum of GPU arrays, {n} processes (NCCL), float32",
                    "torch", rows, n)
    if torch is not None:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--max-mb", type=float, default=256)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--step", action="store_true", help="time a data-parallel training step")
    p.add_argument("--batch", type=int, default=256, help="global batch of --step")
    p.add_argument("--gpu", action="store_true", help="GPU arrays over NCCL, against PyTorch")
    args = p.parse_args()
    if args.gpu:
        gpu_bench(kc.distributed.init(strict=True, backend="nccl"), args.max_mb, args.iters)
        return
    g = kc.distributed.init(strict=True, backend="mpi") if kc.distributed.is_available("mpi") \
        else kc.distributed.init()
    if args.step:
        step_bench(g, args.batch, args.iters)
        return
    try:
        from mpi4py import MPI
    except ImportError:
        MPI = None
    n = g.size()
    rows = []
    for size in sizes(args.max_mb):
        count = size // 4
        # Random values, as gradients are.
        x = kc.random.normal((count,))
        kc.eval(x)
        iters = args.iters if size >= 2**20 else args.iters * 10
        kiln_call = lambda: kc.eval(kc.distributed.all_sum(x))
        if MPI is not None:
            a = np.array(x)
            b = np.empty_like(a)
            t_kiln, t_mpi = paired_times(
                kiln_call, lambda: MPI.COMM_WORLD.Allreduce(a, b, op=MPI.SUM), iters)
        else:
            t_kiln, t_mpi = median_time(kiln_call, iters), float("nan")
        rows.append((size, t_kiln, t_mpi))
    if g.rank() == 0:
        print_table(f"all_sum, {n} processes, float32; KILN_DISTRIBUTED_CHECK as set",
                    "MPI", rows, n)


if __name__ == "__main__":
    main()
