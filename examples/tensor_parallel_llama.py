#!/usr/bin/env python3
"""Tensor parallelism on a small Llama-shaped model.

The model (token embedding, RMSNorm, attention with grouped-query heads and
RoPE, a SwiGLU MLP, a few layers; random float32 weights from a fixed seed)
is built whole on every process. Each process computes its logits for fixed
tokens, then shards the model across the group as mlx-lm shards its Llama:
the attention's q/k/v projections and the MLP's gate/up projections keep
this process's slice of their output features (shard_linear
"all-to-sharded": its heads, its part of the hidden layer), the o and down
projections the matching slice of their input features ("sharded-to-all",
whose partial products are summed over the group). The sharded forward must
give the whole model's logits on every process.

    python -m kiln.launch -n 2 examples/tensor_parallel_llama.py
    python -m kiln.launch -n 3 examples/tensor_parallel_llama.py \
        --heads 6 --kv-heads 3 --dims 96 --hidden 192

The module names follow mlx-lm's Llama (model.layers[i].self_attn.q_proj,
...), so its weights load there unchanged.
"""

import argparse
import sys
from dataclasses import dataclass

import kiln.core as mx
import kiln.nn as nn
from kiln.nn.layers.distributed import shard_linear
from kiln.utils import tree_flatten


@dataclass
class Config:
    vocab_size: int = 384
    dims: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    hidden: int = 128
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.n_heads, self.n_kv_heads = cfg.heads, cfg.kv_heads
        head_dim = cfg.dims // cfg.heads
        self.scale = head_dim**-0.5
        self.q_proj = nn.Linear(cfg.dims, cfg.heads * head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.dims, cfg.kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.dims, cfg.kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * head_dim, cfg.dims, bias=False)
        self.rope = nn.RoPE(head_dim, traditional=False, base=cfg.rope_theta)

    def __call__(self, x, mask):
        B, L, _ = x.shape
        # n_heads and n_kv_heads are this process's heads once sharded.
        q = self.q_proj(x).reshape(B, L, self.n_heads, -1).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, L, self.n_kv_heads, -1).transpose(0, 2, 1, 3)
        out = mx.fast.scaled_dot_product_attention(self.rope(q), self.rope(k), v, scale=self.scale, mask=mask)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.dims, cfg.hidden, bias=False)
        self.up_proj = nn.Linear(cfg.dims, cfg.hidden, bias=False)
        self.down_proj = nn.Linear(cfg.hidden, cfg.dims, bias=False)

    def __call__(self, x):
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg)
        self.input_layernorm = nn.RMSNorm(cfg.dims, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(cfg.dims, eps=cfg.rms_norm_eps)

    def __call__(self, x, mask):
        h = x + self.self_attn(self.input_layernorm(x), mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.dims)
        self.layers = [Block(cfg) for _ in range(cfg.layers)]
        self.norm = nn.RMSNorm(cfg.dims, eps=cfg.rms_norm_eps)

    def __call__(self, tokens):
        h = self.embed_tokens(tokens)
        mask = "causal" if h.shape[1] > 1 else None
        for layer in self.layers:
            h = layer(h, mask)
        return self.norm(h)


class Llama(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg.dims, cfg.vocab_size, bias=False)

    def __call__(self, tokens):
        return self.lm_head(self.model(tokens))


def build(cfg: Config, seed: int = 0) -> Llama:
    """The model with random weights drawn from ``seed`` (the same on every
    process); the norms' scales are drawn too, so that they matter."""
    mx.random.seed(seed)
    model = Llama(cfg)
    for m in [model.model.norm] + [n for b in model.model.layers
                                   for n in (b.input_layernorm, b.post_attention_layernorm)]:
        m.weight = 1 + 0.1 * mx.random.normal(m.weight.shape)
    mx.eval(model.parameters())
    return model


def check_config(cfg: Config, size: int):
    """Raises ValueError unless the heads and the MLP divide among ``size``
    processes."""
    if cfg.dims % cfg.heads or cfg.heads % cfg.kv_heads:
        raise ValueError(f"[tensor_parallel_llama] dims ({cfg.dims}) must divide by heads ({cfg.heads}) and heads "
                         f"by kv_heads ({cfg.kv_heads}).")
    for what, n in (("heads", cfg.heads), ("kv_heads", cfg.kv_heads), ("hidden", cfg.hidden)):
        if n % size:
            raise ValueError(f"[tensor_parallel_llama] {what} ({n}) does not divide among {size} processes.")


def shard(model: Llama, group):
    """Shards ``model`` across ``group`` in place: each process keeps its
    heads and its slice of each MLP's hidden layer."""
    n = group.size()
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        if a.n_heads % n or a.n_kv_heads % n:
            raise ValueError(f"[tensor_parallel_llama] {a.n_heads} heads and {a.n_kv_heads} kv heads do not divide "
                             f"among {n} processes.")
        # Contiguous slices: process r keeps query heads r*H/n... and the
        # key/value heads they attend with (GQA groups stay whole).
        a.q_proj = shard_linear(a.q_proj, "all-to-sharded", group=group)
        a.k_proj = shard_linear(a.k_proj, "all-to-sharded", group=group)
        a.v_proj = shard_linear(a.v_proj, "all-to-sharded", group=group)
        a.o_proj = shard_linear(a.o_proj, "sharded-to-all", group=group)
        a.n_heads //= n
        a.n_kv_heads //= n
        m.gate_proj = shard_linear(m.gate_proj, "all-to-sharded", group=group)
        m.up_proj = shard_linear(m.up_proj, "all-to-sharded", group=group)
        m.down_proj = shard_linear(m.down_proj, "sharded-to-all", group=group)


def n_params(model):
    return sum(v.size for _, v in tree_flatten(model.parameters()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cfg0 = Config()
    ap.add_argument("--layers", type=int, default=cfg0.layers)
    ap.add_argument("--dims", type=int, default=cfg0.dims)
    ap.add_argument("--heads", type=int, default=cfg0.heads)
    ap.add_argument("--kv-heads", type=int, default=cfg0.kv_heads)
    ap.add_argument("--hidden", type=int, default=cfg0.hidden, help="the MLP's hidden size")
    ap.add_argument("--vocab-size", type=int, default=cfg0.vocab_size)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16, help="tokens per sequence")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4, help="largest allowed |logits difference|")
    args = ap.parse_args()
    cfg = Config(vocab_size=args.vocab_size, dims=args.dims, layers=args.layers, heads=args.heads,
                 kv_heads=args.kv_heads, hidden=args.hidden)

    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    try:
        check_config(cfg, size)
    except ValueError as e:
        sys.exit(str(e))

    model = build(cfg, args.seed)
    total = n_params(model)
    tokens = mx.random.randint(0, cfg.vocab_size, (args.batch, args.seq), key=mx.random.key(args.seed + 1))
    reference = model(tokens)  # the whole model, on every process
    mx.eval(reference)

    shard(model, group)
    logits = model(tokens)
    diff = mx.abs(logits - reference).max().item()
    scale = mx.abs(reference).max().item()
    ok = diff <= args.tolerance
    print(f"rank {rank} of {size}: {n_params(model)} of {total} parameters, logits {tuple(logits.shape)}, "
          f"max |sharded - whole| {diff:.3g} (largest logit {scale:.3g}, tolerance {args.tolerance:g}) "
          f"{'ok' if ok else 'MISMATCH'}", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
