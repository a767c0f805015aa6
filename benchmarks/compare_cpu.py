"""Times the peers of kiln_bench's CPU benchmarks in this process and prints
a markdown table: kiln's time, each peer's time, and peer/kiln (> 1 means
kiln is faster)."""
import json
import platform
import sys
import time

import numpy as np


def best_of(fn, repeat=7, inner=3):
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best * 1e3


def softmax_np(r):
    e = np.exp(r - r.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def logsumexp_np(r):
    m = r.max(1, keepdims=True)
    return np.log(np.exp(r - m).sum(1)) + m[:, 0]


def numpy_peers():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, 1 << 24).astype(np.float32)
    b = rng.uniform(-1, 1, 1 << 24).astype(np.float32)
    m = rng.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    x = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    y = rng.uniform(-1, 1, (1024, 1024)).astype(np.float32)
    r = rng.uniform(-1, 1, (2048, 2048)).astype(np.float32)
    pos = np.abs(a[: 1 << 22])
    gelu = lambda: (np.tanh((np.square(a) * np.float32(0.0356774081)
                             + np.float32(0.7978845608)) * a) + 1) * a * 0.5
    chain = lambda: np.square(np.exp(np.tanh(a * b + 1) * 0.5 - a) - b)
    return {
        "BM_Chain8x16MCompiled": best_of(gelu),
        "BM_Chain8x16MUncompiled": best_of(gelu),
        "BM_ExpTanh8x16MCompiled": best_of(chain),
        "BM_ExpTanh8x16MUncompiled": best_of(chain),
        "BM_Add16M": best_of(lambda: np.add(a, b)),
        "BM_Sum16M": best_of(lambda: np.sum(a)),
        "BM_Exp16M": best_of(lambda: np.exp(a)),
        "BM_TransposeCopy4096": best_of(lambda: np.ascontiguousarray(m.T)),
        "BM_SubtractTransposed1024": best_of(lambda: x - y.T),
        "BM_CumsumColumns2048": best_of(lambda: np.cumsum(r, 0)),
        "BM_ArgMaxRows2048": best_of(lambda: np.argmax(r, 1)),
        "BM_MaxRows2048": best_of(lambda: np.max(r, 1)),
        "BM_Power4M": best_of(lambda: np.power(pos, np.float32(1.5))),
        "BM_PowerSquare4M": best_of(lambda: a[: 1 << 22] ** 2),
        "BM_ArcTan2_4M": best_of(lambda: np.arctan2(a[: 1 << 22], b[: 1 << 22])),
        "BM_SoftmaxRows2048": best_of(lambda: softmax_np(r)),
        "BM_LogSumExpRows2048": best_of(lambda: logsumexp_np(r)),
        "BM_Sigmoid4M": best_of(lambda: 1 / (1 + np.exp(-a[: 1 << 22]))),
        "BM_LogAddExp4M": best_of(lambda: np.logaddexp(a[: 1 << 22], b[: 1 << 22])),
        "BM_SortRows2048": best_of(lambda: np.sort(r, 1)),
        "BM_Sort4M": best_of(lambda: np.sort(a[: 1 << 22])),
        "BM_ArgSort4M": best_of(lambda: np.argsort(a[: 1 << 22], kind="stable")),
        "BM_Matmul1024": best_of(lambda: x @ x),
    }


def torch_peers():
    try:
        import torch
    except ImportError:
        return {}
    a = torch.rand(1 << 24) * 2 - 1
    b = torch.rand(1 << 24) * 2 - 1
    m = torch.rand(4096, 4096)
    x = torch.rand(1024, 1024)
    y = torch.rand(1024, 1024)
    r = torch.rand(2048, 2048)
    pos = a[: 1 << 22].abs()
    gelu = lambda: (torch.tanh((torch.square(a) * 0.0356774081
                                + 0.7978845608) * a) + 1) * a * 0.5
    chain = lambda: torch.square(torch.exp(torch.tanh(a * b + 1) * 0.5 - a) - b)
    return {
        "BM_Chain8x16MUncompiled": best_of(gelu),
        "BM_ExpTanh8x16MUncompiled": best_of(chain),
        "BM_Add16M": best_of(lambda: a + b),
        "BM_Sum16M": best_of(lambda: a.sum()),
        "BM_Exp16M": best_of(lambda: torch.exp(a)),
        "BM_TransposeCopy4096": best_of(lambda: m.t().contiguous()),
        "BM_SubtractTransposed1024": best_of(lambda: x - y.t()),
        "BM_CumsumColumns2048": best_of(lambda: torch.cumsum(r, 0)),
        "BM_ArgMaxRows2048": best_of(lambda: torch.argmax(r, 1)),
        "BM_MaxRows2048": best_of(lambda: torch.amax(r, 1)),
        "BM_Power4M": best_of(lambda: torch.pow(pos, 1.5)),
        "BM_PowerSquare4M": best_of(lambda: a[: 1 << 22] ** 2),
        "BM_ArcTan2_4M": best_of(lambda: torch.atan2(a[: 1 << 22], b[: 1 << 22])),
        "BM_SoftmaxRows2048": best_of(lambda: torch.softmax(r, -1)),
        "BM_LogSumExpRows2048": best_of(lambda: torch.logsumexp(r, 1)),
        "BM_Sigmoid4M": best_of(lambda: torch.sigmoid(a[: 1 << 22])),
        "BM_LogAddExp4M": best_of(lambda: torch.logaddexp(a[: 1 << 22], b[: 1 << 22])),
        "BM_SortRows2048": best_of(lambda: torch.sort(r, 1)),
        "BM_Sort4M": best_of(lambda: torch.sort(a[: 1 << 22])),
        "BM_ArgSort4M": best_of(lambda: torch.argsort(a[: 1 << 22], stable=True)),
        "BM_Matmul1024": best_of(lambda: x @ x),
    }


def mlx_peers():
    try:
        import mlx.core as mx
    except ImportError:
        return {}
    a = mx.random.uniform(-1, 1, (1 << 24,))
    b = mx.random.uniform(-1, 1, (1 << 24,))
    m = mx.random.uniform(-1, 1, (4096, 4096))
    x = mx.random.uniform(-1, 1, (1024, 1024))
    y = mx.random.uniform(-1, 1, (1024, 1024))
    r = mx.random.uniform(-1, 1, (2048, 2048))
    pos = mx.abs(a[: 1 << 22])
    mx.eval(a, b, m, x, y, r, pos)
    ev = lambda f: (lambda: mx.eval(f()))
    gelu = lambda x: (mx.tanh((mx.square(x) * 0.0356774081 + 0.7978845608)
                              * x) + 1) * x * 0.5
    chain = lambda a, b: mx.square(mx.exp(mx.tanh(a * b + 1) * 0.5 - a) - b)
    gelu_c, chain_c = mx.compile(gelu), mx.compile(chain)
    return {
        "BM_Chain8x16MCompiled": best_of(ev(lambda: gelu_c(a))),
        "BM_Chain8x16MUncompiled": best_of(ev(lambda: gelu(a))),
        "BM_ExpTanh8x16MCompiled": best_of(ev(lambda: chain_c(a, b))),
        "BM_ExpTanh8x16MUncompiled": best_of(ev(lambda: chain(a, b))),
        "BM_Add16M": best_of(ev(lambda: a + b)),
        "BM_Sum16M": best_of(ev(lambda: mx.sum(a))),
        "BM_Exp16M": best_of(ev(lambda: mx.exp(a))),
        "BM_TransposeCopy4096": best_of(ev(lambda: mx.contiguous(m.T))),
        "BM_SubtractTransposed1024": best_of(ev(lambda: x - y.T)),
        "BM_CumsumColumns2048": best_of(ev(lambda: mx.cumsum(r, 0))),
        "BM_ArgMaxRows2048": best_of(ev(lambda: mx.argmax(r, 1))),
        "BM_MaxRows2048": best_of(ev(lambda: mx.max(r, 1))),
        "BM_Power4M": best_of(ev(lambda: mx.power(pos, 1.5))),
        "BM_PowerSquare4M": best_of(ev(lambda: a[: 1 << 22] ** 2)),
        "BM_ArcTan2_4M": best_of(ev(lambda: mx.arctan2(a[: 1 << 22], b[: 1 << 22]))),
        "BM_SoftmaxRows2048": best_of(ev(lambda: mx.softmax(r, -1))),
        "BM_LogSumExpRows2048": best_of(ev(lambda: mx.logsumexp(r, 1))),
        "BM_Sigmoid4M": best_of(ev(lambda: mx.sigmoid(a[: 1 << 22]))),
        "BM_LogAddExp4M": best_of(ev(lambda: mx.logaddexp(a[: 1 << 22], b[: 1 << 22]))),
        "BM_SortRows2048": best_of(ev(lambda: mx.sort(r, 1))),
        "BM_Sort4M": best_of(ev(lambda: mx.sort(a[: 1 << 22]))),
        "BM_ArgSort4M": best_of(ev(lambda: mx.argsort(a[: 1 << 22]))),
        "BM_Matmul1024": best_of(ev(lambda: x @ x)),
    }


def main():
    with open(sys.argv[1]) as f:
        report = json.load(f)
    kiln = {}
    for b in report["benchmarks"]:
        name = b["name"].split("/")[0]
        unit = {"ms": 1.0, "us": 1e-3, "ns": 1e-6}[b["time_unit"]]
        kiln[name] = b["real_time"] * unit
    peers = {"NumPy " + np.__version__: numpy_peers()}
    t = torch_peers()
    if t:
        import torch
        peers["PyTorch " + torch.__version__] = t
    m = mlx_peers()
    if m:
        import mlx.core as mx
        peers["MLX " + mx.__version__] = m
    ctx = report.get("context", {})
    print(f"machine: {platform.machine()}, {ctx.get('num_cpus')} CPUs, "
          f"{ctx.get('mhz_per_cpu')} MHz; times in ms, best of runs")
    head = "| benchmark | kiln |" + "".join(f" {p} | ratio |" for p in peers)
    print(head)
    print("|" + "---|" * (2 + 2 * len(peers)))
    for name, kt in kiln.items():
        row = f"| {name[3:]} | {kt:.2f} |"
        for p in peers.values():
            if name in p:
                row += f" {p[name]:.2f} | {p[name] / kt:.2f}x |"
            else:
                row += " - | - |"
        print(row)
    if "BM_OpenBLASSgemm1024" in kiln and "BM_Matmul1024" in kiln:
        r = kiln["BM_Matmul1024"] / kiln["BM_OpenBLASSgemm1024"]
        print(f"\nkiln matmul / OpenBLAS sgemm called directly: {r:.3f}")


if __name__ == "__main__":
    main()
