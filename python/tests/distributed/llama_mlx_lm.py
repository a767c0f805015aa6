"""Run by test_distributed_nn.py under python -m kiln.launch: the Llama of
examples/tensor_parallel_llama.py (path in argv[1]) against mlx-lm's Llama
run on kiln through the mlx alias, with the same weights: the whole models
agree, and mlx-lm's own Model.shard() over the group gives the whole
model's logits on every process."""

import importlib.util
import sys

import kiln.mlx

kiln.mlx.install()

import mlx.core as mx  # noqa: E402  (kiln.core, through the alias)
import numpy as np  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.models import llama  # noqa: E402

spec = importlib.util.spec_from_file_location("tensor_parallel_llama", sys.argv[1])
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

group = mx.distributed.init()
R = group.rank()
cfg = example.Config()
ours = example.build(cfg, seed=3)
theirs = llama.Model(llama.ModelArgs(
    model_type="llama", hidden_size=cfg.dims, num_hidden_layers=cfg.layers, intermediate_size=cfg.hidden,
    num_attention_heads=cfg.heads, num_key_value_heads=cfg.kv_heads, rms_norm_eps=cfg.rms_norm_eps,
    vocab_size=cfg.vocab_size, rope_theta=cfg.rope_theta, tie_word_embeddings=False))
theirs.load_weights(tree_flatten(ours.parameters()), strict=True)  # the same names and shapes

tokens = mx.random.randint(0, cfg.vocab_size, (2, 12), key=mx.random.key(4))
whole = np.asarray(ours(tokens))


def check(got, what, tol):
    err = float(np.abs(np.asarray(got) - whole).max())
    if not err <= tol * max(1.0, float(np.abs(whole).max())):
        raise AssertionError(f"{what} on rank {R}: max |difference| {err:.3g}")


check(theirs(tokens), "mlx-lm's Llama, whole", 1e-5)
theirs.shard(group)
check(theirs(tokens), f"mlx-lm's Llama sharded by Model.shard() over {group.size()} processes", 1e-4)
print("ok mlx-lm llama", flush=True)
