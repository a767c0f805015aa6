"""Host cost of kiln's Python calls on the default device (the CPU unless
--gpu): a compiled call on a cache hit, with and without eval, the same ops
uncompiled, and the seed's broadcast chain (10 calls whose results are
broadcast views, so only host time remains) compiled and uncompiled.

    PYTHONPATH=build/python python3 benchmarks/host_overhead.py [--gpu]
"""

import argparse
import time

import kiln.core as mx


def per_call_us(fn, n):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def seed_broadcast_chain():
    """The seed's broadcast chain: (uncompiled, compiled) functions and a
    runner that applies one ten times from a one-element array and evaluates."""

    def fun(x):
        return mx.broadcast_to(mx.sin(mx.exp(mx.log(mx.abs(x)))), (16384, 2048, 16))

    def chain(fn):
        y = mx.array([1.0])
        for _ in range(10):
            y = fn(y)
        mx.eval(y)
        return y

    return fun, mx.compile(fun), chain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("-n", type=int, default=20000)
    args = ap.parse_args()
    mx.set_default_device(mx.gpu if args.gpu else mx.cpu)
    x = mx.random.uniform(shape=(16,))
    mx.eval(x)

    def g(a):
        return mx.exp(a) * 2 + 1

    f = mx.compile(g)
    rows = [
        ("compiled call (3 fused ops), no eval", per_call_us(lambda: f(x), args.n)),
        ("compiled call + eval", per_call_us(lambda: mx.eval(f(x)), args.n)),
        ("the same 3 ops uncompiled + eval", per_call_us(lambda: mx.eval(g(x)), args.n)),
    ]

    fun, cfun, chain = seed_broadcast_chain()
    for name, fn in (("compiled", cfun), ("uncompiled", fun)):
        rows.append((f"seed broadcast chain x10, {name}", per_call_us(lambda: chain(fn), args.n // 50)))
    print(f"| host cost on the {'GPU' if args.gpu else 'CPU'} | us |")
    print("| --- | --- |")
    for name, us in rows:
        print(f"| {name} | {us:.1f} |")


if __name__ == "__main__":
    main()
