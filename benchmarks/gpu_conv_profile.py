"""Where a convolution training step's GPU time goes: each kernel's device
time per step from the CUDA profiler (torch.profiler records kiln's
kernels too), for gpu_bench.py's conv shapes: kiln's compiled step, its two
gradients alone, and PyTorch's forward + autograd step.

    cd benchmarks && PYTHONPATH=../build-gpu-jit/python python3 gpu_conv_profile.py [NAME...]

With names, only the shapes whose names contain one of them.
"""
import collections
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import kiln.core as mx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import CONV_SHAPES, compiled_vjp  # noqa: E402


def show(fn, label, steps=10):
    """The kernels of `steps` calls of fn, device time per call, longest
    first."""
    for _ in range(3):
        fn()
    mx.synchronize()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn()
        mx.synchronize()
        torch.cuda.synchronize()
    time = collections.defaultdict(float)
    count = collections.Counter()
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            time[e.name[:100]] += e.device_time / steps
            count[e.name[:100]] += 1
    print(label, "total device us", round(sum(time.values()), 1))
    for name, us in sorted(time.items(), key=lambda t: -t[1])[:12]:
        print(f"  {us:8.2f} us  x{count[name] / steps:.0f}  {name}")


def main():
    mx.set_default_device(mx.gpu)
    for name, xs, ws, stride, padding, groups in CONV_SHAPES:
        if sys.argv[1:] and not any(n in name for n in sys.argv[1:]):
            continue
        rng = np.random.default_rng(8)

        def rand(shape):
            a = rng.uniform(-1, 1, shape).astype(np.float32)
            return mx.array(a).astype(mx.bfloat16)

        one_axis = len(xs) == 3
        kiln_conv = mx.conv1d if one_axis else mx.conv2d

        def conv(x, w):
            return kiln_conv(x, w, stride=stride, padding=padding, groups=groups)

        x, w = rand(xs), rand(ws)
        y = conv(x, w)
        ct = rand(y.shape)
        mx.eval(x, w, y, ct)
        step = compiled_vjp(conv, 2)

        def input_grad():
            mx.eval(*mx.vjp(lambda x: conv(x, w), [x], [ct])[1])

        def weight_grad():
            mx.eval(*mx.vjp(lambda w: conv(x, w), [w], [ct])[1])

        show(lambda: mx.eval(*step(x, w, ct)), f"kiln {name} step")
        show(input_grad, f"kiln {name} input gradient (uncompiled)")
        show(weight_grad, f"kiln {name} weight gradient (uncompiled)")

        def nchw(shape, grad=False):  # NHWC memory seen as NCHW
            t = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
            t = t.permute(0, 2, 1) if one_axis else t.permute(0, 3, 1, 2)
            return t.requires_grad_() if grad else t

        tx, tw, tc = nchw(xs, True), nchw(ws, True), nchw(y.shape)
        torch_conv = F.conv1d if one_axis else F.conv2d

        def torch_step():
            out = torch_conv(tx, tw, stride=stride, padding=padding, groups=groups)
            torch.autograd.grad(out, (tx, tw), tc)

        show(torch_step, f"torch {name} step")


if __name__ == "__main__":
    main()
