#!/usr/bin/env python3
"""Train an MLP and a LeNet-style conv net on the 8x8 handwritten digits.

The data (1797 images, 10 classes; examples/data/README.md says where it
comes from) ships with the repository, so this runs offline. The training
step is compiled with the model, the optimizer state and the random state
captured, exactly as an MLX program would write it; the script is MLX code
with kiln's imports. It runs on the GPU when one is present, else the CPU.

    python examples/train_digits.py                 # both models
    python examples/train_digits.py --model lenet --epochs 30

Data parallel over several processes: each takes its share of every global
batch, the gradients are averaged over the group (nn.average_gradients), and
the printed loss is the group's mean, the one-process run's on the same
global batch:

    python -m kiln.launch -n 2 examples/train_digits.py --distributed
"""

import argparse
import gzip
import os
import sys
import time
from functools import partial

import numpy as np

import kiln.core as mx
import kiln.nn as nn
import kiln.optimizers as optim

HERE = os.path.dirname(os.path.abspath(__file__))

# What each model reaches on the held-out split with the default settings
# (measured over seeds 0-4; the run fails below these).
TARGET_ACCURACY = {"mlp": 0.95, "lenet": 0.95}


def load_digits(seed=0, test_fraction=0.2):
    """(x_train, y_train, x_test, y_test): pixels scaled to [0, 1] as
    (N, 8, 8, 1) float32, labels int32; a fixed shuffled split."""
    with gzip.open(os.path.join(HERE, "data", "digits.csv.gz"), "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x = (raw[:, :64] / 16.0).reshape(-1, 8, 8, 1)
    y = raw[:, 64].astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


class MLP(nn.Module):
    def __init__(self, hidden=128, classes=10):
        super().__init__()
        self.layers = [nn.Linear(64, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, classes)]

    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x))
        return self.layers[-1](x)


class LeNet(nn.Module):
    """Two conv+pool stages and two dense layers, sized for 8x8 inputs."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.fc1 = nn.Linear(2 * 2 * 32, 64)
        self.fc2 = nn.Linear(64, classes)

    def __call__(self, x):
        x = self.pool(nn.relu(self.conv1(x)))
        x = self.pool(nn.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        return self.fc2(nn.relu(self.fc1(x)))


def progress(epoch, epochs, done, total, loss, rate, width=24):
    if not sys.stdout.isatty():  # a log gets the per-epoch lines only
        return
    filled = int(width * done / total)
    bar = "#" * filled + "-" * (width - filled)
    sys.stdout.write(
        f"\r  epoch {epoch:3d}/{epochs} [{bar}] loss {loss:7.4f}  {rate:9.0f} samples/s"
    )
    sys.stdout.flush()


def train(name, model, data, args, group):
    x_train, y_train, x_test, y_test = data
    optimizer = optim.Adam(learning_rate=args.lr)
    rank, size = (group.rank(), group.size()) if group is not None else (0, 1)
    log = print if rank == 0 else (lambda *a, **k: None)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)
    state = [model.state, optimizer.state, mx.random.state]

    def step(x, y):
        loss, grads = loss_and_grad(x, y)
        if size > 1:
            # Every process holds an equal share of the global batch: the
            # mean of the shares' gradients (and losses) is the global
            # batch's.
            grads = nn.average_gradients(grads, group=group)
            loss = mx.distributed.all_sum(loss, group=group) / size
        optimizer.update(model, grads)
        return loss

    if not args.no_compile:
        step = partial(mx.compile, inputs=state, outputs=state)(step)

    def accuracy(x, y):
        # Each process scores its share of the images; the counts are summed.
        x, y = x[rank::size], y[rank::size]
        model.eval()
        correct = 0
        for i in range(0, len(x), 512):
            logits = model(mx.array(x[i : i + 512]))
            correct += int((mx.argmax(logits, axis=1) == mx.array(y[i : i + 512])).sum().item())
        model.train()
        if size > 1:
            correct = int(mx.distributed.all_sum(mx.array(correct), group=group).item())
        return correct / len(x_test)

    n_params = sum(v.size for _, v in _flat(model.parameters()))
    log(f"{name}: {n_params} parameters, {len(x_train)} training / {len(x_test)} test images")
    rng = np.random.default_rng(args.seed)
    bs = args.batch_size  # the global batch, shared out among the processes
    local = bs // size
    steps_per_epoch = len(x_train) // bs  # whole batches only: one compiled shape
    total_time, total_samples, steps_done = 0.0, 0, 0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))
        tic = time.perf_counter()
        losses = []
        for s in range(steps_per_epoch):
            idx = order[s * bs : (s + 1) * bs][rank * local : (rank + 1) * local]
            loss = step(mx.array(x_train[idx]), mx.array(y_train[idx]))
            # The loss with the state: its all_sum then runs on every
            # process at the same point, as collectives must.
            mx.eval(loss, state)
            losses.append(loss)
            steps_done += 1
            if args.log_every and steps_done % args.log_every == 0:
                log(f"  step {steps_done:5d}  loss {loss.item():.9g}")
            if rank == 0 and (s % 4 == 0 or s == steps_per_epoch - 1):
                elapsed = time.perf_counter() - tic
                progress(epoch, args.epochs, s + 1, steps_per_epoch,
                         losses[-1].item(), (s + 1) * bs / max(elapsed, 1e-9))
            if steps_done == args.max_steps:
                break
        epoch_time = time.perf_counter() - tic
        if epoch > 1:  # the first epoch includes tracing and compiling
            total_time += epoch_time
            total_samples += len(losses) * bs
        mean_loss = float(np.mean([l.item() for l in losses]))
        last = epoch == args.epochs or steps_done == args.max_steps
        if epoch % args.report_every == 0 or last:
            acc = accuracy(x_test, y_test)
            if rank == 0:
                sys.stdout.write(
                    ("\r" if sys.stdout.isatty() else "") + f"  epoch {epoch:3d}/{args.epochs}  loss {mean_loss:.4f}  "
                    f"test accuracy {100 * acc:5.1f}%  "
                    f"{len(losses) * bs / epoch_time:9.0f} samples/s{' ' * 12}\n"
                )
        if last:
            break
    acc = accuracy(x_test, y_test)
    rate = total_samples / total_time if total_time else float("nan")
    if args.max_steps is not None:  # a short run: no target
        log(f"{name}: test accuracy {100 * acc:.1f}% after {steps_done} steps")
        return True
    target = TARGET_ACCURACY[name]
    verdict = "reached" if acc >= target else "MISSED"
    log(
        f"{name}: test accuracy {100 * acc:.1f}% ({verdict} the target of "
        f"{100 * target:.0f}%), {rate:.0f} samples/s after the first epoch"
    )
    return acc >= target


def _flat(tree):
    from kiln.utils import tree_flatten

    return tree_flatten(tree)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["mlp", "lenet", "both"], default="both")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=64, help="the global batch (all processes together)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    ap.add_argument("--no-compile", action="store_true", help="run the step uncompiled")
    ap.add_argument("--report-every", type=int, default=5)
    ap.add_argument("--log-every", type=int, default=0, metavar="K", help="print the loss of every K-th step")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="stop after this many steps (a short run: the accuracy target is not applied)")
    ap.add_argument("--distributed", action="store_true",
                    help="data parallel over the processes of python -m kiln.launch")
    args = ap.parse_args()
    if args.max_steps is not None and args.max_steps < 1:
        sys.exit(f"train_digits: --max-steps must be at least 1, got {args.max_steps}")
    if args.log_every < 0:
        sys.exit(f"train_digits: --log-every must be 0 (off) or more, got {args.log_every}")

    # Without a launcher, init() gives the group of this one process.
    group = mx.distributed.init() if args.distributed else None
    if group is not None and args.batch_size % group.size():
        sys.exit(f"train_digits: --batch-size {args.batch_size} does not divide among "
                 f"{group.size()} processes")

    gpu_present = mx.is_available(mx.gpu)
    if args.device == "gpu" and not gpu_present:
        sys.exit("train_digits: --device gpu was asked for, but no GPU is available")
    use_gpu = args.device == "gpu" or (args.device == "auto" and gpu_present)
    mx.set_default_device(mx.gpu if use_gpu else mx.cpu)
    if group is None or group.rank() == 0:
        print(f"device: {mx.default_device()}, compile: {not args.no_compile}"
              + (f", data parallel over {group.size()} processes" if group is not None else ""))

    mx.random.seed(args.seed)
    data = load_digits(seed=args.seed)
    models = {"mlp": MLP, "lenet": LeNet}
    names = list(models) if args.model == "both" else [args.model]
    ok = all([train(n, models[n](), data, args, group) for n in names])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
