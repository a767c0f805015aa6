#!/usr/bin/env python3
"""Training-step benchmark: the same models and batches on kiln, MLX and
PyTorch, in one run, on the CPU (or on the GPU with --device gpu).

Models: the digits MLP and LeNet of examples/train_digits.py (batch 64, 8x8
inputs), and a larger MLP (784-1024-1024-10, batch 256). A step is forward,
cross-entropy, backward and an Adam update, evaluated to completion. kiln
and MLX run literally the same Python code (kiln's API is MLX's); PyTorch
runs the equivalent nn.Module in eager mode.

    PYTHONPATH=build/python python benchmarks/train_step_bench.py
"""

import argparse
import os
import sys
import time
from functools import partial

import numpy as np


def mlx_like_models(mx, nn):
    class DigitsMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)]

        def __call__(self, x):
            x = x.reshape(x.shape[0], -1)
            for l in self.layers[:-1]:
                x = nn.relu(l(x))
            return self.layers[-1](x)

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.fc1 = nn.Linear(128, 64)
            self.fc2 = nn.Linear(64, 10)

        def __call__(self, x):
            x = self.pool(nn.relu(self.conv1(x)))
            x = self.pool(nn.relu(self.conv2(x)))
            return self.fc2(nn.relu(self.fc1(x.reshape(x.shape[0], -1))))

    class BigMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(784, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)]

        def __call__(self, x):
            for l in self.layers[:-1]:
                x = nn.relu(l(x))
            return self.layers[-1](x)

    return {"digits_mlp": DigitsMLP, "digits_lenet": LeNet, "mlp_784_1024": BigMLP}


SHAPES = {
    "digits_mlp": ((64, 64), 64),
    "digits_lenet": ((64, 8, 8, 1), 64),
    "mlp_784_1024": ((256, 784), 256),
}


# A small learning rate keeps the timed steps away from the regime where a
# model has memorised its batch and its gradients underflow to denormal
# floats, which slow a CPU GEMM several times (docs/cpu_kernels.md says more).
LEARNING_RATE = 1e-4


def mlx_like_step(mx, nn, optim, model_cls, compiled):
    model = model_cls()
    opt = optim.Adam(learning_rate=LEARNING_RATE)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    grad_fn = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    def step(x, y):
        loss, grads = grad_fn(x, y)
        opt.update(model, grads)
        return loss

    if compiled:
        step = partial(mx.compile, inputs=state, outputs=state)(step)

    def run(x, y):
        loss = step(x, y)
        mx.eval(loss, state)

    return run


def torch_step(torch, name, device):
    tnn = torch.nn
    if name == "digits_mlp":
        model = tnn.Sequential(tnn.Flatten(), tnn.Linear(64, 128), tnn.ReLU(),
                               tnn.Linear(128, 128), tnn.ReLU(), tnn.Linear(128, 10))
    elif name == "digits_lenet":
        class LeNet(tnn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = tnn.Conv2d(1, 16, 3, padding=1)
                self.conv2 = tnn.Conv2d(16, 32, 3, padding=1)
                self.pool = tnn.MaxPool2d(2, 2)
                self.fc1 = tnn.Linear(128, 64)
                self.fc2 = tnn.Linear(64, 10)

            def forward(self, x):  # NHWC in, like the others
                x = x.permute(0, 3, 1, 2)
                x = self.pool(torch.relu(self.conv1(x)))
                x = self.pool(torch.relu(self.conv2(x)))
                return self.fc2(torch.relu(self.fc1(x.flatten(1))))

        model = LeNet()
    else:
        model = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024),
                               tnn.ReLU(), tnn.Linear(1024, 10))
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = tnn.CrossEntropyLoss()

    def run(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        loss.item() if device == "cpu" else torch.cuda.synchronize()

    return run


def time_it(run, args_, warmup, iters):
    for _ in range(warmup):
        run(*args_)
    best = float("inf")
    for _ in range(3):
        tic = time.perf_counter()
        for _ in range(iters):
            run(*args_)
        best = min(best, (time.perf_counter() - tic) / iters)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="PyTorch threads (default: all cores)")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    data = {}
    # The digits models train on a batch of the real digits; the large MLP
    # on random inputs labelled by a random linear teacher.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from train_digits import load_digits

    digits_x, digits_y, _, _ = load_digits()
    data["digits_mlp"] = (digits_x[:64].reshape(64, 64), digits_y[:64])
    data["digits_lenet"] = (digits_x[:64], digits_y[:64])
    x = rng.standard_normal(SHAPES["mlp_784_1024"][0]).astype(np.float32)
    teacher = rng.standard_normal((784, 10)).astype(np.float32)
    data["mlp_784_1024"] = (x, np.argmax(x @ teacher, axis=1).astype(np.int32))

    results = {}  # (model, framework) -> seconds
    import kiln.core as kmx
    import kiln.nn as knn
    import kiln.optimizers as koptim

    kmx.set_default_device(kmx.gpu if args.device == "gpu" else kmx.cpu)
    peers = [("kiln", kmx, knn, koptim)]
    try:
        import mlx.core as mmx
        import mlx.nn as mnn
        import mlx.optimizers as moptim

        if args.device == "cpu":
            mmx.set_default_device(mmx.cpu)
        peers.append(("mlx", mmx, mnn, moptim))
    except ImportError:
        print("mlx not installed: skipping")

    for label, mx, nn, optim in peers:
        models = mlx_like_models(mx, nn)
        for name, cls in models.items():
            mx.random.seed(0)
            x, y = (mx.array(a) for a in data[name])
            for compiled in (False, True):
                run = mlx_like_step(mx, nn, optim, cls, compiled)
                key = f"{label}{' compiled' if compiled else ''}"
                results[(name, key)] = time_it(run, (x, y), 5, args.iters)

    try:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        dev = "cuda" if args.device == "gpu" else "cpu"
        for name in SHAPES:
            torch.manual_seed(0)
            x, y = data[name]
            tx, ty = torch.from_numpy(x).to(dev), torch.from_numpy(y).long().to(dev)
            results[(name, "torch eager")] = time_it(torch_step(torch, name, dev), (tx, ty), 5, args.iters)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    except ImportError:
        print("torch not installed: skipping")

    frameworks = []
    for (_, f) in results:
        if f not in frameworks:
            frameworks.append(f)
    print(f"\ntraining step (forward + backward + Adam), {args.device}, best of 3 x {args.iters} steps, ms per step")
    header = f"{'model':<14}" + "".join(f"{f:>16}" for f in frameworks) + "   kiln compiled vs"
    print(header)
    for name in SHAPES:
        row = f"{name:<14}"
        for f in frameworks:
            t = results.get((name, f))
            row += f"{t * 1e3:16.3f}" if t else f"{'-':>16}"
        base = results.get((name, "kiln compiled"))
        ratios = []
        for f in frameworks:
            if f != "kiln compiled" and (name, f) in results and base:
                ratios.append(f"{f} {results[(name, f)] / base:.2f}x")
        print(row + "   " + ", ".join(ratios))
    print("(ratios above 1 mean kiln compiled is faster)")


if __name__ == "__main__":
    main()
