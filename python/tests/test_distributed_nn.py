"""kiln.nn over real groups of 2 and 3 processes started by python -m
kiln.launch: the sharded linear layers (dense and quantized), shard_linear
and shard_inplace with segments, average_gradients, clip_grad_norm_sharded
and fully_shard against the one-process model with the full weights
(distributed/nn_checks.py); and the examples that use them: data-parallel
train_digits.py, whose loss curve must be the one-process run's on the same
global batch, and tensor_parallel_llama.py, whose sharded logits must be the
whole model's."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

import kiln.core as kc
from conftest import needs_open_mpi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NN_CHECKS = os.path.join(HERE, "distributed", "nn_checks.py")
LLAMA_MLX_LM = os.path.join(HERE, "distributed", "llama_mlx_lm.py")
TRAIN_DIGITS = os.path.join(ROOT, "examples", "train_digits.py")
TP_LLAMA = os.path.join(ROOT, "examples", "tensor_parallel_llama.py")



pytestmark = needs_open_mpi

TIMEOUT = 240  # seconds, for any one subprocess


def run(args, timeout=TIMEOUT):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # kiln as this process imports it
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def launch(n, *args, timeout=TIMEOUT):
    return run(["-m", "kiln.launch", "-n", str(n), *args], timeout=timeout)


CHECKS = ["linear", "quantized", "segments", "average_gradients", "clip_grad_norm_sharded", "fully_shard"]


@pytest.mark.parametrize("n", [2, 3])
def test_sharded_layers_and_helpers_against_the_whole_model(n):
    rc, out = launch(n, NN_CHECKS, *CHECKS)
    assert rc == 0, out
    for r in range(n):
        for c in CHECKS:
            assert f"[{r}] ok {c}" in out, out


def _loss_curves(out, prefix=""):
    """{model: [loss of each step]} from train_digits.py's output."""
    curves, model = {}, None
    for line in out.splitlines():
        if not line.startswith(prefix):
            continue
        line = line[len(prefix):]
        m = re.match(r"(\w+): \d+ parameters", line)
        if m:
            model = m.group(1)
            curves[model] = []
        m = re.match(r"\s+step\s+(\d+)\s+loss (\S+)$", line)
        if m:
            assert int(m.group(1)) == len(curves[model]) + 1, line
            curves[model].append(float(m.group(2)))
    return curves


def test_data_parallel_digits_match_one_process():
    # Few steps: the runs sum in different orders, and training amplifies
    # those roundings over hundreds of steps.
    settings = ["--model", "both", "--batch-size", "32", "--max-steps", "8", "--log-every", "1",
                "--device", "cpu"]
    rc, one = run([TRAIN_DIGITS, *settings])
    assert rc == 0, one
    rc, two = launch(2, TRAIN_DIGITS, "--distributed", *settings)
    assert rc == 0, two
    assert "[0] device: Device(cpu, 0), compile: True, data parallel over 2 processes" in two, two
    assert not re.search(r"^\[1\]", two, re.M), two  # rank 0 alone prints
    want, got = _loss_curves(one), _loss_curves(two, "[0] ")
    assert sorted(want) == ["lenet", "mlp"] and all(len(c) == 8 for c in want.values()), one
    assert sorted(got) == sorted(want), two
    for model in want:
        for step, (g, w) in enumerate(zip(got[model], want[model]), 1):
            assert abs(g - w) <= 1e-5 * abs(w), (model, step, got[model], want[model])
    # Both runs score the same model on the same images.
    acc = re.findall(r"(\w+): test accuracy (\S+)% after 8 steps", one)
    assert len(acc) == 2 and acc == re.findall(r"\[0\] (\w+): test accuracy (\S+)% after 8 steps", two), (one, two)


def test_data_parallel_digits_rejects_a_batch_the_group_does_not_divide():
    rc, out = launch(2, TRAIN_DIGITS, "--distributed", "--model", "mlp", "--batch-size", "33", "--max-steps", "1")
    assert rc != 0
    assert "train_digits: --batch-size 33 does not divide among 2 processes" in out, out


def _max_diffs(out, n):
    diffs = re.findall(r"^\[(\d)\] rank \1 of (\d): .* max \|sharded - whole\| (\S+) .* ok$", out, re.M)
    assert sorted(int(r) for r, _, _ in diffs) == list(range(n)) and {s for _, s, _ in diffs} == {str(n)}, out
    return [float(d) for _, _, d in diffs]


def test_tensor_parallel_llama_matches_the_whole_model():
    rc, out = launch(2, TP_LLAMA)
    assert rc == 0, out
    assert all(d <= 1e-4 for d in _max_diffs(out, 2)), out
    # Three processes with heads that divide among them.
    rc, out = launch(3, TP_LLAMA, "--heads", "6", "--kv-heads", "3", "--dims", "48", "--hidden", "96")
    assert rc == 0, out
    assert all(d <= 1e-4 for d in _max_diffs(out, 3)), out


def test_tensor_parallel_llama_rejects_heads_the_group_does_not_divide():
    rc, out = launch(3, TP_LLAMA)
    assert rc != 0
    assert "[tensor_parallel_llama] heads (4) does not divide among 3 processes." in out, out


@pytest.mark.skipif(importlib.util.find_spec("mlx_lm") is None, reason="mlx-lm is not installed")
def test_tensor_parallel_llama_is_mlx_lm_llama_and_shards_as_it_does():
    rc, out = launch(2, LLAMA_MLX_LM, TP_LLAMA)
    assert rc == 0, out
    assert "[0] ok mlx-lm llama" in out and "[1] ok mlx-lm llama" in out, out
