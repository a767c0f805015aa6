"""The example programs run, and say what they claim."""

import os
import runpy
import subprocess
import sys

import numpy as np
import pytest

import kiln.core as mx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLES = os.path.join(ROOT, "examples")


def _bf16_to_f32(a):
    return np.array(a.astype(mx.float32))


def test_seed_linear_step_compiled_matches_uncompiled_and_numpy():
    g = runpy.run_path(os.path.join(EXAMPLES, "seed_linear_step.py"))
    y, step, x, params = g["y"], g["step"], g["x"], g["params"]
    assert y.shape == (4, 512, 3072)
    # float16 input times bfloat16 weights promotes to float32, as in MLX.
    assert y.dtype == mx.float32
    mx.disable_compile()
    try:
        y_plain = step(x, params)
    finally:
        mx.enable_compile()
    np.testing.assert_allclose(np.array(y), np.array(y_plain), rtol=1e-5, atol=1e-5)
    w = _bf16_to_f32(params["weight"].astype(mx.bfloat16)).astype(np.float64)
    b = _bf16_to_f32(params["bias"].astype(mx.bfloat16)).astype(np.float64)
    xf = np.array(x.astype(mx.float16).astype(mx.float32)).astype(np.float64)
    ref = xf @ w.T + b
    np.testing.assert_allclose(np.array(y), ref, rtol=2e-4, atol=2e-4)


def test_train_digits_reaches_its_target_quickly():
    """A short run of the main job: both models, a few epochs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "train_digits.py"), "--epochs", "8", "--device", "cpu"],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mlp: test accuracy" in out.stdout and "lenet: test accuracy" in out.stdout
    assert "reached" in out.stdout
